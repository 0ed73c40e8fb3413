"""In-context ridge regression with paper B's attention-only gradient-descent layers (App. B), by appended anchors.

Paper B (Hu et al. 2025, App. B; v1 Sec. 4) runs gradient descent in context with softmax attention-only
layers (`uatlab.constructions.paper_b.appB_incontext_gd.build_incontext_gd`, least squares). Ridge
with a given λ reduces to it exactly by appending d anchor tokens, the same kind of operation as paper B's
appended interpolation anchors (Thm 3.4):

    (1/2N) Σ_i (wᵀx_i − y_i)² + (λ/2)‖w‖²  =  (1/2N) Σ_{i ≤ N + d} (wᵀx̃_i − ỹ_i)²,
    x̃_{N+k} = √(Nλ) e_k,  ỹ_{N+k} = 0   (k = 1..d),

so one GD step of ridge with step η, w ← w − η[(1/N) Σ_i (wᵀx_i − y_i) x_i + λ w], is one least-squares GD
step on the N' = N + d tokens with step η N'/N. The k-layer network therefore approximates k ridge GD
steps (its per-step error bound is the least-squares one on the augmented context), and as k grows the
iterates converge to the closed form ŵ_λ = (XᵀX + NλI)^{-1} Xᵀy at rate (1 − η(μ + λ))^k with μ the
smallest eigenvalue of XᵀX/N (η ≤ 1/(L + λ)).

Notation map (paper B → here): the anchor tokens → the d rows √(Nλ) e_k appended to the context; η → ``lr``;
λ → ``lam``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from uatlab.constructions.contract import Construction
from uatlab.constructions.paper_b.appB_incontext_gd import build_incontext_gd
from uatlab.errors import InputError


def augment(x_ctx: np.ndarray, y_ctx: np.ndarray, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """Append the d anchor tokens √(Nλ) e_k with label 0: (B, N, d), (B, N) → (B, N + d, d), (B, N + d)."""
    B, N, d = x_ctx.shape
    anchors = np.broadcast_to(math.sqrt(N * lam) * np.eye(d), (B, d, d))
    return np.concatenate([x_ctx, anchors], axis=1), np.concatenate([y_ctx, np.zeros((B, d))], axis=1)


def build_incontext_ridge(
    d: int, context: int, lam: float, *, steps: int, lr: float, eps: float = 1e-4
) -> Construction:
    """k attention-only GD layers on the augmented context (N + d tokens) computing k ridge GD steps."""
    if not (lam > 0 and math.isfinite(lam)):
        raise InputError(f"lam must be a positive number, got {lam}")
    N2 = context + d
    gd = build_incontext_gd(d, N2, steps=steps, lr=lr * N2 / context, eps=eps)
    facts = {
        **gd.facts,
        "theorem": "Appendix B, ridge regression by appended anchors",
        "lam": lam,
        "ridge_lr": lr,
        "context": context,
        "augmented_context": N2,
    }
    return dataclasses.replace(gd, facts=facts)


def ridge_gd(x_ctx: np.ndarray, y_ctx: np.ndarray, x_q: np.ndarray, lam: float, lr: float, steps: int) -> np.ndarray:
    """Exact k ridge GD steps from w = 0: the prediction wᵀx_q, (B,)."""
    B, N, d = x_ctx.shape
    w = np.zeros((B, d))
    for _ in range(steps):
        r = np.einsum("bnd,bd->bn", x_ctx, w) - y_ctx  # (B, N)
        w = w - lr * (np.einsum("bn,bnd->bd", r, x_ctx) / N + lam * w)
    return np.einsum("bd,bd->b", w, x_q)


def ridge_closed_form(x_ctx: np.ndarray, y_ctx: np.ndarray, x_q: np.ndarray, lam: float) -> np.ndarray:
    """ŵ_λ = (XᵀX + NλI)^{-1} Xᵀ y per batch element; returns ŵ_λᵀ x_q, (B,)."""
    B, N, d = x_ctx.shape
    A = np.einsum("bnd,bne->bde", x_ctx, x_ctx) + N * lam * np.eye(d)
    w = np.linalg.solve(A, np.einsum("bnd,bn->bd", x_ctx, y_ctx)[..., None])[..., 0]
    return np.einsum("bd,bd->b", w, x_q)


def predict_ridge(c: Construction, x_ctx: np.ndarray, y_ctx: np.ndarray, x_q: np.ndarray, lam: float) -> np.ndarray:
    xa, ya = augment(x_ctx, y_ctx, lam)
    return c.detail.predict(xa, ya, x_q)
