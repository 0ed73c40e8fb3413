"""Model files are the same bytes for the same model: a canonical safetensors header, no run times stored."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset, save_compiled
from uatlab.data import from_lists
from uatlab.models.safetensors_file import canonical_header, canonicalize_header, write_safetensors

META = {f"key_{c}": f"value {c} é" for c in "qwertyuiop"}  # ten keys: a hash map's order is one of 10! orders


def _header(path: Path) -> bytes:
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    return raw[8 : 8 + n]


def test_the_metadata_keys_are_sorted_and_the_tensors_read_back(tmp_path: Path) -> None:
    tensors = {"b": torch.arange(3, dtype=torch.float64), "a": torch.ones(2, 2, dtype=torch.float32)}
    out = write_safetensors(tensors, tmp_path / "m.safetensors", META)
    doc = json.loads(_header(out))
    assert list(doc)[0] == "__metadata__"
    assert list(doc["__metadata__"]) == sorted(META)
    assert len(_header(out)) % 8 == 0  # the data still starts on an 8-byte boundary
    with safe_open(str(out), "pt") as f:
        assert f.metadata() == META
        for k, v in tensors.items():
            assert torch.equal(f.get_tensor(k), v)


def test_the_same_tensors_and_metadata_give_the_same_bytes_in_every_process(tmp_path: Path) -> None:
    """The library's own writer orders the metadata by a per-process (and per-map) random hash: four writes of
    ten keys agree by chance with probability about (1/10!)^3."""
    code = (
        "import sys, torch\n"
        "from uatlab.models.safetensors_file import write_safetensors\n"
        f"meta = {META!r}\n"
        "write_safetensors({'w': torch.arange(6, dtype=torch.float64).reshape(2, 3)}, sys.argv[1], meta)\n"
    )
    files = []
    for i in range(4):
        p = tmp_path / f"m{i}.safetensors"
        subprocess.run([sys.executable, "-c", code, str(p)], check=True)
        files.append(p.read_bytes())
    assert all(f == files[0] for f in files)


def test_canonical_form_pads_a_looser_header_and_refuses_one_that_does_not_fit(tmp_path: Path) -> None:
    body = b'{ "w": {"dtype":"F64","shape":[1],"data_offsets":[0,8]}, "__metadata__": {"z":"1","a":"2"} }'
    n = (len(body) + 7) // 8 * 8
    p = tmp_path / "loose.safetensors"
    p.write_bytes(n.to_bytes(8, "little") + body + b" " * (n - len(body)) + b"\0" * 8)
    canonicalize_header(p)
    assert _header(p).rstrip(b" ") == canonical_header(body)
    assert _header(p).startswith(b'{"__metadata__":{"a":"2","z":"1"},"w":')
    with safe_open(str(p), "pt") as f:
        assert f.metadata() == {"a": "2", "z": "1"}
    tight = b'{"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},"__metadata__":{"a":"\\u00e9"}}'
    q = tmp_path / "tight.safetensors"  # an escaped é is longer than the raw UTF-8: fits; the reverse does not
    q.write_bytes(len(tight).to_bytes(8, "little") + tight + b"\0" * 8)
    canonicalize_header(q)
    assert json.loads(_header(q))["__metadata__"] == {"a": "é"}
    grown = b'{"__metadata__":{"a":"b"},"w":{"dtype":"F64","shape":[1E2],"data_offsets":[0,8]}}'
    r = tmp_path / "grown.safetensors"  # not the library's writing: 1E2 reads as 100.0, two bytes longer
    r.write_bytes(len(grown).to_bytes(8, "little") + grown + b"\0" * 8)
    with pytest.raises(ValueError, match="exceeds"):
        canonicalize_header(r)
    assert r.read_bytes()[8 : 8 + len(grown)] == grown  # left as it was


def test_compiling_twice_saves_the_same_file(tmp_path: Path) -> None:
    toks = [["a", "b", "c"], ["b", "a"], ["c", "c", "a", "b"]]
    labs = [["X", "Y", "X"], ["Y", "Y"], ["X", "Z", "X", "Y"]]
    saved = []
    for i in range(2):
        res = compile_dataset(from_lists(toks, labs))
        assert res.report["seconds"] > 0  # the report has the run's times; the file does not
        p = save_compiled(res.model, tmp_path / f"m{i}.safetensors", res.report)
        saved.append(p.read_bytes())
        with safe_open(str(p), "pt") as f:
            facts = json.loads(f.metadata()["uatlab_extra"])["facts"]
        assert "seconds" not in facts and "stage_seconds" not in facts
        assert facts["certified_tokens"] == res.certificate.certified_tokens
    assert saved[0] == saved[1]


def test_the_same_model_compiled_in_other_chunks_is_the_same_file(tmp_path: Path, monkeypatch, capsys) -> None:
    """How the data was cut into chunks and buckets is a setting of the run, not a fact of the model."""
    from uatlab.cli import main

    monkeypatch.chdir(tmp_path)
    rows = [f"w{i % 7} {'B-X' if i % 3 == 0 else 'O'}\n" + ("\n" if i % 5 == 4 else "") for i in range(60)]
    Path("d.conll").write_text("".join(rows) + "\n")
    assert main(["compile", "d.conll", "--format", "conll", "--out", "a.safetensors", "--json"]) == 0
    whole = json.loads(capsys.readouterr().out)
    args = ["compile", "d.conll", "--format", "conll", "--out", "b.safetensors", "--chunk-tokens", "7", "--json"]
    assert main(args) == 0
    chunked = json.loads(capsys.readouterr().out)
    assert chunked["buckets"] > whole["buckets"] == 1  # the runs differ in how they cut the data
    assert Path("a.safetensors").read_bytes() == Path("b.safetensors").read_bytes()
