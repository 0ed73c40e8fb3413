"""The one mapping between paper A's column convention and uatlab's row convention.

Paper A (and Yun et al.) write a sequence as X ∈ R^{d×n}, tokens as **columns** X_{:,k}.
uatlab (PyTorch) writes a batch of sequences as a tensor (B, n, d), tokens as **rows** x[b, k].

    paper X ∈ R^{d×n}   ⟷   uatlab x = Xᵀ ∈ R^{n×d}  (one sequence; a batch stacks them)
    paper X_{:,k}        ⟷   x[k]
    paper W X            ⟷   x Wᵀ            (every weight matrix keeps the paper's shape)
    column-wise σ        ⟷   row-wise σ over keys of S = (x W_Qᵀ)(x W_Kᵀ)ᵀ = Aᵀ

`paper_self_attention` is a literal numpy transcription of the paper's formula, used by the
tests to check `uatlab.models.MultiHeadSelfAttention` through `to_rows`/`to_columns`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch


def to_rows(X: np.ndarray) -> torch.Tensor:
    """Paper column form (d, n) or a stack (N, d, n) → uatlab rows (N, n, d) as a float64 tensor."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 2:
        X = X[None]
    return torch.from_numpy(np.ascontiguousarray(np.swapaxes(X, -1, -2)))


def to_columns(x: torch.Tensor) -> np.ndarray:
    """uatlab rows (N, n, d) → paper column form (N, d, n) as float64 numpy."""
    return np.swapaxes(x.detach().to(torch.float64).cpu().numpy(), -1, -2)


def _column_softmax(A: np.ndarray) -> np.ndarray:
    A = A - A.max(axis=0, keepdims=True)
    E = np.exp(A)
    return E / E.sum(axis=0, keepdims=True)


def _column_hardmax(A: np.ndarray) -> np.ndarray:
    win = A == A.max(axis=0, keepdims=True)
    return win / win.sum(axis=0, keepdims=True)


def paper_self_attention(
    Z: np.ndarray,
    W_O: Sequence[np.ndarray],
    W_V: Sequence[np.ndarray],
    W_K: Sequence[np.ndarray],
    W_Q: Sequence[np.ndarray],
    hardmax: bool = False,
) -> np.ndarray:
    """Literal F^(SA)(Z) = Z + Σ_i W_O^i W_V^i Z σ[(W_K^i Z)ᵀ (W_Q^i Z)] for one sequence Z (d, n)."""
    out = np.array(Z, dtype=np.float64, copy=True)
    sigma = _column_hardmax if hardmax else _column_softmax
    for O, V, K, Q in zip(W_O, W_V, W_K, W_Q, strict=True):
        A = (K @ Z).T @ (Q @ Z)  # (n, n): A[j, k] = key_j · query_k
        out = out + O @ V @ Z @ sigma(A)
    return out
