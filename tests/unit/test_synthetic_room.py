"""`write_synthetic` (``uatlab synth``) refuses, before writing a byte, a file its folder has no room for."""

from __future__ import annotations

import shutil
from collections import namedtuple

import pytest

from uatlab.data.synthetic import write_synthetic
from uatlab.errors import InputError

Usage = namedtuple("Usage", "total used free")


def test_a_file_larger_than_the_free_space_is_refused_before_writing(tmp_path, monkeypatch):
    out = tmp_path / "s.jsonl"
    real = write_synthetic(tmp_path / "real.jsonl", 200, 30, 50, 3)
    size = real.stat().st_size  # 200 lines of 30 tokens: what the bound must not exceed
    assert 200 * (29 + 12 * 30) <= size
    monkeypatch.setattr(shutil, "disk_usage", lambda p: Usage(10**9, 10**9 - 1000, 1000))
    with pytest.raises(InputError, match=r"s.jsonl: 200 sequences of 30 tokens take at least .* GB free"):
        write_synthetic(out, 200, 30, 50, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["real.jsonl"]  # nothing written, no temporary left
    monkeypatch.setattr(shutil, "disk_usage", lambda p: Usage(10**9, 10**9 - size, size))  # just enough room
    assert write_synthetic(out, 200, 30, 50, 3).read_bytes() == real.read_bytes()


def test_the_cli_refuses_an_absurd_size_at_once(tmp_path, capsys):
    from uatlab.cli import main

    out = tmp_path / "huge.jsonl"
    assert main(["synth", str(out), "-N", str(10**12), "-n", str(10**6)]) == 2
    err = capsys.readouterr().err
    assert "sequences of 1000000 tokens take at least" in err and not out.exists()
    assert list(tmp_path.iterdir()) == []
