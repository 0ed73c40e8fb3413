"""compile and certify decide the data format once (`uatlab.data.jsonl.sequence_format`) and read the records
with that decision: `_records` never decides again."""

from __future__ import annotations

from pathlib import Path

import pytest

import uatlab.data.jsonl as jsonl
from uatlab.cli import compile as cli_compile

PARA = "the cat sat\non the mat\n\nand it was\nvery happy now\n"  # prose: format 'auto' refuses it


def test_records_take_the_decided_reading(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "para.txt"
    path.write_text(PARA)

    def decide_again(*args, **kwargs):
        raise AssertionError(f"the format was decided again: sequence_format{args}")

    monkeypatch.setattr(jsonl, "sequence_format", decide_again)
    records = list(cli_compile._records(path, "conll"))  # the user's --format conll: read as columns
    assert [(toks, labs) for toks, labs, _ in records] == [
        (["the", "on"], ["sat", "mat"]),
        (["and", "very"], ["was", "now"]),
    ]
    with pytest.raises(ValueError, match="reading must be 'conll' or 'jsonl'.*'auto'"):
        cli_compile._records(path, "auto")
