"""``uatlab compile --resume`` reuses exactly what the first run stored, or stops with one clear error.

A work directory kept by a finished run (``--keep-work``) holds chunks and a recorded bucket pass, so a
resumed run reuses both. Each case damages one file the way a crash, a full disk, a copy or a hand edit
would; the resumed run must exit 2 with one ``error:`` line naming the file and what differs, leave ``--out``
and the work directory as they were, and suggest starting again without ``--resume``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from uatlab.cli import main

WORK = Path("m.safetensors.work")
ARGV = ["compile", "s.jsonl", "--out", "m.safetensors", "--chunk-tokens", "10", "--no-certify", "--json"]


@pytest.fixture(scope="module")
def kept(tmp_path_factory) -> Path:
    """A folder with a data set, its compiled model and the kept work directory (chunks and buckets)."""
    import os

    root = tmp_path_factory.mktemp("kept")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        assert main(["synth", "s.jsonl", "-N", "12", "-n", "5", "-V", "20", "-C", "3", "--json"]) == 0
        assert main([*ARGV, "--keep-work"]) == 0
    finally:
        os.chdir(cwd)
    m = json.loads((root / WORK / "manifest.json").read_text())
    assert len(m["chunks"]) >= 3 and m["buckets"]["count"] >= 3  # several of each to damage
    return root


@pytest.fixture
def here(kept: Path, tmp_path: Path, monkeypatch) -> Path:
    case = tmp_path / "case"
    shutil.copytree(kept, case)
    monkeypatch.chdir(case)
    return case


def _manifest(here: Path) -> dict:
    return json.loads((here / WORK / "manifest.json").read_text())


def _edit_manifest(here: Path, edit: Callable[[dict], None]) -> None:
    m = _manifest(here)
    edit(m)
    (here / WORK / "manifest.json").write_text(json.dumps(m))


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _tensors(path: Path) -> dict[str, bytes]:
    """The model's tensors as bytes (the file's metadata holds timings)."""
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as f:
        return {k: f.get_tensor(k).tobytes() for k in f.keys()}


def _nonempty_bucket(here: Path) -> Path:
    return next(p for p in sorted((WORK / "buckets").iterdir()) if p.stat().st_size > 0)


def _flip_last_byte(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0x01
    path.write_bytes(bytes(raw))


def missing_bucket(here: Path) -> tuple[Path, str]:
    path = _nonempty_bucket(here)
    (here / path).unlink()
    return path, "missing"


def bucket_not_whole_records(here: Path) -> tuple[Path, str]:
    path = _nonempty_bucket(here)
    with open(here / path, "ab") as fh:
        fh.write(b"\x00\x00\x00")
    return path, "not a whole number of"


def edited_bucket(here: Path) -> tuple[Path, str]:
    path = _nonempty_bucket(here)
    _flip_last_byte(here / path)  # the last column of the last record: same size, another h
    return path, "content differs"


def edited_chunk(here: Path) -> tuple[Path, str]:
    path = WORK / "chunk_00001.npz"
    raw = bytearray((here / path).read_bytes())
    # a byte inside the stored word ids: the archive still loads (no CRC is checked), with another word
    at = raw.index(b"word.npy") + 200
    raw[at] ^= 0x01
    (here / path).write_bytes(bytes(raw))
    return path, "content differs"


def truncated_chunk(here: Path) -> tuple[Path, str]:
    path = WORK / "chunk_00001.npz"
    size = (here / path).stat().st_size
    (here / path).write_bytes((here / path).read_bytes()[:100])
    return path, f"100 bytes, {size} when written"


def replaced_chunk(here: Path) -> tuple[Path, str]:
    shutil.copyfile(here / WORK / "chunk_00000.npz", here / WORK / "chunk_00001.npz")
    return WORK / "chunk_00001.npz", "damaged"


def manifest_counts_edited(here: Path) -> tuple[Path, str]:
    def edit(m: dict) -> None:  # consistent totals, but not what the chunk holds
        m["chunks"][-1]["tokens"] += 1
        m["tokens"] += 1

    _edit_manifest(here, edit)
    last = _manifest(here)["chunks"][-1]
    return WORK / last["file"], f"holds {last['tokens'] - 1} tokens, the manifest records {last['tokens']}"


def manifest_totals_edited(here: Path) -> tuple[Path, str]:
    _edit_manifest(here, lambda m: m.update(sequences=m["sequences"] - 1))
    return WORK / "manifest.json", "it records 11 sequences in all, its chunks 12"


def old_manifest(here: Path) -> tuple[Path, str]:
    def edit(m: dict) -> None:  # as the store version before digests wrote it
        m["version"] = 1
        for c in m["chunks"]:
            c.pop("bytes", None), c.pop("blake2b", None)
        m["buckets"].pop("files", None)

    _edit_manifest(here, edit)
    return WORK / "manifest.json", "cannot be verified"


@pytest.mark.parametrize(
    "damage",
    [
        missing_bucket,
        bucket_not_whole_records,
        edited_bucket,
        edited_chunk,
        truncated_chunk,
        replaced_chunk,
        manifest_counts_edited,
        manifest_totals_edited,
        old_manifest,
    ],
)
def test_damaged_work_directory_stops_the_resumed_run(here: Path, capsys, damage) -> None:
    path, what = damage(here)
    before_out = (here / "m.safetensors").read_bytes()
    before_work = _snapshot(here / WORK)
    capsys.readouterr()
    assert main([*ARGV, "--resume"]) == 2
    cap = capsys.readouterr()
    lines = [line for line in cap.err.splitlines() if line.startswith("error")]
    assert len(lines) == 1, cap.err
    assert str(path) in lines[0] and what in lines[0], lines[0]
    assert "without --resume" in lines[0] and "Traceback" not in cap.err and cap.out == ""
    assert (here / "m.safetensors").read_bytes() == before_out
    assert _snapshot(here / WORK) == before_work  # nothing deleted, nothing rewritten


def test_undamaged_work_directory_resumes_to_the_same_model(here: Path, capsys) -> None:
    """The control: the same kept work directory, untouched, is reused and gives the same model bytes."""
    assert main([*ARGV, "--resume", "--out", "again.safetensors", "--work-dir", str(WORK)]) == 0
    assert _tensors(here / "again.safetensors") == _tensors(here / "m.safetensors")


def test_a_hand_edited_chunk_name_never_deletes_a_file_outside(here: Path, capsys) -> None:
    """A chunk entry edited to name a file outside the work directory never gets it deleted: a run that starts
    over refuses the kept directory and one that resumes refuses the entry, each naming why, before anything is
    removed (`TokenStore.remove` deletes only the names it writes: tests/unit/test_out_of_core.py)."""
    victim = here / "victim.txt"
    victim.write_text("keep me")
    _edit_manifest(here, lambda m: m["chunks"][0].update(file="../victim.txt"))
    before = _snapshot(here / WORK)
    capsys.readouterr()
    why = {  # each run refuses the directory before touching it: the reason is what protects the file outside
        "": f"error: work directory {WORK} holds all of s.jsonl read by an earlier run",
        "--resume": f'{WORK}/manifest.json: chunk entry 0 is not one uatlab writes: {{"file": "../victim.txt"',
    }
    for extra, reason in why.items():
        assert main([*ARGV, *([extra] if extra else [])]) == 2
        assert reason in capsys.readouterr().err
        assert victim.read_text() == "keep me"
    assert _snapshot(here / WORK) == before  # and the directory itself untouched


def test_a_kept_work_directory_is_not_discarded_by_a_run_without_resume(here: Path, capsys) -> None:
    """The data an earlier run kept (--keep-work, or for --resume after an interrupt or bad data) is the user's:
    a run without --resume says so and touches nothing, rather than clearing it to start over."""
    before_out = (here / "m.safetensors").read_bytes()
    before_work = _snapshot(here / WORK)
    capsys.readouterr()
    assert main([*ARGV, "--out", "m.safetensors"]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and "Traceback" not in cap.err
    assert f"error: work directory {WORK} holds all of s.jsonl read by an earlier run" in cap.err
    assert "add --resume to continue from it" in cap.err
    assert _snapshot(here / WORK) == before_work
    assert (here / "m.safetensors").read_bytes() == before_out


def test_a_killed_run_resumes_only_on_the_data_it_stored(here: Path, capsys) -> None:
    """A run killed mid-read records no identity of its input: the resumed run checks the stored sequences
    against the data itself, so it completes on the same data and stops on changed data."""
    _edit_manifest(here, lambda m: m.update(input=None, complete=False))  # as a run killed mid-read leaves it
    kept = here.parent / "kept-copy"
    shutil.copytree(here, kept)
    assert main([*ARGV, "--resume", "--out", "again.safetensors", "--work-dir", str(WORK)]) == 0
    assert _tensors(here / "again.safetensors") == _tensors(here / "m.safetensors")

    lines = (kept / "s.jsonl").read_text().splitlines()
    row = json.loads(lines[4])
    row["tokens"][2] = "changed"
    lines[4] = json.dumps(row)
    (kept / "s.jsonl").write_text("\n".join(lines) + "\n")
    before = _snapshot(kept)
    capsys.readouterr()
    assert (
        main(
            [
                "compile",
                str(kept / "s.jsonl"),
                "--out",
                str(kept / "m.safetensors"),
                "--chunk-tokens",
                "10",
                "--no-certify",
                "--resume",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert f"error: --resume: {kept / 's.jsonl'}:5: sequence 5 is not the one stored in " in err, err
    assert "chunk_00002.npz (its tokens differ" in err and "without --resume" in err, err
    assert _snapshot(kept) == before


def test_a_change_inside_the_last_stored_sentence_is_found(tmp_path: Path, capsys) -> None:
    """The input's recorded prefix ends at the first line of the last stored sentence: a change in its later
    lines is found by comparing the sentence itself."""
    good = "".join(f"w{i} O\nv{i} B-X\n\n" for i in range(6))
    data, out = tmp_path / "d.conll", tmp_path / "m.safetensors"
    data.write_text(good + "broken\n")
    argv = ["compile", str(data), "--out", str(out), "--chunk-tokens", "4", "--no-certify"]
    assert main(argv) == 2  # six sentences stored; the last starts on line 16
    data.write_text(good.replace("v5 B-X", "v5 B-Y") + "fixed O\n")
    capsys.readouterr()
    assert main([*argv, "--resume"]) == 2
    err = capsys.readouterr().err
    assert f"error: --resume: {data}:16: sequence 6 is not the one stored in " in err, err
    assert "(its labels differ" in err and not out.exists()
