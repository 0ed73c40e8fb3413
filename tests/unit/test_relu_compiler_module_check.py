"""Only Linear → ReLU → Linear torch modules compile (paper B, Lemma 3.11's target); shapes must agree."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from uatlab.constructions.paper_b.lem3_11_relu_network import (
    ReluNetwork,
    compile_relu_network,
    compile_relu_network_two_layer,
    random_relu_network,
)
from uatlab.constructions.paper_b.lem3_11_standard_attention import compile_relu_network_standard
from uatlab.errors import InputError

COMPILERS = [
    lambda m, **k: compile_relu_network(m, anchors=9, **k),
    lambda m, **k: compile_relu_network_two_layer(m, anchors=9, **k),
    lambda m, **k: compile_relu_network_standard(m, anchors=9, **k),
]


def _seq(*mid: nn.Module, tail: tuple[nn.Module, ...] = ()) -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 4), *mid, nn.Linear(4, 6), *tail).double()


class _Custom(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(6, 4), nn.Linear(4, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.tanh(self.a(x)))


@pytest.mark.parametrize(
    ("module", "message"),
    [
        (_seq(nn.Tanh()), r"module 1 \(Tanh\)"),
        (_seq(nn.Sigmoid()), r"module 1 \(Sigmoid\)"),
        (_seq(nn.LeakyReLU(0.5)), r"module 1 \(LeakyReLU\)"),
        (_seq(), r"module 1 \(Linear\) is where a ReLU must be"),
        (_seq(nn.ReLU(), tail=(nn.ReLU(),)), r"module 3 \(ReLU\) follows the output Linear"),
        (_seq(nn.ReLU(), nn.Dropout(0.5)), r"module 2 \(Dropout\) is dropout in training mode"),
        (nn.Sequential(nn.Linear(6, 4), nn.Sequential(nn.ReLU(), nn.Tanh()), nn.Linear(4, 6)), r"module 1\.1 \(Tanh\)"),
        (nn.Sequential(nn.Linear(6, 4), nn.ReLU()), r"missing the Linear"),
        (_Custom(), r"got a _Custom"),
    ],
)
@pytest.mark.parametrize("compiler", range(len(COMPILERS)))
def test_module_that_is_not_linear_relu_linear_is_refused(module, message, compiler):
    with pytest.raises(InputError, match=message):
        COMPILERS[compiler](module, n=3, d=2)


def test_identity_layers_are_skipped_and_the_compiled_model_is_the_modules_function():
    seq = _seq(nn.Identity(), nn.ReLU(), nn.Dropout(0.5), tail=(nn.Identity(),)).eval()
    nested = nn.Sequential(nn.Sequential(seq[0], nn.ReLU()), nn.Dropout(0.0), seq[4]).train()
    x = np.random.default_rng(0).uniform(0, 1, size=(64, 3, 2))
    want = seq(torch.as_tensor(x).reshape(64, 6)).detach().numpy().reshape(64, 3, 2)
    for module in (seq, nested):
        assert np.allclose(ReluNetwork.from_torch(module, 3, 2)(x), want, rtol=0, atol=1e-12)
        c = compile_relu_network(module, n=3, d=2, anchors=65)
        assert np.abs(c.detail(x) - want).max() <= c.guarantee["sup_error_bound"]


def test_forward_hooks_are_refused():
    seq = _seq(nn.ReLU())
    seq[1].register_forward_hook(lambda _m, _i, out: -out)
    with pytest.raises(InputError, match=r"module 1 \(ReLU\) has forward hooks"):
        compile_relu_network(seq, n=3, d=2, anchors=9)


@pytest.mark.parametrize("compiler", range(len(COMPILERS)))
def test_relu_network_with_other_n_or_d_is_refused(compiler):
    net = random_relu_network(3, 2, 2, seed=0)
    with pytest.raises(InputError, match="n=5 was given but the ReLU network is for sequences of 3×2"):
        COMPILERS[compiler](net, n=5)
    with pytest.raises(InputError, match="d=4 was given"):
        COMPILERS[compiler](net, n=3, d=4)
    assert COMPILERS[compiler](net, n=3, d=2).detail.net is net
