"""Label-information measures (uatlab.data.information) against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from uatlab.data.information import bits_per_parameter, ceiling_mask, label_information, label_information_of


def test_word_bits_is_conditional_entropy_summed_over_tokens():
    # word "a": labels X, X, Y, Y (4 tokens, 1 bit each); word "b": always Z (0 bits)
    recs = [(["a", "b"], ["X", "Z"]), (["b", "a"], ["Z", "X"]), (["a"], ["Y"]), (["a", "b", "b"], ["Y", "Z", "Z"])]
    info = label_information_of(recs)
    assert info.word_bits == pytest.approx(4.0)
    # marginal: 8 tokens, X 2, Y 2, Z 4 → 2·2 + 2·2 + 4·1 = 12 bits
    assert info.marginal_bits == pytest.approx(12.0)
    # (word, position): "a"@0: X, Y(seq 3: "a" alone), ... every (word, position) pair here has one label except
    # "a"@0 (X, Y, Y) → 3·H(1/3) bits
    h13 = -(1 / 3) * math.log2(1 / 3) - (2 / 3) * math.log2(2 / 3)
    assert info.word_position_bits == pytest.approx(3 * h13)
    assert info.exceptions == 2  # "a" has majority X or Y (tie): 2 tokens differ either way
    T, E = 8, 2
    assert info.exception_code_bits == pytest.approx(math.log2(T + 1) + math.log2(math.comb(T, E)) + E * math.log2(2))
    assert info.uniform_label_bits == pytest.approx(8 * math.log2(3))
    assert bits_per_parameter(info, 8) == pytest.approx(0.5)


def test_conflicts_are_excluded():
    # the same input (whole sequence, position) labelled twice differently: the minority token is dropped
    recs = [(["a", "b"], ["X", "Z"]), (["a", "b"], ["X", "Z"]), (["a", "b"], ["Y", "Z"])]
    info = label_information_of(recs)
    assert info.tokens == 6 and info.ceiling_tokens == 5
    assert info.word_bits == 0.0  # after dropping the conflict, "a" is always X


def test_ceiling_mask_majority_then_first_seen():
    key = np.array([7, 7, 7, 3, 3])
    lab = np.array([1, 0, 0, 2, 1])
    # input 7: label 0 twice beats 1 once; input 3: tie 2 vs 1 → the first seen (2) wins
    assert ceiling_mask(key, lab).tolist() == [False, True, True, True, False]


def test_random_labels_carry_about_log2_C_bits_per_token_given_the_word():
    rng = np.random.default_rng(0)
    T, C = 20_000, 4
    word = rng.integers(0, 10, T)  # few words, many tokens each: H(label | word) ≈ log2 C
    info = label_information(word, rng.integers(0, C, T), np.arange(T) % 7, np.arange(T))
    assert 0.99 * T * math.log2(C) < info.word_bits <= T * math.log2(C)


def _exact_inputs(records: list[tuple[list[str], list[str]]], context: str) -> tuple[np.ndarray, ...]:
    """Word, label, position and one id per distinct input (the words themselves, no hash) of every token."""
    words: dict[str, int] = {}
    labels: dict[str, int] = {}
    inputs: dict[tuple, int] = {}
    W, Y, P, K = [], [], [], []
    for toks, labs in records:
        for k, (t, y) in enumerate(zip(toks, labs, strict=True)):
            W.append(words.setdefault(t, len(words)))
            Y.append(labels.setdefault(y, len(labels)))
            P.append(k)
            inp = tuple(toks[: k + 1]) if context == "prefix" else (tuple(toks), k)
            K.append(inputs.setdefault(inp, len(inputs)))
    return tuple(np.array(a, dtype=np.int64) for a in (W, Y, P, K))


@pytest.mark.parametrize("context", ["sequence", "prefix"])
def test_inputs_built_to_share_a_rolling_key_are_two_inputs(context):
    # two different sentences with equal rolling-hash keys (LLL), labelled apart everywhere: every token whose
    # input is not shared by the other sentence is winnable, so it counts, and the figures are those of an
    # exact grouping of the inputs (by their words)
    from key_collision import rolling_hash_collision

    from uatlab.data.keys import input_keys

    s1, s2 = rolling_hash_collision()
    assert input_keys(s1, context)[-1] == input_keys(s2, context)[-1]  # the collision is real in this context
    records = [(s1, ["X"] * len(s1)), (s2, ["Y"] * len(s2)), (["zz", s1[0]], ["X", "Y"])]
    got = label_information_of(records, context=context)
    word, label, pos, exact = _exact_inputs(records, context)
    want = label_information(word, label, pos, exact)
    assert got == want
    counts: dict[int, dict[int, int]] = {}
    for inp, y in zip(exact.tolist(), label.tolist(), strict=True):
        counts.setdefault(inp, {}).setdefault(y, 0)
        counts[inp][y] += 1
    assert got.ceiling_tokens == sum(max(c.values()) for c in counts.values())
    if context == "sequence":
        assert got.ceiling_tokens == got.tokens  # no two tokens share an input


def test_input_groups_is_the_partition_by_both_keys():
    """Equal ids exactly when both keys are equal, with and without keys shared by several second keys (the sort
    by the first key alone is used only when every run of equal keys has one second key)."""
    from uatlab.data.information import input_groups

    rng = np.random.default_rng(7)
    for trial in range(300):
        T = int(rng.integers(0, 50))
        key = rng.integers(0, 6, T)
        key2 = key * 7 + 1 if trial % 2 else rng.integers(0, 3, T)
        ids = input_groups(key, key2)
        pairs = list(zip(key.tolist(), key2.tolist(), strict=True))
        same_ids = ids[:, None] == ids[None, :]
        same_pairs = np.array([[a == b for b in pairs] for a in pairs], dtype=bool).reshape(T, T)
        assert np.array_equal(same_ids, same_pairs)
