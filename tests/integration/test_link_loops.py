"""A loop of symbolic links where a command writes (its output file or folder, a work directory, or a folder on
the way to one) is one ``error:`` line naming the option and the path, exit 2, nothing written: resolving such a
path fails, and it failed with a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from uatlab.cli import main

CONLL = "w1 X O\nw2 X B-PER\n\nw3 X O\nw1 X O\n"

COMMANDS = {  # the option the error names, and the command (the loop at "{loop}")
    "compile --out": ("--out", ["compile", "c.txt", "--out", "{loop}", "--json"]),
    "compile --out inside": ("--out", ["compile", "c.txt", "--out", "{loop}/m.safetensors", "--json"]),
    "compile --ff deep --out": ("--out", ["compile", "c.txt", "--ff", "deep", "--out", "{loop}", "--json"]),
    "compile --work-dir": ("--work-dir", ["compile", "c.txt", "--out", "m.safetensors", "--work-dir", "{loop}"]),
    "train --out": ("--out", ["train", "c.txt", "--out", "{loop}", "--epochs", "1", "--json"]),
    "capacity --out": (
        "--out",
        ["experiment", "capacity", "--kind", "conll", "--data", "c.txt", "--ns", "2", "--out", "{loop}"],
    ),
    "synth OUT": ("OUT", ["synth", "{loop}", "-N", "3"]),
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_link_loop_at_the_output_is_one_error_line(tmp_path: Path, monkeypatch, capsys, name: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.txt").write_text(CONLL)
    os.symlink("loopB", "loopA")
    os.symlink("loopA", "loopB")
    before = sorted(os.listdir(tmp_path))
    option, argv = COMMANDS[name]
    code = main([a.replace("{loop}", "loopA") for a in argv])
    cap = capsys.readouterr()
    lines = [ln for ln in cap.err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in cap.err, cap.err
    assert lines[0].startswith("error: ") and "loop of symbolic links" in lines[0], lines[0]
    assert f"{option} loopA" in lines[0], lines[0]
    assert sorted(os.listdir(tmp_path)) == before
