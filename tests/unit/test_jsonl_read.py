"""JSONL sequences read as strings: plain string lines, escaped characters and integers alike; a lone surrogate
escape is still refused with its line."""

from __future__ import annotations

import pytest

from uatlab.data.jsonl import iter_jsonl
from uatlab.errors import InputError


def test_string_escaped_and_integer_items_read_as_strings(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(
        '{"tokens": ["a", "b"], "labels": ["X", "Y"]}\n'
        '{"tokens": ["caf\\u00e9", "\\u00fc"], "labels": ["X", "X"]}\n'
        "\n"
        '{"tokens": [3, "x"], "labels": [1, "Y"]}\n',
        encoding="utf-8",
    )
    got = list(iter_jsonl(path))
    assert got == [(["a", "b"], ["X", "Y"], 1), (["café", "ü"], ["X", "X"], 2), (["3", "x"], ["1", "Y"], 4)]
    assert all(type(v) is str for toks, labs, _ in got for v in toks + labs)


def test_a_lone_surrogate_escape_is_refused_with_its_line(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"tokens": ["a"], "labels": ["X"]}\n{"tokens": ["\\ud800"], "labels": ["X"]}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"d\.jsonl:2: token .* lone surrogate"):
        list(iter_jsonl(path))


def test_one_rule_picks_jsonl_or_conll_by_the_file_name(tmp_path):
    from uatlab.data.jsonl import is_jsonl_path, read_sequences, sequence_format

    assert is_jsonl_path("a/b.jsonl") and is_jsonl_path(tmp_path / "x.json")
    assert not is_jsonl_path("train.txt") and not is_jsonl_path("data.jsonl.txt")
    assert sequence_format("x.jsonl") == "jsonl" and sequence_format("x.conll") == "conll"
    assert sequence_format("x.jsonl", "conll") == "conll"  # an explicit format wins
    with pytest.raises(InputError, match="unknown data format 'csv'"):
        sequence_format("x.jsonl", "csv")
    js, co = tmp_path / "d.json", tmp_path / "d.txt"
    js.write_text('{"tokens": ["a", "b"], "labels": ["O", "X"]}\n')
    co.write_text("a O\nb X\n")
    assert read_sequences(js).tokens == read_sequences(co).tokens == [["a", "b"]]
    assert read_sequences(js).labels == read_sequences(co).labels == [["O", "X"]]
