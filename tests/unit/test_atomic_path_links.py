"""`atomic_path`, the writer every output file goes through, never replaces a symbolic link: the rename would put
a regular file where the link was (not write through it). Refused before the write and, for a link put there
while the file was being written, again before the rename; the temporary file is removed either way."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from uatlab.errors import InputError
from uatlab.io_safety import atomic_path, atomic_write


@pytest.mark.parametrize("target", ["mine.txt", "nowhere.txt"], ids=["to-a-file", "dangling"])
def test_a_link_there_before_the_write_is_refused(tmp_path: Path, target: str) -> None:
    (tmp_path / "mine.txt").write_text("mine\n")
    link = tmp_path / "out.txt"
    link.symlink_to(target)
    with pytest.raises(InputError, match="symbolic link"), atomic_write(link) as fh:
        fh.write("new\n")
    assert link.is_symlink() and os.readlink(link) == target
    assert (tmp_path / "mine.txt").read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt", "out.txt"]  # no temporary left


def test_a_link_put_there_while_writing_is_refused_at_the_rename(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("mine\n")
    out = tmp_path / "out.txt"
    with pytest.raises(InputError, match="symbolic link"), atomic_path(out) as tmp:
        tmp.write_text("new\n")
        out.symlink_to("mine.txt")  # another program, meanwhile
    assert out.is_symlink() and (tmp_path / "mine.txt").read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt", "out.txt"]


def test_a_regular_file_is_still_replaced(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    out.write_text("old\n")
    with atomic_write(out) as fh:
        fh.write("new\n")
    assert out.read_text() == "new\n" and not out.is_symlink()
