"""Tokenwise separatedness, vocabulary, duplicates and the input errors."""

import math

import numpy as np
import pytest
import torch

from uatlab.errors import InputError
from uatlab.theory import require_no_duplicates, tokenwise_separatedness


def example():
    return [
        [[3.0, 0.0], [0.0, 2.0], [1.0, 1.0]],
        [[3.0, 0.0], [0.0, -1.5], [1.0, 1.0]],
    ]


def test_measures_constants_and_vocabulary():
    sep = tokenwise_separatedness(example())
    assert sep.r_min == pytest.approx(math.sqrt(2))
    assert sep.r_max == 3.0
    # brute force over distinct tokens
    toks = {tuple(t) for s in example() for t in s}
    dists = [np.linalg.norm(np.subtract(a, b)) for a in toks for b in toks if a != b]
    assert sep.eps == pytest.approx(min(dists))
    (i, k), (j, l) = sep.closest_pair
    assert np.linalg.norm(np.subtract(example()[i][k], example()[j][l])) == pytest.approx(sep.eps)
    assert sep.vocab_size == 4 and sep.vocabulary.shape == (4, 2)
    assert sep.vocab_sets[0] != sep.vocab_sets[1]
    keys = sep.context_keys()
    assert keys[0, 0] != keys[1, 0]  # same token, different sets
    assert len(np.unique(keys)) == 6
    assert sep.holds(1.0, 3.0, 0.5) and not sep.holds(1.5, 3.0, 0.5) and not sep.holds(1.0, 2.9, 0.5)
    assert sep.duplicates == ()


def test_same_set_in_another_order_shares_keys():
    X = [[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]]
    keys = tokenwise_separatedness(torch.tensor(X)).context_keys()
    assert keys[0, 0] == keys[1, 1] and keys[0, 1] == keys[1, 0]


def test_claimed_constants_are_checked_and_named():
    with pytest.raises(InputError, match=r"sequence \d position \d and sequence \d position \d .* apart"):
        tokenwise_separatedness(example(), eps=2.0)
    with pytest.raises(InputError, match="sequence 0, position 2 has norm 1.41421, not above the claimed r_min = 2"):
        tokenwise_separatedness(example(), r_min=2.0)
    with pytest.raises(InputError, match="above the claimed r_max = 2.5"):
        tokenwise_separatedness(example(), r_max=2.5)


def test_duplicates_named_with_positional_encoding_hint():
    X = [[[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]]
    sep = tokenwise_separatedness(X)
    assert sep.duplicates == ((0, 0, 2),)
    with pytest.raises(InputError, match="sequence 0 repeats a token at positions 0 and 2.*positional encoding"):
        tokenwise_separatedness(X, allow_duplicates=False)
    with pytest.raises(InputError, match="positional encoding"):
        require_no_duplicates(sep)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ([], "no sequences"),
        ([[]], "sequence 0 is empty"),
        ([[[1.0, 0.0]], [[1.0, 0.0], [2.0, 0.0]]], "ragged input: sequence 1 has 2 tokens"),
        ([[[1.0, 0.0]], [[1.0, 0.0, 0.0]]], "sequence 1 has tokens of dimension 3"),
        ([[[1.0, 0.0]], [[float("inf"), 0.0]]], "sequence 1, position 0 has a non-finite entry inf"),
        ([[[1.0, 0.0], [0.0, float("nan")]]], "sequence 0, position 1 has a non-finite entry nan in coordinate 1"),
        ([[1.0, 2.0]], "expected"),
    ],
)
def test_malformed_input(bad, message):
    if message == "expected":
        bad = np.zeros((2, 3, 4, 5))
    with pytest.raises(InputError, match=message):
        tokenwise_separatedness(bad)


def test_single_token_vocabulary():
    sep = tokenwise_separatedness([[[1.0, 1.0]]])
    assert sep.eps == math.inf and sep.closest_pair is None and sep.vocab_size == 1
