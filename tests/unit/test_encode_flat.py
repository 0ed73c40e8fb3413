"""Encoding and input keys over whole data sets at once give what the per-token definitions give, and
`certify` validates the data once."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import uatlab
from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset
from uatlab.data import SequenceDataset, from_lists
from uatlab.data.dataset import Encoding
from uatlab.data.keys import input_keys, input_keys_of_words
from uatlab.errors import InputError

WORDS = st.sampled_from(["a", "b", "c", "dé", "e", "the", "1"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(WORDS, max_size=9), max_size=12), st.sampled_from(["sequence", "prefix"]))
def test_keys_of_words_equal_the_per_sequence_keys(seqs: list[list[str]], context: str) -> None:
    expected = [k for s in seqs for k in input_keys(s, context)]
    got = input_keys_of_words(seqs, context)
    assert got.dtype == np.int64 and got.tolist() == expected


def _per_token(enc: Encoding, rows, mapping, fallback=None):
    return [[mapping.get(x, fallback) for x in seq] for seq in rows]


def test_encoding_equals_a_lookup_per_token_and_names_the_first_unknown_word() -> None:
    data = from_lists([["x", "y"], ["y", "z", "x"], ["q"]], [["A", "B"], ["B", "A", "A"], ["A"]])
    enc = Encoding.fit(data.subset([0]))  # x and y; labels A and B
    with pytest.raises(InputError, match=r"token 'z' \(sequence 1, position 1\)"):
        enc.encode_tokens(data)  # 'z' comes before 'q' in data order: the first one is named
    unk = Encoding.from_lists([*enc.id_to_token, "<unk>"], enc.id_to_label, "<unk>")
    ids = unk.encode_tokens(data, unknown="unk")
    assert [a.tolist() for a in ids] == _per_token(unk, data.tokens, unk.token_to_id, unk.unknown_id)
    assert all(a.dtype == np.int64 for a in ids) and [len(a) for a in ids] == [2, 3, 1]
    labels = unk.encode_labels(data)
    assert [a.tolist() for a in labels] == _per_token(unk, data.labels, unk.label_to_id)
    bad = from_lists([["x"], ["y", "x"]], [["A"], ["A", "C"]])
    with pytest.raises(InputError, match=r"label 'C' \(sequence 1, position 1\)"):
        enc.encode_labels(bad)


def test_certify_validates_the_data_once_and_still_refuses_data_changed_after_it_was_made(monkeypatch) -> None:
    data = from_lists(
        [["a", "b", "c"], ["b", "a"], ["c", "c", "a"]] * 4, [["X", "Y", "X"], ["Y", "Y"], ["X", "Z", "X"]] * 4
    )
    model = compile_dataset(data, run_certificate=False).model
    calls = []
    real = SequenceDataset.validate
    monkeypatch.setattr(SequenceDataset, "validate", lambda self: (calls.append(len(self)), real(self))[1])
    cert = uatlab.certify(model, data, chunk_tokens=5)  # several chunks
    assert cert.certified and cert.certified_tokens == data.num_tokens
    assert calls == [len(data)]  # the whole data set once; its chunks are not validated again
    data.tokens[5].append("b")  # a sequence made longer than its labels after the data set was made
    with pytest.raises(InputError, match="sequence 5 has 4 tokens but 3 labels"):
        uatlab.certify(model, data, chunk_tokens=5)


def test_an_empty_data_set_encodes_to_nothing_and_is_refused_by_compile() -> None:
    """No sequences: each encoding is an empty list, and compiling says there is nothing to compile."""
    empty = SequenceDataset([], [])
    enc = Encoding.from_lists(["a"], ["A"])
    assert enc.encode_tokens(empty) == [] and enc.encode_labels(empty) == []
    with pytest.raises(InputError, match="no sequences"):
        compile_dataset(empty)
