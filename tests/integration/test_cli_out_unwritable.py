"""``--out``: a folder no file can be made in, or an empty path, is refused before any work."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from uatlab.cli import main
from uatlab.memory_guard import human


@pytest.mark.skipif(
    not Path("/proc/self").exists() or os.geteuid() != 0, reason="root on Linux: /proc's bits say writable"
)
@pytest.mark.parametrize(
    "argv",
    [
        ["approx", "heads", "--quick", "--out", "/proc/uatlab-out"],
        ["approx", "truncated-linear", "--out", "/proc/uatlab-out"],
    ],
)
def test_approx_refuses_such_an_out_before_its_sweep(capsys, argv):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "cannot write there: no file can be made in /proc" in captured.err
    assert captured.out == ""  # no sweep ran, nothing printed


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["train", "d.jsonl", "--epochs", "1", "--dim", "8", "--out", ""], "--out"),
        (["reproduce", "--quick", "--only", "A.thm2.causal-exact", "--out="], "--out"),
        (["approx", "heads", "--quick", "--out", ""], "--out"),
        (["compile", "d.jsonl", "--work-dir", ""], "--work-dir"),
    ],
)
def test_an_empty_path_is_refused_not_read_as_the_current_folder(tmp_path, monkeypatch, capsys, argv, option):
    """``--out ""`` (an unset shell variable) reached the command as the path "." and wrote into the current
    folder: refused before any work, naming the option."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.jsonl").write_text('{"tokens": ["a", "b"], "labels": ["X", "Y"]}\n')
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert f"Invalid value for '{option}': an empty path" in captured.err and captured.out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl"]  # nothing written here


def test_a_killed_runs_temporary_file_is_named_and_kept(tmp_path, monkeypatch, capsys):
    """SIGKILL leaves the temporary file of an atomic write beside the output (no clean-up can run): the next run
    of synth or compile on that output names it and its size, and deletes nothing."""
    monkeypatch.chdir(tmp_path)
    left = tmp_path / ".sy.jsonl.0123abcd.tmp"
    left.write_bytes(b"x" * 3000)
    assert main(["synth", "-N", "4", "sy.jsonl"]) == 0
    err = capsys.readouterr().err
    assert "note: 1 temporary file(s) of an earlier run killed before it could clean up are beside sy.jsonl" in err
    assert f".sy.jsonl.0123abcd.tmp ({human(3000)})" in err
    assert left.read_bytes() == b"x" * 3000
    (tmp_path / ".m.safetensors.0123abcd.tmp").write_bytes(b"y")
    assert main(["compile", "sy.jsonl", "--out", "m.safetensors", "--json"]) == 0
    assert f".m.safetensors.0123abcd.tmp ({human(1)})" in capsys.readouterr().err
