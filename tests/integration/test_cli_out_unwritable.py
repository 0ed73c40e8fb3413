"""``uatlab approx ... --out``: a folder no file can be made in is refused before the sweep runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from uatlab.cli import main


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
