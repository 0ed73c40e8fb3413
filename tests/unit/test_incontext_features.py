"""In-context ridge on (x, ReLU(x)) by paper B's anchor interpolation + GD layers, and the trained counterpart."""

import numpy as np
import pytest
import torch

from uatlab.constructions.paper_b.appB_incontext_features import (
    build_feature_layer,
    build_incontext_features,
    feature_ridge_closed_form,
    relu_features,
)
from uatlab.constructions.paper_b.appB_incontext_ridge import augment
from uatlab.errors import InputError
from uatlab.experiments.incontext import (
    TaskSpec,
    closed_form,
    construction_errors,
    gd_step_size,
    predict_trained,
    sample_tasks,
    train_attention_only,
)
from uatlab.models.attention_only import AttentionOnlyLayer


def test_feature_layer_within_its_bound_and_keeps_x_and_y():
    d, n = 3, 9
    layer, plan = build_feature_layer(d, n, 0.0, 1.0, anchors=17, heads=2)
    rng = np.random.default_rng(0)
    tok = np.zeros((32, n, 2 * d + 1))
    tok[..., :d] = rng.uniform(-1.5, 1.5, (32, n, d))  # also outside [a, b]: the clamp region
    tok[..., 2 * d] = rng.standard_normal((32, n))
    with torch.no_grad():
        out = layer(torch.as_tensor(tok)).numpy()
    assert np.array_equal(out[..., :d], tok[..., :d]) and np.array_equal(out[..., 2 * d], tok[..., 2 * d])
    err = np.abs(out[..., d : 2 * d] - np.clip(tok[..., :d], 0.0, 1.0)).max()
    assert 0 < err <= plan.bound
    assert plan.bound < 0.05  # Δ/2 = 1/(2·2·16) plus tails


def test_closed_form_is_least_squares_on_augmented_features():
    spec = TaskSpec("relu-features", d=2, context=10, noise=1.0)
    x, y, q, _ = sample_tasks(spec, 6, np.random.default_rng(1))
    xa, ya = augment(relu_features(x), y, spec.lam)
    A = np.einsum("bnd,bne->bde", xa, xa)
    w = np.linalg.solve(A, np.einsum("bnd,bn->bd", xa, ya)[..., None])[..., 0]
    assert np.allclose(np.einsum("bd,bd->b", w, relu_features(q)), feature_ridge_closed_form(x, y, q, spec.lam))
    assert np.allclose(closed_form(spec, x, y, q), feature_ridge_closed_form(x, y, q, spec.lam))


def test_network_approaches_the_nonlinear_closed_form():
    spec = TaskSpec("relu-features", d=2, context=12, noise=1.0)
    x, y, q, _ = sample_tasks(spec, 16, np.random.default_rng(2))
    few, many = (construction_errors(spec, x, y, q, k, anchors=33, heads=4) for k in (5, 80))
    assert many["rel_sup"] < few["rel_sup"] / 5
    assert many["rel_sup"] < 0.02
    assert many["feature_sup_error"] <= many["feature_bound"]
    # the remaining error is the interpolation error, not GD: finer anchors shrink it
    fine = construction_errors(spec, x, y, q, 80, anchors=65, heads=8)
    assert fine["rel_sup"] < many["rel_sup"] / 2


def test_construction_predict_uses_the_network():
    spec = TaskSpec("relu-features", d=2, context=8, noise=1.0)
    x, y, q, _ = sample_tasks(spec, 4, np.random.default_rng(3))
    c = build_incontext_features(2, 8, spec.lam, steps=3, lr=gd_step_size(spec, x))
    base = c.detail.predict(x, y, q)
    tok = np.zeros((4, 9, 3))
    tok[:, :8, :2], tok[:, :8, 2], tok[:, 8, :2] = x, y, q
    with torch.no_grad():
        assert np.array_equal(c.model(torch.as_tensor(tok)).numpy(), base)  # the Construction's model is the network
    with torch.no_grad():
        c.detail.feature_layer.W_O.mul_(0.5)  # halve every feature: the prediction must move
    assert np.abs(c.detail.predict(x, y, q) - base).max() > 1e-3


def test_trained_model_is_attention_only_deterministic_and_learns():
    spec = TaskSpec("ridge", d=2, context=8, noise=1.0)
    x, y, q, yq = sample_tasks(spec, 128, np.random.default_rng(5))
    m1, info = train_attention_only(spec, steps=60, batch=16, lr=5e-3, layers=2, width=16, heads=2, seed=0)
    m2, _ = train_attention_only(spec, steps=60, batch=16, lr=5e-3, layers=2, width=16, heads=2, seed=0)
    assert all(isinstance(layer, AttentionOnlyLayer) for layer in m1.layers)
    p1, p2 = predict_trained(m1, x, y, q), predict_trained(m2, x, y, q)
    assert np.array_equal(p1, p2)
    untrained, _ = train_attention_only(spec, steps=1, batch=32, lr=1e-9, layers=2, width=16, heads=2, seed=0)
    assert np.mean((p1 - yq) ** 2) < np.mean((predict_trained(untrained, x, y, q) - yq) ** 2)
    assert info["parameters"] == m1.num_parameters()


def test_bad_input():
    with pytest.raises(InputError):
        TaskSpec("lasso")
    with pytest.raises(InputError):
        TaskSpec("ridge", noise=0.0)
    with pytest.raises(InputError):
        build_incontext_features(2, 8, 0.0, steps=1, lr=0.1)
    c = build_incontext_features(2, 8, 0.1, steps=1, lr=0.1)
    with pytest.raises(InputError):
        c.detail.predict(np.zeros((1, 7, 2)), np.zeros((1, 7)), np.zeros((1, 2)))
