"""compile --task next-token: options validated before reading or writing, model saved atomically."""

from __future__ import annotations

import json
import random

import pytest

from uatlab.cli.next_token import compile_next_token_file
from uatlab.errors import InputError, PrecisionError


def test_text_windows_compile_certify_and_save(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("the cat sat on the mat and the dog sat on the log " * 3, encoding="utf-8")
    out = tmp_path / "m.json"
    fig = compile_next_token_file(text, "auto", 3, "whitespace", "float64", out, seed=0)
    assert fig["certified"] and fig["correct_examples"] == fig["ceiling_examples"]
    assert fig["ceiling_examples"] < fig["examples"]  # repeated windows with different next words conflict
    saved = json.loads(out.read_text())
    assert saved["format"] == "uatlab-next-token-v1" and len(saved["layers"]) == fig["depth"]


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
    out = tmp_path / "m.json"
    args = {"fmt": "auto", "window": 2, "tokenizer": "whitespace", "dtype": "float64", "seed": 0} | kwargs
    with pytest.raises(InputError, match=message):
        compile_next_token_file(text, out=out, **args)
    assert not out.exists()


def test_too_many_windows_for_float32_names_the_largest_n(tmp_path):
    text = tmp_path / "t.txt"
    rng = random.Random(0)
    text.write_text(" ".join(f"w{rng.randrange(97)}" for _ in range(5000)), encoding="utf-8")
    out = tmp_path / "m.json"
    with pytest.raises(PrecisionError, match=r"largest N that fits is \d+"):
        compile_next_token_file(text, "auto", 8, "whitespace", "float32", out, seed=0)
    assert not out.exists()
