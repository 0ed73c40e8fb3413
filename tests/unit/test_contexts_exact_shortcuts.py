"""Grouping's shortcuts give bit for bit what the plain formulas give: the sort by (group, h) equals
np.lexsort((h, group)), the Boltzmann rows' maximum taken from the keys equals the maximum of the scores."""

from __future__ import annotations

import numpy as np
import pytest

from uatlab.constructions.paper_a.cor1_memorizer.contexts import group_value_order


def _order(group: np.ndarray, h: np.ndarray) -> np.ndarray:
    return group_value_order(group, h)


@pytest.mark.parametrize("seed", range(6))
def test_equals_lexsort_with_ties_signed_zeros_and_sparse_group_ids(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    group = rng.integers(0, 40, n) * 1_000_003 + rng.integers(0, 3, n)  # few, far-apart group ids
    h = np.round(rng.normal(size=n) * 4) / 8  # many ties within a group
    h[rng.random(n) < 0.1] = -0.0  # -0.0 and 0.0 compare equal: lexsort keeps them in data order
    h[rng.random(n) < 0.1] = 0.0
    got = _order(group, h)
    want = np.lexsort((h, group))
    assert np.array_equal(got, want)
    # the tie rule matters here: a data-order-blind sort would differ
    assert len(np.unique(np.stack([group, h]), axis=1).T) < n


def test_groups_spanning_beyond_the_key_are_renumbered():
    group = np.array([2**62, -(2**62), 2**62, 5, 5])
    h = np.array([0.5, 0.25, 0.25, 0.0, -0.0])
    assert np.array_equal(_order(group, h), np.lexsort((h, group)))


def test_nan_and_empty_fall_back_to_lexsort():
    group = np.array([2, 1, 2, 1, 2])
    h = np.array([0.5, np.nan, np.nan, 0.25, 0.5])
    assert np.array_equal(_order(group, h), np.lexsort((h, group)))
    assert len(_order(np.zeros(0, dtype=np.int64), np.zeros(0))) == 0


@pytest.mark.parametrize("causal", [False, True])
def test_boltzmann_rows_take_the_row_maximum_from_the_keys_bit_for_bit(causal):
    from uatlab.constructions.paper_a.cor1_memorizer.contexts import _boltzmann_rows

    rng = np.random.default_rng(1)
    B, n = 64, 17
    a = rng.integers(-1024, 1025, (B, n)) / 2**15  # dyadic keys, as the compiler's codes
    a[rng.random((B, n)) < 0.1] = -0.0
    a[:3] = a[:3, :1]  # rows of equal keys
    b = 0.75 * (1 + rng.integers(0, 8, n) / 8) * 3.3  # positive query scales, not powers of two

    assert np.array_equal(_boltzmann_rows(a, b, causal), _plain_rows(a, b, causal))
    b[0] = -1.0  # a non-positive scale: the maximum is taken over the scores
    assert np.array_equal(_boltzmann_rows(a, b, causal), _plain_rows(a, b, causal))


def _plain_rows(a, b, causal):
    n = a.shape[1]
    S = b[None, :, None] * a[:, None, :]  # the row maximum taken over the scores
    if causal:
        S = np.where(np.tril(np.ones((n, n), dtype=bool))[None], S, -np.inf)
    S -= S.max(axis=-1, keepdims=True)
    P = np.exp(S)
    if causal:  # the prefix alone, summed left to right: the same order for the same prefix in any sequence
        h = np.empty(a.shape)
        for i in range(a.shape[0]):
            for q in range(n):
                num = den = 0.0
                for k in range(q + 1):
                    den += P[i, q, k]
                    num += P[i, q, k] * a[i, k]
                h[i, q] = num / den
        return h
    P /= P.sum(axis=-1, keepdims=True)
    return np.einsum("bqk,bk->bq", P, a)


@pytest.mark.parametrize("batch_tokens", [2_000_000, 40])  # batched by length, and blocks of queries
def test_causal_h_of_one_prefix_is_the_same_in_sequences_of_any_length(batch_tokens):
    from uatlab.constructions.paper_a.cor1_memorizer.contexts import boltzmann_context

    rng = np.random.default_rng(3)
    alpha, pi = rng.standard_normal(9), rng.standard_normal(40) * 0.1
    b = 1.0 + rng.random(40)
    prefix = rng.integers(0, 9, 7)
    words = [np.r_[prefix, rng.integers(0, 9, extra)] for extra in (0, 1, 5, 13, 30)]
    hs = boltzmann_context(words, alpha, pi, b, causal=True, batch_tokens=batch_tokens)
    for h in hs[1:]:
        assert np.array_equal(h[: len(prefix)], hs[0])  # bit for bit


@pytest.mark.parametrize("causal", [False, True])
def test_boltzmann_columns_reuse_one_score_array_bit_for_bit(causal):
    """The score array shared by every batch and scale (larger batches first, then smaller and other lengths)
    leaves no trace: each batch's h equals its rows computed on a fresh array."""
    from uatlab.constructions.paper_a.cor1_memorizer.contexts import _boltzmann_columns, _boltzmann_rows

    rng = np.random.default_rng(7)
    lengths = [9, 9, 9, 4, 4, 1, 12, 9]
    words = [rng.integers(0, 30, n) for n in lengths]
    alpha = rng.integers(-512, 513, 30) / 2**12
    pi = rng.integers(-64, 65, 12) / 2**14
    scales = [3.3 * (1 + rng.integers(0, 8, 12) / 8) for _ in range(3)]
    H = _boltzmann_columns(words, alpha, pi, scales, causal, batch_tokens=200)  # 2 sequences of 9 a batch
    at = np.cumsum([0, *lengths])
    for i, w in enumerate(words):
        a = (alpha[w] + pi[: len(w)])[None]
        for c, b in enumerate(scales):
            assert np.array_equal(H[at[i] : at[i + 1], c], _boltzmann_rows(a, b[: len(w)], causal)[0])
