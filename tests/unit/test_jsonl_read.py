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
