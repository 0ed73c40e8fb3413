"""Yun et al. (2020)'s deep hardmax memorizer: exact on the grid, layer counts as in their lemmas."""

import dataclasses
from fractions import Fraction

import pytest

from uatlab.constructions.baselines.yun2020 import (
    BumpLayer,
    build_yun_memorizer,
    random_set_labels,
    verify_exact,
    yun_layer_formula,
)
from uatlab.errors import InputError


@pytest.mark.parametrize(("d", "n", "K"), [(1, 3, 4), (2, 2, 2), (1, 4, 5)])
def test_exact_on_every_ordering_and_layer_counts(d, n, K):
    delta = Fraction(1, K)
    labels = random_set_labels(d, n, delta, classes=3, seed=1)
    con = build_yun_memorizer(labels, d, n, delta)
    net = con.model
    res = verify_exact(net, labels)
    assert res["exact"] and res["tokens_checked"] > 0
    f = yun_layer_formula(d, n, delta)
    assert net.count("attention") == f["attention"] == K**d + 1
    assert net.count("feed-forward") == f["quantise"] + f["value_mapping"]
    assert len(set(net.ids.values())) == len(labels)  # the contextual mapping is injective
    assert con.facts["layers"] == len(net.layers) and con.facts["parameters"] == net.params
    assert con.guarantee["min_id_gap"] > 0


def test_a_wrong_value_layer_is_detected():
    delta = Fraction(1, 3)
    labels = random_set_labels(1, 2, delta, classes=3, seed=0)
    net = build_yun_memorizer(labels, 1, 2, delta).model
    i = next(i for i, layer in enumerate(net.layers) if isinstance(layer, BumpLayer))
    net.layers[i] = dataclasses.replace(net.layers[i], y=net.layers[i].y + 1)
    assert verify_exact(net, labels)["wrong"] > 0


def test_bad_requests():
    with pytest.raises(InputError, match="1/K"):
        build_yun_memorizer({}, 1, 3, Fraction(2, 5))
    with pytest.raises(InputError, match="no labelled contexts"):
        build_yun_memorizer({}, 1, 3, Fraction(1, 4))
    with pytest.raises(InputError, match="distinct grid tokens"):
        build_yun_memorizer({(frozenset({(Fraction(0),)}), (Fraction(0),)): 1}, 1, 3, Fraction(1, 4))
