"""Paper B's two-layer universality with standard multi-head attention layers only."""

import numpy as np
import pytest

from uatlab.constructions.paper_b.lem3_11_relu_network import random_relu_network
from uatlab.constructions.paper_b.lem3_11_standard_attention import compile_relu_network_standard
from uatlab.errors import InputError
from uatlab.experiments.measure import measure_compiled


@pytest.mark.parametrize("seed", [0, 3])
def test_error_within_bound_and_falls_with_anchors(seed):
    net = random_relu_network(n=4, d=2, hidden=3, seed=seed)
    errs = []
    for m in (7, 31):
        c = compile_relu_network_standard(net, anchors=m).detail
        r = measure_compiled(c, samples=64, seed=seed)
        assert r["sup_error"] <= c.bound
        assert c.nonstandard == []
        errs.append(r["sup_error"])
    assert errs[1] < errs[0] / 2


def test_eps_mode_meets_eps_and_bad_requests():
    net = random_relu_network(n=3, d=2, hidden=2, seed=1)
    c = compile_relu_network_standard(net, eps=0.05).detail
    assert c.bound <= 0.05 and measure_compiled(c, samples=32)["sup_error"] <= 0.05
    with pytest.raises(InputError):
        compile_relu_network_standard(net, anchors=9, eps=0.1)
    with pytest.raises(InputError):
        compile_relu_network_standard(net, domain=(1.0, 0.0), anchors=9)


def test_output_depends_on_other_positions():
    """A cross-position target is computed through attention only (the input of token 0 moves token 2's output)."""
    net = random_relu_network(n=3, d=1, hidden=4, seed=2)
    c = compile_relu_network_standard(net, anchors=41).detail
    x = np.full((2, 3, 1), 0.5)
    x[1, 0, 0] = 0.9
    y, g = net(x), c(x)
    assert np.abs(g - y).max() <= c.bound
    assert abs(y[1, 2, 0] - y[0, 2, 0]) > 3 * c.bound  # the target moves at token 2 ...
    assert abs(g[1, 2, 0] - g[0, 2, 0]) > c.bound  # ... and so does the compiled model
