"""Compile's passes on other executors (a local process pool, a real local Ray instance) give the same model
bytes and certificate; a worker dying mid-certification is retried; a changed input is refused."""

from __future__ import annotations

import hashlib
import json
import os
import sys

import numpy as np
import pytest
from safetensors import safe_open

from uatlab.cli import main
from uatlab.data.synthetic import write_synthetic

CERT_FIELDS = (
    "certified",
    "certified_tokens",
    "ceiling_tokens",
    "correct_tokens",
    "min_certified_margin",
    "min_margin_at",
    "torch_spot_check",
)


def _tensors_hash(path) -> str:
    h = hashlib.sha256()
    with safe_open(str(path), framework="numpy") as f:
        for name in sorted(f.keys()):
            h.update(name.encode() + f.get_tensor(name).tobytes())
    return h.hexdigest()


def _compile(capsys, data, out, *extra) -> dict:
    capsys.readouterr()
    code = main(["compile", str(data), "--out", str(out), "--chunk-tokens", "900", "--json", *extra])
    captured = capsys.readouterr()
    assert code in (0, None), captured.err[-2000:]
    return json.loads(captured.out)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("exec") / "syn.jsonl"
    write_synthetic(path, 300, 10, 120, 4, seed=7)  # 3,000 tokens: 4 chunks, 4 buckets at 900 tokens a chunk
    return path


def test_process_pool_gives_the_same_model_and_certificate(tmp_path, capsys, data):
    one = _compile(capsys, data, tmp_path / "one.safetensors")
    pool = _compile(capsys, data, tmp_path / "pool.safetensors", "--workers", "2")
    assert one["buckets"] == pool["buckets"] == 4 and pool["executor"] == {"executor": "local", "workers": 2}
    assert _tensors_hash(tmp_path / "one.safetensors") == _tensors_hash(tmp_path / "pool.safetensors")
    assert {k: one[k] for k in CERT_FIELDS} == {k: pool[k] for k in CERT_FIELDS}
    assert one["certified"] is True


def test_any_chunk_size_gives_the_same_file_bytes(tmp_path, capsys, data):
    """Compiling the same data with any --chunk-tokens writes the same file, byte for byte: the tensors and every
    stored fact, the label-information figures included (summed exactly over the word buckets; summed bucket by
    bucket in float64 they differed in the last bit with the number of buckets)."""
    files, buckets = [], []
    for chunk in ("900", "1700", "100000"):
        out = tmp_path / f"c{chunk}.safetensors"
        capsys.readouterr()
        assert main(["compile", str(data), "--out", str(out), "--chunk-tokens", chunk, "--json"]) == 0
        buckets.append(json.loads(capsys.readouterr().out)["buckets"])
        files.append(out.read_bytes())
    assert len(set(buckets)) == 3  # three different splits of the words
    assert files[0] == files[1] == files[2]


