"""``uatlab approx ... --out``: a folder no file can be made in is refused before the sweep runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from uatlab.cli import main


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs Linux /proc")
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
