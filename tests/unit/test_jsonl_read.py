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


@pytest.mark.parametrize("name", ["J.JSONL", "j.Jsonl", "J.JSON"])
def test_the_extension_picks_jsonl_in_any_case(tmp_path, monkeypatch, capsys, name):
    """A file named J.JSONL (a copy made on a case-insensitive system, say) is JSONL for every command that
    chooses the format by the file's name: data-report, compile (both tasks) and predict."""
    import json

    from uatlab.cli import main
    from uatlab.data.jsonl import is_jsonl_path, read_sequences

    assert is_jsonl_path(name) and not is_jsonl_path(name + ".TXT")
    monkeypatch.chdir(tmp_path)
    (tmp_path / name).write_text('{"tokens": ["a", "b"], "labels": ["O", "X"]}\n{"tokens": ["b"], "labels": ["X"]}\n')
    assert read_sequences(name).tokens == [["a", "b"], ["b"]]
    assert main(["data-report", name, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == 3
    assert main(["compile", name, "--out", "m.safetensors", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sequences"] == 2
    assert main(["predict", "m.safetensors", name, "--json"]) == 0
    fig = json.loads(capsys.readouterr().out)
    assert fig["format"] == "jsonl" and fig["labels"] == [["O", "X"], ["X"]]  # the memorized labels
    nt = "NT" + name[1:]
    (tmp_path / nt).write_text('{"tokens": ["a", "b"], "label": "a"}\n{"tokens": ["b", "b"], "label": "b"}\n')
    assert main(["compile", nt, "--task", "next-token", "--out", "nt.safetensors", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["examples"] == 2
