"""One standard attention layer whose keys read the data: universal for n = 2, not for n ≥ 3 and d ≥ 2."""

from fractions import Fraction

import numpy as np
import pytest
import torch

from uatlab.constructions.paper_b.lem3_11_relu_network import ReluNetwork, hidden_unit_ranges, random_relu_network
from uatlab.constructions.paper_b.lem3_11_standard_two_tokens import (
    compile_relu_network_one_standard_layer_two_tokens,
)
from uatlab.errors import InputError
from uatlab.experiments.measure import measure_compiled
from uatlab.experiments.paper_b.one_layer_data_keys import (
    SliceWitness,
    _density,
    _density_exact,
    cross_hessian_asymmetry,
    data_key_error_lower_bound,
    slice_functional,
    slice_functional_exact,
    slice_functional_quadrature,
    trained_heads_sweep,
    witness_faces,
)
from uatlab.experiments.paper_b.one_layer_standard import (
    TrainableStandardAttention,
    output_range_upper_bound,
    positional_key_error_lower_bound,
    positional_key_layer,
)


def _run(model):
    return lambda x: model(torch.as_tensor(np.asarray(x, np.float64))).detach().numpy()


def test_one_layer_with_data_keys_has_symmetric_cross_hessian_blocks_and_two_layers_do_not():
    torch.set_num_threads(1)
    layer = positional_key_layer(6, 3, heads=8, seed=3, keys_read_data=True)
    X = np.random.default_rng(0).uniform(0, 1, (6, 3))
    asym, scale = cross_hessian_asymmetry(layer, X, 2, 1)
    assert scale > 1e-2 and asym <= 1e-11 * scale
    asym2, scale2 = cross_hessian_asymmetry(lambda x: layer(layer(x)), X, 2, 1)
    assert asym2 > 1e-3 * scale2
    # token-wise nonlinearity after the layer (not a standard readout) breaks it too
    asym3, scale3 = cross_hessian_asymmetry(lambda x: torch.tanh(layer(x)), X, 2, 1)
    assert asym3 > 1e-3 * scale3
    # the trainable form (4-dimensional values, readout bias): one layer symmetric, two layers not
    one = TrainableStandardAttention(6, 3, heads=8, keys="data", seed=1, dtype=torch.float64)
    a1, s1 = cross_hessian_asymmetry(one, X, 0, 2)
    assert s1 > 1e-3 and a1 <= 1e-11 * s1
    two = TrainableStandardAttention(6, 3, layers=2, heads=8, keys="data", seed=1, dtype=torch.float64)
    a2, s2 = cross_hessian_asymmetry(two, X, 0, 2)
    assert a2 > 1e-2 * s2


def test_exact_density_matches_the_float_one_and_integrates_to_one():
    coef = [Fraction(3, 2), Fraction(-1, 3), Fraction(5, 4), Fraction(1, 2)]
    ys = np.linspace(-1.0, 3.5, 901)
    exact = np.array([float(_density_exact(coef, Fraction(float(y)))) for y in ys])
    flt = _density(np.array([float(c) for c in coef])[None, :].repeat(len(ys), 0), ys)
    assert np.abs(exact - flt).max() < 1e-12
    assert abs(float(np.trapezoid(exact, ys)) - 1.0) < 1e-4  # support [−1/3, 3.25] inside the grid


def _witness(n: int, d: int, i: int, seed: int) -> SliceWitness:
    rng = np.random.default_rng(seed)
    al, aq = np.zeros(n), np.zeros(n)
    for k in range(n):
        if k != i:
            (al if rng.random() < 0.5 else aq)[k] = rng.choice([-1.0, 1.0])
    return SliceWitness(i, 0, 0, 1, al, aq, rng.uniform(0, 1, (n, d)))


def test_box_functional_vanishes_on_a_data_key_layer_and_is_exact_on_the_net():
    torch.set_num_threads(1)
    net = random_relu_network(5, 2, 4, seed=4)
    w = _witness(5, 2, 1, seed=1)
    points = w.points(np.random.default_rng(0).uniform(0, 1, (200, 4)))
    assert points.min() >= 0.0 and points.max() <= 1.0  # the slice stays in the box
    exact = float(slice_functional_exact(net, w))
    assert abs(exact) > 1e-2
    assert abs(slice_functional(net, w) - exact) < 1e-9 * max(1.0, abs(exact))
    assert abs(slice_functional_quadrature(net, w, nodes=64) - exact) < 1e-3 * abs(exact)
    layer = _run(positional_key_layer(5, 2, heads=8, seed=5, keys_read_data=True))
    t_layer = slice_functional_quadrature(layer, w, nodes=32)
    w.c = 1  # any output channel
    t_layer_c1 = slice_functional_quadrature(layer, w, nodes=32)
    stacked = positional_key_layer(5, 2, heads=8, seed=5, keys_read_data=True)
    t_two = slice_functional_quadrature(_run(lambda x: stacked(stacked(x))), w, nodes=32)
    assert abs(t_two) > 1e-2
    assert abs(t_layer) < 1e-6 * abs(t_two) and abs(t_layer_c1) < 1e-6 * abs(t_two)


