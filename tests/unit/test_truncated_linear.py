"""Paper B's interpolation attention: proven bound, rates, clamping, modes, bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from uatlab.constructions.paper_b.thm3_truncated_linear import build_truncated_linear_attention, plan_interpolation
from uatlab.errors import InputError, PrecisionError
from uatlab.experiments.measure import fit_loglog_slope, measure_sup_error

YS = np.linspace(-3.0, 3.0, 2001)


@pytest.mark.parametrize("mode", ["token", "sequence"])
def test_m81_error_within_bound_and_half_spacing(mode):
    c = build_truncated_linear_attention(
        [1.0], 0.0, -1.0, 1.0, anchors=81, mode=mode, n_tokens=81 if mode == "token" else 3
    ).detail
    r = measure_sup_error(c, YS)
    assert r["sup_error"] <= c.plan.bound
    assert r["sup_error"] <= 0.0125
    assert r["sup_outside"] <= c.plan.clamp_bound  # clamp value within the proven bound
    assert c.plan.bound <= c.plan.spec_bound  # our bound improves the spec's Δ + (b−a)m e^{−βΔ²}


def test_error_slope_against_anchors_is_minus_one():
    errs, ms = [], [11, 21, 41, 81]
    for m in ms:
        c = build_truncated_linear_attention([1.0], 0.0, -1.0, 1.0, anchors=m, mode="token").detail
        errs.append(measure_sup_error(c, YS)["sup_error"])
    assert -1.1 <= fit_loglog_slope(ms, errs) <= -0.9


def test_heads_divide_the_error():
    errs = []
    for H in (1, 2, 4, 8):
        c = build_truncated_linear_attention([1.0], 0.0, -1.0, 1.0, anchors=11, heads=H, mode="token").detail
        r = measure_sup_error(c, YS)
        assert r["sup_error"] <= c.plan.bound
        errs.append(r["sup_error"])
    assert -1.1 <= fit_loglog_slope([1, 2, 4, 8], errs) <= -0.9


def test_token_and_sequence_modes_agree():
    x = torch.linspace(-2, 2, 21, dtype=torch.float64).reshape(1, 21, 1)
    tok = build_truncated_linear_attention([1.0], 0.0, -1.0, 1.0, anchors=21, mode="token").detail
    seq = build_truncated_linear_attention([1.0], 0.0, -1.0, 1.0, anchors=21, mode="sequence", n_tokens=21).detail
    assert tok.layer.is_tokenwise and not seq.layer.is_tokenwise
    assert torch.allclose(tok(x), seq(x), atol=1e-12)


def test_per_token_weights_need_sequence_mode():
    rng = np.random.default_rng(0)
    w, t = rng.standard_normal((5, 3)), rng.standard_normal(5)
    with pytest.raises(InputError, match="token mode needs the same w"):
        build_truncated_linear_attention(w, t, -1.0, 1.0, anchors=21, mode="token", n_tokens=21)
    c = build_truncated_linear_attention(w, t, -1.0, 1.0, anchors=41, mode="sequence").detail
    x = torch.as_tensor(rng.uniform(-1, 1, size=(64, 5, 3)))
    err = (c(x) - c.target(x)).abs().max().item()
    assert err <= c.plan.bound


def test_eps_mode_meets_the_target():
    c = build_truncated_linear_attention(
        [0.5, -1.0], [0.1, 0.2, 0.3], -2.0, 3.0, eps=0.05, heads=2, mode="sequence"
    ).detail
    assert c.plan.bound <= 0.05
    x = torch.as_tensor(np.random.default_rng(1).uniform(-4, 4, size=(200, 3, 2)))
    assert (c(x) - c.target(x)).abs().max().item() <= 0.05


def test_construction_is_trainable_module():
    c = build_truncated_linear_attention([1.0], 0.0, -1.0, 1.0, anchors=11, mode="sequence", n_tokens=2).detail
    x = torch.rand(4, 2, 1, dtype=torch.float64)
    c(x).sum().backward()
    assert c.layer.W_Q.grad is not None and c.layer.anchors.grad is not None


def test_bad_input_is_refused():
    with pytest.raises(InputError):
        plan_interpolation(1.0, -1.0, anchors=5)
    with pytest.raises(InputError):
        plan_interpolation(-1.0, 1.0, eps=0.0)
    with pytest.raises(InputError):
        plan_interpolation(-1.0, 1.0, eps=0.1, anchors=5)
    with pytest.raises(InputError):
        build_truncated_linear_attention([1.0], 0.0, -1.0, 1.0, anchors=21, mode="token", n_tokens=5)
    with pytest.raises(PrecisionError, match="float32"):
        plan_interpolation(-1.0, 1.0, anchors=81, dtype="float32")
    with pytest.raises(PrecisionError, match="overflow"):
        plan_interpolation(-1.0, 1.0, anchors=5, beta=1e306)


@pytest.mark.parametrize("a, b", [(-1.0, 1.0), (0.0, 10.0)])
def test_eps_mode_never_returns_a_guarantee_above_eps(a, b):
    """float32: either the bound (with the rounding estimate) meets eps, or a clear PrecisionError."""
    refused = 0
    for eps in np.geomspace(1e-3, 0.5, 12) * (b - a):
        try:
            c = build_truncated_linear_attention([1.0], 0.0, a, b, eps=float(eps), mode="sequence", dtype="float32")
        except PrecisionError as e:
            refused += 1
            assert "float32" in str(e)
            continue
        assert c.guarantee["sup_error_bound"] <= eps * (1 + 1e-9)
    assert refused > 0


def test_guarantee_records_its_input_range_and_rounding_estimate():
    c = build_truncated_linear_attention([2.0], 0.5, -1.0, 1.0, anchors=11, y_bound=3.0, mode="sequence")
    g = c.guarantee
    # the recorded range is the one the plan's rounding estimate was computed for, and the guarantee holds on it
    assert g["y_bound"] == c.detail.plan.y_bound
    assert 0 < g["rounding_estimate"] == c.detail.plan.float_term < g["sup_error_bound"]
    y = np.linspace(-3.0, 3.0, 2001)  # y = 2x + 0.5 over the whole recorded range |y| ≤ 3
    x = torch.as_tensor(((y - 0.5) / 2.0)[:, None, None])
    assert (c.detail(x) - c.detail.target(x)).abs().max().item() <= g["sup_error_bound"]
    # a wider assumed range gives a larger rounding estimate (the estimate depends on it)
    wide = build_truncated_linear_attention([2.0], 0.5, -1.0, 1.0, anchors=11, y_bound=300.0, mode="sequence")
    assert wide.guarantee["rounding_estimate"] > g["rounding_estimate"]
