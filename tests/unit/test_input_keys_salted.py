"""The certificate's second input key (`uatlab.data.keys.salted_input_keys`): one key per input, whatever the
sequence or chunk it sits in, and different keys for different inputs, including inputs built to collide under
the rolling hash of `input_keys`."""

from __future__ import annotations

import numpy as np
import pytest
from key_collision import rolling_hash_collision

from uatlab.data.keys import input_keys, salt_table, salted_input_keys


def _flat(seqs: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    return np.concatenate([np.asarray(s, np.int64) for s in seqs]), np.r_[0, np.cumsum([len(s) for s in seqs])]


@pytest.mark.parametrize("context", ["prefix", "sequence"])
def test_equal_inputs_equal_keys_different_inputs_different_keys(context):
    rng = np.random.default_rng(0)
    base = [rng.integers(0, 5, 9).tolist() for _ in range(6)]  # shared prefixes, repeated sentences
    seqs = [base[rng.integers(6)][: rng.integers(1, 10)] for _ in range(300)]
    table = salt_table(12345, 5)
    tok, off = _flat(seqs)
    whole = salted_input_keys(tok, off, table, context)
    # the same keys computed in chunks of other sizes (the certificate computes them per chunk)
    parts = [salted_input_keys(*_flat(seqs[a : a + 37]), table, context) for a in range(0, len(seqs), 37)]
    assert np.array_equal(whole, np.concatenate(parts))
    key_of: dict[tuple, int] = {}
    for s, keys in zip(seqs, np.split(whole, off[1:-1]), strict=True):
        for k, key in enumerate(keys.tolist()):
            inp = tuple(s[: k + 1]) if context == "prefix" else (tuple(s), k)
            assert key_of.setdefault(inp, key) == key  # one key per input
    assert len(set(key_of.values())) == len(key_of)  # a key per input, none shared


def test_inputs_built_to_collide_under_the_rolling_hash_get_different_salted_keys():
    s1, s2 = rolling_hash_collision()
    assert s1 != s2 and input_keys(s1, "sequence") == input_keys(s2, "sequence")  # the collision is real
    vocab = {t: i for i, t in enumerate(sorted(set(s1 + s2)))}
    tok, off = _flat([[vocab[t] for t in s1], [vocab[t] for t in s2]])
    for salt in range(5):
        k1, k2 = np.split(salted_input_keys(tok, off, salt_table(salt, len(vocab)), "sequence"), [len(s1)])
        assert not np.any(k1 == k2)
