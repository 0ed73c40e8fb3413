"""contextual_margin: the (r, δ) a layer achieves, checked against brute force."""

import itertools

import numpy as np
import pytest
import torch

from uatlab.errors import InputError
from uatlab.models import MultiHeadSelfAttention
from uatlab.theory import contextual_margin, contextual_margin_of_outputs, tokenwise_separatedness


def brute_force(outputs, sequences):
    """δ by the definition: min over (i,k),(j,l) with V^(i) ≠ V^(j) or x_k ≠ x_l."""
    N, n = len(sequences), len(sequences[0])
    best = np.inf
    for (i, k), (j, l) in itertools.combinations([(i, k) for i in range(N) for k in range(n)], 2):
        si = {tuple(t) for t in sequences[i]}
        sj = {tuple(t) for t in sequences[j]}
        if si != sj or tuple(sequences[i][k]) != tuple(sequences[j][l]):
            best = min(best, float(np.linalg.norm(outputs[i, k] - outputs[j, l])))
    return best


def random_sequences(seed, N=6, n=3, d=2, vocab=5):
    rng = np.random.default_rng(seed)
    V = rng.standard_normal((vocab, d))
    return np.stack([V[rng.choice(vocab, n, replace=False)] for _ in range(N)])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_margin_matches_definition(seed):
    torch.manual_seed(seed)
    layer = MultiHeadSelfAttention(2, n_heads=2, head_dim=1, rank=1, dtype=torch.float64)
    X = random_sequences(seed)
    m = contextual_margin(layer, X)
    with torch.no_grad():
        Y = layer(torch.from_numpy(X)).numpy()
    assert m.delta == pytest.approx(brute_force(Y, X.tolist()), rel=1e-12)
    assert m.r == pytest.approx(np.linalg.norm(Y, axis=-1).max())
    (i, k), (j, l) = m.worst_pair
    assert np.linalg.norm(Y[i, k] - Y[j, l]) == pytest.approx(m.delta)
    assert m.is_contextual


def test_identity_is_not_contextual_and_names_the_pair():
    X = [[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, -1.0]]]
    m = contextual_margin(lambda x: x, X)
    assert m.delta == 0 and not m.is_contextual
    assert m.worst_pair == ((0, 0), (1, 0))
    assert "sequence 0 position 0 vs sequence 1 position 0" in m.describe_worst_pair()


def test_permutation_equivariant_layer_same_key_outputs_agree():
    X = np.array([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[0.0, 1.0], [1.0, 1.0], [1.0, 0.0]]])
    torch.manual_seed(0)
    layer = MultiHeadSelfAttention(2, dtype=torch.float64)
    m = contextual_margin(layer, X)
    assert m.distinct_ids == 3 and m.same_key_spread < 1e-14


def test_output_shape_and_finiteness_errors():
    X = np.ones((2, 3, 2)) * np.arange(1, 4)[None, :, None]
    sep = tokenwise_separatedness(X)
    with pytest.raises(InputError, match="do not match"):
        contextual_margin_of_outputs(np.zeros((2, 2, 2)), sep)
    with pytest.raises(InputError, match="sequence 1, position 2 is not finite"):
        Y = np.zeros((2, 3, 2))
        Y[1, 2, 0] = np.inf
        contextual_margin_of_outputs(Y, sep)
