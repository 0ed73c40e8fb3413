"""A stdout whose encoding cannot write a word (``PYTHONIOENCODING=ascii``, a cp1252 console): every command
writes it escaped, as stderr does, and finishes; none ends in a UnicodeEncodeError after its work was done."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from uatlab.cli import main

WORDS = ("Zürich", "東京")


def _stdout(monkeypatch, encoding: str) -> io.BytesIO:
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding=encoding, write_through=True))
    return raw


def _escaped(word: str, encoding: str) -> bytes:
    return word.encode(encoding, "backslashreplace")


@pytest.fixture
def conll(tmp_path: Path) -> Path:
    data = tmp_path / "données.txt"
    data.write_text(f"{WORDS[0]}\tB-LOC\nis\tO\n\n{WORDS[1]}\tB-LOC\ncity\tO\n", encoding="utf-8")
    return data


@pytest.mark.parametrize("encoding", ["ascii", "cp1252"])
def test_predict_prints_every_label_with_the_words_escaped(tmp_path, conll, monkeypatch, encoding) -> None:
    model = tmp_path / "m.safetensors"
    assert main(["compile", str(conll), "--out", str(model), "--json"]) == 0
    text = tmp_path / "s.txt"
    text.write_text(f"{WORDS[0]} is\n{WORDS[1]} city\n", encoding="utf-8")
    raw = _stdout(monkeypatch, encoding)
    assert main(["predict", str(model), str(text), "--format", "text"]) == 0
    out = raw.getvalue()
    for word in WORDS:
        assert _escaped(word, encoding) + b"\tB-LOC" in out, out
    assert b"city\tO" in out


@pytest.mark.parametrize("encoding", ["ascii", "cp1252"])
def test_compile_and_certify_print_their_figures_for_a_non_ascii_path(tmp_path, conll, monkeypatch, encoding):
    """The figures name the data file and the token of the smallest margin: both may be non-ASCII."""
    model = tmp_path / "modèle.safetensors"
    raw = _stdout(monkeypatch, encoding)
    assert main(["compile", str(conll), "--out", str(model)]) == 0
    assert model.is_file() and _escaped(model.name, encoding) in raw.getvalue(), raw.getvalue()
    raw = _stdout(monkeypatch, encoding)
    assert main(["certify", str(model), str(conll)]) == 0
    assert _escaped(conll.name, encoding) in raw.getvalue(), raw.getvalue()
    raw = _stdout(monkeypatch, encoding)
    assert main(["certify", str(model), str(conll), "--json"]) == 0
    assert json.loads(raw.getvalue())["certified"] is True


def test_the_help_prints_on_an_ascii_stdout(monkeypatch) -> None:
    """``uatlab`` alone prints its help (which names FF∘SA∘FF): escaped, with no traceback."""
    raw = _stdout(monkeypatch, "ascii")
    assert main([]) == 2
    assert b"compile" in raw.getvalue() and b"FF\\u2218SA" in raw.getvalue(), raw.getvalue()


def test_predict_writes_a_token_with_escape_codes_as_given(tmp_path, monkeypatch) -> None:
    """A token holding a terminal escape code is printed byte for byte to a pipe or file (not stripped)."""
    word = "a\x1b[1mb"
    data = tmp_path / "d.txt"
    data.write_text(f"{word}\tB-X\nc\tO\n", encoding="utf-8")
    model = tmp_path / "m.safetensors"
    assert main(["compile", str(data), "--out", str(model), "--json"]) == 0
    text = tmp_path / "s.txt"
    text.write_text(f"{word} c\n", encoding="utf-8")
    raw = _stdout(monkeypatch, "utf-8")
    assert main(["predict", str(model), str(text), "--format", "text"]) == 0
    assert raw.getvalue() == f"{word}\tB-X\nc\tO\n".encode(), raw.getvalue()
