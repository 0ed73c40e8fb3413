"""compile --task next-token: options validated before reading or writing, model saved atomically."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from uatlab.cli.next_token import compile_next_token_file
from uatlab.errors import InputError, PrecisionError


def test_text_windows_compile_certify_and_save(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat and the dog sat on the log " * 3, encoding="utf-8")
    out = tmp_path / "m.safetensors"
    fig = compile_next_token_file(text, "auto", 3, "whitespace", "float64", out, seed=0)
    assert fig["certified"] and fig["correct_examples"] == fig["ceiling_examples"]
    assert fig["ceiling_examples"] < fig["examples"]  # repeated windows with different next words conflict
    from uatlab.constructions.paper_c.model_file import load_next_token

    memo, header = load_next_token(out)
    assert header["source"]["window"] == 3 and memo.circuit.depth == fig["depth"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dtype": "float16"}, "--dtype 'float16'"),
        ({"window": None}, "--window is required"),
        ({"window": 0}, "--window 0: a window needs at least one token"),
        ({"window": 50}, "--window 50 is longer than the text"),
        ({"tokenizer": "bpe"}, "--tokenizer 'bpe'"),
    ],
)
def test_bad_options_fail_before_writing(tmp_path, kwargs, message):
    text = tmp_path / "t.txt"
    text.write_text("a b c d e f", encoding="utf-8")
    out = tmp_path / "m.safetensors"
    args = {"fmt": "auto", "window": 2, "tokenizer": "whitespace", "dtype": "float64", "seed": 0} | kwargs
    with pytest.raises(InputError, match=message):
        compile_next_token_file(text, out=out, **args)
    assert not out.exists()


def test_too_many_windows_for_float32_names_the_largest_n(tmp_path):
    text = tmp_path / "t.txt"
    rng = random.Random(0)
    text.write_text(" ".join(f"w{rng.randrange(97)}" for _ in range(5000)), encoding="utf-8")
    out = tmp_path / "m.safetensors"
    with pytest.raises(PrecisionError, match=r"largest N that fits is \d+"):
        compile_next_token_file(text, "auto", 8, "whitespace", "float32", out, seed=0)
    assert not out.exists()


BAD_INPUT = [
    ("l.jsonl", '{"tokens": ["a", "b"], "labels": ["x", "y"]}\n', [], 'l.jsonl:1: has "labels"'),
    ("l.jsonl", '{"tokens": ["a", "b"], "label": "a", "labels": ["x", "y"]}\n', [], 'has both "label" and "labels"'),
    ("l.jsonl", '{"tokens": [], "label": "a"}\n', [], "l.jsonl:1: empty token list"),
    ("l.jsonl", '{"tokens": ["a", "b"], "label": "zz"}\n', [], "l.jsonl:1: label 'zz' never occurs as a token"),
    ("t.txt", "a b c d\n", ["--window", "0"], "--window 0: a window needs at least one token"),
    ("t.txt", "a b c d\n", ["--window", "9"], "--window 9 is longer than the text: t.txt has 4 tokens"),
    ("t.txt", "a b c d\n", [], "--window is required"),
    ("big.txt", None, ["--window", "8", "--dtype", "float32"], r"float32 .* the largest N that fits is \d+"),
]


@pytest.mark.parametrize(("name", "content", "extra", "message"), BAD_INPUT)
def test_cli_bad_input_one_error_line_exit_2_no_file(tmp_path, monkeypatch, capsys, name, content, extra, message):
    """Every bad next-token input: exit 2, one 'error: …' line naming the item, no traceback, no output file."""
    import re

    from uatlab.cli import main

    monkeypatch.chdir(tmp_path)
    if content is None:
        rng = random.Random(0)
        content = " ".join(f"w{rng.randrange(97)}" for _ in range(5000))
    (tmp_path / name).write_text(content, encoding="utf-8")
    assert main(["compile", name, "--task", "next-token", "--out", "o.safetensors", *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and re.search(message, err[0]), err
    assert not (tmp_path / "o.safetensors").exists()


def test_one_format_guess_for_compile_certify_and_predict():
    from uatlab.cli.next_token import data_format

    for name, fmt, plain, read in [
        ("d.jsonl", "auto", "text", "jsonl"),
        ("d.json", "auto", "lines", "jsonl"),
        ("d.txt", "auto", "text", "text"),  # compile, certify: windows cut from the text
        ("d.txt", "auto", "lines", "lines"),  # predict: one sequence per line
        ("d.jsonl", "text", "lines", "lines"),  # --format wins over the name
        ("d.txt", "jsonl", "lines", "jsonl"),
        ("d.txt", "conll", "text", "conll"),  # left for the command to refuse
    ]:
        assert data_format(Path(name), fmt, plain) == read, (name, fmt, plain)


def test_conll_columns_given_as_text_are_refused_unless_format_text(tmp_path, capsys):
    # read as text, a CoNLL file's POS, chunk and entity tags would become words of the windows
    from uatlab.cli import main

    conll = tmp_path / "c.txt"
    rows = ["-DOCSTART- -X- -X- O", "", "EU NNP B-NP B-ORG", "rejects VBZ B-VP O", "German JJ B-NP B-MISC", ""]
    rows += ["Peter NNP B-NP B-PER", "Blackburn NNP I-NP I-PER", ""]
    conll.write_text("\n".join(rows))
    out = tmp_path / "n.safetensors"
    with pytest.raises(InputError, match=rf"{conll}:3: 'EU NNP B-NP B-ORG' looks like CoNLL columns.*--format text"):
        compile_next_token_file(conll, "auto", 2, "whitespace", "float64", out, seed=0)
    assert not out.exists()
    capsys.readouterr()
    assert main(["compile", str(conll), "--task", "next-token", "--window", "2", "--out", str(out)]) == 2
    assert f"{conll}:3: " in " ".join(capsys.readouterr().err.split()) and not out.exists()
    # read as text anyway when asked: the tags are words of the vocabulary
    fig = compile_next_token_file(conll, "text", 2, "whitespace", "float64", out, seed=0)
    assert fig["certified"] and out.exists()
    # certify and predict with a next-token model refuse the same file under --format auto, not under text
    for argv in (["certify", str(out), str(conll)], ["predict", str(out), str(conll)]):
        capsys.readouterr()
        assert main(argv) == 2, argv
        assert f"{conll}:3: " in " ".join(capsys.readouterr().err.split()), argv
    assert main(["certify", str(out), str(conll), "--format", "text", "--json"]) == 0
    # predict with a next-token model says how --format auto read its input, in every output mode
    seqs = tmp_path / "s.txt"
    seqs.write_text("EU NNP\nPeter NNP\n")
    for extra in ([], ["--json"]):
        capsys.readouterr()
        assert main(["predict", str(out), str(seqs), *extra]) == 0
        cap = capsys.readouterr()
        assert [x for x in cap.err.splitlines() if x.startswith("note:")] == [
            f"note: {seqs} read as plain text (one sequence per line, split by the model's tokenizer)"
        ]
    assert json.loads(cap.out)["format"] == "text"
    # genuine text, lines of one width in paragraphs included, is read as before
    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat\nand the dog sat on a log\n\nthe end\n")
    assert compile_next_token_file(text, "auto", 2, "whitespace", "float64", tmp_path / "t.safetensors", seed=0)[
        "certified"
    ]
