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
