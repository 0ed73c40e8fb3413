"""The compiled next-token memorizer as a torch module: `NextTokenModel` for the float regimes, `ExactNextTokenModule`
for the exact one.

Forward pass of `NextTokenModel`, for token ids (B, n):

1. left-pad to n' with the pad id V; x_j = (ν[j, t_j], 1, 0)                               (B, n', 3)
2. rank-1 single-head attention with skip (paper A's F^(SA)), softmax over keys:
   q = x W_Q^T, k = x W_K^T (B, n', 1), v = x W_V^T (B, n', 1); out = x + softmax(q k^T) v W_O^T
3. the last position's stream (B, 3) goes through the integer ReLU circuit (sparse layers) → y (B,)
4. logits_c = 2c·y − c²  (B, C)

All weights are integers (or 0/1 and n') below 2^53, so in float64 the forward pass is exact on the
compiled data (see `uatlab.verify.next_token` for the certificate).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch
from torch import nn

from uatlab.constructions.paper_c.layout import MANTISSA_BITS
from uatlab.constructions.paper_c.next_token_memorizer import NextTokenMemorizer
from uatlab.constructions.paper_c.relu_circuit import Circuit
from uatlab.errors import PrecisionError

#: the torch dtype of each floating-point regime of the paper C memorizers ('exact' has none: integers)
REGIME_DTYPES = {"float64": torch.float64, "float32": torch.float32}
#: mantissa bits of those dtypes (`uatlab.constructions.paper_c.layout.MANTISSA_BITS`)
DTYPE_MANTISSA_BITS = {dtype: MANTISSA_BITS[regime] for regime, dtype in REGIME_DTYPES.items()}


Layers = list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]]


def first_tensor_difference(
    pairs: Iterable[tuple[str, torch.Tensor | None, torch.Tensor]],
) -> tuple[str, torch.Tensor | None, torch.Tensor] | None:
    """The first ``(name, module tensor, construction tensor)`` whose module tensor is missing (None) or differs
    from the construction's in dtype, shape or any value (bit for bit), or None when none does.

    A memorizer module's certificate proves the construction it was built from (Kajitsuka & Sato, ICLR 2025;
    `uatlab.verify.next_token`, `uatlab.verify.seq2seq_deep`); it covers the module's forward pass only while
    every tensor the pass reads is that construction rendered in the regime's dtype. ``pairs`` may be a
    generator: tensors are built and compared one at a time, and the first difference stops it."""
    for name, got, want in pairs:
        if got is None or got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
            return name, got, want
    return None


def circuit_layers(circuit: Circuit, dtype: torch.dtype) -> Layers:
    """Each layer of an integer circuit in coordinate form: unit rows[e] += weights[e] * input[cols[e]]."""
    out: Layers = []
    for layer in circuit.layers:
        rows = torch.repeat_interleave(torch.arange(layer.width), torch.tensor(np.diff(layer.ptr)))
        out.append(
            (
                rows,
                torch.tensor(layer.cols),
                torch.tensor(layer.weights, dtype=dtype),
                torch.tensor(layer.bias, dtype=dtype),
            )
        )
    return out


def apply_circuit(layers: Layers, u: torch.Tensor) -> torch.Tensor:
    """The circuit's last layer (width, B) for inputs u (n_inputs, B): ReLU(W u + b), layer after layer."""
    for rows, cols, w, b in layers:
        out = b[:, None].repeat(1, u.shape[1])  # (width, B)
        u = torch.relu(out.index_add_(0, rows, w[:, None] * u[cols]))
    return u


class NextTokenModel(nn.Module):
    """One rank-1 attention layer + a deep sparse ReLU network + a rank-1 readout."""

    def __init__(self, memo: NextTokenMemorizer, dtype: torch.dtype = torch.float64) -> None:
        super().__init__()
        bits = DTYPE_MANTISSA_BITS[dtype]
        if memo.circuit.max_weight_bits() > bits or int(memo.layout.h_max).bit_length() > bits:
            raise PrecisionError(f"weights of {memo.circuit.max_weight_bits()} bits do not fit {dtype}")
        self.dtype, self.n, self.n_pad, self.V = dtype, memo.n, memo.layout.n_pad, memo.V
        self.memo = memo  # the exact construction (saved by uatlab.save, read by the certificate)
        self.register_buffer("nu", torch.tensor(memo.nu, dtype=dtype))  # (n', V+1)
        att = memo.attention_weights()
        for name, w in att.items():
            self.register_buffer(name, torch.tensor(w, dtype=dtype))
        self._layers = circuit_layers(memo.circuit, dtype)
        c = torch.arange(memo.C, dtype=dtype)
        self.register_buffer("readout_w", 2 * c)  # (C,)
        self.register_buffer("readout_b", -(c * c))  # (C,)

    def stream(self, tokens: torch.Tensor) -> torch.Tensor:
        """The residual stream at the last position after the attention layer, (B, 3)."""
        B, n = tokens.shape
        pad = torch.full((B, self.n_pad - n), self.V, dtype=torch.long)
        ids = torch.cat([pad, tokens.long()], dim=1)  # (B, n')
        pos = torch.arange(self.n_pad)
        x = torch.stack(
            [
                self.nu[pos[None, :], ids],
                torch.ones(B, self.n_pad, dtype=self.dtype),
                torch.zeros(B, self.n_pad, dtype=self.dtype),
            ],
            dim=-1,
        )  # (B, n', 3)
        q = x[:, -1:, :] @ self.W_Q.T  # (B, 1, 1) query of the last token
        k = x @ self.W_K.T  # (B, n', 1)
        v = x @ self.W_V.T  # (B, n', 1)
        a = torch.softmax(q @ k.transpose(1, 2), dim=-1)  # (B, 1, n'), exactly 1/n' each
        return x[:, -1, :] + (a @ v)[:, 0, :] @ self.W_O.T  # (B, 3)

    def label_value(self, tokens: torch.Tensor) -> torch.Tensor:
        return apply_circuit(self._layers, self.stream(tokens).T)[0]  # (B,)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        y = self.label_value(tokens)  # (B,)
        return y[:, None] * self.readout_w[None, :] + self.readout_b[None, :]  # (B, C)


class ExactNextTokenModule(nn.Module):
    """The exact-regime memorizer as a module: integer evaluation on CPU, logits 2c·y − c² as float64.

    Its words exceed what any float holds, so there is no floating-point forward pass; this module runs the
    integer circuit exactly (Python integers) and returns exact logits (exactly representable: small integers).
    """

    def __init__(self, memo: NextTokenMemorizer) -> None:
        super().__init__()
        self.memo = memo

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        y = torch.tensor(self.memo.predict_exact(np.asarray(tokens.cpu(), dtype=np.int64)), dtype=torch.float64)
        c = torch.arange(self.memo.C, dtype=torch.float64)
        return y[:, None] * (2 * c)[None, :] - (c * c)[None, :]  # (B, C)
