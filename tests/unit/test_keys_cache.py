"""Input keys hash each distinct word once per process, and the cache does not change a key."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from uatlab.data import keys
from uatlab.data.keys import input_keys, input_keys_of_ids, token_hashes


class _CountingHashlib:
    def __init__(self):
        self.calls = 0

    def blake2b(self, *a, **k):
        self.calls += 1
        return hashlib.blake2b(*a, **k)


def test_each_word_hashed_once_and_keys_unchanged(monkeypatch):
    seqs = [["the", "cat", "sat"], ["the", "dog"], ["a", "cat", "the", "cat"]] * 50
    keys._token_hash.cache_clear()
    expected = [keys.input_keys(s, "sequence") for s in seqs]  # reference, filled the cache
    counting = _CountingHashlib()
    monkeypatch.setattr(keys, "hashlib", counting)
    keys._token_hash.cache_clear()
    got = [keys.input_keys(s, "sequence") for s in seqs] + [keys.input_keys(s, "prefix") for s in seqs]
    assert counting.calls == len({w for s in seqs for w in s}) == 5  # not 2 × 450 tokens
    assert got[: len(seqs)] == expected
    # the rolling hash over the cached word hashes equals the uncached definition
    keys._token_hash.cache_clear()
    monkeypatch.setattr(keys, "hashlib", hashlib)
    h = [int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little") for w in seqs[2]]
    acc, prefix = 0, []
    for v in h:
        acc = (acc * keys._MUL + v + 1) & keys._MASK64
        prefix.append(acc >> 1)
    assert keys.input_keys(seqs[2], "prefix") == prefix


@pytest.mark.parametrize("context", ["sequence", "prefix"])
def test_keys_of_token_ids_equal_the_per_sequence_keys(context):
    # many sequences of lengths 1..60 (unicode words, repeats): every key equal to input_keys of its sequence
    rng = np.random.default_rng(5)
    vocab = [f"w{i}·é" for i in range(200)]
    seqs = [[vocab[j] for j in rng.integers(0, 200, size=rng.integers(1, 61))] for _ in range(500)]
    t2i: dict[str, int] = {}
    ids = [np.array([t2i.setdefault(t, len(t2i)) for t in s], dtype=np.int64) for s in seqs]
    want = np.concatenate([np.array(input_keys(s, context), dtype=np.int64) for s in seqs])
    got = input_keys_of_ids(ids, token_hashes(t2i), context)
    assert got.dtype == np.int64 and np.array_equal(got, want)
    assert len(np.unique(got)) > len(got) // 2  # distinct inputs, distinct keys
