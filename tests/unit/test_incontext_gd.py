"""Softmax attention running gradient descent in context."""

from __future__ import annotations

import pytest

from uatlab.constructions.paper_b.appB_incontext_gd import build_incontext_gd
from uatlab.errors import InputError, PrecisionError
from uatlab.experiments.measure import relative_error


def test_one_step_context64_d8():
    g = build_incontext_gd(8, 64, steps=1, lr=0.5, eps=1e-4).detail
    r = relative_error(g, batch=16)
    assert r["relative_error"] < 1e-3
    assert r["sup_error"] <= r["bound"]


def test_three_steps():
    g = build_incontext_gd(8, 64, steps=3, lr=0.5, eps=1e-4).detail
    r = relative_error(g, batch=16)
    assert r["relative_error"] < 1e-3
    assert r["sup_error"] <= r["bound"]


def test_error_shrinks_with_eps():
    errs = [
        relative_error(build_incontext_gd(4, 16, eps=e).detail, batch=16)["relative_error"] for e in (1e-1, 1e-2, 1e-3)
    ]
    assert errs[0] > errs[1] > errs[2]


def test_bad_input():
    with pytest.raises(InputError):
        build_incontext_gd(0, 8)
    with pytest.raises(InputError):
        build_incontext_gd(4, 8, eps=-1.0)
    with pytest.raises(PrecisionError):
        build_incontext_gd(4, 8, eps=1e-7, dtype="float32")


@pytest.mark.parametrize("eps", [1e-10, 1e-12])
def test_float64_error_within_bound_at_small_eps(eps):
    """Below ε ≈ 1e-9 rounding (∝ u/ε) dominates: the reported bound must include it."""
    g = build_incontext_gd(8, 16, steps=1, lr=0.1, eps=eps).detail
    r = relative_error(g, batch=64)
    assert r["sup_error"] <= r["bound"]
    assert r["sup_error"] > r["exact_arithmetic_bound"]  # rounding is what matters here
    assert r["rounding_bound"] > 0


def test_float32_error_within_bound():
    g = build_incontext_gd(4, 16, steps=2, lr=0.1, eps=1e-4, dtype="float32").detail
    r = relative_error(g, batch=32)
    assert r["sup_error"] <= r["bound"]
    assert r["rounding_bound"] > r["exact_arithmetic_bound"]


def test_rounding_term_grows_like_one_over_eps():
    from uatlab.constructions.paper_b.appB_incontext_gd import multi_step_bound, multi_step_float_bound

    args = dict(N=16, M=1.6e9, S=20.0, V=3.0, lr=0.1, steps=1)
    r = [
        multi_step_float_bound(eps=e, S_abs=20.0, d=8, dtype="float64", **args) - multi_step_bound(eps=e, **args)
        for e in (1e-10, 1e-12)
    ]
    assert 90 < r[1] / r[0] < 110


def test_stored_eps_is_exact_in_float64():
    g = build_incontext_gd(3, 4, eps=1e-4)
    assert float(g.model.layers[0].W_Q[0, 0, 0].detach()) == 1e-4
