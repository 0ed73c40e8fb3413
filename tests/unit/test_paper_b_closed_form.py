"""The closed-form interpolation construction written into the trained architecture (paper B, Thm 3.4/3.9)."""

from __future__ import annotations

import math

import pytest
import torch

from uatlab.errors import InputError
from uatlab.experiments.measure import fit_loglog_slope
from uatlab.experiments.paper_b.closed_form import (
    closed_form_model,
    write_interpolation_weights,
)
from uatlab.experiments.paper_b.data import TruncatedLinearTarget, corrected_truncated_linear_data, uniform_inputs
from uatlab.experiments.paper_b.models import TruncatedAttentionConfig, TruncatedAttentionModel


@pytest.fixture(scope="module")
def data():
    return corrected_truncated_linear_data(n=12, d=3, clipped_fraction=0.3, n_train=200, n_val=10, n_test=300)


def _sup(model, x, y) -> float:
    with torch.no_grad():
        return float((model(x)[..., 0] - y).abs().max())


def test_sup_error_falls_as_one_over_heads(data):
    errs = []
    heads = [1, 2, 4, 8]
    for H in heads:
        model = TruncatedAttentionModel(
            TruncatedAttentionConfig(n=12, d=3, n_anchors=6, width=16, n_heads=H, head_dim=2, out_dim=4)
        )
        closed_form_model(model, data.target, data.x_train, data.y_train)
        errs.append(_sup(model, data.x_test, data.y_test))
    slope = fit_loglog_slope(heads, errs)
    assert -1.3 < slope < -0.7, (errs, slope)


def test_sup_error_falls_with_anchors_and_respects_bound(data):
    anchors = [4, 8, 16, 32]
    errs = []
    for m in anchors:
        model = TruncatedAttentionModel(
            TruncatedAttentionConfig(n=12, d=3, n_anchors=m, width=8, n_heads=1, head_dim=2, out_dim=1)
        )
        info = write_interpolation_weights(model, data.target, sharpness=2.0)
        err = _sup(model, data.x_test, data.y_test)
        errs.append(err)
        # Thm 3.4's bound Δ + (b−a)·m·exp(−βΔ²) (one head), from the library's plan
        assert err <= info["spec_bound"] + 1e-4
    assert fit_loglog_slope(anchors, errs) < -0.7


def test_other_channels_are_exactly_zero_and_parameter_count_matches_trained_model(data):
    cfg = TruncatedAttentionConfig(n=12, d=3, n_anchors=5, width=10, n_heads=3, head_dim=3, out_dim=6)
    model = TruncatedAttentionModel(cfg)
    before = model.num_parameters()
    write_interpolation_weights(model, data.target)
    with torch.no_grad():
        out = model(data.x_test)
    assert torch.count_nonzero(out[..., 1:]) == 0
    assert model.num_parameters() == before == TruncatedAttentionModel(cfg).num_parameters()


def test_token_wise_map_attends_to_the_nearest_level():
    n, d, a, b = 20, 2, -2.0, 2.0
    g = torch.Generator().manual_seed(3)
    target = TruncatedLinearTarget(torch.randn(n, d, generator=g), torch.randn(n, generator=g), a, b)
    model = TruncatedAttentionModel(
        TruncatedAttentionConfig(n=n, d=d, n_anchors=0, width=d + 4, n_heads=1, head_dim=2, out_dim=1)
    )
    info = write_interpolation_weights(model, target, sharpness=16.0)
    x = uniform_inputs(5, n, d, generator=g)
    with torch.no_grad():
        _, weights = model(x, return_weights=True)  # (B, 1, n, n)
    y = target(x)  # (B, n), clamped
    nearest = torch.round((y - a) / info["delta"]).long()  # index of the nearest level L_k = a + kΔ
    picked = weights[:, 0].argmax(-1)  # (B, n)
    assert (picked == nearest).float().mean() > 0.95
    assert math.isclose(info["delta"], (b - a) / (n - 1))  # one head, the n tokens are the anchors


def test_closed_form_refuses_too_narrow_models(data):
    model = TruncatedAttentionModel(
        TruncatedAttentionConfig(n=12, d=3, n_anchors=4, width=6, n_heads=1, head_dim=2, out_dim=1)
    )
    with pytest.raises(InputError, match="width"):
        write_interpolation_weights(model, data.target)


def test_bound_uses_the_models_own_dtype_and_holds(data):
    from uatlab.constructions.paper_b.thm3_truncated_linear import plan_in_dtype
    from uatlab.experiments.paper_b.closed_form import interpolation_plan

    model = TruncatedAttentionModel(
        TruncatedAttentionConfig(n=12, d=3, n_anchors=10, width=8, n_heads=1, head_dim=2, out_dim=1)
    )
    assert model.attn.q_proj.weight.dtype == torch.float32
    info = write_interpolation_weights(model, data.target, sharpness=4.0)
    assert info["dtype"] == "float32"
    p64 = interpolation_plan(data.target.a, data.target.b, 10, 1, 4.0, n_dead=12)
    assert info["rounding_estimate"] == pytest.approx(plan_in_dtype(p64, "float32", 12).float_term)
    assert info["rounding_estimate"] > 1e6 * p64.float_term  # float32, not float64
    assert info["bound"] < info["spec_bound"]
    assert _sup(model, data.x_test, data.y_test) <= info["bound"]
