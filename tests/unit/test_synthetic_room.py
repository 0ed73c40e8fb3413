"""`write_synthetic` (``uatlab synth``) refuses, before writing a byte, a file its folder has no room for."""

from __future__ import annotations

import shutil
from collections import namedtuple

import pytest

from uatlab.data.synthetic import _LINE_BYTES, _TOKEN_BYTES, write_synthetic
from uatlab.errors import InputError
from uatlab.memory_guard import human

Usage = namedtuple("Usage", "total used free")


def test_a_file_larger_than_the_free_space_is_refused_before_writing(tmp_path, monkeypatch):
    out = tmp_path / "s.jsonl"
    real = write_synthetic(tmp_path / "real.jsonl", 200, 30, 50, 3)
    size = real.stat().st_size  # 200 lines of 30 tokens: what the bound must not exceed
    assert 200 * (_LINE_BYTES + _TOKEN_BYTES * 30) <= size
    monkeypatch.setattr(shutil, "disk_usage", lambda p: Usage(10**9, 10**9 - 1000, 1000))
    need = human(200 * (_LINE_BYTES + _TOKEN_BYTES * 30))
    with pytest.raises(
        InputError, match=rf"s.jsonl: 200 sequences of 30 tokens take at least {need}, and .* has 1000 B free"
    ):
        write_synthetic(out, 200, 30, 50, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["real.jsonl"]  # nothing written, no temporary left
    monkeypatch.setattr(shutil, "disk_usage", lambda p: Usage(10**9, 10**9 - size, size))  # just enough room
    assert write_synthetic(out, 200, 30, 50, 3).read_bytes() == real.read_bytes()


@pytest.mark.parametrize(("N", "n", "V", "C"), [(50, 1, 1, 1), (200, 30, 5, 3), (10, 7, 10, 10)])
def test_the_size_bound_is_below_the_size_of_files_of_one_digit_ids(tmp_path, N, n, V, C):
    size = write_synthetic(tmp_path / "s.jsonl", N, n, V, C).stat().st_size
    assert N * (_LINE_BYTES + _TOKEN_BYTES * n) <= size  # the bound the refusal uses


def test_the_cli_refuses_an_absurd_size_at_once(tmp_path, capsys):
    from uatlab.cli import main

    out = tmp_path / "huge.jsonl"
    assert main(["synth", str(out), "-N", str(10**12), "-n", str(10**6)]) == 2
    err = capsys.readouterr().err
    assert "sequences of 1000000 tokens take at least" in err and not out.exists()
    assert list(tmp_path.iterdir()) == []
