"""Paper B v2's one layer + softmax, combination step as Boltzmann pooling over DC pieces."""

import numpy as np
import pytest

from uatlab.constructions.paper_b.lem3_11_relu_network import random_relu_network
from uatlab.constructions.paper_b.v2_one_layer_softmax import boltz_rows, build_softmax_pooling, evaluate
from uatlab.errors import InputError


def test_boltz_is_a_smooth_max_within_log_k_over_beta():
    z = np.random.default_rng(0).normal(size=(50, 7))
    for beta in (1.0, 10.0):
        b = boltz_rows(z, beta)
        assert np.all(b <= z.max(-1) + 1e-12) and np.all(b >= z.max(-1) - np.log(7) / beta)


@pytest.mark.parametrize("seed", [0, 1])
def test_error_within_bound_and_falls_with_beta(seed):
    net = random_relu_network(n=3, d=2, hidden=5, seed=seed)
    x = np.random.default_rng(seed).uniform(0, 1, size=(40, 3, 2))
    errs = []
    for beta in (10.0, 1000.0):
        c = build_softmax_pooling(net, beta)
        e = np.abs(evaluate(c, x) - net(x)).max()
        assert e <= c.guarantee["sup_error_bound"]
        errs.append(e)
    assert errs[1] < errs[0] / 10


def test_bad_beta():
    with pytest.raises(InputError):
        build_softmax_pooling(random_relu_network(n=2, d=1, hidden=2, seed=0), 0.0)
