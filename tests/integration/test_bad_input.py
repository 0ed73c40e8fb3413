"""Hostile but realistic invocations of every command: one ``error:`` line, exit 2, nothing lost.

Each case runs the CLI in-process in a fresh folder holding the same fixtures, and asserts the exit code,
exactly one ``error:`` line on stderr naming the problem, no traceback, and that every file present before
the run is byte-identical afterwards. The few cases that need signals run a subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import safetensors.torch
from conll_fixture import CONLL

from uatlab.cli import main
from uatlab.errors import InputError
from uatlab.models.io import FORMAT_TAG, file_format

JSONL = (
    "\n".join(
        json.dumps({"tokens": t, "labels": y})
        for t, y in [
            (["a", "b", "c"], ["X", "Y", "X"]),
            (["b", "a"], ["Y", "Y"]),
            (["c", "c", "a", "b"], ["X", "X", "Y", "X"]),
        ]
    )
    + "\n"
)


def _bytes(text: str) -> bytes:
    return text.encode("utf-8")


# every case starts from a folder holding these files (plus a compiled model, see ``_fixture_dir``)
FILES: dict[str, bytes] = {
    "data.txt": _bytes(CONLL),
    "data.jsonl": _bytes(JSONL),
    "empty.txt": b"",
    "blank.txt": b"\n\n   \n\t\n",
    "header.txt": b"-DOCSTART- -X- -X- O\n\n",
    "empty.jsonl": b"",
    "bom.txt": b"\xef\xbb\xbf" + _bytes(CONLL),
    "latin1.txt": _bytes(CONLL) + "Caf\u00e9 NN B-NP O\n".encode("latin-1"),
    "latin1.jsonl": _bytes(JSONL) + b'{"tokens": ["caf\xe9"], "labels": ["X"]}\n',
    "surrogate.jsonl": _bytes(JSONL) + b'{"tokens": ["\\ud800"], "labels": ["X"]}\n' + _bytes(JSONL),
    "bigint.jsonl": _bytes(JSONL) + b'{"tokens": [' + b"9" * 5000 + b'], "labels": ["X"]}\n',
    "badjson.jsonl": _bytes(JSONL) + b'{"tokens": ["a", "labels": ["X"]}\n',
    "ragged.jsonl": _bytes(JSONL) + b'{"tokens": ["a", "b"], "labels": ["X"]}\n',
    "notlist.jsonl": b'{"tokens": "abc", "labels": "XYZ"}\n',
    "nested.jsonl": b'{"tokens": [["a"]], "labels": ["X"]}\n',
    "onecol.txt": b"Zorbia B-ORG\nlonely\n",
    "cols.txt": b"a NN O\nb NN I-NP O\n",
    "deep.jsonl": b"[" * 100000 + b"\n",
    "notes.md": b"precious notes\n",
    "long.txt": b"".join(b"Zorbia NNP B-NP B-ORG\npraises VBZ B-VP O\n" for _ in range(1000)),
}


@dataclass
class Case:
    """One invocation: ``argv`` (relative paths into the case folder), the exit code and a fragment of the
    ``error:`` line expected, an optional ``setup(folder)`` run first."""

    id: str
    argv: list[str]
    match: str
    code: int = 2
    setup: Callable[[Path], None] | None = None
    check: Callable[[Path], None] | None = None
    extra: dict = field(default_factory=dict)


def _snapshot(folder: Path) -> dict[str, bytes]:
    out = {}
    for p in folder.rglob("*"):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(folder))] = p.read_bytes()
    return out


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory) -> Path:
    """The fixture files and a model compiled from data.txt (model.safetensors)."""
    d = tmp_path_factory.mktemp("fixtures")
    for name, data in FILES.items():
        (d / name).write_bytes(data)
    cwd = os.getcwd()
    os.chdir(d)
    try:
        assert main(["compile", "data.txt", "--out", "model.safetensors", "--json"]) == 0
    finally:
        os.chdir(cwd)
    return d


@pytest.fixture
def case_dir(fixture_dir, tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "case"
    folder.mkdir()
    for p in fixture_dir.iterdir():
        if p.is_file():
            (folder / p.name).write_bytes(p.read_bytes())
    monkeypatch.chdir(folder)
    return folder


def run_case(case: Case, folder: Path, capsys) -> None:
    if case.setup is not None:
        case.setup(folder)
    before = _snapshot(folder)
    capsys.readouterr()
    code = main(list(case.argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err + out
    assert code == case.code, (code, err)
    error_lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(error_lines) == 1, err
    assert case.match.lower() in error_lines[0].lower(), error_lines[0]
    assert out.strip() == "" or "--help" in case.argv, out  # an error prints no JSON or table on stdout
    after = _snapshot(folder)
    for name, data in before.items():
        assert name in after, f"{name} was deleted"
        assert after[name] == data, f"{name} was modified"
    if case.check is not None:
        case.check(folder)


# ------------------------------------------------------------------------------------------------ cases
def _mkdir(name: str, files: dict[str, str] | None = None) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        (folder / name).mkdir(parents=True, exist_ok=True)
        for rel, text in (files or {}).items():
            (folder / name / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / name / rel).write_text(text)

    return setup


def _symlink(name: str, target: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        (folder / name).symlink_to(target)

    return setup


def _fifo(name: str) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        os.mkfifo(folder / name)

    return setup


def _absent(*names: str) -> Callable[[Path], None]:
    def check(folder: Path) -> None:
        for name in names:
            assert not (folder / name).exists(), f"{name} was left behind"

    return check


DATA_LOSS = [
    Case(
        "compile-workdir-foreign-manifest",
        ["compile", "data.txt", "--out", "m.safetensors", "--work-dir", "proj"],
        "not a uatlab work directory",
        setup=_mkdir("proj", {"manifest.json": '{"name": "app"}', "src/KEEP.txt": "x"}),
    ),
    Case("compile-out-is-input", ["compile", "data.txt", "--out", "data.txt"], "is the input file"),
    Case(
        "compile-out-is-input-other-spelling",
        ["compile", "data.txt", "--out", "./sub/../data.txt"],
        "is the input file",
        setup=_mkdir("sub"),
    ),
    Case(
        "compile-out-is-input-link",
        ["compile", "data.txt", "--out", "link.txt"],
        "is the input file",
        setup=_symlink("link.txt", "data.txt"),
    ),
    Case("compile-jsonl-out-is-input", ["compile", "data.jsonl", "--out", "data.jsonl"], "is the input file"),
    Case(
        "compile-out-existing-dir", ["compile", "data.txt", "--out", "adir"], "existing directory", setup=_mkdir("adir")
    ),
    # a folder's spelling: Path drops "/." and would write a file named "nd" (and "nd/.." one named "nd/..")
    *(
        Case(f"compile-out-spelt-{tag}", ["compile", "data.txt", "--out", out], f"{out!r} {says}", check=_absent("nd"))
        for tag, out, says in [
            ("dot", "nd/.", "ends in '.', the spelling of a folder"),
            ("dotdot", "nd/..", "ends in '..', the spelling of a folder"),
            ("here", ".", "is the spelling of a folder"),
            ("slash", "nd/", "ends in '/', the spelling of a folder"),
        ]
    ),
    Case("synth-out-spelt-dot", ["synth", "nd/.", "-N", "2"], "'nd/.' ends in '.'", check=_absent("nd")),
    Case("compile-workdir-is-input", ["compile", "data.txt", "--work-dir", "data.txt"], "is the input file"),
    Case(
        "compile-workdir-is-file",
        ["compile", "data.txt", "--out", "m.safetensors", "--work-dir", "notes.md"],
        "not a folder",
    ),
    Case("synth-N0-keeps-file", ["synth", "notes.md", "-N", "0"], "--sequences"),
    Case("synth-V-negative", ["synth", "notes.md", "-V", "-3"], "--vocab"),
    Case("synth-no-repeats-n-gt-V", ["synth", "notes.md", "--no-repeats", "-n", "10", "-V", "5"], "vocabulary"),
    Case("synth-seed-negative", ["synth", "notes.md", "--seed", "-1"], "--seed"),
    Case("synth-length-huge", ["synth", "notes.md", "-n", "1000000000000"], "--length"),
    Case("synth-vocab-float", ["synth", "notes.md", "-V", "1e20"], "--vocab"),
    Case("synth-into-dir", ["synth", "adir"], "existing directory", setup=_mkdir("adir")),
    Case("synth-out-is-dash", ["synth", "-"], "standard output"),
    Case("synth-over-a-user-file", ["synth", "notes.md", "-N", "2"], "notes.md exists and is not synthetic data"),
    Case(
        "compile-surrogate-then-resume-other",
        ["compile", "surrogate.jsonl", "--out", "m.safetensors"],
        "surrogate.jsonl:4",
    ),
    Case(
        "compile-missing-leaves-no-workdir",
        ["compile", "nothere.txt", "--out", "m.safetensors"],
        "does not exist",
        check=_absent("m.safetensors.work", "m.safetensors"),
    ),
    Case(
        "compile-empty-leaves-no-workdir",
        ["compile", "empty.txt", "--out", "m.safetensors"],
        "no sequences",
        check=_absent("m.safetensors.work", "m.safetensors"),
    ),
]


@pytest.mark.parametrize("case", DATA_LOSS, ids=lambda c: c.id)
def test_data_loss_cases(case: Case, case_dir: Path, capsys) -> None:
    run_case(case, case_dir, capsys)


def test_workdir_kept_when_given_empty(case_dir: Path, capsys) -> None:
    """An existing empty --work-dir is used, then emptied, but never deleted (uatlab did not create it)."""
    (case_dir / "wd").mkdir()
    assert main(["compile", "data.txt", "--out", "m.safetensors", "--work-dir", "wd", "--json"]) == 0
    assert (case_dir / "wd").is_dir() and not any((case_dir / "wd").iterdir())
    assert main(["compile", "data.txt", "--out", "m2.safetensors", "--json"]) == 0
    assert not (case_dir / "m2.safetensors.work").exists()  # created by uatlab: removed after success


def test_workdir_with_forged_marker_is_not_deleted(case_dir: Path, capsys) -> None:
    """A marker whose id does not match the manifest proves nothing: the folder is refused, not deleted."""
    wd = case_dir / "wd"
    wd.mkdir()
    (wd / ".uatlab-work").write_text(json.dumps({"uatlab_work_id": "abc", "created_folder": True}))
    (wd / "manifest.json").write_text(json.dumps({"work_id": "other"}))
    (wd / "KEEP").write_text("x")
    assert main(["compile", "data.txt", "--out", "m.safetensors", "--work-dir", "wd"]) == 2
    assert (wd / "KEEP").read_text() == "x"
    assert main(["compile", "data.txt", "--out", "m.safetensors", "--work-dir", "wd", "--resume"]) == 2
    assert "not a uatlab work directory" in capsys.readouterr().err


def test_existing_out_replaced_only_when_complete(case_dir: Path, capsys) -> None:
    """A failing compile leaves an existing model at --out untouched; a successful one replaces it whole."""
    out = case_dir / "m.safetensors"
    assert main(["compile", "data.txt", "--out", "m.safetensors", "--ff", "deep", "--json"]) == 0
    old = out.read_bytes()
    assert main(["compile", "ragged.jsonl", "--out", "m.safetensors"]) == 2
    assert out.read_bytes() == old
    # the sequences of ragged.jsonl it read are kept for --resume: another run is refused, not handed them
    capsys.readouterr()
    assert main(["compile", "data.txt", "--out", "m.safetensors", "--json"]) == 2
    assert "work directory m.safetensors.work holds 3 sequences of ragged.jsonl" in capsys.readouterr().err
    assert out.read_bytes() == old
    shutil.rmtree(case_dir / "m.safetensors.work")  # the user discards them
    assert main(["compile", "data.txt", "--out", "m.safetensors", "--json"]) == 0
    assert out.read_bytes() != old and file_format(out) == FORMAT_TAG  # the deep model replaced by the one-layer
    assert not [p for p in case_dir.iterdir() if p.name.endswith((".tmp", ".lock"))]


def test_chunk_atomic_and_resume_checks_identity(case_dir: Path, capsys) -> None:
    """A bad token stores whole sequences only; --resume continues the same file and refuses another."""
    assert main(["compile", "surrogate.jsonl", "--out", "m.safetensors", "--chunk-tokens", "1"]) == 2
    err = capsys.readouterr().err
    assert "surrogate.jsonl:4" in err and "3 sequences read before the error" in err
    work = case_dir / "m.safetensors.work"
    manifest = json.loads((work / "manifest.json").read_text())
    assert manifest["sequences"] == 3 and manifest["input"]["lines"] == 3
    # another file with a different beginning: refused, work kept
    (case_dir / "other.jsonl").write_text(JSONL.replace('"a"', '"z"'))
    assert main(["compile", "other.jsonl", "--out", "m.safetensors", "--resume"]) == 2
    assert "not the data this work directory was made from" in capsys.readouterr().err
    # the same file with the bad line fixed (after what was read): resumed and completed
    fixed = FILES["surrogate.jsonl"].replace(b"\\ud800", b"ok")
    (case_dir / "surrogate.jsonl").write_bytes(fixed)
    assert main(["compile", "surrogate.jsonl", "--out", "m.safetensors", "--resume", "--json"]) == 0
    fig = json.loads(capsys.readouterr().out)
    assert fig["sequences"] == 7
    assert not work.exists()


def test_resume_from_a_fifo_is_refused_before_the_work_directory_is_read(case_dir: Path, capsys) -> None:
    """--resume reads the data again from its start (to check the stored sequences): a FIFO (a process
    substitution, a pipe on /dev/stdin) cannot be, and is refused naming it, the stored work left as it was."""
    assert main(["compile", "surrogate.jsonl", "--out", "m.safetensors", "--chunk-tokens", "1"]) == 2
    work = case_dir / "m.safetensors.work"
    stored = {p.name: p.read_bytes() for p in work.iterdir()}
    assert stored
    os.mkfifo(case_dir / "pipe")
    capsys.readouterr()
    assert main(["compile", "pipe", "--out", "m.safetensors", "--work-dir", str(work), "--resume"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "data file pipe is a FIFO (named pipe), not a regular file" in err, err
    assert {p.name: p.read_bytes() for p in work.iterdir()} == stored


@pytest.mark.parametrize(
    ("data", "extra"),
    [
        ("notlist.jsonl", []),
        ("nested.jsonl", []),
        ("onecol.txt", []),
        ("data.txt", ["--format", "jsonl"]),
    ],
)
def test_bad_input_before_any_sequence_leaves_no_work_directory(
    case_dir: Path, capsys, data: str, extra: list[str]
) -> None:
    """Bad input before the first sequence is stored: the work directory compile created is removed, the one
    the user gave is kept (emptied of compile's files only), and the error does not offer --resume."""
    argv = ["compile", data, *extra, "--out", "m.safetensors"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "--resume" not in err, err
    assert not (case_dir / "m.safetensors.work").exists() and not (case_dir / "m.safetensors").exists()
    mine = case_dir / "mine"
    mine.mkdir()
    assert main([*argv, "--work-dir", "mine"]) == 2
    assert "--resume" not in capsys.readouterr().err
    assert mine.is_dir() and not any(mine.iterdir())
    (mine / "KEEP.txt").write_text("mine")  # a folder holding the user's files is refused, not touched
    assert main([*argv, "--work-dir", "mine"]) == 2
    assert [p.name for p in mine.iterdir()] == ["KEEP.txt"]


@pytest.mark.parametrize("extra", [[], ["--ff", "deep"], ["--ff", "ramps"]])
def test_format_text_is_refused_for_the_token_task_naming_it(case_dir: Path, capsys, extra: list[str]) -> None:
    """--format text is for --task next-token: with the token task it is refused naming the option and the
    task, before any file is touched."""
    before = sorted(p.name for p in case_dir.iterdir())
    assert main(["compile", "data.txt", "--format", "text", *extra, "--out", "m.safetensors"]) == 2
    err = capsys.readouterr().err
    assert "--format text" in err and "--task next-token" in err, err
    assert sorted(p.name for p in case_dir.iterdir()) == before


def test_failed_compile_leaves_no_empty_output_folder_it_made(case_dir: Path, capsys) -> None:
    """--out in folders that do not exist: a run that fails before writing removes the (empty) folders its lock
    file needed; a user's existing empty folder and a successful run's folders are kept."""
    assert main(["compile", "notlist.jsonl", "--out", "new/sub/m.safetensors"]) == 2
    assert not (case_dir / "new").exists()
    (case_dir / "mine").mkdir()
    assert main(["compile", "notlist.jsonl", "--out", "mine/m.safetensors"]) == 2
    assert (case_dir / "mine").is_dir() and not any((case_dir / "mine").iterdir())
    capsys.readouterr()
    assert main(["compile", "data.txt", "--out", "new/sub/m.safetensors", "--json"]) == 0
    assert sorted(p.name for p in (case_dir / "new" / "sub").iterdir()) == ["m.safetensors"]


def test_bad_input_after_stored_sequences_keeps_the_work_for_resume(case_dir: Path, capsys) -> None:
    """Once a sequence is stored, the work directory is kept and the error says how to resume."""
    assert main(["compile", "badjson.jsonl", "--out", "m.safetensors"]) == 2
    err = capsys.readouterr().err
    assert "badjson.jsonl:4" in err and "--resume" in err, err
    manifest = json.loads((case_dir / "m.safetensors.work" / "manifest.json").read_text())
    assert manifest["sequences"] == 3


def test_two_jobs_cannot_write_one_output(case_dir: Path, capsys) -> None:
    """While one job holds the lock on an output, a second job writing it is refused."""
    from uatlab.io_safety import OutputLock

    with OutputLock(case_dir / "m.safetensors"):
        assert main(["compile", "data.txt", "--out", "m.safetensors"]) == 2
        assert "another uatlab job" in capsys.readouterr().err
        assert main(["synth", "m.safetensors", "-N", "2"]) == 2
    assert not (case_dir / "m.safetensors").exists()
    assert main(["synth", "m.safetensors", "-N", "2", "--json"]) == 0


# ------------------------------------------------------------------------------------------------ bad data
def _data_cases(cmd: list[str], tag: str, has_empty_msg: str) -> list[Case]:
    """The same bad data files through one data-reading command."""
    return [
        Case(f"{tag}-empty", [*cmd, "empty.txt"], has_empty_msg),
        Case(f"{tag}-blank", [*cmd, "blank.txt"], has_empty_msg),
        Case(f"{tag}-header-only", [*cmd, "header.txt"], has_empty_msg),
        Case(f"{tag}-empty-jsonl", [*cmd, "empty.jsonl"], has_empty_msg.replace("sentences", "sequences")),
        Case(f"{tag}-latin1", [*cmd, "latin1.txt"], "latin1.txt:14: not UTF-8"),
        Case(f"{tag}-latin1-jsonl", [*cmd, "latin1.jsonl"], "latin1.jsonl:4: not UTF-8"),
        Case(f"{tag}-surrogate", [*cmd, "surrogate.jsonl"], "surrogate.jsonl:4"),
        Case(f"{tag}-bigint", [*cmd, "bigint.jsonl"], "bigint.jsonl:4"),
        Case(f"{tag}-badjson", [*cmd, "badjson.jsonl"], "badjson.jsonl:4: not valid JSON"),
        Case(f"{tag}-ragged", [*cmd, "ragged.jsonl"], "ragged"),
        Case(f"{tag}-notlist", [*cmd, "notlist.jsonl"], "must be lists"),
        Case(f"{tag}-nested", [*cmd, "nested.jsonl"], "neither a string"),
        Case(f"{tag}-onecol", [*cmd, "onecol.txt"], "onecol.txt:2"),
        Case(f"{tag}-columns", [*cmd, "cols.txt"], "cols.txt:2"),
        Case(f"{tag}-deep", [*cmd, "deep.jsonl"], "deep.jsonl:1"),
        Case(f"{tag}-dir", [*cmd, "adir"], "is a directory", setup=_mkdir("adir")),
        Case(f"{tag}-dash", [*cmd, "-"], "standard input"),
        Case(f"{tag}-devnull", [*cmd, "/dev/null"], "character device"),
        Case(f"{tag}-fifo", [*cmd, "pipe"], "FIFO", setup=_fifo("pipe")),
        Case(f"{tag}-missing", [*cmd, "nothere.txt"], "does not exist"),
        Case(
            f"{tag}-broken-link", [*cmd, "dangling.txt"], "broken symbolic link", setup=_symlink("dangling.txt", "gone")
        ),
    ]


BAD_DATA = [
    *_data_cases(["compile", "--out", "m.safetensors"], "compile", "no sequences"),
    *_data_cases(["data-report"], "data-report", "no sentences"),
    *_data_cases(["train", "--out", "run", "--epochs", "1"], "train", "no sentences"),
    *_data_cases(["certify", "model.safetensors"], "certify", "no tokens"),
    Case("depth-ablation-empty", ["experiment", "depth-ablation", "empty.txt", "--out", "run"], "no sentences"),
    Case("depth-ablation-missing", ["experiment", "depth-ablation", "nothere.txt", "--out", "run"], "does not exist"),
    Case(
        "capacity-conll-missing",
        ["experiment", "capacity", "--kind", "conll", "--data", "nothere.txt"],
        "does not exist",
    ),
    Case("train-valid-empty", ["train", "data.txt", "--valid", "empty.txt", "--out", "run"], "no sentences"),
    Case("train-valid-missing", ["train", "data.txt", "--valid", "nothere.txt", "--out", "run"], "does not exist"),
]


@pytest.mark.parametrize("case", BAD_DATA, ids=lambda c: c.id)
def test_bad_data(case: Case, case_dir: Path, capsys) -> None:
    run_case(case, case_dir, capsys)


# ------------------------------------------------------------------------------------------------ bad options
def _opt(tag: str, argv: list[str], match: str) -> Case:
    return Case(tag, argv, match)


C = ["compile", "data.txt", "--out", "m.safetensors"]
T = ["train", "data.txt", "--out", "run", "--epochs", "1"]
HC = ["hardmax-counterexample"]
CM = ["contextual-mapping", "literal"]
TL = ["approx", "truncated-linear", "--out", "ao"]
AH = ["approx", "heads", "--out", "ao"]
RN = ["approx", "relu-network", "--out", "ao"]
UN = ["approx", "universal", "--out", "ao"]
GD = ["approx", "gd-in-context", "--out", "ao"]
CAP = ["experiment", "capacity", "--out", "cap"]
DA = ["experiment", "depth-ablation", "data.txt", "--out", "da"]

BAD_OPTIONS = [
    # compile
    _opt("compile-dtype", [*C, "--dtype", "half"], "--dtype"),
    _opt("compile-format", [*C, "--format", "xml"], "--format"),
    _opt("compile-dim-negative", [*C, "--dim", "-1"], "--dim"),
    _opt("compile-dim-huge", [*C, "--dim", "1000000000"], "--dim"),
    _opt("compile-dim-text", [*C, "--dim", "abc"], "--dim"),
    _opt("compile-beta-text", [*C, "--beta", "abc"], "--beta"),
    _opt("compile-beta-nan", [*C, "--beta", "nan"], "--beta"),
    _opt("compile-beta-negative", [*C, "--beta", "-2"], "--beta"),
    _opt("compile-beta-inf", [*C, "--beta", "inf"], "--beta"),
    _opt("compile-beta-not-pow2", [*C, "--beta", "3"], "power of two"),
    _opt("compile-seed-negative", [*C, "--seed", "-1"], "--seed"),
    _opt("compile-seed-huge", [*C, "--seed", "99999999999"], "--seed"),
    _opt("compile-chunk-zero", [*C, "--chunk-tokens", "0"], "--chunk-tokens"),
    _opt("compile-exp-ulp-nan", [*C, "--exp-ulp", "nan"], "--exp-ulp"),
    _opt("compile-code", [*C, "--code", "foo"], "code"),
    _opt("compile-group", [*C, "--group", "foo"], "group"),
    _opt("compile-unknown-option", [*C, "--bogus"], "no such option"),
    _opt("compile-missing-argument", ["compile"], "missing argument"),
    _opt("compile-resume-nothing", [*C, "--resume"], "no work directory"),
    _opt("compile-out-empty", ["compile", "data.txt", "--out", ""], "--out"),
    _opt("compile-out-parent-file", ["compile", "data.txt", "--out", "notes.md/m.safetensors"], "is a file"),
    _opt("compile-out-dash", ["compile", "data.txt", "--out", "-"], "standard output"),
    # certify
    _opt("certify-not-model", ["certify", "notes.md", "data.txt"], "notes.md"),
    _opt("certify-data-as-model", ["certify", "data.txt", "data.txt"], "data.txt"),
    _opt("certify-model-missing", ["certify", "nothere.safetensors", "data.txt"], "does not exist"),
    _opt("certify-model-dir", ["certify", ".", "data.txt"], "is a directory"),
    _opt("certify-format", ["certify", "model.safetensors", "data.txt", "--format", "xml"], "--format"),
    _opt("certify-exp-ulp", ["certify", "model.safetensors", "data.txt", "--exp-ulp", "-1"], "--exp-ulp"),
    _opt("certify-missing-argument", ["certify", "model.safetensors"], "missing argument"),
    # synth
    _opt("synth-classes-zero", ["synth", "o.jsonl", "-C", "0"], "--classes"),
    _opt("synth-length-zero", ["synth", "o.jsonl", "-n", "0"], "--length"),
    _opt("synth-N-text", ["synth", "o.jsonl", "-N", "abc"], "--sequences"),
    _opt("synth-parent-file", ["synth", "notes.md/o.jsonl"], "is a file"),
    _opt("synth-missing-argument", ["synth"], "missing argument"),
    _opt("synth-data-kept", ["synth", "data.txt", "-N", "0"], "--sequences"),
    # data-report
    _opt("data-report-scheme", ["data-report", "data.txt", "--scheme", "foo"], "--scheme"),
    _opt("data-report-format", ["data-report", "data.txt", "--format", "xml"], "--format"),
    _opt("data-report-conflicts", ["data-report", "data.txt", "--conflicts", "-1"], "--conflicts"),
    # train
    _opt("train-rank-text", [*T, "--rank", "abc"], "--rank"),
    _opt("train-rank-zero", [*T, "--rank", "0"], "--rank"),
    _opt("train-weight-decay-nan", [*T, "--weight-decay", "nan"], "--weight-decay"),
    _opt("train-threads-zero", [*T, "--threads", "0"], "--threads"),
    _opt("train-threads-negative", [*T, "--threads", "-1"], "--threads"),
    _opt("train-embed-std-nan", [*T, "--embed-std", "nan"], "--embed-std"),
    _opt("train-embed-std-negative", [*T, "--embed-std", "-1"], "--embed-std"),
    _opt("train-clip-negative", [*T, "--clip", "-1"], "--clip"),
    _opt("train-clip-nan", [*T, "--clip", "nan"], "--clip"),
    _opt("train-warmup-negative", [*T, "--warmup-steps", "-5"], "--warmup-steps"),
    _opt("train-max-minutes-nan", [*T, "--max-minutes", "nan"], "--max-minutes"),
    _opt("train-max-minutes-negative", [*T, "--max-minutes", "-1"], "--max-minutes"),
    _opt("train-max-minutes-zero", [*T, "--max-minutes", "0"], "--max-minutes"),
    _opt("train-lr-zero", [*T, "--lr", "0"], "--lr"),
    _opt("train-lr-inf", [*T, "--lr", "inf"], "--lr"),
    _opt("train-optimizer", [*T, "--optimizer", "adam"], "--optimizer"),
    _opt("train-schedule", [*T, "--schedule", "linear"], "--schedule"),
    _opt("train-scheme", [*T, "--scheme", "foo"], "--scheme"),
    _opt("train-format", [*T, "--format", "xml"], "--format"),
    _opt("train-epochs-zero", [*T, "--epochs", "0"], "--epochs"),
    _opt("train-batch-zero", [*T, "--batch-size", "0"], "--batch-size"),
    _opt("train-dim-zero", [*T, "--dim", "0"], "--dim"),
    _opt("train-layers-zero", [*T, "--layers", "0"], "--layers"),
    _opt("train-heads-zero", [*T, "--heads", "0"], "--heads"),
    _opt("train-head-dim-zero", [*T, "--head-dim", "0"], "--head-dim"),
    _opt("train-ff-mult-negative", [*T, "--ff-mult", "-1"], "--ff-mult"),
    _opt("train-seed-negative", [*T, "--seed", "-1"], "--seed"),
    _opt("train-out-is-input", ["train", "data.txt", "--out", "data.txt"], "data.txt"),
    _opt("train-out-is-file", ["train", "data.txt", "--out", "notes.md"], "existing file"),
    _opt("train-init-missing", [*T, "--init", "nothere.safetensors"], "does not exist"),
    _opt("train-init-not-model", [*T, "--init", "notes.md"], "notes.md"),
    _opt("train-resume-nothing", [*T, "--resume"], "checkpoint"),
    _opt("train-max-memory-tiny", [*T, "--max-memory", "100"], "would need"),
    _opt("train-max-memory-text", [*T, "--max-memory", "lots"], "memory size"),
    # hardmax-counterexample
    _opt("hardmax-length-huge", [*HC, "--length", "100000"], "would need"),
    _opt("hardmax-dim-float", [*HC, "--dim", "1e9"], "--dim"),
    _opt("hardmax-dim-zero", [*HC, "--dim", "0"], "--dim"),
    _opt("hardmax-length-short", [*HC, "--length", "3"], "n ≥ 4"),
    _opt("hardmax-trials-zero", [*HC, "--trials", "0"], "--trials"),
    _opt("hardmax-heads-text", [*HC, "--heads", "abc"], "--heads"),
    _opt("hardmax-heads-zero", [*HC, "--heads", "0"], "--heads"),
    _opt("hardmax-seed-negative", [*HC, "--seed", "-1"], "--seed"),
    _opt("hardmax-head-dim-zero", [*HC, "--head-dim", "0"], "--head-dim"),
    # contextual-mapping literal
    _opt("contextual-seed-negative", [*CM, "--seed", "-1"], "--seed"),
    _opt("contextual-eps-nan", [*CM, "--eps", "nan"], "--eps"),
    _opt("contextual-eps-negative", [*CM, "--eps", "-1"], "--eps"),
    _opt("contextual-rmin-inf", [*CM, "--r-min", "inf"], "--r-min"),
    _opt("contextual-sequences", [*CM, "--sequences", "foo"], "--sequences"),
    _opt("contextual-vocab-zero", [*CM, "--vocab-size", "0"], "size"),
    _opt("contextual-length-one", [*CM, "--length", "1"], "length"),
    _opt("contextual-rmax-overflows", [*CM, "--r-max", "1e300"], "r_max + eps = 1e+300"),
    _opt("contextual-eps-underflows", [*CM, "--eps", "1e-200", "--max-digits", "2000"], "exact certificate"),
    # approx
    _opt("truncated-points-zero", [*TL, "--points", "0"], "--points"),
    _opt("truncated-points-one", [*TL, "--points", "1"], "--points"),
    _opt("truncated-points-negative", [*TL, "--points", "-5"], "--points"),
    _opt("truncated-range-huge", [*TL, "--a", "-1e300", "--b", "1e300"], "--a"),
    _opt("truncated-range-reversed", [*TL, "--a", "1", "--b", "-1"], "smaller than --b"),
    _opt("truncated-a-nan", [*TL, "--a", "nan"], "--a"),
    _opt("truncated-anchors-text", [*TL, "--anchors", "x,y"], "--anchors"),
    _opt("truncated-anchors-zero", [*TL, "--anchors", "0"], "--anchors"),
    _opt("truncated-anchors-huge", [*TL, "--anchors", "10000000"], "--anchors"),
    _opt("truncated-mode", [*TL, "--mode", "foo"], "--mode"),
    _opt("truncated-dtype", [*TL, "--dtype", "half"], "--dtype"),
    _opt("truncated-quick-overrides", [*TL, "--quick", "--anchors", "11"], "--quick"),
    _opt("truncated-out-file", ["approx", "truncated-linear", "--out", "notes.md"], "existing file"),
    _opt("heads-points-zero", [*AH, "--points", "0"], "--points"),
    _opt("heads-heads-zero", [*AH, "--heads", "0"], "--heads"),
    _opt("heads-anchors-one", [*AH, "--anchors", "1"], "--anchors"),
    _opt("heads-quick-overrides", [*AH, "--quick", "--points", "11"], "--quick"),
    _opt("relu-nets-zero", [*RN, "--nets", "0"], "--nets"),
    _opt("relu-samples-zero", [*RN, "--samples", "0"], "--samples"),
    _opt("relu-n-zero", [*RN, "--n", "0"], "--n"),
    _opt("relu-seed-negative", [*RN, "--seed", "-1"], "--seed"),
    _opt("relu-layers-three", [*RN, "--layers", "3"], "layers must be 1 or 2"),
    _opt("relu-d-zero", [*RN, "--d", "0"], "--d"),
    _opt("relu-standard-one-anchors", [*RN, "--layers", "1", "--standard", "--anchors", "33"], "--anchors"),
    _opt("relu-pairs-compiled", [*RN, "--layers", "2", "--pairs", "10"], "--pairs"),
    _opt("relu-pairs-zero", [*RN, "--layers", "1", "--standard", "--pairs", "0"], "--pairs"),
    _opt("universal-samples-zero", [*UN, "--samples", "0"], "--samples"),
    _opt("universal-samples-negative", [*UN, "--samples", "-1"], "--samples"),
    _opt("universal-target", [*UN, "--target", "foo"], "--target"),
    _opt("universal-d-zero", [*UN, "--d", "0"], "--d"),
    _opt("universal-grids-text", [*UN, "--grids", "abc"], "--grids"),
    _opt("gd-eps-text", [*GD, "--eps", "abc"], "--eps"),
    _opt("gd-eps-negative", [*GD, "--eps", "-1"], "--eps"),
    _opt("gd-lr-nan", [*GD, "--lr", "nan"], "--lr"),
    _opt("gd-contexts-zero", [*GD, "--contexts", "0"], "--contexts"),
    _opt("gd-steps-zero", [*GD, "--steps", "0"], "--steps"),
    _opt("gd-d-zero", [*GD, "--d", "0"], "--d"),
    # experiments
    _opt("capacity-ns-zero", [*CAP, "--ns", "0"], "--ns"),
    _opt("capacity-ns-text", [*CAP, "--ns", "abc"], "--ns"),
    _opt("capacity-kind", [*CAP, "--kind", "foo"], "--kind"),
    _opt("capacity-axis", [*CAP, "--axis", "foo"], "--axis"),
    _opt("capacity-conll-no-data", [*CAP, "--kind", "conll"], "--data"),
    _opt("capacity-workers-zero", [*CAP, "--workers", "0"], "--workers"),
    _opt("capacity-lr-nan", [*CAP, "--lr", "nan"], "--lr"),
    _opt("capacity-seed-negative", [*CAP, "--seed", "-1"], "--seed"),
    _opt("capacity-out-file", ["experiment", "capacity", "--out", "notes.md"], "existing file"),
    _opt("depth-sentences-zero", [*DA, "--sentences", "0"], "--sentences"),
    _opt("depth-layers-zero", [*DA, "--layers", "0"], "--layers"),
    _opt("depth-layers-text", [*DA, "--layers", "abc"], "--layers"),
    _opt("depth-executor", [*DA, "--executor", "foo"], "--executor"),
    _opt("depth-out-file", ["experiment", "depth-ablation", "data.txt", "--out", "notes.md"], "existing file"),
    _opt("heads-sweep-quick-full", ["experiment", "attention-heads", "--quick", "--full", "--out", "x"], "--quick"),
    _opt("range-mode", ["experiment", "attention-range", "--mode", "sideways", "--out", "x"], "--mode"),
    _opt("anchors-workers-zero", ["experiment", "attention-anchors", "--workers", "0", "--out", "x"], "--workers"),
    _opt("heatmap-executor", ["experiment", "attention-heatmap", "--executor", "foo", "--out", "x"], "--executor"),
    _opt("seq2seq-mode", ["experiment", "attention-seq2seq", "--mode", "foo", "--out", "x"], "--mode"),
    _opt(
        "seq2seq-more-seeds-than-the-scale",
        ["experiment", "attention-seq2seq", "--quick", "--seeds", "64", "--out", "x"],
        "--seeds",
    ),
    _opt("heatmap-out-file", ["experiment", "attention-heatmap", "--quick", "--out", "notes.md"], "existing file"),
    _opt("rank-ranks-text", ["experiment", "rank-ablation", "data.txt", "--ranks", "x", "--out", "ra"], "--ranks"),
    _opt("rank-ranks-zero", ["experiment", "rank-ablation", "data.txt", "--ranks", "0", "--out", "ra"], "--ranks"),
    _opt("rank-missing-data", ["experiment", "rank-ablation", "nothere.txt", "--out", "ra"], "does not exist"),
    _opt("rank-lr-nan", ["experiment", "rank-ablation", "data.txt", "--lr", "nan", "--out", "ra"], "--lr"),
    _opt("rank-epochs-zero", ["experiment", "rank-ablation", "data.txt", "--epochs", "0", "--out", "ra"], "--epochs"),
    _opt("rank-out-is-input", ["experiment", "rank-ablation", "data.txt", "--out", "data.txt"], "data.txt"),
    _opt("boltzmann-no-vector", ["boltzmann"], "missing argument"),
    _opt("boltzmann-text", ["boltzmann", "a,b"], "vector 0"),
    _opt("boltzmann-nan", ["boltzmann", "1,nan"], "not finite"),
    _opt("boltzmann-three", ["boltzmann", "1,2", "1,2", "1,2"], "one or two vectors"),
    _opt("boltzmann-ragged", ["boltzmann", "1,2", "1,2,3"], "equal lengths"),
    _opt("boltzmann-r-negative", ["boltzmann", "1,2", "--r", "-1"], "--r"),
    _opt(
        "compile-long-sentence-memory",
        ["compile", "long.txt", "--out", "m.safetensors", "--max-memory", "10M"],
        "certifying the sequence of 2000 tokens at long.txt:1 would need",
    ),
    _opt(
        "certify-longer-than-model",
        ["certify", "model.safetensors", "long.txt"],
        "long.txt:1: a sequence of 2000 tokens is longer than the model's max_len",
    ),
    _opt(
        "train-init-longer-than-model",
        ["train", "long.txt", "--init", "model.safetensors", "--out", "run"],
        "long.txt:1: a sequence of 2000 tokens is longer than the init model's max_len",
    ),
    _opt(
        "train-long-sentence-memory",
        ["train", "long.txt", "--out", "run", "--max-memory", "10M"],
        "training would need",
    ),
    _opt("compile-max-memory-text", ["compile", "data.txt", "--max-memory", "x"], "memory size"),
    # reproduce and the top level
    _opt("reproduce-only-nothing", ["reproduce", "--quick", "--only", "ZZZ*", "--out", "rep"], "matches no claim"),
    _opt("reproduce-seed-negative", ["reproduce", "--seed", "-1"], "--seed"),
    _opt("reproduce-out-file", ["reproduce", "--quick", "--only", "A.*", "--out", "notes.md"], "existing file"),
    _opt("unknown-command", ["frobnicate"], "no such command"),
    _opt("unknown-subcommand", ["approx", "frobnicate"], "no such command"),
]


@pytest.mark.parametrize("case", BAD_OPTIONS, ids=lambda c: c.id)
def test_bad_options(case: Case, case_dir: Path, capsys) -> None:
    run_case(case, case_dir, capsys)


ALL_CASES = DATA_LOSS + BAD_DATA + BAD_OPTIONS


def test_case_table_is_large_and_unique() -> None:
    ids = [c.id for c in ALL_CASES]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 150


# ------------------------------------------------------------------------------------------------ signals
def _interrupt(
    argv: list[str],
    cwd: Path,
    delay: float,
    sig: int = signal.SIGINT,
    when: Callable[[], bool] | None = None,
    when_proc: Callable[[int], bool] | None = None,
) -> tuple[int, str]:
    """Run uatlab, send ``sig`` once ``when()`` (or ``when_proc(pid)``) holds (polled, at most 120 s) plus
    ``delay`` seconds."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "uatlab", *argv], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    ready = when if when_proc is None else (lambda: when_proc(proc.pid))
    deadline = time.monotonic() + 120
    while ready is not None and not ready() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(delay)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=300)
    return proc.returncode, err


def test_ctrl_c_while_loading_commands(monkeypatch, capsys) -> None:
    """Ctrl-C while the command modules are imported (start-up): one line, exit 130, no traceback."""
    import uatlab.cli as cli

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_load_commands", interrupted)
    assert main(["compile", "data.txt"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "interrupted (partial results, if any, were kept)"


def _torch_mapped(pid: int) -> bool:
    """True once torch's C++ library is mapped into process ``pid`` (its import has begun)."""
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs /proc to see torch being loaded")
@pytest.mark.parametrize("delay", [0.0, 0.3, 3.0])
def test_ctrl_c_while_torch_loads(case_dir: Path, delay: float) -> None:
    """Ctrl-C while a command imports torch (or just after): exit 130 with one line, never an abort in torch's
    C++ start-up. The interrupt is sent ``delay`` seconds after torch's library is mapped, so it never lands in
    the interpreter's own start-up, however slow the machine is."""
    code, err = _interrupt(
        ["hardmax-counterexample", "--trials", "1000000", "--json"], case_dir, delay, when_proc=_torch_mapped
    )
    assert "Traceback" not in err and "terminate called" not in err, err
    assert code == 130, (code, err)
    assert err.strip().endswith("interrupted (partial results, if any, were kept)")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_while_writing_keeps_the_old_file(case_dir: Path, sig: int) -> None:
    """Ctrl-C or SIGTERM while synth writes over its own earlier file: exit 130, the old file intact, no temporary
    file left."""
    assert main(["synth", "old.jsonl", "-N", "5", "--json"]) == 0
    before = _snapshot(case_dir)
    code, err = _interrupt(
        ["synth", "old.jsonl", "-N", "1000000", "-n", "64", "--json"],  # ≥ 0.8 GB: still writing when interrupted
        case_dir,
        0.5,
        sig,
        when=lambda: any(p.name.endswith(".tmp") for p in case_dir.iterdir()),
    )
    assert "Traceback" not in err, err
    assert code == 130, (code, err)
    assert err.strip().endswith("interrupted: old.jsonl is as it was (synth writes it whole, at the end)"), err
    assert _snapshot(case_dir) == before


def test_ctrl_c_during_compile_keeps_work_and_resumes(case_dir: Path, capsys) -> None:
    # large enough that the compile is still running 0.2 s after its first chunk is written
    assert main(["synth", "big.jsonl", "-N", "8000", "-n", "16", "-V", "1000", "--json"]) == 0
    capsys.readouterr()
    before = _snapshot(case_dir)
    code, err = _interrupt(
        ["compile", "big.jsonl", "--out", "m.safetensors", "--chunk-tokens", "2000", "--no-certify"],
        case_dir,
        0.2,
        when=lambda: (case_dir / "m.safetensors.work" / "chunk_00000.npz").exists(),
    )
    assert "Traceback" not in err, err
    assert code in (0, 130), err
    after = _snapshot(case_dir)
    assert all(after.get(k) == v for k, v in before.items())
    work = case_dir / "m.safetensors.work"
    if code == 130 and work.exists():  # interrupted mid-run: the work is kept and a resumed run completes it
        assert (work / "manifest.json").is_file(), sorted(p.name for p in work.iterdir())
        argv = ["compile", "big.jsonl", "--out", "m.safetensors", "--chunk-tokens", "2000", "--no-certify"]
        assert main([*argv, "--resume", "--json"]) == 0
    else:  # finished before the signal (or the signal came during its clean-up): a whole model, no work left
        assert (case_dir / "m.safetensors").is_file() and not work.exists()


def test_sigterm_during_train_keeps_files(case_dir: Path, capsys) -> None:
    assert main(["synth", "t.jsonl", "-N", "1000", "-n", "12", "-V", "300", "--json"]) == 0
    capsys.readouterr()
    before = _snapshot(case_dir)
    code, err = _interrupt(
        ["train", "t.jsonl", "--out", "run", "--epochs", "50", "--dim", "16"],
        case_dir,
        0.5,
        signal.SIGTERM,
        when=lambda: (case_dir / "run").is_dir(),
    )
    assert "Traceback" not in err, err
    assert code in (130, -signal.SIGTERM, 143), (code, err)
    after = _snapshot(case_dir)
    assert all(after.get(k) == v for k, v in before.items())


def test_two_trains_cannot_write_one_folder(case_dir: Path, capsys) -> None:
    from uatlab.io_safety import OutputLock

    with OutputLock(case_dir / "run"):
        assert main(["train", "data.txt", "--out", "run", "--epochs", "1"]) == 2
        assert "another uatlab job" in capsys.readouterr().err
    assert not (case_dir / "run").exists()


def test_disk_full_is_one_line_and_keeps_the_old_file(case_dir: Path, capsys, monkeypatch) -> None:
    import errno

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    assert main(["synth", "old.jsonl", "-N", "3", "--json"]) == 0
    old = (case_dir / "old.jsonl").read_bytes()
    capsys.readouterr()
    monkeypatch.setattr(os, "replace", full)
    assert main(["synth", "old.jsonl", "-N", "5"]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "no space left on device" in err and "Traceback" not in err
    assert (case_dir / "old.jsonl").read_bytes() == old
    assert not [p for p in case_dir.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(
    ("os_error", "said"),
    [
        (
            'Os { code: 28, kind: StorageFull, message: "No space left on device" }',
            "no space left on device writing m.safetensors (nothing was replaced; the data read is kept in the work "
            "directory m.safetensors.work: free some space, then add --resume --work-dir m.safetensors.work)",
        ),
        (
            'Os { code: 30, kind: ReadOnlyFilesystem, message: "Read-only file system" }',
            "m.safetensors: Read-only file system (the data read is kept in the work directory m.safetensors.work: "
            "once m.safetensors can be written, add --resume --work-dir m.safetensors.work)",
        ),
    ],
)
def test_a_writers_own_os_error_is_one_line_naming_the_work_directory_once(
    case_dir: Path, capsys, monkeypatch, os_error: str, said: str
) -> None:
    """safetensors reports an I/O error as its own SafetensorError (not an OSError), whose message carries the OS
    error; compile then says so in one line, keeps the model already there and names the work directory it kept,
    once, with advice that fits the error."""

    class SafetensorError(Exception):  # the type safetensors raises, with the message its Rust I/O error gives
        pass

    def failing(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"partial")
        raise SafetensorError(f"Error while serializing: IoError({os_error})")

    assert main(["compile", "data.txt", "--out", "m.safetensors", "--json"]) == 0
    old = (case_dir / "m.safetensors").read_bytes()
    capsys.readouterr()
    monkeypatch.setattr(safetensors.torch, "save_file", failing)  # the writer every model file goes through
    assert main(["compile", "data.txt", "--out", "m.safetensors"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err.count("error:") == 1 and "Traceback" not in err, err
    assert f"error: {said}" in err, err
    assert err.count("kept in") == 1, err
    assert (case_dir / "m.safetensors").read_bytes() == old
    assert not [p for p in case_dir.iterdir() if p.name.endswith(".tmp")]
    assert (case_dir / "m.safetensors.work").is_dir()


def test_a_full_disk_is_seen_before_the_temporary_file_frees_its_space(tmp_path, monkeypatch) -> None:
    """A writer's error that names no OS error (a library's own exception) on a disk the temporary file filled:
    the free space is measured while the temporary file still holds it."""
    import errno

    import uatlab.io_safety as io_safety

    target = tmp_path / "out.bin"
    monkeypatch.setattr(io_safety, "_disk_full", lambda folder: any(Path(folder).glob(".*.tmp")))
    with pytest.raises(OSError) as info:
        with io_safety.atomic_path(target) as tmp:
            tmp.write_bytes(b"x" * 1000)
            raise RuntimeError("write failed")  # what a library may raise when its write fails
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(target)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("schedule", ["cosine", "constant"])
def test_warmup_longer_than_the_run_is_warned(case_dir: Path, capsys, schedule: str) -> None:
    # the linear warm-up reaches --lr at its last step under either schedule: a run shorter than it never does
    run = ["train", "data.txt", "--epochs", "2", "--dim", "8", "--schedule", schedule, "--json"]
    assert main([*run, "--out", "run"]) == 0
    err = capsys.readouterr().err
    assert "warning: the warm-up (200 steps) is longer than the whole run (2 steps: 2 epochs of 1 batches)" in err
    assert main([*run, "--out", "fits", "--warmup-steps", "2"]) == 0  # reaches --lr at the run's last step
    assert "warm-up" not in capsys.readouterr().err
    # a resume refused for other options says only why: the refused run's warnings would not apply
    argv = [*run, "--out", "run", "--lr", "0.5", "--resume"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "written for a different run" in err and "warm-up" not in err


def test_bad_init_model_fails_before_any_warning_or_output(case_dir: Path, capsys) -> None:
    """A corrupt --init is reported alone: no warm-up warning first, no output directory left behind."""
    (case_dir / "bad.safetensors").write_bytes(b"junk")
    assert main(["train", "data.txt", "--out", "run", "--epochs", "2", "--init", "bad.safetensors"]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "bad.safetensors" in err and "Traceback" not in err
    assert "warning" not in err
    assert not (case_dir / "run").exists()


def test_corrupt_checkpoint_never_advises_unsafe_loading(case_dir: Path, capsys) -> None:
    (case_dir / "run").mkdir()
    (case_dir / "run" / "checkpoint.pt").write_bytes(b"\x80\x04not a checkpoint at all")
    assert main(["train", "data.txt", "--out", "run", "--epochs", "1", "--warmup-steps", "0", "--resume"]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "checkpoint.pt is unreadable" in errors[0] and "weights_only" not in err


def test_next_token_out_is_input_refused(case_dir: Path, capsys) -> None:
    (case_dir / "nt.jsonl").write_text('{"tokens": ["a", "b"], "label": "X"}\n')
    before = _snapshot(case_dir)
    assert main(["compile", "nt.jsonl", "--task", "next-token", "--out", "nt.jsonl"]) == 2
    assert "is the input file" in capsys.readouterr().err
    assert _snapshot(case_dir) == before


@pytest.mark.parametrize("error", [ValueError, OSError, InputError])
def test_ctrl_c_inside_a_librarys_clean_up_is_an_interrupt(monkeypatch, capsys, error) -> None:
    """Ctrl-C that lands in a library's clean-up (numpy's savez: zipfile's close raises "Can't close the ZIP file
    while there is an open writing handle" while the interrupt unwinds): exit 130 with the one line, not the
    clean-up's traceback or error."""
    import uatlab.cli as cli

    def interrupted_then_clean_up_fails() -> None:
        try:
            raise KeyboardInterrupt
        finally:
            raise error("clean-up failed while the interrupt unwound")

    monkeypatch.setattr(cli, "_load_commands", interrupted_then_clean_up_fails)
    assert main(["compile", "data.txt"]) == 130
    assert capsys.readouterr().err.strip() == "interrupted (partial results, if any, were kept)"


# ------------------------------------------------------------------------------------------------ compile: nothing written
def _tree(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` (folders as None, files with their bytes)."""
    return {str(p.relative_to(folder)): (None if p.is_dir() else p.read_bytes()) for p in folder.rglob("*")}


@pytest.mark.parametrize(
    "opts, match",
    [
        (["--beta", "3"], "--beta must be 'auto' or a positive power of two"),
        (["--beta", "1e308"], "--beta must be 'auto' or a positive power of two"),
        (["--beta", "8.98846567431158e307"], "--beta 8.98846567431158e307: out of range for float64"),
        (["--beta", "7.006492321624085e-46", "--dtype", "float32"], "out of range for float32"),
    ],
    ids=["not-power-of-two", "huge-not-power", "2^1023", "float32-underflow"],
)
def test_bad_beta_is_refused_before_anything_is_written(case_dir: Path, capsys, opts, match) -> None:
    """--beta that is not a power of two, or whose query scale 2β overflows or vanishes in --dtype, is refused
    before the data is read: the folder holds exactly what it held (no work directory, no --out folders)."""
    before = _tree(case_dir)
    assert main(["compile", "data.txt", "--out", "new/sub/m.safetensors", *opts]) == 2
    err = capsys.readouterr().err
    assert match in err and err.count("error:") == 1, err
    assert "reading" not in err, err  # refused before the first pass over the data
    assert _tree(case_dir) == before


AFTER_READ_ERRORS = [
    ("data.txt", ["--code", "60000-hot"], "--code 60000-hot: more ones than the 6 words"),
    ("data.txt", ["--dim", "6", "--labels", "one-hot"], "--dim 6 is too small: data.txt"),
    ("data.txt", ["--labels", "one-hot", "--dim", "7"], "--dim 7 is too small: data.txt"),
    ("data.txt", ["--ff", "ramps", "--dim", "9"], "--dim 9 is too small: data.txt"),
    ("data.txt", ["--max-memory", "1K"], "above the limit of 1.0 KB"),
    ("s.jsonl", ["--causal", "--dim", "6"], "--dim 6 is too small: this data needs"),  # known after the attention
]


def _synth_small(folder: Path, capsys) -> None:
    """s.jsonl: 20 random sequences whose knots code needs more coordinates than the data-free bound."""
    assert main(["synth", "s.jsonl", "-N", "20", "-n", "5", "-V", "10", "-C", "3", "--json"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("out", ["new/sub/m.safetensors", "m2.safetensors"])
@pytest.mark.parametrize("data, opts, match", AFTER_READ_ERRORS, ids=[" ".join(c[1]) for c in AFTER_READ_ERRORS])
def test_option_refused_after_reading_leaves_the_folder_as_it_was(case_dir: Path, capsys, data, opts, match, out):
    """An option the data does not allow (found once the data is read, or after the attention pass) ends the run
    with one error line and nothing written: no work directory, no folder made for --out. The error starts a line
    of its own, after the progress bars."""
    _synth_small(case_dir, capsys)
    before = _tree(case_dir)
    assert main(["compile", data, "--out", out, *opts]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and match in err, err
    assert "reading" in err  # it was refused after the data was read...
    assert err.startswith("error:") or "\nerror:" in err, err  # ...and the error line is not glued to the bars
    assert _tree(case_dir) == before


def test_option_refused_after_reading_keeps_a_given_work_dir_and_kept_work(case_dir: Path, capsys) -> None:
    """A --work-dir that existed (empty) stays, empty; --keep-work keeps the data read and the error says where."""
    (case_dir / "mine").mkdir()
    before = _tree(case_dir)
    assert main(["compile", "data.txt", "--out", "m.safetensors", "--code", "60000-hot", "--work-dir", "mine"]) == 2
    assert _tree(case_dir) == before
    capsys.readouterr()
    assert main(["compile", "data.txt", "--out", "m.safetensors", "--code", "60000-hot", "--keep-work"]) == 2
    err = capsys.readouterr().err
    assert "kept in the work directory m.safetensors.work (--keep-work)" in err, err
    assert (case_dir / "m.safetensors.work" / "manifest.json").is_file()
    assert not (case_dir / "m.safetensors").exists()
    # the kept work is resumed with options the data allows; a refused --resume run keeps it too
    assert main(["compile", "data.txt", "--out", "m.safetensors", "--dim", "6", "--labels", "one-hot", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "(--resume)" in err and (case_dir / "m.safetensors.work" / "manifest.json").is_file(), err
    assert main(["compile", "data.txt", "--out", "m.safetensors", "--resume", "--json"]) == 0
    assert (case_dir / "m.safetensors").is_file() and not (case_dir / "m.safetensors.work").exists()


def test_interrupt_after_the_run_has_ended_says_so(case_dir: Path, capsys, monkeypatch) -> None:
    """Ctrl-C or SIGTERM after the figures were printed, as the command unwinds (here: as it releases its work
    directory's lock): exit 130 with a line saying the run had ended and the model is complete, not the
    generic "partial results, if any" line."""
    import uatlab.io_safety as io_safety

    real_exit = io_safety.OutputLock.__exit__

    def exit_then_interrupt(self, *exc):
        real_exit(self, *exc)
        if self.target.name.endswith(".work") and exc[0] is None:
            raise KeyboardInterrupt

    monkeypatch.setattr(io_safety.OutputLock, "__exit__", exit_then_interrupt)
    assert main(["compile", "data.txt", "--out", "m.safetensors"]) == 130
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == (
        "interrupted after the run had ended: m.safetensors is saved and complete, and its figures were printed"
    ), err
    monkeypatch.setattr(io_safety.OutputLock, "__exit__", real_exit)
    assert main(["certify", "m.safetensors", "data.txt", "--json"]) == 0  # the saved model is whole
    assert json.loads(capsys.readouterr().out)["certified"] is True


def test_interrupt_after_the_model_is_in_place_says_it_was_saved(case_dir: Path, capsys, monkeypatch) -> None:
    """Ctrl-C or SIGTERM (both raise KeyboardInterrupt) just after the model file was renamed into place: exit 130,
    and the line says the model was saved, complete; the work directory is removed as after a finished run."""
    import uatlab.constructions.paper_a.cor1_memorizer.api as memorizer_api  # compile saves through save_compiled

    real_save = memorizer_api.save

    def save_then_interrupt(*args, **kwargs):
        real_save(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(memorizer_api, "save", save_then_interrupt)
    assert main(["compile", "data.txt", "--out", "m.safetensors"]) == 130
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("interrupted after the model was saved: m.safetensors is complete"), err
    assert "partial results" not in err
    monkeypatch.setattr(memorizer_api, "save", real_save)
    assert main(["certify", "m.safetensors", "data.txt", "--json"]) == 0  # the saved model is whole
    assert json.loads(capsys.readouterr().out)["certified"] is True
    assert not (case_dir / "m.safetensors.work").exists()
    # with --keep-work the work directory stays, and the line says so
    monkeypatch.setattr(memorizer_api, "save", save_then_interrupt)
    assert main(["compile", "data.txt", "--out", "m.safetensors", "--keep-work"]) == 130
    err = capsys.readouterr().err
    assert "is complete; the work directory m.safetensors.work is kept" in err, err
    assert (case_dir / "m.safetensors.work" / "manifest.json").is_file()


def test_interrupt_while_compiling_says_what_is_kept_for_resume(case_dir: Path, capsys, monkeypatch) -> None:
    """Ctrl-C during the attention pass: exit 130, --out as it was, and the line names the work directory kept
    for --resume, which then completes the model."""
    import uatlab.constructions.paper_a.cor1_memorizer as memorizer

    real = memorizer.compile_memorizer

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(memorizer, "compile_memorizer", interrupted)
    assert main(["compile", "data.txt", "--out", "m.safetensors"]) == 130
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == (
        "interrupted: no model was saved (m.safetensors is as it was); the data read so far is kept in "
        "m.safetensors.work: run again with --resume to continue from it"
    ), err
    assert not (case_dir / "m.safetensors").exists()
    monkeypatch.setattr(memorizer, "compile_memorizer", real)
    assert main(["compile", "data.txt", "--out", "m.safetensors", "--resume", "--json"]) == 0
    assert (case_dir / "m.safetensors").is_file() and not (case_dir / "m.safetensors.work").exists()


def test_disk_full_while_compile_stores_the_data_leaves_no_partial_chunk(case_dir: Path, capsys, monkeypatch) -> None:
    """No space left while a chunk of the data is written: one error line, no partial chunk file left. At the first
    chunk nothing was stored and the folder is as it was; later the chunks already written are kept for --resume."""
    import errno

    import numpy as np

    real_savez = np.savez
    written = [0]

    def full_after(n: int):
        def savez(path, **arrays):
            if written[0] >= n:
                Path(path).write_bytes(b"PK\x03\x04 partial")  # what a full disk leaves: the start of the file
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            written[0] += 1
            return real_savez(path, **arrays)

        return savez

    before = _tree(case_dir)
    monkeypatch.setattr(np, "savez", full_after(0))
    assert main(["compile", "data.txt", "--out", "new/m.safetensors"]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "no space left on device" in err and "kept" not in err, err
    assert _tree(case_dir) == before

    monkeypatch.setattr(np, "savez", full_after(1))
    assert main(["compile", "data.txt", "--out", "m.safetensors", "--chunk-tokens", "2"]) == 2
    err = capsys.readouterr().err
    assert (
        "no space left on device (nothing was replaced; the data read so far is kept in m.safetensors.work: "
        "free some space, then run again with --resume)" in err
    ), err
    work = case_dir / "m.safetensors.work"
    assert sorted(p.name for p in work.iterdir()) == [".uatlab-work", "chunk_00000.npz", "manifest.json"]
    monkeypatch.setattr(np, "savez", real_savez)
    assert main(["compile", "data.txt", "--out", "m.safetensors", "--chunk-tokens", "2", "--resume", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["certified"] is True


@pytest.mark.parametrize("code", ["ENOSPC", "EDQUOT"])
def test_disk_or_quota_full_after_reading_says_where_the_data_is_kept(
    case_dir: Path, capsys, monkeypatch, code
) -> None:
    """Out of space (a full disk or a full quota) once the data is stored: the message says it is kept for
    --resume, in either case."""
    import errno

    import uatlab.constructions.paper_a.cor1_memorizer as memorizer

    number = getattr(errno, code)

    def full(*args, **kwargs):
        raise OSError(number, os.strerror(number), "m.safetensors.work/buckets/b0")

    monkeypatch.setattr(memorizer, "compile_memorizer", full)
    assert main(["compile", "data.txt", "--out", "m.safetensors"]) == 2
    err = capsys.readouterr().err
    kept = "the data read so far is kept in m.safetensors.work: free some space, then run again with --resume"
    assert err.count("error:") == 1 and kept in err, err


def test_any_refusal_after_reading_says_where_kept_work_is(case_dir: Path, capsys, monkeypatch) -> None:
    """With --keep-work, every kind of error that ends a run after the data was stored says where the work is."""
    import uatlab.constructions.paper_a.cor1_memorizer as memorizer
    from uatlab.errors import UatlabError

    class OtherRefusal(UatlabError):
        pass

    def refuse(*_args, **_kwargs):
        raise OtherRefusal("the construction cannot go on")

    monkeypatch.setattr(memorizer, "compile_memorizer", refuse)
    assert main(["compile", "data.txt", "--out", "m.safetensors", "--keep-work"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "the construction cannot go on; the data read is kept in the work directory m.safetensors.work" in err
    assert (case_dir / "m.safetensors.work" / "manifest.json").is_file()


def test_an_output_name_too_long_for_its_temporary_file_is_refused_before_the_work(case_dir: Path, capsys) -> None:
    """A name a few bytes under the file system's limit passes as a name, but the temporary file written beside it
    (14 bytes longer) does not: refused before reading, with the longest name that works, which does."""
    limit = os.pathconf(case_dir, "PC_NAME_MAX")
    longest = limit - 14
    too_long = "m" * (longest + 1 - len(".safetensors")) + ".safetensors"
    before = sorted(p.name for p in case_dir.iterdir())
    capsys.readouterr()
    assert main(["compile", "data.txt", "--out", too_long]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"its name is {longest + 1} bytes" in err and f"choose a name of at most {longest} bytes" in err, err
    assert "Traceback" not in err and sorted(p.name for p in case_dir.iterdir()) == before  # no work directory
    fits = too_long[1:]
    assert main(["compile", "data.txt", "--out", fits, "--json"]) == 0
    assert (case_dir / fits).is_file()


def test_a_work_directory_a_killed_run_left_empty_does_not_block_the_next(case_dir: Path, capsys) -> None:
    """A run killed (SIGKILL: no clean-up) after it made its work directory but before it stored a sequence left a
    manifest of 0 sequences: nothing to resume or to lose, so the next run reuses the folder and removes it at the
    end as its own; a work directory holding stored sequences is still refused."""
    from uatlab.data.token_store import TokenStore

    work = case_dir / "m.safetensors.work"
    TokenStore(work, "data.txt", "sequence")  # made, never read into, never removed
    (work / "chunk_00000.npz.tmp.npz").write_bytes(b"half a chunk")  # killed while writing the first chunk
    capsys.readouterr()
    assert main(["compile", "data.txt", "--out", "m.safetensors", "--json"]) == 0, capsys.readouterr().err
    assert (case_dir / "m.safetensors").is_file() and not work.exists()
    kept = TokenStore(work, "data.txt", "sequence")
    kept.read([(["a"], ["X"], 1)], lambda toks, ctx: [0] * len(toks))
    capsys.readouterr()
    assert main(["compile", "data.txt", "--out", "m.safetensors"]) == 2
    assert "holds all of data.txt read by an earlier run" in " ".join(capsys.readouterr().err.split())


def test_an_interrupt_while_train_prints_its_summary_says_the_files_are_complete(
    case_dir: Path, capsys, monkeypatch
) -> None:
    """Once `train` has returned, the model, checkpoint and summary are written: an interrupt while the command
    prints the summary says so, not the generic "partial results, if any, were kept"."""
    import uatlab.cli.train as train_cli

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(train_cli, "_print_training", interrupted)
    capsys.readouterr()
    assert main(["train", "data.txt", "--out", "run", "--epochs", "1", "--warmup-steps", "0"]) == 130
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == "interrupted after the run had ended: its files are complete", err
    assert {"model.safetensors", "summary.json", "checkpoint.pt"} <= {p.name for p in (case_dir / "run").iterdir()}


@pytest.mark.parametrize("code", [0, 130])
def test_sigterm_after_main_has_returned_exits_with_the_commands_status(tmp_path: Path, code: int) -> None:
    """Once main() has returned (the command's output complete and said), a SIGTERM during the interpreter's
    shutdown is ignored: the process exits with the command's own status, its output whole. The default action
    ended it with status 143 and no line, after a completed compile or train."""
    script = (
        "import os, signal, sys, time\n"
        "from uatlab.cli import _quiet_after_main\n"
        "sys.stdout.write('saved m.safetensors\\n')  # buffered: a pipe\n"
        "_quiet_after_main()\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "time.sleep(0.2)\n"
        f"sys.exit({code})\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert proc.stdout == "saved m.safetensors\n" and proc.stderr == ""


def _interrupt_in(monkeypatch, module: str, name: str) -> None:
    """``module.name`` (``Class.method`` too) raises KeyboardInterrupt, as Ctrl-C or SIGTERM in it would."""
    import importlib

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    owner, _, attr = name.rpartition(".")
    target = importlib.import_module(module)
    monkeypatch.setattr(getattr(target, owner) if owner else target, attr, interrupted)


def test_an_interrupted_synth_export_predict_or_experiment_says_what_it_left(case_dir: Path, capsys, monkeypatch):
    """Each says what an interruption leaves and how to go on (they said only "partial results, if any, were
    kept", true of nothing they write)."""
    assert main(["synth", "s.jsonl", "-N", "40", "-n", "5", "-V", "30", "-C", "3", "--json"]) == 0
    assert main(["compile", "s.jsonl", "--out", "m.safetensors", "--json"]) == 0
    before = (case_dir / "s.jsonl").read_bytes()
    capsys.readouterr()
    cases = [
        ("uatlab.data.synthetic", "write_synthetic", ["synth", "s.jsonl", "-N", "50"], "s.jsonl is as it was"),
        (
            "uatlab.interop.transformer_lens",
            "save_hooked",
            ["export", "m.safetensors", "tl", "--to", "transformer-lens"],
            "tl was not created (nothing was written)",
        ),
        (
            "uatlab.models.transformer",
            "Transformer.predict",
            ["predict", "m.safetensors", "s.jsonl", "--json"],
            "nothing was printed (--json prints every label at the end)",
        ),
        (
            "uatlab.experiments.depth_ablation",
            "run_depth_ablation",
            ["experiment", "depth-ablation", "s.jsonl", "--out", "ex", "--layers", "1", "--epochs", "1"],
            "the trials finished so far are kept in ex; run the same command again to go on from them",
        ),
    ]
    for module, name, argv, says in cases:
        with monkeypatch.context() as m:
            _interrupt_in(m, module, name)
            assert main(argv) == 130, argv
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert last.startswith("interrupted") and (says is None or says in last), (argv, last)
    assert (case_dir / "s.jsonl").read_bytes() == before and not (case_dir / "tl").exists()
