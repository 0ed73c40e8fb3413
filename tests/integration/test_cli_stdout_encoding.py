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


def _stdout(monkeypatch, encoding: str, errors: str = "strict") -> io.BytesIO:
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding=encoding, errors=errors, write_through=True))
    return raw


def _escaped(word: str, encoding: str) -> bytes:
    return word.encode(encoding, "backslashreplace")


@pytest.fixture
def conll(tmp_path: Path) -> Path:
    data = tmp_path / "данные.txt"  # a name neither ASCII nor cp1252 can write
    data.write_text(f"{WORDS[0]}\tB-LOC\nis\tO\n\n{WORDS[1]}\tB-LOC\ncity\tO\n", encoding="utf-8")
    return data


@pytest.mark.parametrize(
    ("encoding", "errors"), [("ascii", "strict"), ("cp1252", "strict"), ("ascii", "surrogateescape")]
)
def test_predict_prints_every_label_with_the_words_escaped(tmp_path, conll, monkeypatch, encoding, errors) -> None:
    """ascii with surrogateescape is Python's stdout in a C locale without UTF-8 mode."""
    model = tmp_path / "m.safetensors"
    assert main(["compile", str(conll), "--out", str(model), "--json"]) == 0
    text = tmp_path / "s.txt"
    text.write_text(f"{WORDS[0]} is\n{WORDS[1]} city\n", encoding="utf-8")
    raw = _stdout(monkeypatch, encoding, errors)
    assert main(["predict", str(model), str(text), "--format", "text"]) == 0
    out = raw.getvalue()
    for word in WORDS:
        assert _escaped(word, encoding) + b"\tB-LOC" in out, out
    assert b"city\tO" in out
    assert sys.stdout.errors == errors  # the stream is left as the caller had it


def test_an_undecodable_byte_goes_out_as_it_came_in_and_other_characters_escaped() -> None:
    """What Python read as a lone surrogate (an undecodable byte of a file name) is written as that byte."""
    from uatlab.cli import STDOUT_ERRORS

    assert "a\udcffb".encode("ascii", STDOUT_ERRORS) == b"a\xffb"
    assert "é東\U0001f600".encode("ascii", STDOUT_ERRORS) == b"\\xe9\\u6771\\U0001f600"
    assert "é東".encode("cp1252", STDOUT_ERRORS) == "é".encode("cp1252") + b"\\u6771"


def test_predict_without_a_stdout_finishes(tmp_path, conll, monkeypatch) -> None:
    """No stdout at all (closed with >&-, pythonw): the labels have nowhere to go, and the command ends normally."""
    model = tmp_path / "m.safetensors"
    assert main(["compile", str(conll), "--out", str(model), "--json"]) == 0
    text = tmp_path / "s.txt"
    text.write_text(f"{WORDS[0]} is\n", encoding="utf-8")
    monkeypatch.setattr(sys, "stdout", None)
    assert main(["predict", str(model), str(text), "--format", "text"]) == 0


@pytest.mark.parametrize("encoding", ["ascii", "cp1252"])
def test_compile_and_certify_print_their_figures_for_a_non_ascii_path(tmp_path, conll, monkeypatch, encoding):
    """The figures name the data file and the token of the smallest margin: both may be non-ASCII."""
    model = tmp_path / "模型.safetensors"
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
    """``uatlab`` alone prints its help (which names FF∘SA∘FF): the same text as on a UTF-8 stdout, escaped,
    with no traceback."""
    full = _stdout(monkeypatch, "utf-8")
    assert main([]) == 2
    text = full.getvalue().decode("utf-8")
    raw = _stdout(monkeypatch, "ascii")
    assert main([]) == 2
    assert not text.isascii() and raw.getvalue() == text.encode("ascii", "backslashreplace")
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
