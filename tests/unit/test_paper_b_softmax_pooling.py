"""Paper B v2's one layer + softmax, combination step as Boltzmann pooling over DC pieces."""

from fractions import Fraction

import numpy as np
import pytest

from uatlab.constructions.paper_b.lem3_11_relu_network import ReluNetwork, random_relu_network
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


def _exact_network(net, x: np.ndarray) -> np.ndarray:
    """f(X) in exact rational arithmetic on the float64 weights and inputs, rounded once to float64."""
    W1, W2 = [[Fraction(v) for v in r] for r in net.W1], [[Fraction(v) for v in r] for r in net.W2]
    b1, b2 = [Fraction(v) for v in net.b1], [Fraction(v) for v in net.b2]
    out = []
    for row in x.reshape(len(x), -1):
        xf = [Fraction(v) for v in row]
        h = [max(sum(w * xi for w, xi in zip(r, xf, strict=True)) + b, 0) for r, b in zip(W1, b1, strict=True)]
        out.append([float(sum(w * hj for w, hj in zip(r, h, strict=True)) + b) for r, b in zip(W2, b2, strict=True)])
    return np.array(out).reshape(x.shape)


def test_guarantee_holds_in_float64_at_every_beta():
    rng = np.random.default_rng(0)
    net = ReluNetwork(rng.normal(size=(4, 6)), rng.normal(size=4), rng.normal(size=(6, 4)), rng.normal(size=6), 3, 2)
    x = rng.uniform(size=(300, 3, 2))
    x[:20] = rng.integers(0, 2, size=(20, 3, 2))  # corners of the box
    y = _exact_network(net, x)
    rows = []
    for beta in (1e2, 1e15, 1e16, 1e18, 1e300):
        c = build_softmax_pooling(net, beta)
        rows.append((beta, float(np.abs(evaluate(c, x) - y).max()), c.guarantee))
    assert all(err <= g["sup_error_bound"] for _b, err, g in rows), rows
    for _beta, _err, g in rows:
        assert g["sup_error_bound"] >= g["exact_arithmetic_bound"] + g["rounding_bound"] * (1 - 1e-12)
        # the rounding part is of the size of float64 rounding on unit-size outputs, not a vacuous number
        assert 0 < g["rounding_bound"] < 1e-12
    _beta, err, g = rows[-1]
    assert err > 10 * g["exact_arithmetic_bound"]  # at β = 1e300 only the rounding part covers the error


def test_rounding_part_grows_with_the_domain():
    net = random_relu_network(n=2, d=1, hidden=2, seed=0)
    small = build_softmax_pooling(net, 1e300).guarantee["rounding_bound"]
    large = build_softmax_pooling(net, 1e300, domain=(-100.0, 100.0)).guarantee["rounding_bound"]
    assert large > 10 * small
    with pytest.raises(InputError, match="domain"):
        build_softmax_pooling(net, 1.0, domain=(1.0, 0.0))
