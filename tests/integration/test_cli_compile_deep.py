"""``uatlab compile DATA --ff deep`` end to end: progress on stderr, bad input as one ``error:`` line naming the
item (exit 2, nothing written), memory refused before building. Fixtures are made here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from uatlab.cli import main

STAGES = ("reading", "construct", "certify gate", "certify retrieval")


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _conll(sentences: list[list[tuple[str, str]]]) -> str:
    return "".join("".join(f"{w} {y}\n" for w, y in s) + "\n" for s in sentences)


@pytest.fixture
def here(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    rng = np.random.default_rng(0)
    sents = [[(f"w{rng.integers(12)}", ["O", "B-X", "I-X"][rng.integers(3)]) for _ in range(5)] for _ in range(30)]
    (tmp_path / "d.conll").write_text(_conll(sents))
    return tmp_path


def test_progress_on_stderr_unless_json(here: Path, capsys) -> None:
    """Every stage shows a bar on stderr (the tables on stdout); --json prints one JSON object and no bars."""
    capsys.readouterr()
    assert main(["compile", "d.conll", "--ff", "deep", "--out", "a.safetensors"]) == 0
    cap = capsys.readouterr()
    for stage in STAGES:
        assert f"{stage}:" in cap.err, (stage, cap.err)
        assert f"{stage}:" not in cap.out
    assert "?seq/s" in cap.err and "/3 [" in cap.err and "point/s" in cap.err  # each stage's unit and total
    assert main(["compile", "d.conll", "--ff", "deep", "--out", "b.safetensors", "--json"]) == 0
    cap = capsys.readouterr()
    assert cap.err.startswith("note: d.conll read as CoNLL columns") and cap.err.count("\n") == 1, cap.err  # no bars
    assert json.loads(cap.out)["certified"] is True
    assert main(["compile", "d.conll", "--ff", "deep", "--out", "c.safetensors", "--no-certify"]) == 0
    err = capsys.readouterr().err
    assert "construct:" in err and "certify gate" not in err  # no certificate, no certificate bars


def test_the_same_data_compiles_to_the_same_file_bytes(here: Path, capsys) -> None:
    """The file keeps the compile certificate without its time, and its header in one order."""
    for name in ("a.safetensors", "b.safetensors"):
        assert main(["compile", "d.conll", "--ff", "deep", "--out", name, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["certified"] is True
    assert (here / "a.safetensors").read_bytes() == (here / "b.safetensors").read_bytes()


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error: ")]  # bars end in \r, not \n


def test_max_memory_refuses_a_long_sequence_naming_its_line(here: Path, capsys) -> None:
    """One long sequence sets the context n' for all: the padded arrays are estimated before building and
    refused above --max-memory with the sequence's file:line; nothing is written."""
    rng = np.random.default_rng(1)
    long = [[(f"w{rng.integers(12)}", ["O", "B-X", "I-X"][rng.integers(3)]) for _ in range(3000)]]
    (here / "long.conll").write_text((here / "d.conll").read_text() + _conll(long))
    line = (here / "d.conll").read_text().count("\n") + 1
    before = _listing(here)
    capsys.readouterr()
    assert main(["compile", "long.conll", "--ff", "deep", "--out", "l.safetensors", "--max-memory", "1M"]) == 2
    (err,) = _error_lines(capsys.readouterr().err)
    assert err.startswith(f"error: compiling --ff deep with the sequence at long.conll:{line} would need about")
    assert "n' = 4096" in err and "above the limit of 1.0 MB" in err, err
    assert _listing(here) == before
    # a limit it fits under: compiled (the option is honoured, not refused)
    assert main(["compile", "long.conll", "--ff", "deep", "--out", "l.safetensors", "--max-memory", "8G"]) == 0
    assert (here / "l.safetensors").is_file()