def test_functional_is_zero_for_a_target_the_lemma_allows():
    # every unit reads the tokens through one direction γ per unit: W1_j = α_j ⊗ γ_j, cross blocks symmetric
    rng = np.random.default_rng(0)
    n, d, J = 5, 3, 4
    dyadic = lambda size: rng.integers(-8, 9, size) / 8.0  # noqa: E731  (products exact in float64)
    W1 = np.stack([np.outer(dyadic(n), dyadic(d)).reshape(-1) for _ in range(J)])
    net = ReluNetwork(W1, rng.standard_normal(J), rng.standard_normal((n * d, J)), rng.standard_normal(n * d), n, d)
    assert slice_functional_exact(net, _witness(n, d, 0, seed=2)) == 0
    kinked = random_relu_network(n, d, J, seed=0)
    assert data_key_error_lower_bound(kinked, starts=2, steps=200)["lower_bound"] > 0


def test_benchmark_net_is_out_of_reach_of_any_one_standard_layer():
    net = random_relu_network(20, 5, 10, seed=0)
    r = data_key_error_lower_bound(net, starts=4, steps=1500, seed=0)
    assert Fraction(r["lower_bound"]) <= abs(slice_functional_exact(net, r["witness"])) / 8
    assert r["lower_bound"] > 0.01 * output_range_upper_bound(net)
    # measured on this net: the positional-key bound (a smaller class) is larger
    assert positional_key_error_lower_bound(net, pairs=100, seed=0)["lower_bound"] > r["lower_bound"]
    with pytest.raises(ValueError, match="n ≥ 3"):
        data_key_error_lower_bound(random_relu_network(2, 5, 3, seed=0))


def test_two_token_layer_is_within_its_bound_and_the_bound_shrinks():
    torch.set_num_threads(1)
    net = random_relu_network(2, 3, 4, seed=1)
    errors, bounds = [], []
    for m in (10, 40):
        c = compile_relu_network_one_standard_layer_two_tokens(net, sigmoids=m).detail
        active = int((hidden_unit_ranges(net, 0.0, 1.0)[1] > 0).sum())
        assert not c.nonstandard and c.heads == 2 * active * m and 0 < active
        meas = measure_compiled(c, samples=300, seed=2)
        errors.append(meas["sup_error"])
        bounds.append(c.bound)
        assert meas["sup_error"] <= c.bound
    assert bounds[1] < bounds[0] / 3 and errors[1] < errors[0] / 2
    c = compile_relu_network_one_standard_layer_two_tokens(net, eps=0.05).detail
    assert c.bound <= 0.05


def test_two_token_layer_beats_the_positional_key_limit():
    # f(X)_0 = ReLU(x_1 − 1/2), n = 2, d = 1: every positional-key layer is ≥ 1/8 off; keys reading the data are not
    net = ReluNetwork(np.array([[0.0, 1.0]]), np.array([-0.5]), np.array([[1.0], [0.0]]), np.zeros(2), 2, 1)
    assert positional_key_error_lower_bound(net, pairs=8)["lower_bound"] > 0.124
    c = compile_relu_network_one_standard_layer_two_tokens(net, sigmoids=50).detail
    x = np.random.default_rng(0).uniform(0, 1, (400, 2, 1))
    err = np.abs(c(x) - net(x)).max()
    assert err <= c.bound < 0.03


def test_two_token_compiler_rejects_bad_requests():
    with pytest.raises(InputError, match="n = 2"):
        compile_relu_network_one_standard_layer_two_tokens(random_relu_network(3, 2, 2, seed=0), sigmoids=4)
    with pytest.raises(InputError, match="sigmoids"):
        compile_relu_network_one_standard_layer_two_tokens(random_relu_network(2, 2, 2, seed=0), sigmoids=0)
    with pytest.raises(InputError, match="exactly one"):
        compile_relu_network_one_standard_layer_two_tokens(random_relu_network(2, 2, 2, seed=0))


def test_trained_heads_sweep_reads_the_witness_faces_and_resumes():
    torch.set_num_threads(1)
    net = random_relu_network(4, 2, 3, seed=1)
    w = data_key_error_lower_bound(net, starts=2, steps=100, seed=0)["witness"]
    faces = witness_faces(w, grid=5)
    assert faces.shape == (8 * 25, 4, 2) and faces.min() >= 0.0 and faces.max() <= 1.0
    seen = []
    rows = trained_heads_sweep(net, [2], steps=5, witness=w, on_row=seen.append)
    assert len(seen) == 1 and rows[0]["max_error_on_witness_faces"] > 0 and rows[0]["params"] > 0
    again = trained_heads_sweep(net, [2], steps=5, witness=w, done={2: rows[0]}, on_row=seen.append)
    assert again == rows and len(seen) == 1  # resumed, nothing retrained
