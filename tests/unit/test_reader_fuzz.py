"""Fuzzing the CoNLL and JSONL readers: any bytes give a data set or an InputError naming a line."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uatlab.data.conll import read_conll
from uatlab.data.jsonl import read_jsonl
from uatlab.errors import InputError

FUZZ_EXAMPLES = 300  # per reader and strategy: 4 × 300 = 1200 examples in all

# realistic fragments, so that random files are often nearly valid
CONLL_PIECES = [
    b"Zorbia NNP B-NP B-ORG\n",
    b"praises VBZ B-VP O\n",
    b"\n",
    b"-DOCSTART- -X- -X- O\n",
    b"a b\n",
    b"x\n",
    b"\xef\xbb\xbf",
    b"\xff\xfe",
    b"\xc3\xa9 NN O\n",
    b"\r\n",
    b"\t \n",
    b"a b c d e\n",
    b"\x00",
]
JSONL_PIECES = [
    b'{"tokens": ["a", "b"], "labels": ["X", "Y"]}\n',
    b'{"tokens": [1, 2], "labels": [3, 4]}\n',
    b'{"tokens": [], "labels": []}\n',
    b'{"tokens": ["\\ud800"], "labels": ["X"]}\n',
    b"[]\n",
    b"{\n",
    b'{"tokens": [true], "labels": [null]}\n',
    b"\xef\xbb\xbf",
    b"\xff",
    b"\n",
    b"1e999\n",
    b"9" * 5000,
    b'{"tokens": "ab", "labels": "XY"}\n',
    b"[" * 3000,
    b"NaN\n",
]

LINE = re.compile(r":\d+: ")


def _check(reader, path, data: bytes) -> None:
    path.write_bytes(data)
    try:
        ds = reader(path)
    except InputError as exc:
        msg = str(exc)
        assert LINE.search(msg) or "no sentences found" in msg or "no sequences found" in msg, msg
        return
    assert len(ds) > 0
    for toks, labs in ds:
        assert len(toks) == len(labs) > 0
        assert all(isinstance(t, str) and t.encode("utf-8") for t in toks + labs)


def _fuzz(pieces):
    return st.one_of(st.binary(max_size=400), st.lists(st.sampled_from(pieces), max_size=12).map(b"".join))


SETTINGS = settings(
    max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(data=_fuzz(CONLL_PIECES))
def test_conll_reader_fuzz(tmp_path, data: bytes) -> None:
    _check(read_conll, tmp_path / "f.txt", data)


@SETTINGS
@given(data=_fuzz(JSONL_PIECES))
def test_jsonl_reader_fuzz(tmp_path, data: bytes) -> None:
    _check(read_jsonl, tmp_path / "f.jsonl", data)


@SETTINGS
@given(data=st.binary(max_size=200), pieces=st.lists(st.sampled_from(CONLL_PIECES), min_size=1, max_size=6))
def test_conll_reader_fuzz_after_valid_lines(tmp_path, data: bytes, pieces) -> None:
    _check(read_conll, tmp_path / "f.txt", b"".join(pieces) + data)


@SETTINGS
@given(data=st.binary(max_size=200), pieces=st.lists(st.sampled_from(JSONL_PIECES), min_size=1, max_size=6))
def test_jsonl_reader_fuzz_after_valid_lines(tmp_path, data: bytes, pieces) -> None:
    _check(read_jsonl, tmp_path / "f.jsonl", b"".join(pieces) + data)