def test_input_changed_between_passes_is_refused_and_nothing_written(tmp_path, capsys, monkeypatch):
    import uatlab.constructions.paper_a.cor1_memorizer.api as mem

    path = tmp_path / "grow.jsonl"
    write_synthetic(path, 50, 6, 30, 3, seed=1)
    real = mem.compile_store

    def compile_then_append(*a, **k):  # another program appends to the file while it is being compiled
        res = real(*a, **k)
        with path.open("a") as fh:
            fh.write(json.dumps({"tokens": ["late"], "labels": ["0"]}) + "\n")
        return res

    monkeypatch.setattr(mem, "compile_store", compile_then_append)
    out = tmp_path / "m.safetensors"
    capsys.readouterr()
    assert main(["compile", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "changed while it was being compiled" in err and "size" in err and str(path) in err
    assert "Traceback" not in err
    assert not out.exists()


def _reading_first(monkeypatch, path, count: int, then) -> None:
    """Compile's reading pass yields the first ``count`` records of ``path``, then calls ``then()`` (which may
    raise), as a reader does whose file another program changes under it."""
    import itertools

    import uatlab.cli.compile as compile_cli

    real = compile_cli._records

    def records(*a, **k):
        yield from itertools.islice(real(*a, **k), count)
        then()

    monkeypatch.setattr(compile_cli, "_records", records)


def test_a_file_cut_short_while_read_and_refilled_is_refused(tmp_path, capsys, monkeypatch):
    """The reader stops at a truncation; the file is refilled with the same bytes before the job ends. Its size and
    digest match the first pass again, but the model would hold only the sequences before the cut."""
    path = tmp_path / "refilled.jsonl"
    write_synthetic(path, 50, 6, 30, 3, seed=1)
    before = path.read_bytes()

    def refill():  # truncated, then written back as it was (a tool regenerating the file in place)
        path.write_bytes(before[: len(before) // 2])
        path.write_bytes(before)
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a clock tick later, on any file system

    _reading_first(monkeypatch, path, 20, refill)
    out = tmp_path / "m.safetensors"
    capsys.readouterr()
    assert main(["compile", str(path), "--out", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{path} was written to while it was being compiled (its modification time changed" in err, err
    assert f"nothing was written to {out}" in err and "Traceback" not in err
    assert not out.exists() and path.read_bytes() == before


def test_a_line_cut_off_by_a_change_is_not_called_an_error_in_the_data(tmp_path, capsys, monkeypatch):
    from uatlab.errors import InputError

    path = tmp_path / "cut.jsonl"
    write_synthetic(path, 50, 6, 30, 3, seed=1)
    size = path.stat().st_size

    def cut():  # truncated mid-line: the reader then finds a fragment of a line
        with path.open("r+b") as fh:
            fh.truncate(size // 2)
        raise InputError(f"{path}:21: not a JSON object: '{{\"tok'")

    _reading_first(monkeypatch, path, 20, cut)
    out = tmp_path / "m.safetensors"
    capsys.readouterr()
    assert main(["compile", str(path), "--out", str(out)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{path} changed while it was being compiled (size differs from the first pass: {size} → {size // 2}" in err
    assert "so this error may come from the change rather than the data" in err and f"{path}:21: not a JSON" in err
    assert "Traceback" not in err and not out.exists()


def test_bad_executor_options_are_refused_before_any_file(tmp_path, capsys, data):
    out = tmp_path / "m.safetensors"
    for args, msg in ((["--executor", "spark"], "--executor"), (["--workers", "0"], "--workers")):
        capsys.readouterr()
        assert main(["compile", str(data), "--out", str(out), *args]) == 2
        assert msg in capsys.readouterr().err
        assert not out.exists() and not (tmp_path / "m.safetensors.work").exists()


class _DieOnce:
    """Wraps a chunk function: the first time chunk ``victim`` runs, its worker process dies (os._exit)."""

    def __init__(self, fn, marker: str, victim: int):
        self.fn, self.marker, self.victim = fn, marker, victim

    def __call__(self, setup, start, chunk, budget):
        if start == self.victim and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os._exit(1)  # the worker dies mid-certification (no exception: a crash)
        return self.fn(setup, start, chunk, budget)


def _take(values, index: int) -> int:
    """values[index]: fails unless ``values`` arrives as the array itself, not an object-store reference."""
    return int(values[index])


@pytest.mark.slow  # a local Ray instance starts in ~20 s: CI runs this test by name
@pytest.mark.filterwarnings("ignore")
def test_ray_compile_same_model_and_worker_death_retried(tmp_path, capsys, data):
    ray = pytest.importorskip("ray")
    from ray import cloudpickle

    from uatlab.constructions.paper_a.cor1_memorizer import load_compiled
    from uatlab.data.jsonl import iter_jsonl
    from uatlab.experiments.executor import map_ordered
    from uatlab.verify.certificate import certify_chunks, stream_chunks

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import the test module
    try:
        local = _compile(capsys, data, tmp_path / "local.safetensors")
        on_ray = _compile(capsys, data, tmp_path / "ray.safetensors", "--executor", "ray", "--workers", "2")
        assert on_ray["executor"] == {"executor": "ray", "workers": 2}
        assert _tensors_hash(tmp_path / "local.safetensors") == _tensors_hash(tmp_path / "ray.safetensors")
        assert {k: local[k] for k in CERT_FIELDS} == {k: on_ray[k] for k in CERT_FIELDS}

        model = load_compiled(tmp_path / "ray.safetensors")
        marker = str(tmp_path / "died")
        chunks = list(stream_chunks(iter_jsonl(data), str(data), tokens_per_chunk=700))
        victim = chunks[2][0]  # the first sequence index of the third chunk

        def dying(fn, items):
            return map_ordered(_DieOnce(fn, marker, victim), items, executor="ray", workers=2, retries=2)

        cert = certify_chunks(model, iter(chunks), mapper=dying)
        assert os.path.exists(marker)  # a worker did die
        # the same chunks certified in this process: the same certificate (the chunking fixes every product's
        # shape, so the rounding; the executor does not change it)
        clean = certify_chunks(model, iter(chunks))
        assert cert.certified and cert.certified_tokens == clean.certified_tokens == local["certified_tokens"]
        assert cert.min_certified_margin == clean.min_certified_margin
        assert cert.min_margin_at == clean.min_margin_at
        assert cert.torch_spot_check == clean.torch_spot_check
        assert cert.ceiling_tokens == clean.ceiling_tokens and cert.correct_tokens == clean.correct_tokens
        # an item's large array travels through the object store as a reference; the worker gets the array
        big = np.arange(300_000, dtype=np.int64)  # 2.4 MB, above the 1 MiB at which map_ordered ships by reference
        assert list(map_ordered(_take, [(big, 123_456), (big, 7)], executor="ray", workers=2)) == [123_456, 7]
        print("ray executor: model hash equal, certificate equal, worker death retried, large arguments resolved")
    finally:
        ray.shutdown()
