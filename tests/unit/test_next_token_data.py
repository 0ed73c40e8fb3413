"""Next-token data: JSONL with one label per sequence, text windows, and their bad-input errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from uatlab.data.next_token import read_next_token_jsonl, read_text_windows, tokenize_text, windows_from_tokens
from uatlab.errors import InputError


def _write(tmp_path, rows, name="d.jsonl"):
    p = tmp_path / name
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return p


def test_jsonl_reads_tokens_and_one_label_with_left_padding(tmp_path):
    p = _write(tmp_path, [{"tokens": ["a", "b", "c"], "label": "x"}, {"tokens": ["b"], "label": 3}])
    d = read_next_token_jsonl(p)
    assert d.token_vocab == ["a", "b", "c"] and d.label_vocab == ["x", "3"]
    assert d.tokens.tolist() == [[0, 1, 2], [3, 3, 1]] and d.pad_id == 3
    assert d.labels.tolist() == [0, 1] and d.lines == [1, 2]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"tokens": ["a"], "labels": ["x"]}, 'd.jsonl:2: has "labels"'),
        ({"tokens": ["a"], "labels": ["x"], "label": "x"}, 'd.jsonl:2: has both "label" and "labels"'),
        ({"tokens": [], "label": "x"}, "d.jsonl:2: empty token list"),
        ({"tokens": ["a"]}, 'd.jsonl:2: expected an object with "tokens" and "label"'),
    ],
)
def test_jsonl_bad_lines_name_file_and_line(tmp_path, row, message):
    p = _write(tmp_path, [{"tokens": ["a", "b"], "label": "b"}, row])
    with pytest.raises(InputError, match=message):
        read_next_token_jsonl(p)


def test_label_never_seen_as_token_is_an_error_in_next_token_mode(tmp_path):
    p = _write(tmp_path, [{"tokens": ["a", "b"], "label": "b"}, {"tokens": ["b", "a"], "label": "zzz"}])
    assert read_next_token_jsonl(p).num_classes == 2  # fine as classification
    with pytest.raises(InputError, match=r"d.jsonl:2: label 'zzz' never occurs as a token"):
        read_next_token_jsonl(p, labels_are_tokens=True)


def test_text_windows_label_each_window_with_the_next_token(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("a b c a b d", encoding="utf-8")
    d = read_text_windows(p, window=2)
    words = [[d.token_vocab[i] for i in row] for row in d.tokens]
    labels = [d.label_vocab[i] for i in d.labels]
    assert words == [["a", "b"], ["b", "c"], ["c", "a"], ["a", "b"]]
    assert labels == ["c", "a", "b", "d"]
    # every label is a token (next-token mode)
    assert set(labels) <= set(d.token_vocab)


def test_empty_window_and_window_longer_than_text_are_errors(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("a b c", encoding="utf-8")
    with pytest.raises(InputError, match="--window 0: a window needs at least one token"):
        read_text_windows(p, window=0)
    with pytest.raises(InputError, match=r"--window 3 is longer than the text: .*t.txt has 3 tokens"):
        read_text_windows(p, window=3)


def test_python_tokenizer_names_layout_tokens():
    toks = tokenize_text("def f(x):\n    return x\n", "python")
    assert toks[:6] == ["def", "f", "(", "x", ")", ":"] and "<INDENT>" in toks and "<DEDENT>" in toks


def test_windows_do_not_cross_streams():
    d = windows_from_tokens([("a", ["x", "y", "z"]), ("b", ["p", "q"])], window=1)
    pairs = [(d.token_vocab[r[0]], d.label_vocab[y]) for r, y in zip(d.tokens, d.labels, strict=True)]
    assert pairs == [("x", "y"), ("y", "z"), ("p", "q")]
    assert np.all(d.tokens < len(d.token_vocab))


def test_tokenize_line_reads_one_line_as_a_whole_sequence():
    from uatlab.data.next_token import tokenize_line

    # the same tokens as the whole-text tokenizer, without the layout tokens it adds at the end of the line
    assert tokenize_text("a b (d) e,\n", "python") == ["a", "b", "(", "d", ")", "e", ",", "<NEWLINE>"]
    assert tokenize_line("a b (d) e,\n", "python") == ["a", "b", "(", "d", ")", "e", ","]
    # a prefix that ends inside a bracket or a string keeps the tokens read before the end of the line
    assert tokenize_line("print(f(x", "python") == ["print", "(", "f", "(", "x"]
    assert tokenize_line("x = '''ab", "python") == ["x", "="]
    assert tokenize_line("a b (d) e,\n", "whitespace") == ["a", "b", "(d)", "e,"]
    with pytest.raises(InputError, match="unknown tokenizer .pascal."):
        tokenize_line("x", "pascal", "q.txt:3")
