"""`uatlab.io_safety.OutputFolder`: which files in a user's output folder a run may replace."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from uatlab.errors import InputError
from uatlab.io_safety import OUTPUT_RECORD, OutputFolder, write_text_atomic


def _write(folder: OutputFolder, name: str, text: str) -> None:
    with folder:
        write_text_atomic(folder.folder / name, text)


def test_own_files_are_replaced_others_refused(tmp_path: Path) -> None:
    a = OutputFolder(tmp_path, "approx heads", ["heads.csv", "figures/*"])
    _write(a, "heads.csv", "one\n")
    _write(a, "heads.csv", "two\n")  # its own file: replaced
    assert (tmp_path / "heads.csv").read_text() == "two\n"
    # the same name written by another kind of run is not this run's
    b = OutputFolder(tmp_path, "reproduce", ["heads.csv"])
    with pytest.raises(InputError, match="written by uatlab approx heads, not by uatlab reproduce"):
        b.check()
    # a user's file under a glob name
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "mine.png").write_bytes(b"\x89PNG user")
    with pytest.raises(InputError, match="mine.png exists and is not a file uatlab approx heads wrote"):
        a.check()
    assert (tmp_path / "figures" / "mine.png").read_bytes() == b"\x89PNG user"


def test_a_file_dropped_in_after_the_check_is_refused_when_written(tmp_path: Path) -> None:
    folder = OutputFolder(tmp_path, "train", ["summary.json"])
    with folder:
        (tmp_path / "summary.json").write_text("user\n")
        with pytest.raises(InputError, match="summary.json exists and is not a file uatlab train wrote"):
            write_text_atomic(tmp_path / "summary.json", "run\n")
    assert (tmp_path / "summary.json").read_text() == "user\n"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_crash_between_record_and_rename_leaves_a_proven_file(tmp_path: Path, monkeypatch) -> None:
    folder = OutputFolder(tmp_path, "train", ["metrics.csv"])
    _write(folder, "metrics.csv", "epoch 1\n")
    real_replace = os.replace

    def crash(src, dst):
        if Path(dst).name == "metrics.csv":
            raise KeyboardInterrupt
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        _write(folder, "metrics.csv", "epoch 2\n")
    monkeypatch.setattr(os, "replace", real_replace)
    assert (tmp_path / "metrics.csv").read_text() == "epoch 1\n"  # the old content, still the run's
    folder.check()
    _write(folder, "metrics.csv", "epoch 2\n")
    assert (tmp_path / "metrics.csv").read_text() == "epoch 2\n"


def test_files_outside_the_names_are_neither_checked_nor_recorded(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep\n")
    folder = OutputFolder(tmp_path, "train", ["summary.json"])
    with folder:
        write_text_atomic(tmp_path / "other.json", "{}")  # not one of the run's names
        write_text_atomic(tmp_path / "summary.json", "{}")
    record = json.loads((tmp_path / OUTPUT_RECORD).read_text())
    assert set(record["files"]) == {"summary.json"} and record["files"]["summary.json"]["kind"] == "train"
    assert (tmp_path / "notes.txt").read_text() == "keep\n"


def test_a_damaged_record_and_a_symlink_are_refused(tmp_path: Path) -> None:
    folder = OutputFolder(tmp_path, "train", ["summary.json"])
    _write(folder, "summary.json", "{}")
    (tmp_path / OUTPUT_RECORD).write_text("not json")
    with pytest.raises(InputError, match="is not a uatlab output record"):
        folder.check()
    assert (tmp_path / OUTPUT_RECORD).read_text() == "not json"
    other = tmp_path / "link"
    other.mkdir()
    (tmp_path / "target.json").write_text("user\n")
    (other / "summary.json").symlink_to(tmp_path / "target.json")
    with pytest.raises(InputError, match="is a symbolic link"):
        OutputFolder(other, "train", ["summary.json"]).check()
    assert (tmp_path / "target.json").read_text() == "user\n"


def test_an_input_among_the_outputs_is_refused_before_it_exists(tmp_path: Path) -> None:
    folder = OutputFolder(tmp_path / "new", "train", ["model.safetensors"], inputs=[tmp_path / "new/model.safetensors"])
    with pytest.raises(InputError, match="this run reads"):
        folder.check()


def test_remove_deletes_only_its_own_unchanged_file(tmp_path: Path) -> None:
    folder = OutputFolder(tmp_path, "experiment trial", ["checkpoint.pt"])
    assert folder.remove("checkpoint.pt") is False  # nothing there
    (tmp_path / "checkpoint.pt").write_text("user\n")
    with pytest.raises(InputError, match="checkpoint.pt exists and is not a file uatlab experiment trial wrote there"):
        folder.remove("checkpoint.pt")
    assert (tmp_path / "checkpoint.pt").read_text() == "user\n" and not folder.holds("checkpoint.pt")
    (tmp_path / "checkpoint.pt").unlink()
    _write(folder, "checkpoint.pt", "ours\n")
    assert folder.holds("checkpoint.pt")
    (tmp_path / "checkpoint.pt").write_text("edited\n")  # changed since: no longer provably ours
    with pytest.raises(InputError, match="was changed after uatlab experiment trial wrote it"):
        folder.remove("checkpoint.pt")
    assert (tmp_path / "checkpoint.pt").read_text() == "edited\n"
    (tmp_path / "checkpoint.pt").unlink()
    _write(folder, "checkpoint.pt", "ours\n")
    assert folder.remove("checkpoint.pt") is True and not (tmp_path / "checkpoint.pt").exists()
    assert "checkpoint.pt" not in json.loads((tmp_path / OUTPUT_RECORD).read_text())["files"]


def test_a_replaced_file_is_hashed_once_per_write(tmp_path: Path, monkeypatch) -> None:
    """Writing over the run's own file hashes the old file once: the identity `check_file` computed is the one
    the record lists, not a second hash of the same file."""
    import uatlab.io_safety as io_safety

    target = tmp_path / "heads.csv"
    folder = OutputFolder(tmp_path, "approx heads", ["heads.csv"])
    _write(folder, "heads.csv", "one\n")
    hashed: list[Path] = []
    real = io_safety.prefix_identity

    def counting(path, lines):
        hashed.append(Path(path))
        return real(path, lines)

    monkeypatch.setattr(io_safety, "prefix_identity", counting)
    with folder:
        hashed.clear()  # the check on entering the folder is its own pass, before any work
        write_text_atomic(target, "two\n")
    assert hashed.count(target) == 1
    assert len(hashed) == 2  # the old file and the new content, once each
    entry = json.loads((tmp_path / OUTPUT_RECORD).read_text())["files"]["heads.csv"]
    assert entry["identities"] == [
        {"bytes": 4, "sha256": hashlib.sha256(b"one\n").hexdigest()},
        {"bytes": 4, "sha256": hashlib.sha256(b"two\n").hexdigest()},
    ]
    _write(folder, "heads.csv", "three\n")  # the record still proves the file: it is replaced again
    assert target.read_text() == "three\n"


@pytest.mark.parametrize(
    ("names", "folders", "blocked"),
    [
        (["trials/*.json"], (), "trials"),  # a glob's folder
        (["figures/a/b.png"], (), "figures/a"),  # a nested one
        (["summary.json"], ("runs",), "runs"),  # a folder the run makes for files it does not list
    ],
)
def test_a_file_where_the_run_makes_a_folder_is_refused_before_any_work(tmp_path, names, folders, blocked) -> None:
    blocker = tmp_path / blocked
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("the user's notes\n")
    folder = OutputFolder(tmp_path, "experiment x", names, folders=folders)
    with pytest.raises(InputError, match=f"{blocker} is a file, where this run writes a folder of its files"):
        folder.check()
    assert blocker.read_text() == "the user's notes\n"
    blocker.unlink()
    os.symlink(tmp_path / "nowhere", blocker)  # a dangling link is not a folder either
    with pytest.raises(InputError, match=f"{blocker} is a broken symbolic link"):
        folder.check()
    blocker.unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, blocker)  # a link to a folder is a folder: the user chose where the files go
    assert folder.check() is folder
    blocker.unlink()
    blocker.mkdir()  # a folder (the user's or an earlier run's) is where the files go
    assert folder.check() is folder
