"""Loading a model from a path that is not a regular file names what the path is: a folder, a missing file, a
broken link, a loop of links, a FIFO (each was "does not exist" but the folder)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from uatlab.errors import UatlabError
from uatlab.models.io import file_format, load


def _make(tmp_path: Path, kind: str) -> Path:
    p = tmp_path / "m.safetensors"
    if kind == "folder":
        p.mkdir()
    elif kind == "broken-link":
        p.symlink_to(tmp_path / "nowhere")
    elif kind == "link-loop":
        os.symlink("m2.safetensors", p)
        os.symlink("m.safetensors", tmp_path / "m2.safetensors")
    elif kind == "fifo":
        os.mkfifo(p)
    return p


WHAT = {
    "missing": "does not exist",
    "folder": "is a folder, not a model file",
    "broken-link": "is a broken symbolic link",
    "link-loop": "Too many levels of symbolic links",
    "fifo": "is a FIFO (named pipe), not a regular file",
}


@pytest.mark.parametrize("kind", sorted(WHAT))
@pytest.mark.parametrize("reader", [load, file_format], ids=["load", "file_format"])
def test_a_path_that_is_not_a_model_file_is_named_for_what_it_is(tmp_path: Path, kind: str, reader) -> None:
    path = _make(tmp_path, kind)
    with pytest.raises(UatlabError) as err:
        reader(path)
    assert str(path) in str(err.value) and WHAT[kind] in str(err.value), str(err.value)
