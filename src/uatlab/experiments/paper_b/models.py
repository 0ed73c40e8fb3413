"""Attention-only models with the architecture of paper B's repository (re-implemented, not copied).

Paper B (Hu et al. 2025, Thm 3.4 / 3.9) composes a linear map A with one softmax attention layer.
The repository realises A as

    z_i = modulation_i ⊙ (W x_i + c)        i = 0..n-1   (token-wise linear map, per-position scale)
    z_{n+k} = anchor_k                       k = 0..m-1   (m = p − n learnable "interpolation tokens")

and the attention layer as standard batch-first multi-head attention with ``nn.Linear`` (with bias)
Q/K/V and an output projection, scores divided by √head_dim. Only the first n output rows are
kept (the anchors are dropped; this is the paper's n×n_o selector W_O).

Notation map (paper → ours): p (total columns) → ``n + n_anchors``; hidden width → ``width``;
H → ``n_heads``; head size → ``head_dim``; the output coordinate k̃_i that holds the target → channel 0.

The parity setting of truncated.py is ``width = n_heads·head_dim = out_dim = 32``: the head size
shrinks as heads are added. The corrected setting fixes ``head_dim`` and lets ``n_heads·head_dim``
grow, with ``out_dim = 1`` (the target channel only).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn
from torch.nn import functional as F

from uatlab.errors import InputError


@dataclass(frozen=True)
class TruncatedAttentionConfig:
    """Sizes of `TruncatedAttentionModel` (one A map + one multi-head attention layer)."""

    n: int = 50  # sequence length (data tokens)
    d: int = 10  # input dimension
    n_anchors: int = 10  # extra learnable tokens (repository: p − seq_len)
    width: int = 32  # output width of A (attention input dimension)
    n_heads: int = 1
    head_dim: int = 32
    out_dim: int = 32  # output channels; the target lives in channel 0

    def __post_init__(self) -> None:
        if min(self.n, self.d, self.width, self.n_heads, self.head_dim, self.out_dim) < 1 or self.n_anchors < 0:
            raise InputError(f"invalid attention-only model sizes: {self}")

    def to_dict(self) -> dict:
        return asdict(self)


class ExtendedTokenMap(nn.Module):
    """Paper B's A: per-position scaled token projection, then m appended learnable anchor tokens."""

    def __init__(self, d: int, width: int, n: int, n_anchors: int) -> None:
        super().__init__()
        self.n = n
        self.token_proj = nn.Linear(d, width)  # W (width, d), c (width,)
        self.modulation = nn.Parameter(torch.ones(n, width))  # (n, width), the per-position scale
        # anchors initialised on linspace(-1, 1) copied across channels (as in the repository)
        init = torch.linspace(-1.0, 1.0, n_anchors).unsqueeze(1).expand(n_anchors, width).clone()
        self.anchors = nn.Parameter(init)  # (m, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, n, d) -> (B, n + m, width)."""
        if x.dim() != 3 or x.shape[1] != self.n:
            raise InputError(f"expected inputs of shape (batch, {self.n}, d), got {tuple(x.shape)}")
        tokens = self.token_proj(x) * self.modulation  # (B, n, width)
        anchors = self.anchors.unsqueeze(0).expand(x.shape[0], -1, -1)  # (B, m, width)
        return torch.cat([tokens, anchors], dim=1)  # (B, n+m, width)


