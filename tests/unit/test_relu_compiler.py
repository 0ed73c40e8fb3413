"""Compiling one-hidden-layer ReLU networks into softmax attention (paper B)."""

from __future__ import annotations

import numpy as np
import pytest
from torch import nn

from uatlab.constructions.paper_b.lem3_11_relu_network import ReluNetwork, compile_relu_network, random_relu_network
from uatlab.errors import InputError
from uatlab.experiments.measure import measure_compiled


def test_small_network_within_bound_and_converging():
    net = random_relu_network(n=4, d=2, hidden=3, seed=3)
    errs = []
    for m in (17, 65):
        c = compile_relu_network(net, anchors=m).detail
        r = measure_compiled(c, samples=64)
        assert r["sup_error"] <= c.bound
        errs.append(r["sup_error"])
    assert errs[1] < 0.5 * errs[0]
    assert not c.model.is_tokenwise and any("across positions" in s for s in c.nonstandard)


def test_paper_b_shape_sampled_error_below_one_percent():
    net = random_relu_network(n=20, d=5, hidden=10, seed=0)
    c = compile_relu_network(net, anchors=257).detail
    r = measure_compiled(c, samples=8)
    assert r["relative_sup_error"] < 0.01
    assert c.params > 0 and c.heads <= 2 * 10 * 5


def test_eps_mode_proves_the_target():
    net = random_relu_network(n=3, d=2, hidden=2, seed=1)
    c = compile_relu_network(net, eps=0.5).detail
    assert c.bound <= 0.5
    assert measure_compiled(c, samples=32)["sup_error"] <= 0.5


def test_torch_module_and_wrong_input_size():
    seq = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 6)).double()
    c = compile_relu_network(seq, n=3, d=2, anchors=33).detail
    x = np.random.default_rng(0).uniform(0, 1, size=(5, 3, 2))
    assert np.abs(c(x) - c.net(x)).max() <= c.bound
    with pytest.raises(InputError, match="input size"):
        compile_relu_network(seq, n=4, d=2, anchors=33)
    with pytest.raises(InputError):
        ReluNetwork(np.zeros((2, 5)), np.zeros(2), np.zeros((6, 2)), np.zeros(6), 3, 2)
    with pytest.raises(InputError):
        compile_relu_network(random_relu_network(3, 2, 2), eps=-1.0)
