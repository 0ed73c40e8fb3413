"""`uatlab.io_safety.check_output_dir` and `check_output_file`: a place no file can be made in is refused before
any work, also where permission bits say yes (root under /proc and /sys: file systems that report no storage)."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from uatlab.errors import InputError
from uatlab.io_safety import check_output_dir, check_output_file


@pytest.fixture
def no_storage(tmp_path, monkeypatch):
    """``tmp_path`` reported, as /proc is, as a file system with no blocks."""
    real = os.statvfs

    def statvfs(path):
        return SimpleNamespace(f_blocks=0) if Path(path) == tmp_path else real(path)

    monkeypatch.setattr(os, "statvfs", statvfs)
    return tmp_path


@pytest.mark.parametrize("check", [check_output_dir, check_output_file])
def test_where_no_file_can_be_made_the_output_is_refused(no_storage, monkeypatch, check):
    def refuse(*args, **kwargs):
        raise OSError(errno.ENOENT, "No such file or directory")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(InputError, match=rf"--out {no_storage / 'out'}: cannot write there: no file can be made in"):
        check(no_storage / "out")
    if check is check_output_dir:  # the folder itself
        with pytest.raises(
            InputError, match=rf"--out {no_storage}: cannot write there: no file can be made in {no_storage} \("
        ):
            check(no_storage)


@pytest.mark.parametrize("check", [check_output_dir, check_output_file])
def test_a_storage_less_file_system_that_takes_files_passes_and_keeps_no_trial_file(no_storage, check):
    assert check(no_storage / "out") == no_storage / "out"
    assert list(no_storage.iterdir()) == []  # the file tried was removed


def test_a_file_system_that_does_not_report_its_storage_is_tried(tmp_path, monkeypatch):
    def statvfs(path):
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(os, "statvfs", statvfs)
    assert check_output_dir(tmp_path / "out") == tmp_path / "out"  # writable: passes
    assert list(tmp_path.iterdir()) == []


def test_a_writable_folder_passes_and_keeps_nothing_of_the_check(tmp_path):
    (tmp_path / "mine.txt").write_text("user\n")
    before = tmp_path.stat().st_mtime_ns
    assert check_output_dir(tmp_path) == tmp_path
    assert check_output_file(tmp_path / "new" / "m.safetensors") == tmp_path / "new" / "m.safetensors"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]
    assert tmp_path.stat().st_mtime_ns == before  # nothing made there, not even for a moment


@pytest.mark.skipif(
    not Path("/proc/self").exists() or os.geteuid() != 0, reason="root on Linux: /proc's bits say writable"
)
def test_proc_is_refused_for_root():
    with pytest.raises(InputError, match=r"--out /proc/uatlab-out: cannot write there: no file can be made in /proc"):
        check_output_dir(Path("/proc/uatlab-out"))


def test_leftover_temps_are_the_temporary_files_of_atomic_writes_only(tmp_path):
    from uatlab.io_safety import atomic_write, leftover_temps

    out = tmp_path / "d.jsonl"
    killed = tmp_path / ".d.jsonl.0badc0de.tmp"  # what a writer killed by SIGKILL leaves
    killed.write_text("partial")
    for other in (".d.jsonl.lock", ".d.jsonl.zzzzzzzz.tmp", ".e.jsonl.0badc0de.tmp", "d.jsonl.0badc0de.tmp"):
        (tmp_path / other).write_text("not ours")
    assert leftover_temps(out) == [killed]
    with atomic_write(out) as fh:  # a write that completes leaves none of its own
        fh.write("x\n")
    assert leftover_temps(out) == [killed]
