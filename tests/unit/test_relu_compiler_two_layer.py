"""Compiling one-hidden-layer ReLU networks into TWO softmax attention layers (paper B, Sec. 3.3)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from uatlab.constructions.paper_b.lem3_11_relu_network import (
    ReluNetwork,
    compile_relu_network_two_layer,
    random_relu_network,
)
from uatlab.errors import InputError
from uatlab.experiments.measure import measure_compiled
from uatlab.models.attention_only import AttentionOnlyLayer


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_paper_b_shape_below_one_percent_and_bound(seed):
    net = random_relu_network(n=20, d=5, hidden=10, seed=seed)
    c = compile_relu_network_two_layer(net, anchors=257).detail
    r = measure_compiled(c, samples=100, seed=seed)
    assert r["relative_sup_error"] < 0.01
    assert r["sup_error"] <= c.bound
    assert c.params > 0


def test_really_two_attention_layers_and_nonstandard_maps_named():
    net = random_relu_network(n=20, d=5, hidden=10, seed=5)
    c = compile_relu_network_two_layer(net, anchors=65).detail
    layers = list(c.model.layers)
    assert len(layers) == 2 and all(isinstance(layer, AttentionOnlyLayer) for layer in layers)
    # layer 1 is sequence-wise (non-standard), layer 2 is a standard token-wise attention layer
    assert not layers[0].is_tokenwise and layers[1].is_tokenwise
    assert c.heads_layer1 == 1 and c.heads_layer2 <= 2 * 5
    assert any("across positions" in s for s in c.nonstandard)
    assert any("anchor tokens" in s for s in c.nonstandard)
    # the output really goes through layer 2: zeroing its output maps leaves only the bias b2
    x = torch.as_tensor(np.random.default_rng(0).uniform(0, 1, size=(4, 20, 5)))
    with torch.no_grad():
        full = c.model(x)
        layers[1].W_O.zero_()
        assert torch.allclose(c.model(x), c.model.output_bias.expand_as(full))
        assert not torch.allclose(full, c.model(x))


def test_layer_two_is_exact_on_exact_hidden_units():
    """Fed the exact normalised hidden units r_j, layer 2 reproduces f up to the floor/sink/rounding terms."""
    net = random_relu_network(n=4, d=2, hidden=7, seed=3)  # 7 units > n − 1: several groups
    c = compile_relu_network_two_layer(net, anchors=33).detail
    G = c.heads_layer1
    assert G == 3
    x = np.random.default_rng(1).uniform(0, 1, size=(50, 4, 2))
    u = x.reshape(50, -1) @ net.W1.T + net.b1  # (B, J)
    U = np.maximum(net.W1, 0).sum(1) + net.b1  # upper range on [0, 1]^{nd}
    r = np.where(U > 0, np.clip(u / np.where(U > 0, U, 1.0), 0.0, 1.0), 0.0)  # (B, J)
    z = np.zeros((50, 4, G))  # unit j at group j // 3, token j % 3; token 3 is the sink (0)
    for j in range(7):
        z[:, j % 3, j // 3] = r[:, j]
    with torch.no_grad():
        out = c.model.layers[1](torch.as_tensor(z)) + c.model.output_bias
    err = np.abs(out.numpy() - net(x)).max()
    assert err <= c.details["floor_sink_float"] + 1e-9
    # and the full model is within its bound, with the error falling as the anchors grow
    errs = [
        measure_compiled(compile_relu_network_two_layer(net, anchors=m).detail, samples=64)["sup_error"]
        for m in (9, 65)
    ]
    assert errs[1] < 0.25 * errs[0]


def test_eps_mode_proves_the_target():
    net = random_relu_network(n=3, d=2, hidden=2, seed=1)
    c = compile_relu_network_two_layer(net, eps=0.5).detail
    assert c.bound <= 0.5
    assert measure_compiled(c, samples=32)["sup_error"] <= 0.5


def test_wrong_input_size_and_bad_arguments():
    seq = nn.Sequential(nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 6)).double()
    c = compile_relu_network_two_layer(seq, n=3, d=2, anchors=33).detail
    x = np.random.default_rng(0).uniform(0, 1, size=(5, 3, 2))
    assert np.abs(c(x) - c.net(x)).max() <= c.bound
    with pytest.raises(InputError, match="input size 6 does not match"):
        compile_relu_network_two_layer(seq, n=4, d=2, anchors=33)
    with pytest.raises(InputError, match="shapes do not fit"):
        compile_relu_network_two_layer(
            ReluNetwork(np.zeros((2, 5)), np.zeros(2), np.zeros((6, 2)), np.zeros(6), 3, 2), anchors=9
        )
    with pytest.raises(InputError, match="expected input of shape"):
        c(np.zeros((2, 3, 4)))
    with pytest.raises(InputError, match="eps"):
        compile_relu_network_two_layer(random_relu_network(3, 2, 2), eps=-1.0)
    with pytest.raises(InputError, match="compact"):
        compile_relu_network_two_layer(random_relu_network(3, 2, 2), anchors=9, domain=(1.0, 0.0))
