"""`uatlab.io_safety.check_output_dir` and `check_output_file`: a place no file can be made in is refused before
any work, also where permission bits say yes (root under /proc and /sys)."""

from __future__ import annotations

from pathlib import Path

import pytest

from uatlab.errors import InputError
from uatlab.io_safety import check_output_dir, check_output_file

NO_FILES = Path("/proc")  # a folder of a pseudo file system: listed, writable to root by its bits, holds no new files
needs_proc = pytest.mark.skipif(not (NO_FILES / "self").exists(), reason="needs Linux /proc")


@needs_proc
@pytest.mark.parametrize("check", [check_output_dir, check_output_file])
def test_a_folder_no_file_can_be_made_in_is_refused(check):
    with pytest.raises(InputError, match=r"--out /proc/uatlab-out: cannot write there: no file can be made in /proc"):
        check(NO_FILES / "uatlab-out")
    if check is check_output_dir:  # the folder itself
        with pytest.raises(InputError, match=r"--out /proc: cannot write there: no file can be made in it"):
            check(NO_FILES)


def test_a_writable_folder_passes_and_keeps_nothing_of_the_check(tmp_path):
    (tmp_path / "mine.txt").write_text("user\n")
    before = tmp_path.stat().st_mtime_ns
    assert check_output_dir(tmp_path) == tmp_path
    assert check_output_file(tmp_path / "new" / "m.safetensors") == tmp_path / "new" / "m.safetensors"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]
    assert tmp_path.stat().st_mtime_ns == before  # nothing made there, not even for a moment
