"""A JSONL line that is not valid JSON is named by its line and the column where the parser stopped."""

from __future__ import annotations

import pytest

from uatlab.data.jsonl import iter_jsonl
from uatlab.errors import InputError


@pytest.mark.parametrize(
    ("line", "where"),
    [
        ('{"tokens":["a","b"]', "the end of the line (column 20)"),  # cut short: the parser stops at the line end
        ('{"tokens":["a","b"]\r', "the end of the line (column 20)"),
        ('{"tokens":["a" "b"], "labels":["A","B"]}', "column 16"),
        ('{"tokens":["a\u2028b","c"]', "the end of the line (column 22)"),  # U+2028 inside a string: no line end
    ],
)
def test_the_column_is_on_the_line_itself(tmp_path, line: str, where: str) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(('{"tokens":["x"],"labels":["X"]}\n' + line + "\n").encode())
    with pytest.raises(InputError, match=r"d\.jsonl:2: not valid JSON \(.*") as info:
        list(iter_jsonl(path))
    assert str(info.value).endswith(f" at {where})"), str(info.value)
