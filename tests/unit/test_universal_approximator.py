"""Paper A's FF∘SA∘FF (Proposition 1) built in closed form."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from uatlab.constructions.paper_a.prop1_universal_approximator import (
    build_universal_approximator,
    example_error_bound,
    product_with_mean,
    smooth_rank,
    softmax_weighted_average,
)
from uatlab.errors import InputError
from uatlab.experiments.measure import measure_approximation, model_size, yun_comparison
from uatlab.models import Transformer, load_model, save_model


@pytest.fixture(scope="module")
def approx_d1():
    return build_universal_approximator(product_with_mean, (0.0, 1.0), grid=6, n=3, d=1).detail


def test_one_rank1_attention_layer_and_certified_ids(approx_d1):
    ap = approx_d1
    assert isinstance(ap.model, Transformer) and len(ap.model.blocks) == 1
    assert ap.model.blocks[0].attn.check_ranks() == {"W_Q": [1], "W_K": [1], "W_V": [1], "W_O": [1]}
    assert ap.certified and ap.min_gap > 4 * ap.rounding_bound
    assert ap.grid_check_max_error < 1e-8  # exact on every grid sequence (all multisets)


def test_model_equals_quantised_target_off_the_ramps(approx_d1):
    ap = approx_d1
    x = np.random.default_rng(0).uniform(0, 1, size=(300, 3, 1))
    thetas = ap.lo + ap.delta * np.arange(1, ap.grid)
    clean = (np.abs(x[..., None] - thetas).min(-1) > ap.ramp).reshape(300, -1).all(-1)
    assert clean.sum() > 250
    assert np.abs(ap(x[clean]) - ap.quantised_target(x[clean])).max() < 1e-7


def test_error_falls_with_the_grid():
    errs = []
    for G in (3, 6, 12):
        ap = build_universal_approximator(product_with_mean, (0.0, 1.0), grid=G, n=3, d=1).detail
        meas = measure_approximation(ap, samples=500)
        assert meas["sup_error_clean"] <= example_error_bound("product-mean", ap)
        errs.append(meas["lp_error"])
    assert errs[0] > errs[1] > errs[2]
    assert errs[2] < 0.6 * errs[1]


@pytest.mark.parametrize("f", [softmax_weighted_average, smooth_rank])
def test_d2_examples_build(f):
    ap = build_universal_approximator(f, (0.0, 1.0), grid=3, n=3, d=2).detail
    assert ap.certified and ap.grid_check_max_error < 1e-6
    assert model_size(ap)["params"] == ap.model.num_parameters()


def test_saved_and_loaded_like_any_model(approx_d1, tmp_path):
    save_model(approx_d1.model, tmp_path / "m.safetensors")
    m2, _ = load_model(tmp_path / "m.safetensors")
    x = torch.rand(5, 3, 1, dtype=torch.float64)
    assert torch.allclose(m2(x), approx_d1.model(x))


def test_yun_depth_is_computed():
    y = yun_comparison(10, 3, 2)
    assert y["yun_attention_layers"] == 101 and y["ours_attention_layers"] == 1


def test_eps_chooses_a_grid():
    ap = build_universal_approximator(product_with_mean, (0.0, 1.0), eps=0.2, n=2, d=1).detail
    x = np.random.default_rng(7).random((4000, 2, 1))  # fresh samples, not the ones that chose the grid
    assert np.abs(ap.quantised_target(x) - product_with_mean(x)).max() <= 0.2  # the grid meets eps
    coarser = build_universal_approximator(product_with_mean, (0.0, 1.0), grid=ap.grid - 1, n=2, d=1).detail
    assert np.abs(coarser.quantised_target(x) - product_with_mean(x)).max() > 0.2  # and is the coarsest that does


def test_bad_input():
    with pytest.raises(InputError, match="not permutation-equivariant"):
        build_universal_approximator(lambda x: np.cumsum(x, axis=1), (0.0, 1.0), grid=3, n=3, d=1)
    with pytest.raises(InputError, match="compact domain"):
        build_universal_approximator(product_with_mean, None, grid=3, n=3, d=1)
    with pytest.raises(InputError, match="compact box"):
        build_universal_approximator(product_with_mean, (0.0, float("inf")), grid=3, n=3, d=1)
    with pytest.raises(InputError, match="eps"):
        build_universal_approximator(product_with_mean, (0.0, 1.0), eps=0.0, n=3, d=1)
