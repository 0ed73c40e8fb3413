"""Paper B's attention-only layer (Hu et al. 2025, "Universal Approximation with Softmax Attention").

Paper B studies self-attention *with linear transformations only*: no feed-forward layer, no
LayerNorm and (in its theorems) no skip connection. Its Definition 2.1 (tokens as columns,
Z ∈ R^{d'×p}):

    Z       = A(X)                                       A: R^{d×n} → R^{d'×p}, linear (+ bias)
    Attn(Z) = Σ_h W_O^h W_V^h Z · Softmax_col( β (W_K^h Z)ᵀ (W_Q^h Z) )   keep the first n columns

uatlab stores tokens as **rows** (``(batch, n, d)``), so one layer computes:

    Z[:, :n]  = X W_Aᵀ + B[:n]  (+ Σ_j M[i, :, j, :] x_j   if ``sequence_map``)       (B, n, d')
    Z[:, n:]  = anchors                                                             (B, m, d')
    S^h       = β (Z[:, :n] W_Q^hᵀ)(Z W_K^hᵀ)ᵀ                                        (B, h, n, p)
    out       = Σ_h softmax_row(S^h) (Z W_V^hᵀ) W_O^hᵀ  (+ X if ``residual``)        (B, n, d_out)

Notation map (paper B → uatlab):

======================================  =====================================================
paper B                                 `AttentionOnlyLayer`
======================================  =====================================================
token-wise part of A (weight)           ``in_proj`` (d', d)
bias of A ("special PE", Thm 3.9)       ``pos_bias`` B (max_len, d')          [token-wise valid]
sequence-wise part of A (Thm 3.4)       ``seq_map`` M (max_len, d', max_len, d)   [NOT token-wise]
appended columns of A (Thm 3.4)         ``anchors`` (m, d')                    [NOT token-wise]
W_Q^h, W_K^h, W_V^h                     ``W_Q``, ``W_K``, ``W_V`` (h, s, d')
W_O (selector keeping n columns)        ``W_O`` (h, d_out, s); anchor rows are never queries
β (inverse temperature)                 ``beta`` (explicit; scores are *not* divided by √s)
======================================  =====================================================

Which parts a standard Transformer has: ``in_proj`` (an embedding), ``pos_bias`` (a positional
encoding), Q/K/V/O and ``residual``. It has **no** ``seq_map`` (a linear map across positions) and
does **not** append tokens; paper B's sequence-wise theorem needs both, and `AttentionOnlyLayer.is_tokenwise` reports whether a given layer avoids them.

`AttentionOnlyNetwork` stacks layers; between layers it keeps only the n data rows (the
anchors of one layer are not seen by the next), as paper B's W_O selector does.

All parameters are ordinary ``nn.Parameter`` tensors, so the same module is built in closed form
(`uatlab.constructions.paper_b.thm3_truncated_linear`, `uatlab.constructions.paper_b.lem3_11_relu_network`,
`uatlab.constructions.paper_b.appB_incontext_gd`) and trained (paper-B experiments). ``freeze_anchors`` /
``requires_grad_`` control what training may move.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from uatlab.errors import InputError


@dataclass(frozen=True)
class AttentionOnlyConfig:
    """Sizes and switches of one `AttentionOnlyLayer`.

    Attributes:
        d_in: token dimension of the input X (paper B: d).
        d_model: width d' of the lifted tokens Z = A(X).
        d_out: token dimension of the output.
        n_heads: number of heads H.
        head_dim: size s of each head.
        max_len: longest input sequence n (size of ``pos_bias`` / ``seq_map``).
        n_anchors: number m of appended anchor tokens (0 = token-wise layer).
        beta: inverse temperature β multiplying every score.
        positional_bias: whether A has a per-position bias B (paper B, Thm 3.9).
        sequence_map: whether A has a linear map across positions M (paper B, Thm 3.4; non-standard).
        residual: add the input to the output (needs d_out == d_in; paper B: off).
        dtype: "float32" or "float64".
    """

    d_in: int
    d_model: int
    d_out: int
    n_heads: int = 1
    head_dim: int = 2
    max_len: int = 64
    n_anchors: int = 0
    beta: float = 1.0
    positional_bias: bool = True
    sequence_map: bool = False
    residual: bool = False
    dtype: str = "float64"

    def __post_init__(self) -> None:
        for name in ("d_in", "d_model", "d_out", "n_heads", "head_dim", "max_len"):
            if int(getattr(self, name)) < 1:
                raise InputError(f"{name} must be a positive integer, got {getattr(self, name)}")
        if self.n_anchors < 0:
            raise InputError(f"n_anchors must be ≥ 0, got {self.n_anchors}")
        if not math.isfinite(self.beta):
            raise InputError(f"beta must be finite, got {self.beta}")
        if self.dtype not in ("float32", "float64"):
            raise InputError(f"dtype must be 'float32' or 'float64', got {self.dtype!r}")
        if self.residual and self.d_out != self.d_in:
            raise InputError(f"residual needs d_out == d_in, got d_out={self.d_out}, d_in={self.d_in}")

    @property
    def torch_dtype(self) -> torch.dtype:
        return torch.float64 if self.dtype == "float64" else torch.float32


class AttentionOnlyLayer(nn.Module):
    """One paper-B attention layer: affine lift A (with optional PE bias, sequence map, anchors), H heads.

    See the module docstring for the equation and the notation map. Parameters are initialised
    small and random (for training); constructions overwrite them with `set_` helpers or
    ``.data.copy_``.
    """

    def __init__(self, config: AttentionOnlyConfig) -> None:
        super().__init__()
        self.config = c = config
        dt = c.torch_dtype
        self.in_proj = nn.Parameter(torch.randn(c.d_model, c.d_in, dtype=dt) / math.sqrt(c.d_in))  # (d', d)
        self.pos_bias = (
            nn.Parameter(torch.zeros(c.max_len, c.d_model, dtype=dt)) if c.positional_bias else None
        )  # (max_len, d')
        self.seq_map = (
            nn.Parameter(torch.zeros(c.max_len, c.d_model, c.max_len, c.d_in, dtype=dt)) if c.sequence_map else None
        )  # (max_len, d', max_len, d)
        self.anchors = (
            nn.Parameter(torch.linspace(-1, 1, c.n_anchors, dtype=dt)[:, None].repeat(1, c.d_model))
            if c.n_anchors
            else None
        )  # (m, d')
        scale = 1.0 / math.sqrt(c.d_model)
        self.W_Q = nn.Parameter(torch.randn(c.n_heads, c.head_dim, c.d_model, dtype=dt) * scale)  # (h, s, d')
        self.W_K = nn.Parameter(torch.randn(c.n_heads, c.head_dim, c.d_model, dtype=dt) * scale)  # (h, s, d')
        self.W_V = nn.Parameter(torch.randn(c.n_heads, c.head_dim, c.d_model, dtype=dt) * scale)  # (h, s, d')
        self.W_O = nn.Parameter(
            torch.randn(c.n_heads, c.d_out, c.head_dim, dtype=dt) / math.sqrt(c.head_dim * c.n_heads)
        )  # (h, d_out, s)

    # ------------------------------------------------------------------ structure
    @property
    def is_tokenwise(self) -> bool:
        """True when the layer is a standard Transformer operation (no sequence map, no appended tokens)."""
        return self.seq_map is None and self.anchors is None

    def freeze_anchors(self, frozen: bool = True) -> None:
        """Keep the anchor tokens fixed (or trainable again) during training."""
        if self.anchors is not None:
            self.anchors.requires_grad_(not frozen)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def zero_(self) -> AttentionOnlyLayer:
        """Set every parameter to 0 (constructions start from here)."""
        with torch.no_grad():
            for p in self.parameters():
                p.zero_()
        return self

    # ------------------------------------------------------------------ forward
    def lift(self, x: torch.Tensor) -> torch.Tensor:
        """Z = A(X): (B, n, d) → (B, n + m, d'); data rows first, then the anchors."""
        c = self.config
        if x.dim() != 3 or x.shape[-1] != c.d_in:
            raise InputError(f"expected input of shape (batch, n, {c.d_in}), got {tuple(x.shape)}")
        n = x.shape[1]
        if n > c.max_len:
            raise InputError(f"sequence length {n} exceeds this layer's max_len {c.max_len}")
        x = x.to(self.in_proj.dtype)
        z = x @ self.in_proj.T  # (B, n, d')
        if self.pos_bias is not None:
            z = z + self.pos_bias[:n]  # (B, n, d')
        if self.seq_map is not None:
            z = z + torch.einsum("iejd,bjd->bie", self.seq_map[:n, :, :n, :], x)  # (B, n, d')
        if self.anchors is not None:
            anchors = self.anchors[None].expand(x.shape[0], -1, -1)  # (B, m, d')
            z = torch.cat([z, anchors], dim=1)  # (B, n + m, d')
        return z

    def attention_weights(self, x: torch.Tensor) -> torch.Tensor:
        """Softmax weights P[b, h, i, j] of data query i over all p = n + m keys, shape (B, h, n, p)."""
        z = self.lift(x)
        return torch.softmax(self._scores(z, x.shape[1]), dim=-1)

    def _scores(self, z: torch.Tensor, n: int) -> torch.Tensor:
        q = torch.einsum("bnd,hsd->bhns", z[:, :n], self.W_Q)  # (B, h, n, s)
        k = torch.einsum("bpd,hsd->bhps", z, self.W_K)  # (B, h, p, s)
        return self.config.beta * (q @ k.transpose(-1, -2))  # (B, h, n, p)

    def head_outputs(self, x: torch.Tensor) -> torch.Tensor:
        """Each head's contribution Σ_j P^h_ij W_O^h W_V^h z_j, shape (B, h, n, d_out)."""
        n = x.shape[1]
        z = self.lift(x)  # (B, p, d')
        p = torch.softmax(self._scores(z, n), dim=-1)  # (B, h, n, p); max-subtracted, never overflows
        v = torch.einsum("bpd,hsd->bhps", z, self.W_V)  # (B, h, p, s)
        return torch.einsum("bhns,hos->bhno", p @ v, self.W_O)  # (B, h, n, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, n, d_in) → (B, n, d_out)."""
        out = self.head_outputs(x).sum(dim=1)  # (B, n, d_out)
        if self.config.residual:
            out = out + x.to(out.dtype)
        return out


class AttentionOnlyNetwork(nn.Module):
    """A stack of `AttentionOnlyLayer` (paper B's multi-layer attention-only model).

    ``output_bias`` (optional, (max_len, d_out)) is a per-position bias added after the last layer:
    a positional encoding on the output, token-wise valid.
    """

    def __init__(self, layers: list[AttentionOnlyLayer], output_bias: torch.Tensor | None = None) -> None:
        super().__init__()
        if not layers:
            raise InputError("an attention-only network needs at least one layer")
        for i in range(1, len(layers)):
            if layers[i].config.d_in != layers[i - 1].config.d_out:
                raise InputError(
                    f"layer {i} expects tokens of size {layers[i].config.d_in}, layer {i - 1} gives "
                    f"{layers[i - 1].config.d_out}"
                )
        self.layers = nn.ModuleList(layers)
        self.output_bias = nn.Parameter(output_bias) if output_bias is not None else None

    @property
    def is_tokenwise(self) -> bool:
        return all(layer.is_tokenwise for layer in self.layers)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (B, n, d_in) → (B, n, d_out of the last layer)."""
        for layer in self.layers:
            x = layer(x)
        if self.output_bias is not None:
            x = x + self.output_bias[: x.shape[1]]
        return x
