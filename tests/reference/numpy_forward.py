"""An independent forward pass of paper A's Transformer in numpy, with every rounding made explicit.

Written from the formulas of Kajitsuka & Sato (ICLR 2024), eq. (1)-(3), in row form for token vectors x_t:

    x_t      = E[id_t] + P[t]                                               (embedding + positional code)
    SA:  x_t ← x_t + Σ_i W_O^i Σ_j softmax_j(β (W_Q^i x_t)·(W_K^i x_j)) (W_V^i x_j)   (keys j ≤ t if causal)
    FF:  x_t ← x_t + W_2 ReLU(W_1 x_t + b_1) + b_2
    logits_t = W x_t + b

Every operation is done in the model's dtype (float32 or float64) one IEEE operation at a time, so that
the summation order of each sum, the way the residual is added (separately, or as the first term of the
sum, as a GEMM with a residual epilogue does) and the rounding of exp can be chosen: each choice is one
valid evaluation of the model in that dtype. This module imports numpy only; it shares no code with the
model or the certificate it is used to check.

Weights come as plain arrays (``Weights``); a low-rank factored weight A B is formed in the dtype as the
evaluator would (a sum over the inner dimension, rounded).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Layer:
    WQ: np.ndarray  # (h, s, d) effective query maps, already in the dtype
    WK: np.ndarray  # (h, s, d)
    WV: np.ndarray  # (h, s, d)
    WO: np.ndarray  # (h, d, s)
    scale: float  # β, the score scale (a Python scalar, rounded to the dtype like PyTorch does)
    W1: np.ndarray  # (q, d)
    b1: np.ndarray  # (q,)
    W2: np.ndarray  # (d, q)
    b2: np.ndarray  # (d,)


@dataclass
class Weights:
    E: np.ndarray  # (V, d)
    P: np.ndarray | None  # (max_len, d)
    layers: list[Layer]
    W: np.ndarray  # (C, d) readout
    b: np.ndarray  # (C,)
    causal: bool
    dtype: type  # np.float32 or np.float64


@dataclass
class Evaluation:
    """How one run evaluates the formulas.

    order: 'forward', 'reversed' or 'random' (a random permutation of every sum's terms: input
        coordinates, feed-forward units and keys, drawn from ``seed``).
    fused_residual: add the residual x as the first term of the sum that forms the update (one rounded
        sum of n + 1 terms) instead of adding it to the finished sum.
    exp_ulps: move every exp result by this many ulps (> 0 up, < 0 down) from the correctly rounded value.
    exp_random_sign: move each exp result up or down at random by |exp_ulps|.
    reciprocal: softmax as e · fl(1/Σ) instead of e / Σ.
    """

    order: str = "forward"
    seed: int = 0
    fused_residual: bool = False
    exp_ulps: int = 0
    exp_random_sign: bool = False
    reciprocal: bool = False
    rng: np.random.Generator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def perm(self, m: int) -> np.ndarray:
        if self.order == "forward":
            return np.arange(m)
        if self.order == "reversed":
            return np.arange(m)[::-1]
        if self.order == "random":
            return self.rng.permutation(m)
        raise ValueError(f"unknown order {self.order!r}")


def low_rank(left: np.ndarray, right: np.ndarray, dtype: type) -> np.ndarray:
    """(h, rows, r) @ (h, r, cols) in ``dtype``, summing over r in forward order."""
    left, right = left.astype(dtype), right.astype(dtype)
    acc = left[:, :, 0:1] * right[:, 0:1, :]
    for k in range(1, left.shape[2]):
        acc = acc + left[:, :, k : k + 1] * right[:, k : k + 1, :]
    return acc


def _sum_terms(term, m: int, order: np.ndarray, start: np.ndarray | None) -> np.ndarray:
    """Σ_k term(k) for k in ``order`` (each term and each partial sum rounded by numpy in the dtype)."""
    acc = start
    for k in order:
        t = term(int(k))
        acc = t if acc is None else acc + t
    return acc


def _sum_last(terms: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Σ over the last axis of ``terms`` in ``order``, one rounded add at a time."""
    acc = terms[..., order[0]]
    for k in order[1:]:
        acc = acc + terms[..., k]
    return acc


def matvec(x: np.ndarray, W: np.ndarray, b: np.ndarray | None, ev: Evaluation, residual: np.ndarray | None = None):
    """x (T, m) → x Wᵀ (+ b) (+ residual) of shape (T, out), every product and add rounded.

    The bias is one more term of the sum, placed by the order; the residual is added after the sum
    (separate) or is the first term of the accumulation (``ev.fused_residual``).
    """
    m = W.shape[1]
    terms = m + (b is not None)

    def term(k: int) -> np.ndarray:
        if k == m:
            return np.broadcast_to(b, (x.shape[0], W.shape[0])).copy()
        return x[:, k : k + 1] * W[None, :, k]

    order = ev.perm(terms)
    if residual is not None and ev.fused_residual:
        return _sum_terms(term, terms, order, residual.copy())
    out = _sum_terms(term, terms, order, None)
    return out if residual is None else residual + out


