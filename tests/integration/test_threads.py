"""Thread settings: chosen in one place, applied to numpy's BLAS and torch, and never changing a result."""

from __future__ import annotations

import hashlib
import json

import pytest
from threadpoolctl import threadpool_info

from uatlab import threads as th
from uatlab.data.synthetic import write_synthetic


def test_choice_by_request_environment_and_machine(monkeypatch):
    monkeypatch.delenv(th.ENV, raising=False)
    assert th.choose_threads(3) == (3, "request")
    monkeypatch.setenv(th.ENV, "2")
    assert th.choose_threads("auto") == (2, "environment")
    monkeypatch.setenv(th.ENV, "zero")
    with pytest.raises(ValueError, match=th.ENV):
        th.choose_threads("auto")
    monkeypatch.delenv(th.ENV)
    monkeypatch.setattr(th, "cores_available", lambda: 2)
    assert th.choose_threads("auto") == (1, "auto")  # small machine: one thread per process
    monkeypatch.setattr(th, "cores_available", lambda: 16)
    monkeypatch.setattr(th.os, "getloadavg", lambda: (5.2, 0.0, 0.0))
    assert th.choose_threads("auto") == (min(16 - 5, th.MAX_THREADS), "auto")  # the idle cores, capped
    monkeypatch.setattr(th.os, "getloadavg", lambda: (40.0, 0.0, 0.0))
    assert th.choose_threads("auto") == (1, "auto")
    with pytest.raises(ValueError):
        th.choose_threads(0)


def test_apply_sets_blas_and_torch_and_records_them():
    import torch

    before = torch.get_num_threads()
    try:
        s = th.apply_threads(2)
        assert s.threads == 2 and s.torch_threads == torch.get_num_threads() == 2
        assert s.blas and all(lib["threads"] == 2 for lib in s.blas)
        assert all(i["num_threads"] == 2 for i in threadpool_info())
        assert json.loads(json.dumps(s.to_json()))["chosen_by"] == "request"
    finally:
        th.apply_threads(before)


def _compile(tmp_path, capsys, data, threads: int) -> tuple[str, dict]:
    from safetensors import safe_open

    from uatlab.cli import main

    out = tmp_path / f"m{threads}.safetensors"
    capsys.readouterr()
    assert main(["compile", str(data), "--out", str(out), "--threads", str(threads), "--json"]) in (0, None)
    fig = json.loads(capsys.readouterr().out)
    h = hashlib.sha256()
    with safe_open(str(out), framework="numpy") as f:
        for name in sorted(f.keys()):
            h.update(name.encode() + f.get_tensor(name).tobytes())
    return h.hexdigest(), fig


def test_compile_and_certificate_identical_for_one_and_two_threads(tmp_path, capsys):
    import torch

    data = tmp_path / "syn.jsonl"
    write_synthetic(data, 300, 16, 300, 5, repeats=True, seed=3)  # 4,800 tokens: products large enough to split
    before = torch.get_num_threads()
    try:
        h2, f2 = _compile(tmp_path, capsys, data, 2)
        h1, f1 = _compile(tmp_path, capsys, data, 1)
    finally:
        th.apply_threads(before)
    assert f1["threads"]["threads"] == 1 and f2["threads"]["threads"] == 2
    assert all(lib["threads"] == 2 for lib in f2["threads"]["blas"])
    assert h1 == h2
    for key in ("certified_tokens", "correct_tokens", "min_certified_margin", "min_margin_at", "ceiling_tokens"):
        assert f1[key] == f2[key], key
    assert f1["certified"] is True
