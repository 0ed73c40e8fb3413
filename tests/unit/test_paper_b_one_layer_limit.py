"""One standard attention layer with data-free scores is affine: certified lower bound on its sup error."""

import numpy as np

from uatlab.constructions.paper_b.lem3_11_relu_network import ReluNetwork, random_relu_network
from uatlab.experiments.paper_b.one_layer_standard import (
    affine_error_lower_bound,
    one_layer_limits,
    output_range_upper_bound,
)


def test_single_kink_lower_bound_is_the_minimax_error():
    # f(x) = ReLU(x − 1/2) on [0, 1]: the best affine approximation x/2 − 1/8 is off by exactly 1/8
    net = ReluNetwork(np.array([[1.0]]), np.array([-0.5]), np.array([[1.0]]), np.array([0.0]), 1, 1)
    low = affine_error_lower_bound(net, pairs=8, seed=0)
    assert abs(low["lower_bound"] - 0.125) < 1e-12
    assert abs(output_range_upper_bound(net) - 0.5) < 1e-9


def test_affine_target_has_no_defect_and_range_bound_covers_samples():
    rng = np.random.default_rng(0)
    W1 = np.abs(rng.standard_normal((3, 6)))  # u_j ≥ b1_j > 0 on the box: f is affine there
    net = ReluNetwork(W1, np.ones(3), rng.standard_normal((6, 3)), rng.standard_normal(6), 3, 2)
    assert affine_error_lower_bound(net, pairs=50)["lower_bound"] < 1e-12
    kinked = random_relu_network(3, 2, 4, seed=1)
    x = rng.integers(0, 2, (500, 3, 2)).astype(float)  # corners reach the extremes of the box
    y = kinked(x)
    assert output_range_upper_bound(kinked) >= y.max() - y.min() - 1e-9


def test_benchmark_net_lower_bound_exceeds_one_percent():
    r = one_layer_limits(random_relu_network(20, 5, 10, seed=0), pairs=100, seed=0)
    assert r["min_tokens_per_hidden_unit"] == 20
    assert r["rel_sup_lower_bound"] > 0.01
