"""How `uatlab predict` reads its input and names what is wrong in it: prose shaped like CoNLL columns is read as
text (the model's labels tell; `uatlab certify` refuses it as unlabelled), and errors name the input's line or the
model file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from uatlab.cli import main

TRAIN = "EU\tB-ORG\nrejects\tO\nGerman\tB-MISC\ncall\tO\n\nPeter\tB-PER\nBlackburn\tI-PER\nsaid\tO\n\n"


@pytest.fixture
def model(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.txt").write_text(TRAIN)
    assert main(["compile", "train.txt", "--out", "m.safetensors", "--json"]) == 0
    return tmp_path / "m.safetensors"


def _predict(argv: list[str], capsys) -> tuple[int, dict | None, str]:
    code = main(["predict", *argv, "--json"])
    got = capsys.readouterr()
    return code, (json.loads(got.out) if code == 0 else None), got.err


def test_a_few_lines_of_prose_are_read_as_text_not_as_columns(model: Path, capsys) -> None:
    """Two lines of three words have the shape of CoNLL columns; their last words are no label of the model and
    are words, so every word is labelled (read as columns, four of the six were dropped)."""
    Path("prose.txt").write_text("EU rejects German\n\nPeter Blackburn said\n")
    code, out, err = _predict([str(model), "prose.txt"], capsys)
    assert code == 0 and out["format"] == "text", err
    assert out["words"] == [["EU", "rejects", "German"], ["Peter", "Blackburn", "said"]]
    assert "read as plain text" in err


@pytest.mark.parametrize(
    ("text", "words"),
    [
        # the model's own labels in the last column: its labelled data
        ("EU\tB-ORG\nrejects\tO\n\nPeter\tB-PER\nsaid\tO\n", [["EU", "rejects"], ["Peter", "said"]]),
        # another tag set (POS tags are not words): columns still
        ("EU NNP\nrejects VBZ\n\nPeter NNP\nsaid VBD\n", [["EU", "rejects"], ["Peter", "said"]]),
        # a word and its lemma (two columns, both words)
        ("rejects reject\nGerman German\n\nsaid say\n", [["rejects", "German"], ["said"]]),
        # word, POS tag, lemma: the tag column is not words
        ("EU NNP eu\nrejects VBZ reject\n\nsaid VBD say\n", [["EU", "rejects"], ["said"]]),
        # another data set's documents, with word-like last columns
        ("-DOCSTART- x y\n\nrejects verb reject\n\nsaid verb say\n", [["rejects"], ["said"]]),
        # labels the model does not know, of an IOB tag set: columns
        ("EU NNP B-NP B-LOC\nrejects VBZ B-VP O\n\nsaid VBD B-VP O\n", [["EU", "rejects"], ["said"]]),
    ],
)
def test_labelled_columns_stay_columns(model: Path, capsys, text: str, words: list[list[str]]) -> None:
    Path("cols.txt").write_text(text)
    code, out, err = _predict([str(model), "cols.txt"], capsys)
    assert code == 0 and out["format"] == "conll" and out["words"] == words, err


def test_a_sentence_longer_than_the_positions_is_named_by_its_line(model: Path, capsys) -> None:
    Path("long.txt").write_text("EU rejects\n\n" + "said " * 40 + "\n")
    code, _, err = _predict([str(model), "long.txt", "--format", "text"], capsys)
    assert code == 2 and err.strip().splitlines()[-1].startswith("error: long.txt:3: sentence 1 has 40 tokens"), err


def test_a_model_without_an_encoding_is_named(model: Path, capsys) -> None:
    """The error names the model file that lacks the encoding, not the input."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    with safe_open(str(model), "pt") as fh:
        meta = dict(fh.metadata())
        tensors = {k: fh.get_tensor(k) for k in fh.keys()}
    extra = json.loads(meta["uatlab_extra"])
    extra.pop("encoding")
    meta["uatlab_extra"] = json.dumps(extra)
    save_file(tensors, "bare.safetensors", metadata=meta)
    Path("s.txt").write_text("EU rejects\n")
    code, _, err = _predict(["bare.safetensors", "s.txt"], capsys)
    assert code == 2 and "error: bare.safetensors stores no token encoding" in err, err
    assert main(["certify", "bare.safetensors", "train.txt"]) == 2  # certify reads the encoding the same way
    err = capsys.readouterr().err
    assert "error: bare.safetensors stores no token encoding" in err and "the words of train.txt" in err, err


@pytest.mark.parametrize("ff", ["knots", "deep"])
def test_certify_refuses_prose_as_unlabelled_data(tmp_path: Path, capsys, monkeypatch, ff: str) -> None:
    """The prose `predict` reads as text has no labels: `certify` says so (it said only that the first line's last
    word is not a label); with --format conll the columns are read as asked, and the file's labels still certify."""
    monkeypatch.chdir(tmp_path)
    Path("train.txt").write_text(TRAIN)
    assert main(["compile", "train.txt", "--ff", ff, "--out", "m.safetensors", "--json"]) == 0
    Path("prose.txt").write_text("EU rejects German\n\nPeter Blackburn said\n")
    capsys.readouterr()
    assert main(["certify", "m.safetensors", "prose.txt"]) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: prose.txt looks like plain text, not labelled columns"), err
    assert "B-ORG" in last and "Traceback" not in err
    assert main(["certify", "m.safetensors", "prose.txt", "--format", "conll"]) == 2
    assert "label 'German'" in capsys.readouterr().err
    assert main(["certify", "m.safetensors", "train.txt", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["certified"] is True