class RepoMultiHeadAttention(nn.Module):
    """Multi-head softmax attention with biased Linear Q/K/V/out and 1/√head_dim scaling.

    ``beta`` multiplies the scores (1 in truncated.py; 25 in attn_map.py).
    """

    def __init__(self, width: int, n_heads: int, head_dim: int, out_dim: int, beta: float = 1.0) -> None:
        super().__init__()
        self.n_heads, self.head_dim, self.beta = n_heads, head_dim, float(beta)
        inner = n_heads * head_dim
        self.q_proj = nn.Linear(width, inner)
        self.k_proj = nn.Linear(width, inner)
        self.v_proj = nn.Linear(width, inner)
        self.out_proj = nn.Linear(inner, out_dim)

    def forward(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, p, width) -> output (B, p, out_dim) and attention weights (B, H, p, p)."""
        B, p, _ = z.shape
        H, s = self.n_heads, self.head_dim
        q = self.q_proj(z).view(B, p, H, s).transpose(1, 2)  # (B, H, p, s)
        k = self.k_proj(z).view(B, p, H, s).transpose(1, 2)  # (B, H, p, s)
        v = self.v_proj(z).view(B, p, H, s).transpose(1, 2)  # (B, H, p, s)
        scores = self.beta * (q @ k.transpose(-2, -1)) / math.sqrt(s)  # (B, H, p, p)
        weights = F.softmax(scores, dim=-1)  # each query row sums to 1 over the keys
        heads = (weights @ v).transpose(1, 2).reshape(B, p, H * s)  # (B, p, H·s)
        return self.out_proj(heads), weights


class TruncatedAttentionModel(nn.Module):
    """A then one multi-head attention layer; returns the n data rows (anchors dropped)."""

    def __init__(self, config: TruncatedAttentionConfig) -> None:
        super().__init__()
        self.config = config
        self.mapping_A = ExtendedTokenMap(config.d, config.width, config.n, config.n_anchors)
        self.attn = RepoMultiHeadAttention(config.width, config.n_heads, config.head_dim, config.out_dim)

    def forward(self, x: torch.Tensor, return_weights: bool = False):
        """(B, n, d) -> (B, n, out_dim) [and attention weights (B, H, p, p)]."""
        out, weights = self.attn(self.mapping_A(x))
        out = out[:, : self.config.n]  # (B, n, out_dim): drop the anchor rows
        return (out, weights) if return_weights else out

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


# --------------------------------------------------------------------------- attn_map.py model
class ManualKeyValueAttentionModel(nn.Module):
    """attn_map.py's model: A (no extra tokens) + one head whose last key and one value are fixed.

    Key coordinate ``s−1`` of token k is overwritten with ``k(L_k + L_0) − 2k·t_val`` and value
    channel ``value_channel`` with ``L_k``, where ``L = linspace(a, b, p)``; scores are
    ``β·QKᵀ/√s``. The target is read from ``value_channel``.
    """

    def __init__(self, d: int, n: int, a: float, b: float, hidden: int = 11, beta: float = 25.0, t_val: float = 1.0):
        super().__init__()
        self.n, self.hidden, self.beta, self.t_val = n, hidden, float(beta), float(t_val)
        self.mapping_A = ExtendedTokenMap(d, hidden, n, 0)
        self.q_proj = nn.Linear(hidden, hidden)
        self.k_proj = nn.Linear(hidden, hidden)
        self.v_proj = nn.Linear(hidden, hidden)
        self.out_proj = nn.Linear(hidden, hidden)
        self.register_buffer("levels", torch.linspace(a, b, n))  # (n,) the anchors L_k
        self.value_channel = 0

    def forward(self, x: torch.Tensor, return_weights: bool = False):
        z = self.mapping_A(x)  # (B, n, hidden)
        q, k, v = self.q_proj(z), self.k_proj(z), self.v_proj(z)  # (B, n, hidden) each
        idx = torch.arange(self.n, dtype=z.dtype)  # (n,) token index k
        fixed_key = idx * (self.levels + self.levels[0]) - 2 * idx * self.t_val  # (n,)
        k = torch.cat([k[..., :-1], fixed_key.expand(z.shape[0], -1).unsqueeze(-1)], dim=-1)
        c = self.value_channel
        v = torch.cat([v[..., :c], self.levels.expand(z.shape[0], -1).unsqueeze(-1), v[..., c + 1 :]], dim=-1)
        scores = self.beta * (q @ k.transpose(-2, -1)) / math.sqrt(self.hidden)  # (B, n, n)
        weights = F.softmax(scores, dim=-1)
        out = self.out_proj(weights @ v)  # (B, n, hidden)
        return (out, weights.unsqueeze(1)) if return_weights else out


# --------------------------------------------------------------------------- seq2seq models
class TwoLayerAttentionModel(nn.Module):
    """seq2seq.py's model: A → MHA₁ → A₂ (token-wise Linear) → MHA₂ → first n rows → Linear readout.

    Attention-only: no residual connections, no normalisation, no feed-forward layer.
    ``output_modulation=True`` (our corrected variant) scales the last attention output per position
    before the shared readout, ``readout(mod_out_i ⊙ z_i)``: the output-side twin of A's per-position
    ``modulation`` (paper B's W_O acts on the sequence axis, Definition 2.1), so that
    each output token can weight the pooled features differently.
    """

    def __init__(
        self,
        n: int,
        d: int,
        d_out: int,
        width: int,
        n_heads: int,
        head_dim: int,
        n_anchors: int,
        output_modulation: bool = False,
    ) -> None:
        super().__init__()
        self.n = n
        self.mapping_A = ExtendedTokenMap(d, width, n, n_anchors)
        self.attn1 = RepoMultiHeadAttention(width, n_heads, head_dim, width)
        self.mapping_A2 = nn.Linear(width, width)
        self.attn2 = RepoMultiHeadAttention(width, n_heads, head_dim, width)
        self.out_modulation = nn.Parameter(torch.ones(n, width)) if output_modulation else None  # (n, width)
        self.readout = nn.Linear(width, d_out)

    def trunk(self, x: torch.Tensor) -> torch.Tensor:
        z, _ = self.attn1(self.mapping_A(x))  # (B, p, width)
        z, _ = self.attn2(self.mapping_A2(z))  # (B, p, width)
        return z

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, n, d) -> (B, n, d_out)."""
        z = self.trunk(x)[:, : self.n]  # (B, n, width)
        if self.out_modulation is not None:
            z = z * self.out_modulation
        return self.readout(z)  # (B, n, d_out)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


class FeedForwardTransformerBaseline(TwoLayerAttentionModel):
    """The baseline: the same model with a ReLU feed-forward layer (with skip) after each attention layer.

    Layout: A → MHA₁ → FF₁ → MHA₂ → FF₂ → first n rows → [per-position scale] → readout, with
    FF(z) = z + W₂ReLU(W₁z + b₁) + b₂ replacing A₂. The feed-forward width ``ff`` is chosen by
    `uatlab.experiments.paper_b.seq2seq.ff_width_for_budget` so that the parameter count
    matches the attention-only model's.
    """

    def __init__(
        self,
        n: int,
        d: int,
        d_out: int,
        width: int,
        n_heads: int,
        head_dim: int,
        n_anchors: int,
        ff: int,
        output_modulation: bool = False,
    ) -> None:
        super().__init__(n, d, d_out, width, n_heads, head_dim, n_anchors, output_modulation)
        del self.mapping_A2
        self.ff1 = nn.Sequential(nn.Linear(width, ff), nn.ReLU(), nn.Linear(ff, width))
        self.ff2 = nn.Sequential(nn.Linear(width, ff), nn.ReLU(), nn.Linear(ff, width))

    def trunk(self, x: torch.Tensor) -> torch.Tensor:
        z, _ = self.attn1(self.mapping_A(x))  # (B, p, width)
        z = z + self.ff1(z)
        z, _ = self.attn2(z)
        return z + self.ff2(z)
