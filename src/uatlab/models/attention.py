"""Multi-head self-attention exactly as in Kajitsuka & Sato (ICLR 2024), paper A.

Paper A, Section 2 (following Yun et al. 2020), with tokens as **columns** of Z ∈ R^{d×n}:

    F^(SA)(Z) = Z + Σ_{i=1..h} W_O^i W_V^i Z σ[(W_K^i Z)^T (W_Q^i Z)]

    W_O^i ∈ R^{d×s},  W_V^i, W_K^i, W_Q^i ∈ R^{s×d},  σ column-wise (over keys j for query k).

uatlab stores tokens as **rows** (PyTorch layout ``(batch, n, d)``). With X = Z^T the same layer is:

    out = X + Σ_i σ_row( β · (X W_Q^iᵀ)(X W_K^iᵀ)ᵀ ) (X W_V^iᵀ) W_O^iᵀ        (B, n, d)

where σ_row normalises each row (a query) over the keys. ``convention.py`` holds the literal
column-form transcription and the test compares the two.

Notation map (paper → uatlab):

=================  ===========================================
paper A            uatlab
=================  ===========================================
d                  ``d_model``
s                  ``head_dim``
h                  ``n_heads``
W_Q^i (s×d)        ``effective_weights()["W_Q"][i]``
σ_S / σ_H          ``attention="softmax"`` / ``"hardmax"``
inverse temp.      ``beta`` (paper: 1, folded into W_Q)
1/√s               ``scale_by_sqrt_head_dim`` (paper: off)
=================  ===========================================

Rank-r factorisation: each matrix is stored as a product ``A @ B`` with inner dimension r, so its
rank is at most r by construction (``rank=None`` stores full matrices). r must satisfy
``r ≤ min(rows, cols)``; `MultiHeadSelfAttention.check_ranks` measures the actual ranks.

Hardmax follows the paper's definition: σ_H[a]_j = 1/|argmax a| for j ∈ argmax a, else 0
(ties averaged, ties meaning exact equality of the scores).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import nn

from uatlab.errors import InputError

AttentionKind = Literal["softmax", "hardmax"]


def hardmax(scores: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """Hardmax over the last axis with ties averaged (paper A's σ_H).

    Args:
        scores: (..., n_keys) real scores.
        valid: optional boolean mask of the same shape; invalid keys never win.

    Returns:
        (..., n_keys) weights: 1/|argmax| on the maximisers, 0 elsewhere; rows with no valid key are 0.
    """
    if valid is not None:
        scores = scores.masked_fill(~valid, float("-inf"))
    top = scores.amax(dim=-1, keepdim=True)  # (..., 1)
    winners = (scores == top) & torch.isfinite(top)
    count = winners.sum(dim=-1, keepdim=True).clamp_min(1)
    return winners.to(scores.dtype) / count.to(scores.dtype)


def masked_softmax(scores: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """Numerically stable softmax over the last axis; masked keys get weight 0.

    The maximum is subtracted before ``exp`` (no overflow for any finite score). A row whose keys are
    all masked (a padding query under a causal or padding mask) returns zeros instead of NaN.
    """
    if valid is None:
        return torch.softmax(scores, dim=-1)
    scores = scores.masked_fill(~valid, float("-inf"))
    top = scores.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(scores - top) * valid.to(scores.dtype)
    z = e.sum(dim=-1, keepdim=True)
    return e / torch.where(z > 0, z, torch.ones_like(z))


class LowRankLinearMaps(nn.Module):
    """h matrices of shape (rows, cols), each stored as A_i B_i with inner dimension ``rank``.

    ``rank=None`` stores the full (h, rows, cols) tensor. The effective matrices are
    ``weight()`` of shape (h, rows, cols).
    """

    def __init__(self, n_heads: int, rows: int, cols: int, rank: int | None, dtype: torch.dtype) -> None:
        super().__init__()
        if rank is not None and not (1 <= rank <= min(rows, cols)):
            raise InputError(
                f"rank {rank} is impossible for a {rows}×{cols} matrix: it must lie in [1, {min(rows, cols)}]"
            )
        self.n_heads, self.rows, self.cols, self.rank = n_heads, rows, cols, rank
        if rank is None:
            self.full = nn.Parameter(torch.empty(n_heads, rows, cols, dtype=dtype))
            self.left = None
            self.right = None
        else:
            self.full = None
            self.left = nn.Parameter(torch.empty(n_heads, rows, rank, dtype=dtype))  # (h, rows, r)
            self.right = nn.Parameter(torch.empty(n_heads, rank, cols, dtype=dtype))  # (h, r, cols)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # Variance-preserving init of the *product*: Var(W_ij) ≈ 1/cols.
        if self.full is not None:
            nn.init.normal_(self.full, std=1.0 / math.sqrt(self.cols))
        else:
            nn.init.normal_(self.left, std=1.0 / math.sqrt(self.rank))
            nn.init.normal_(self.right, std=1.0 / math.sqrt(self.cols))

    def weight(self) -> torch.Tensor:
        """The effective matrices, shape (h, rows, cols)."""
        if self.full is not None:
            return self.full
        return self.left @ self.right

    def set_weight(self, w: torch.Tensor) -> None:
        """Set the effective matrices (h, rows, cols); with a rank limit, factorised by SVD.

        Raises:
            InputError: if the shape is wrong or the matrix has numerical rank above the limit.
        """
        w = torch.as_tensor(w)
        if tuple(w.shape) != (self.n_heads, self.rows, self.cols):
            raise InputError(
                f"weight of shape {tuple(w.shape)} does not fit ({self.n_heads}, {self.rows}, {self.cols})"
            )
        with torch.no_grad():
            if self.full is not None:
                self.full.copy_(w.to(self.full.dtype))
                return
            w64 = w.to(torch.float64)
            u, s, vh = torch.linalg.svd(w64, full_matrices=False)  # (h, rows, k), (h, k), (h, k, cols)
            tol = s.amax(dim=-1, keepdim=True) * max(self.rows, self.cols) * torch.finfo(torch.float64).eps
            true_rank = int((s > tol).sum(dim=-1).max())
            if true_rank > self.rank:
                raise InputError(f"matrix has rank {true_rank}, above this layer's rank limit {self.rank}")
            r = self.rank
            root = s[:, :r].sqrt()
            self.left.copy_((u[:, :, :r] * root[:, None, :]).to(self.left.dtype))
            self.right.copy_((root[:, :, None] * vh[:, :r, :]).to(self.right.dtype))

    def set_factors(self, left: torch.Tensor, right: torch.Tensor) -> None:
        """Set A (h, rows, r) and B (h, r, cols) exactly (no SVD rounding)."""
        if self.left is None:
            self.set_weight(left @ right)
            return
        with torch.no_grad():
            self.left.copy_(left.to(self.left.dtype))
            self.right.copy_(right.to(self.right.dtype))


class MultiHeadSelfAttention(nn.Module):
    """Paper A's multi-head self-attention with skip connection (no LayerNorm).

    Args:
        d_model: token dimension d.
        n_heads: number of heads h.
        head_dim: head size s.
        rank: rank limit r for W_Q, W_K, W_V, W_O (None = full rank; 1 = paper A's case).
        attention: "softmax" (σ_S) or "hardmax" (σ_H, ties averaged).
        beta: explicit inverse temperature multiplying every score (paper A: 1).
        scale_by_sqrt_head_dim: divide scores by √s as in Vaswani et al. (paper A: off).
        causal: query k attends only to keys j ≤ k (paper A's masked-attention extension).
        dtype: torch.float32 or torch.float64.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int = 1,
        head_dim: int = 1,
        rank: int | None = 1,
        attention: AttentionKind = "softmax",
        beta: float = 1.0,
        scale_by_sqrt_head_dim: bool = False,
        causal: bool = False,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        for name, value in (("d_model", d_model), ("n_heads", n_heads), ("head_dim", head_dim)):
            if int(value) < 1:
                raise InputError(f"{name} must be a positive integer, got {value}")
        if attention not in ("softmax", "hardmax"):
            raise InputError(f"attention must be 'softmax' or 'hardmax', got {attention!r}")
        if not math.isfinite(beta):
            raise InputError(f"beta must be finite, got {beta}")
        self.d_model, self.n_heads, self.head_dim, self.rank = d_model, n_heads, head_dim, rank
        self.attention, self.beta = attention, float(beta)
        self.scale_by_sqrt_head_dim, self.causal = scale_by_sqrt_head_dim, causal
        self.W_Q = LowRankLinearMaps(n_heads, head_dim, d_model, rank, dtype)
        self.W_K = LowRankLinearMaps(n_heads, head_dim, d_model, rank, dtype)
        self.W_V = LowRankLinearMaps(n_heads, head_dim, d_model, rank, dtype)
        self.W_O = LowRankLinearMaps(n_heads, d_model, head_dim, rank, dtype)

    @property
    def score_scale(self) -> float:
        """The factor multiplying (W_K z_j)·(W_Q z_k): β, divided by √s if asked."""
        return self.beta / (math.sqrt(self.head_dim) if self.scale_by_sqrt_head_dim else 1.0)

    def effective_weights(self) -> dict[str, torch.Tensor]:
        """W_Q, W_K, W_V (h, s, d) and W_O (h, d, s), the paper's matrices."""
        return {
            "W_Q": self.W_Q.weight(),
            "W_K": self.W_K.weight(),
            "W_V": self.W_V.weight(),
            "W_O": self.W_O.weight(),
        }

    def check_ranks(self) -> dict[str, list[int]]:
        """Numerical rank of every effective matrix (float64 SVD), per head."""
        out: dict[str, list[int]] = {}
        with torch.no_grad():
            for name, w in self.effective_weights().items():
                out[name] = [int(torch.linalg.matrix_rank(m.to(torch.float64))) for m in w]
        return out

    def scores(self, x: torch.Tensor) -> torch.Tensor:
        """Scaled scores S[b, i, q, j] = scale · (W_K^i x_j)·(W_Q^i x_q), shape (B, h, n, n)."""
        w = self.effective_weights()
        q = torch.einsum("bnd,hsd->bhns", x, w["W_Q"])  # (B, h, n, s)
        k = torch.einsum("bnd,hsd->bhns", x, w["W_K"])  # (B, h, n, s)
        return self.score_scale * (q @ k.transpose(-1, -2))  # (B, h, n_query, n_key)

    def key_mask(self, n: int, attend_mask: torch.Tensor | None, device: torch.device) -> torch.Tensor | None:
        """Boolean (B or 1, 1, n_query, n_key) mask of allowed keys, or None when all are allowed.

        ``attend_mask`` (B, n) is True for the keys a query may attend to (real tokens) and False for
        padding: the opposite of ``torch.nn.MultiheadAttention``'s ``key_padding_mask``, hence the other name.
        A mask that leaves some query with no key at all is an `InputError` (its attention row would
        silently be 0).
        """
        valid = None
        if attend_mask is not None:
            if attend_mask.dim() != 2 or attend_mask.shape[1] != n:
                raise InputError(f"attend_mask must have shape (batch, {n}), got {tuple(attend_mask.shape)}")
            valid = attend_mask[:, None, None, :].bool()  # (B, 1, 1, n)
        if self.causal:
            tri = torch.ones(n, n, dtype=torch.bool, device=device).tril()[None, None]  # (1, 1, n, n)
            valid = tri if valid is None else (valid & tri)
        if attend_mask is not None:
            has_key = valid.any(dim=-1)  # (B, 1, n_query)
            if not bool(has_key.all()):
                b, _, q = (int(v) for v in (~has_key).nonzero()[0])
                raise InputError(
                    f"attend_mask leaves query position {q} of sequence {b} with no key to attend to "
                    f"(True marks the tokens to attend to, the opposite of PyTorch's key_padding_mask)"
                )
        return valid

    def attention_weights(self, x: torch.Tensor, attend_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Attention matrix P[b, i, q, j] (rows sum to 1 over allowed keys), shape (B, h, n, n)."""
        s = self.scores(x)
        valid = self.key_mask(x.shape[1], attend_mask, x.device)
        if valid is not None:
            valid = valid.expand_as(s)
        if self.attention == "hardmax":
            return hardmax(s, valid)
        return masked_softmax(s, valid)

    def forward(self, x: torch.Tensor, attend_mask: torch.Tensor | None = None) -> torch.Tensor:
        """x: (B, n, d); attend_mask: (B, n) bool, True for the keys to attend to (real tokens). Returns (B, n, d)."""
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise InputError(f"expected input of shape (batch, n, {self.d_model}), got {tuple(x.shape)}")
        w = self.effective_weights()
        p = self.attention_weights(x, attend_mask)  # (B, h, n, n)
        v = torch.einsum("bnd,hsd->bhns", x, w["W_V"])  # (B, h, n, s)
        if attend_mask is not None:
            # a masked key's weight is exactly 0, but 0 · ±∞ is NaN: a padding token whose value overflows (its
            # embedding row is never read by real tokens otherwise) would turn every row of the sequence into
            # NaN. Its value is zeroed, so padding adds exact zeros whatever it holds (as without padding)
            v = v.masked_fill(~attend_mask.bool()[:, None, :, None], 0.0)
        heads = p @ v  # (B, h, n, s)
        update = torch.einsum("bhns,hds->bnd", heads, w["W_O"])  # (B, n, d)
        return x + update
