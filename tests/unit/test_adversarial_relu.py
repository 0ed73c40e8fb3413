"""The error of a compiled ReLU network at adversarial inputs, and the stated denominator of relative errors."""

from __future__ import annotations

import numpy as np
import pytest

from uatlab.constructions.paper_b.lem3_11_relu_network import (
    compile_relu_network,
    compile_relu_network_two_layer,
    random_relu_network,
)
from uatlab.experiments.adversarial import adversarial_error, interpolation_error
from uatlab.experiments.measure import measure_compiled


@pytest.mark.parametrize("compile_fn", [compile_relu_network, compile_relu_network_two_layer])
def test_adversarial_input_beats_random_sampling_and_stays_below_the_bound(compile_fn):
    net = random_relu_network(n=6, d=3, hidden=5, seed=4)
    c = compile_fn(net, anchors=65).detail
    r = measure_compiled(c, samples=64, seed=0, adversarial=True)
    adv = adversarial_error(c)
    X = adv["input"]
    assert X.shape == (1, 6, 3) and X.min() >= 0.0 and X.max() <= 1.0  # a real input of the box
    assert np.abs(c(X) - net(X)).max() == pytest.approx(adv["adversarial_error"])
    assert r["adversarial_error"] > 1.2 * r["sampled_max_error"]  # sampling misses the worst phases
    assert r["adversarial_error"] <= c.bound
    # the reported lower bound on the sup error is at least the error at fresh random inputs of the box
    Xr = np.random.default_rng(9).uniform(0.0, 1.0, size=(500, 6, 3))
    assert r["max_error_lower_bound"] >= np.abs(c(Xr) - net(Xr)).max()
    assert "random" in r["definition"] and "adversarial" in r["definition"]


def test_relative_figures_share_one_denominator():
    net = random_relu_network(n=4, d=2, hidden=3, seed=1)
    c = compile_relu_network(net, anchors=33).detail
    few, many = measure_compiled(c, samples=8, seed=5), measure_compiled(c, samples=300, seed=5)
    assert few["output_range"] == many["output_range"] > 0
    assert few["relative_sup_error"] == pytest.approx(few["sampled_max_error"] / few["output_range"])
    # the same seed draws the same first inputs: more samples can only raise the sampled maximum
    assert many["sampled_max_error"] >= few["sampled_max_error"] > 0


def test_interpolation_error_formula_matches_the_plan_bound():
    c = compile_relu_network(random_relu_network(n=3, d=2, hidden=2, seed=0), anchors=17).detail
    y = np.linspace(-0.5, 1.5, 4001)
    e = interpolation_error(c.plan, y)
    inside = (y >= 0) & (y <= 1)
    assert np.abs(e[inside]).max() <= c.plan.bound_inside
    assert np.abs(e[inside]).max() > 0.5 * c.plan.delta / 2  # the Δ/2 term is nearly reached
