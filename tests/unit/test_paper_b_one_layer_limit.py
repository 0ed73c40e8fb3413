"""One standard attention layer with data-free scores is affine: certified lower bound on its sup error."""

import numpy as np
import pytest
import torch

from uatlab.constructions.paper_b.lem3_11_relu_network import ReluNetwork, random_relu_network
from uatlab.experiments.paper_b.one_layer_standard import (
    TrainableStandardAttention,
    affine_error_lower_bound,
    affinity_defect,
    error_at_witness,
    one_layer_limits,
    output_range_upper_bound,
    positional_key_error_lower_bound,
    positional_key_layer,
    train_standard_attention,
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


def _two_token_net(reads: int) -> ReluNetwork:
    # n = 2, d = 1: f(X)_0 = ReLU(x_reads − 1/2), f(X)_1 = 0
    return ReluNetwork(np.eye(2)[[reads]], np.array([-0.5]), np.array([[1.0], [0.0]]), np.zeros(2), 2, 1)


def test_positional_key_bound_is_exact_on_a_cross_token_kink_and_zero_on_a_tokenwise_one():
    # output 0 = ReLU(x_1 − 1/2): with x_0 fixed a positional-key layer is affine in x_1, best error 1/8
    assert abs(positional_key_error_lower_bound(_two_token_net(1), pairs=8)["lower_bound"] - 0.125) < 1e-12
    # output 0 = ReLU(x_0 − 1/2) reads only its own token: no lower bound (the query may carry x_0)
    assert positional_key_error_lower_bound(_two_token_net(0), pairs=8)["lower_bound"] < 1e-12


def test_positional_key_layer_is_affine_in_the_other_tokens_only():
    torch.set_num_threads(1)
    layer = positional_key_layer(6, 3, heads=8, seed=2)
    assert affinity_defect(layer, 6, 3, pairs=8) < 1e-12
    assert affinity_defect(layer, 6, 3, pairs=8, fix_token=False) > 1e-3  # nonlinear in its own token
    keys_data = positional_key_layer(6, 3, heads=8, seed=2, keys_read_data=True)
    assert affinity_defect(keys_data, 6, 3, pairs=8) > 1e-3  # the lemma needs the keys to ignore the data


def test_benchmark_net_positional_key_bound_exceeds_one_percent():
    net = random_relu_network(20, 5, 10, seed=1)
    low = positional_key_error_lower_bound(net, pairs=100, seed=1)
    assert low["lower_bound"] / output_range_upper_bound(net) > 0.01


def test_positional_key_models_never_beat_the_witness_bound():
    torch.set_num_threads(1)
    net = random_relu_network(4, 2, 3, seed=3)
    witness = positional_key_error_lower_bound(net, pairs=60, seed=3)
    assert witness["lower_bound"] > 0 and np.array_equal(
        witness["A"][witness["position"]], witness["B"][witness["position"]]
    )
    for seed in range(3):
        layer = positional_key_layer(4, 2, heads=4, seed=seed)
        with torch.no_grad():
            run = lambda x, m=layer: m(torch.as_tensor(x)).numpy()  # noqa: E731
            assert error_at_witness(run, net, witness) >= witness["lower_bound"]
        trainable = TrainableStandardAttention(4, 2, heads=4, keys="positions", seed=seed, dtype=torch.float64)
        with torch.no_grad():
            run = lambda x, m=trainable: m(torch.as_tensor(x)).numpy()  # noqa: E731
            assert error_at_witness(run, net, witness) >= witness["lower_bound"]


def test_one_standard_layer_keys_option_decides_affinity():
    torch.set_num_threads(1)
    pos = TrainableStandardAttention(5, 3, heads=4, keys="positions", seed=1, dtype=torch.float64)
    data = TrainableStandardAttention(5, 3, heads=4, keys="data", seed=1, dtype=torch.float64)
    assert affinity_defect(pos, 5, 3, pairs=8) < 1e-12
    assert affinity_defect(data, 5, 3, pairs=8) > 1e-4


def test_training_one_standard_layer_lowers_the_error():
    torch.set_num_threads(1)
    net = random_relu_network(4, 2, 3, seed=0)
    before = train_standard_attention(net, heads=2, steps=1, lr=1e-6, test=200)
    after = train_standard_attention(net, heads=2, steps=150, test=200)
    assert after["rms_error"] < 0.5 * before["rms_error"]
    # the relative error falls with the absolute one, against the same output range measured once per input set
    assert 0 < after["relative_sup_error"] < before["relative_sup_error"]
    assert after["output_range"] == pytest.approx(before["output_range"])
