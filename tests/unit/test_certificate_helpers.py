"""The certificate's array helpers give the values of the plain whole-array formulas they replace."""

from __future__ import annotations

import numpy as np
import pytest

from uatlab.numerics.float_bounds import gamma
from uatlab.verify.certificate import _column_stats, _gamma_of_counts


@pytest.mark.parametrize("u", [2.0**-24, 2.0**-53])
def test_gamma_of_counts_equals_gamma(u):
    rng = np.random.default_rng(0)
    for top in (0, 5, 70, 3000):  # the table grows past its first size
        n = rng.integers(0, top + 1, (7, 11)).astype(np.float64)
        assert np.array_equal(_gamma_of_counts(n, u), gamma(np.maximum(n, 1), u))
        assert np.array_equal(_gamma_of_counts(n, u, offset=1), gamma(n + 1, u))
        assert np.array_equal(_gamma_of_counts(n.astype(np.int64), u), gamma(np.maximum(n, 1), u))


def test_gamma_of_counts_refuses_what_gamma_refuses():
    with pytest.raises(ArithmeticError):
        _gamma_of_counts(np.array([2**23]), 2.0**-24)


@pytest.mark.parametrize("T", [0, 1, 5, 8192, 8193, 20000])
def test_column_stats_equal_the_whole_array_forms(T):
    rng = np.random.default_rng(T)
    x = rng.standard_normal((T, 6)) * 10.0 ** rng.integers(-3, 4, 6)
    r = np.abs(rng.standard_normal((T, 6))) * 1e-9
    mx, mr, lo, hi = _column_stats(x, r)
    if T == 0:
        assert np.all(mx == 0) and np.all(mr == 0) and np.all(lo == np.inf) and np.all(hi == -np.inf)
        return
    assert np.array_equal(mx, (np.abs(x) + 2 * r).max(axis=0))
    assert np.array_equal(mr, r.max(axis=0))
    assert np.array_equal(lo, (x - r).min(axis=0))
    assert np.array_equal(hi, (x + r).max(axis=0))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("scale", [0.125, -0.75, 3.0, 0.0])
def test_score_row_extremes_equal_the_reductions_over_the_scores(causal, scale):
    from uatlab.verify.certificate import _score_row_extremes

    rng = np.random.default_rng(int(abs(scale) * 8) + causal)
    q = rng.standard_normal((40, 9)) * 10.0 ** rng.integers(-150, 150, (40, 9))
    k = rng.standard_normal((40, 9)) * 10.0 ** rng.integers(-150, 150, (40, 9))
    q[::3, 2], k[::4, 5] = 0.0, -0.0  # zeros of both signs
    S = q[:, :, None] * k[:, None, :]
    S *= scale
    if causal:
        allowed = np.tril(np.ones((9, 9), dtype=bool))[None]
        want_hi, want_lo = np.where(allowed, S, -np.inf).max(-1), np.where(allowed, S, np.inf).min(-1)
    else:
        want_hi, want_lo = S.max(-1), S.min(-1)
    hi, lo = _score_row_extremes(q, k, scale, causal)
    assert np.array_equal(hi, want_hi) and np.array_equal(lo, want_lo)
