"""Error messages name what the user gave (the option, the file) and advise what would work: not a library
parameter ('n = 3', 'size = 0'), an option the command does not have, or a remedy already in use."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from uatlab.cli import main


@pytest.fixture
def here(tmp_path: Path, monkeypatch, capsys) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nt.txt").write_text("the cat sat on the mat and the dog sat on the log the cat\n")
    argv = ["compile", "nt.txt", "--task", "next-token", "--window", "4", "--out", "nt.safetensors", "--json"]
    assert main(argv) == 0
    (tmp_path / "t1.txt").write_text("a b c d\n")  # as many tokens as the model's window: no next token
    (tmp_path / "small.txt").write_text("EU B-ORG\nrejects O\n\nPeter B-PER\n\n")
    rows = [
        {"tokens": ["a", "b", "c"], "labels": ["X", "Y", "X"]},
        {"tokens": ["b", "c", "a"], "labels": ["Y", "X", "Y"]},
    ]
    (tmp_path / "j.txt").write_text("".join(json.dumps(r) + "\n" for r in rows))  # JSONL under a .txt name
    capsys.readouterr()
    return tmp_path


# (command line, what the one error line must say, what it must not say)
CASES = [
    pytest.param(
        ["certify", "nt.safetensors", "t1.txt"],
        ["t1.txt has 4 tokens", "nt.safetensors reads windows of 4 tokens", "at least 5 tokens"],
        ["--window"],  # certify has no --window: the model fixes it
        id="certify-text-shorter-than-the-window",
    ),
    pytest.param(
        ["approx", "truncated-linear", "--anchors", "100000", "--points", "3", "--out", "ap"],
        ["in float64", "fewer anchors per head"],
        ["use float64"],  # already float64
        id="truncated-linear-float64-advice",
    ),
    pytest.param(
        ["approx", "truncated-linear", "--anchors", "100000", "--points", "3", "--dtype", "float32", "--out", "ap"],
        ["in float32", "; use float64"],
        [],
        id="truncated-linear-float32-advice",
    ),
    pytest.param(
        ["approx", "truncated-linear", "--anchors", "1", "--out", "ap"],
        ["--anchors '1'", "≥ 2"],
        ["anchors per head must"],
        id="truncated-linear-anchors",
    ),
    pytest.param(
        ["approx", "relu-network", "--anchors", "33,1", "--out", "ap"],
        ["--anchors '33,1'", "≥ 2"],
        ["anchors per head must"],
        id="relu-network-anchors",
    ),
    pytest.param(
        ["hardmax-counterexample", "--length", "3"],
        ["--length 3", "n ≥ 4"],
        ["n = 3"],
        id="hardmax-length",
    ),
    pytest.param(
        ["contextual-mapping", "literal", "--vocab-size", "0"],
        ["--vocab-size"],
        ["size = 0"],
        id="contextual-mapping-vocab-size",
    ),
    pytest.param(
        ["contextual-mapping", "literal", "--length", "5"],
        ["--length 5 exceeds --vocab-size 4"],
        ["n = 5"],
        id="contextual-mapping-length",
    ),
    pytest.param(
        ["reproduce", "--data-dir", "nodir2", "--out", "rep"],
        ["--data-dir nodir2 does not exist"],
        ["no train.txt there"],
        id="reproduce-data-dir-missing",
    ),
    pytest.param(
        ["reproduce", "--data-dir", "small.txt", "--out", "rep"],
        ["--data-dir small.txt is a file, not a folder"],
        ["no train.txt there"],
        id="reproduce-data-dir-a-file",
    ),
    pytest.param(
        ["compile", "j.txt", "--out", "j.safetensors"],
        ["j.txt", "JSON object", "--format jsonl"],
        ["looks like plain text"],
        id="compile-jsonl-named-txt",
    ),
]


@pytest.mark.parametrize(("argv", "says", "not_says"), CASES)
def test_error_names_the_option_and_gives_the_right_advice(here: Path, capsys, argv, says, not_says) -> None:
    before = sorted(p.name for p in here.iterdir())
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for part in says:
        assert part in lines[0], lines[0]
    for part in not_says:
        assert part.lower() not in lines[0].lower(), lines[0]
    assert sorted(p.name for p in here.iterdir()) == before  # refused before writing anything


def test_reproduce_names_a_conll_folder_from_the_environment_without_train_txt(here: Path, capsys, monkeypatch):
    """$UATLAB_CONLL_DIR set to a folder without train.txt is an error naming the variable when a chosen claim reads
    CoNLL-2003 (the claim ran on synthetic data, exit 0, saying the variable was not set); ignored when none does."""
    monkeypatch.setenv("UATLAB_CONLL_DIR", str(here / "nodir3"))
    assert main(["reproduce", "--quick", "--out", "rep3", "--only", "A.sec5.rank-ablation"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: $UATLAB_CONLL_DIR {here / 'nodir3'} does not exist"), err
    assert not (here / "rep3").exists()
    (here / "empty_conll").mkdir()  # a folder, but no train.txt in it
    monkeypatch.setenv("UATLAB_CONLL_DIR", str(here / "empty_conll"))
    assert main(["reproduce", "--quick", "--out", "rep3", "--only", "A.sec5.rank-ablation"]) == 2
    assert f"error: $UATLAB_CONLL_DIR {here / 'empty_conll'}: no train.txt there" in capsys.readouterr().err
    assert main(["reproduce", "--quick", "--out", "rep4", "--only", "A.thm1*", "--json"]) == 0


def test_compile_help_lists_every_option_ff_deep_takes() -> None:
    """--ff's help names the options --ff deep takes: every compile option it does not refuse (nor refuses with
    its own error, --causal; nor refuses for every --task token run, --window and --tokenizer), besides DATA,
    --out, --json, --task and --ff."""
    import typer.main

    from uatlab.cli.app import app
    from uatlab.cli.compile import DEEP_REFUSES

    command = typer.main.get_command(app).commands["compile"]
    params = {p.name: p for p in command.params}
    text = " ".join(params["ff"].help.split())
    taken = text.split("besides --out and --json it takes", 1)[1]
    exempt = {"data", "out", "json_out", "task", "ff", "causal", "window", "tokenizer", *DEEP_REFUSES}
    for name, p in params.items():
        if name not in exempt and p.opts:
            assert max(p.opts, key=len) in taken, (name, taken)


def test_every_command_says_its_exit_codes_in_its_help() -> None:
    """Each command's --help names its exit codes (0, 2 for a user error, 130 when interrupted, and its own)."""
    import typer.main

    from uatlab.cli import _load_commands
    from uatlab.cli.app import app

    _load_commands()

    def leaves(command, path):
        subcommands = getattr(command, "commands", None)  # a group (typer may vendor click: not isinstance)
        if subcommands:
            for name, sub in subcommands.items():
                yield from leaves(sub, [*path, name])
        else:
            yield " ".join(path), command.help or ""

    found = dict(leaves(typer.main.get_command(app), []))
    assert len(found) > 20
    for name, text in found.items():
        flat = " ".join(text.split())
        assert "Exit codes:" in flat or "Exit status 0" in flat, name
        assert re.search(r"\b2 a user error|Exit 2 with one", flat) and re.search(r"\b130\b", flat), (name, flat[-300:])
