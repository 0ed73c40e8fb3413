"""The one line a command prints for an OS error: a full disk always ends with what to do about it."""

from __future__ import annotations

import errno
import os

import pytest

from uatlab.cli import _os_error


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_full_disk_line_keeps_its_advice_beside_a_note(code: int) -> None:
    exc = OSError(code, os.strerror(code), "out/m.safetensors")
    assert _os_error(exc).endswith("(nothing was replaced; free some space and run again)")
    exc.add_note("the log so far is in run.log")  # a note that gives no advice of its own
    line = _os_error(exc)
    assert "the log so far is in run.log" in line and line.endswith("free some space and run again)"), line


def test_a_note_with_its_own_advice_is_not_given_the_generic_one() -> None:
    exc = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "w/chunk.npz")
    exc.add_note("the data read so far is kept in w: free some space, then run again with --resume")
    line = _os_error(exc)
    assert line.count("free some space") == 1 and line.endswith("--resume)"), line


def test_other_os_errors_carry_their_notes_and_no_disk_advice() -> None:
    exc = OSError(errno.EACCES, os.strerror(errno.EACCES), "m.safetensors")
    exc.add_note("the work directory w is kept")
    assert _os_error(exc) == f"m.safetensors: {os.strerror(errno.EACCES)} (the work directory w is kept)"