def test_unsolvable_tables_name_the_longest_sequence(here: Path, capsys) -> None:
    """Few ambiguous keys in a long context: the ids of the short sentences collide with different labels in
    every draw. One error line naming the longest sequence's file:line (it was a traceback), nothing written."""
    (here / "c.conll").write_text((here / "d.conll").read_text() + _conll([[(f"u{i % 7}", "O") for i in range(3000)]]))
    line = (here / "d.conll").read_text().count("\n") + 1
    before = _listing(here)
    capsys.readouterr()
    for mode in ([], ["--json"]):
        assert main(["compile", "c.conll", "--ff", "deep", "--out", "c.safetensors", *mode]) == 2
        (err,) = _error_lines(capsys.readouterr().err)
        assert err.startswith(f"error: c.conll:{line}: the retrieval tables were not solvable in 12 draws"), err
        assert "(3000 tokens)" in err and "n' = 4096" in err and "split the longest sentences" in err
        assert _listing(here) == before


BAD_INPUTS = {
    # name: (file content, expected start of the error after "error: ")
    "columns.conll": (b"EU B-ORG\nrejects O\n\nPeter B-PER\nBlackburn NNP I-NP I-PER\n\n", "columns.conll:5: "),
    "no_label.conll": (b"EU B-ORG\nrejects\n\n", "no_label.conll:2: "),
    "empty.conll": (b"", "empty.conll: no sequences found"),
    "docstart.conll": (b"\n-DOCSTART- -X- O O\n\n\n", "docstart.conll: no sequences found"),
    "bytes.conll": (b"a O\nb\xff\xfe B-X\n\n", "bytes.conll:2: not UTF-8 text"),
    "ragged.jsonl": (b'{"tokens": ["a", "b"], "labels": ["O"]}\n', "ragged.jsonl:1: "),
    "broken.jsonl": (b'{"tokens": ["a"], "labels": ["O"]}\nnot json\n', "broken.jsonl:2: not valid JSON"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_bad_input_is_one_error_line_and_nothing_written(here: Path, capsys, name: str) -> None:
    content, start = BAD_INPUTS[name]
    (here / name).write_bytes(content)
    before = _listing(here)
    capsys.readouterr()
    for mode in ([], ["--json"]):
        assert main(["compile", name, "--ff", "deep", "--out", "m.safetensors", *mode]) == 2
        cap = capsys.readouterr()
        errors = _error_lines(cap.err)
        assert len(errors) == 1 and errors[0].startswith(f"error: {start}"), cap.err
        assert "Traceback" not in cap.err and cap.out == ""
        assert _listing(here) == before


@pytest.mark.parametrize(
    "sentences",
    [
        [[("a", "O"), ("b", "O")], [("c", "O"), ("b", "O")]],  # one label class
        [[("a", "O"), ("a", "B-X")], [("a", "B-X"), ("a", "B-X"), ("a", "O")]],  # a vocabulary of one word
    ],
    ids=["one-class", "one-word"],
)
def test_degenerate_but_valid_data_is_memorized(here: Path, capsys, sentences) -> None:
    """One label class or one word is a data set the theorem covers: certified at the ceiling, and the saved
    model predicts every label back (not refused)."""
    (here / "t.conll").write_text(_conll(sentences))
    capsys.readouterr()
    assert main(["compile", "t.conll", "--ff", "deep", "--out", "t.safetensors", "--json"]) == 0
    fig = json.loads(capsys.readouterr().out)
    assert fig["certified_at_ceiling"] is True and fig["certified_tokens"] == sum(map(len, sentences))
    assert main(["predict", "t.safetensors", "t.conll", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["labels"] == [[y for _, y in s] for s in sentences]


def test_json_splits_cpu_seconds_by_stage(here: Path, capsys) -> None:
    """stage_cpu_seconds: read, compile, certify, save, each ≥ 0, together no more than the CPU time the
    process spent in the command; compile and certify did work. --no-certify: certify 0."""
    import time

    capsys.readouterr()
    cpu = time.process_time()
    assert main(["compile", "d.conll", "--ff", "deep", "--out", "a.safetensors", "--json"]) == 0
    cpu = time.process_time() - cpu
    stages = json.loads(capsys.readouterr().out)["stage_cpu_seconds"]
    assert sorted(stages) == ["certify", "compile", "read", "save"]
    assert min(stages.values()) >= 0 and stages["compile"] > 0 and stages["certify"] > 0
    assert sum(stages.values()) <= cpu
    assert main(["compile", "d.conll", "--ff", "deep", "--out", "b.safetensors", "--json", "--no-certify"]) == 0
    assert json.loads(capsys.readouterr().out)["stage_cpu_seconds"]["certify"] < stages["certify"]


def test_certify_a_deep_model_shows_progress_and_checks_memory(here: Path, capsys) -> None:
    """`uatlab certify` on a deep model: the same bars on stderr (none with --json); --max-memory is honoured:
    below the padded sequences' estimate one error line naming the data and the model, nothing written."""
    assert main(["compile", "d.conll", "--ff", "deep", "--out", "m.safetensors", "--json"]) == 0
    capsys.readouterr()
    assert main(["certify", "m.safetensors", "d.conll"]) == 0
    err = capsys.readouterr().err
    assert all(f"{stage}:" in err for stage in ("reading", "certify gate", "certify retrieval")), err
    assert main(["certify", "m.safetensors", "d.conll", "--json", "--max-memory", "8G"]) == 0
    cap = capsys.readouterr()
    assert cap.err.startswith("note: d.conll read as CoNLL columns") and cap.err.count("\n") == 1, cap.err  # no bars
    assert json.loads(cap.out)["certified_at_ceiling"] is True
    before = _listing(here)
    assert main(["certify", "m.safetensors", "d.conll", "--max-memory", "1K"]) == 2
    (err,) = _error_lines(capsys.readouterr().err)
    assert err.startswith("error: certifying d.conll on m.safetensors would need about") and "n' = 8" in err, err
    assert _listing(here) == before


def test_every_command_names_an_empty_data_file_with_the_one_message(here: Path, capsys) -> None:
    """compile and certify, with and without --ff deep, refuse a data file holding no sequence with the same
    message (`no_data_error`), naming the file."""
    from uatlab.cli.options import no_data_error

    assert main(["compile", "d.conll", "--ff", "deep", "--out", "deep.safetensors", "--json"]) == 0
    assert main(["compile", "d.conll", "--out", "flat.safetensors", "--no-certify", "--json"]) == 0
    (here / "docstart.conll").write_bytes(b"\n-DOCSTART- -X- O O\n\n\n")
    runs = [
        (["compile", "docstart.conll", "--ff", "deep", "--out", "m.safetensors"], "no sequences found"),
        (["compile", "docstart.conll", "--out", "m.safetensors"], "no sequences found"),
        (["certify", "deep.safetensors", "docstart.conll"], "no tokens to certify"),
        (["certify", "flat.safetensors", "docstart.conll"], "no tokens to certify"),
    ]
    capsys.readouterr()
    for args, what in runs:
        assert main(args) == 2, args
        errors = _error_lines(capsys.readouterr().err)
        assert errors == [f"error: {no_data_error('docstart.conll', what)}"], args
    assert not (here / "m.safetensors").exists()


def test_compile_and_certify_json_count_conflict_tokens_as_the_knots_model(here: Path, capsys) -> None:
    """A word labelled two ways in one context is a conflict: a deep model's --json gives conflict_tokens (tokens
    no model can get right) as the knots model's does, equal to tokens − ceiling_tokens."""
    (here / "c.conll").write_text(_conll([[("a", "O"), ("b", "O")], [("a", "B-X"), ("b", "O")], [("c", "O")]]))
    capsys.readouterr()
    figs = {}
    for ff in ("deep", "knots"):
        assert main(["compile", "c.conll", "--ff", ff, "--out", f"{ff}.safetensors", "--json"]) == 0
        compiled = json.loads(capsys.readouterr().out)
        assert main(["certify", f"{ff}.safetensors", "c.conll", "--json"]) == 0
        figs[ff] = (compiled, json.loads(capsys.readouterr().out))
    for compiled, certified in figs.values():
        for fig in (compiled, certified):
            assert fig["conflict_tokens"] == 1 == fig["tokens"] - fig["ceiling_tokens"], fig
