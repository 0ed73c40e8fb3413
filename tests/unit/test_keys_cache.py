"""Input keys hash each distinct word once per process, and the cache does not change a key."""

from __future__ import annotations

import hashlib

from uatlab.data import keys


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