def _exp(t: np.ndarray, ev: Evaluation, dtype: type) -> np.ndarray:
    """exp(t) for t ≤ 0 in ``dtype``: correctly rounded (float32, via float64) or numpy's (float64), then
    moved by ``ev.exp_ulps`` ulps."""
    e = np.exp(t.astype(np.float64)).astype(dtype)
    k = abs(ev.exp_ulps)
    if k == 0:
        return e
    if ev.exp_random_sign:
        direction = np.where(ev.rng.random(e.shape) < 0.5, -np.inf, np.inf).astype(dtype)
    else:
        direction = np.full(e.shape, np.inf if ev.exp_ulps > 0 else -np.inf, dtype=dtype)
    for _ in range(k):
        e = np.where(e > 0, np.nextafter(e, direction), e)  # exp(−inf) = 0 stays 0 (masked keys)
    return e


def attention(x: np.ndarray, L: Layer, causal: bool, ev: Evaluation, dtype: type) -> np.ndarray:
    """x (B, n, d) → x + SA(x), one sequence position at a time for the softmax."""
    B, n, d = x.shape
    flat = x.reshape(B * n, d)
    update_terms = []
    for i in range(L.WQ.shape[0]):
        q = matvec(flat, L.WQ[i], None, ev).reshape(B, n, -1)  # (B, n, s)
        k = matvec(flat, L.WK[i], None, ev).reshape(B, n, -1)
        v = matvec(flat, L.WV[i], None, ev).reshape(B, n, -1)
        s_dim = q.shape[-1]
        # scores q·k (sum over s), times the scale rounded to the dtype
        qk = _sum_last(q[:, :, None, :] * k[:, None, :, :], ev.perm(s_dim))  # (B, n, n)
        S = dtype(L.scale) * qk
        allowed = np.tril(np.ones((n, n), dtype=bool)) if causal else np.ones((n, n), dtype=bool)
        Sm = np.where(allowed[None], S, dtype(-np.inf))
        M = Sm.max(axis=-1, keepdims=True)
        e = _exp(np.where(allowed[None], Sm - M, dtype(-np.inf)), ev, dtype)  # (B, n, n), 0 on masked keys
        denom = _sum_last(e, ev.perm(n))  # (B, n)
        if ev.reciprocal:
            p = e * (dtype(1) / denom)[..., None]
        else:
            p = e / denom[..., None]
        h = _sum_last(p[:, :, None, :] * v.transpose(0, 2, 1)[:, None, :, :], ev.perm(n))  # (B, n, s): Σ keys
        update_terms.append((h.reshape(B * n, s_dim), L.WO[i]))
    # update_c = Σ_i Σ_s W_O^i[c, s] h_i,s : one sum over h·s terms, plus the residual
    hs = np.concatenate([h for h, _ in update_terms], axis=1)  # (T, h·s)
    WO = np.concatenate([W for _, W in update_terms], axis=1)  # (d, h·s)
    return matvec(hs, WO, None, ev, residual=flat).reshape(B, n, d)


def forward(w: Weights, ids: np.ndarray, ev: Evaluation) -> np.ndarray:
    """Logits (B, n, C) in ``w.dtype`` for token ids (B, n) of one length."""
    dt = w.dtype
    x = w.E.astype(dt)[ids]  # (B, n, d)
    if w.P is not None:
        x = x + w.P.astype(dt)[: ids.shape[1]][None]
    B, n, d = x.shape
    for L in w.layers:
        x = attention(x, L, w.causal, ev, dt)
        flat = x.reshape(B * n, d)
        z = matvec(flat, L.W1.astype(dt), L.b1.astype(dt), ev)
        a = np.maximum(z, dt(0))
        x = matvec(a, L.W2.astype(dt), L.b2.astype(dt), ev, residual=flat).reshape(B, n, d)
    logits = matvec(x.reshape(B * n, d), w.W.astype(dt), w.b.astype(dt), ev)
    return logits.reshape(B, n, -1)


def shift_for(exp_ulps: float, dtype: type) -> int:
    """Whole ulps an exp result may be moved from our exp while staying within ``exp_ulps`` of exp's exact
    value: our float32 exp is correctly rounded (≤ 0.5 ulp), numpy's float64 exp errs by < 1 ulp."""
    base = 0.5 if dtype == np.float32 else 1.0
    return max(0, math.floor(exp_ulps - base))
