"""In-context regression on piecewise-linear features: paper B's anchor interpolation, then ridge by GD layers.

Task (nonlinear in-context regression). Context pairs (x_i, y_i), i = 1..N, x_i ∈ R^d, and a query x_q.
The features are the input and its truncated-linear image, coordinate by coordinate:

    φ(x) = (x_1, …, x_d, Range_[a,b](x_1), …, Range_[a,b](x_d)) ∈ R^{2d}      (p = 2d features)

(with x ∈ [−1, 1]^d and [a, b] = [0, 1], Range_[0,1](x_c) = ReLU(x_c): in-context fitting of a
piecewise-linear function with a kink at 0 in each coordinate). The target is the closed-form ridge
predictor on the features, for a given λ:

    ŷ_q = φ(x_q)ᵀ (ΦᵀΦ + NλI)^{-1} Φᵀ y            (Φ ∈ R^{N×p}, rows φ(x_i))

Construction (paper B's two mechanisms, composed)
-------------------------------------------------
1. **Feature layer** (paper B Thm 3.4, interpolation over m appended anchor tokens;
   `uatlab.constructions.paper_b.thm3_truncated_linear` derives the heads and proves the bound).
   One attention-only layer with a residual connection; tokens (x, 0_d, y) for the context and
   (x_q, 0_d, 0) for the query. For each coordinate c and each of the H sub-intervals of [a, b], head
   (c, h) scores its query β(2x_c, −1) against the anchor keys (kΔ, kΔ(L^h_k + L^h_0)) (the data tokens get
   the dead key and score −60), and writes the telescoped anchor value into slot d + c. Output token:
   (x, φ̃_2(x), y) with |φ̃_2 − Range_[a,b](x)| ≤ ``feature_bound`` (proven, per entry).
2. **Ridge by GD layers** (paper B App. B; `uatlab.constructions.paper_b.appB_incontext_ridge`):
   the p anchor tokens √(Nλ)e_k (label 0) are appended to the feature tokens and k attention-only GD
   layers (two heads and a sink each) run k ridge GD steps with step η; the iterates converge to the
   closed form at rate (1 − η(μ + λ))^k, μ the smallest eigenvalue of ΦᵀΦ/N.

Both appended token sets (interpolation anchors, ridge anchors) are sequence-wise operations of paper B's
A map (Thm 3.4), not standard Transformer operations. The error against the closed form has three parts:
the feature interpolation error (≤ ``feature_bound`` per feature entry, propagated through the ridge solve),
the attention error of the GD layers (``multi_step_bound`` of the GD module), and the k-step GD remainder;
all three are measured separately by `uatlab.experiments.incontext.construction_errors`.

Notation map (paper B → here): interpolation points p → ``anchors`` m per head; H → ``heads`` per
coordinate; β → ``plan.beta``; the ridge anchors → `appB_incontext_ridge.augment`; η → ``lr``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from uatlab.constructions.contract import PAPER_B, Construction, count_parameters
from uatlab.constructions.paper_b.appB_incontext_ridge import build_incontext_ridge
from uatlab.constructions.paper_b.thm3_truncated_linear import DEAD_SCORE, InterpolationPlan, plan_interpolation
from uatlab.errors import InputError
from uatlab.models.attention_only import AttentionOnlyConfig, AttentionOnlyLayer


def relu_features(x: np.ndarray, a: float = 0.0, b: float = 1.0) -> np.ndarray:
    """φ(x) = (x, Range_[a,b](x)) on the last axis: (..., d) → (..., 2d)."""
    x = np.asarray(x, dtype=np.float64)
    return np.concatenate([x, np.clip(x, a, b)], axis=-1)


def feature_ridge_closed_form(
    x_ctx: np.ndarray, y_ctx: np.ndarray, x_q: np.ndarray, lam: float, a: float = 0.0, b: float = 1.0
) -> np.ndarray:
    """φ(x_q)ᵀ(ΦᵀΦ + NλI)^{-1}Φᵀy per batch element: (B, N, d), (B, N), (B, d) → (B,)."""
    from uatlab.constructions.paper_b.appB_incontext_ridge import ridge_closed_form

    return ridge_closed_form(relu_features(x_ctx, a, b), y_ctx, relu_features(x_q, a, b), lam)


class FeatureRidgeNetwork(nn.Module):
    """Tokens (x_i, y_i), i < N, then (x_q, 0) → ŷ_q: the feature layer, the ridge anchors appended, k GD layers.

    (B, N+1, d+1) → (B,), float64. The ridge anchors √(Nλ)e_k (label 0) are appended after the feature layer
    (paper B's sequence-wise A, as in `uatlab.constructions.paper_b.appB_incontext_ridge.augment`).
    """

    def __init__(self, feature_layer: AttentionOnlyLayer, gd: nn.Module, d: int, context: int, lam: float) -> None:
        super().__init__()
        self.feature_layer, self.gd, self.d, self.context = feature_layer, gd, d, context
        p = 2 * d
        self.register_buffer("ridge_anchors", math.sqrt(context * lam) * torch.eye(p, dtype=torch.float64))  # (p, p)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        B, n1, d1 = tokens.shape
        d, N, p = self.d, self.context, 2 * self.d
        if n1 != N + 1 or d1 != d + 1:
            raise InputError(f"expected tokens of shape (batch, {N + 1}, {d + 1}), got {tuple(tokens.shape)}")
        tokens = tokens.to(torch.float64)
        z = torch.zeros(B, N + 1, p + 1, dtype=torch.float64)  # (x, φ slots, y)
        z[..., :d] = tokens[..., :d]
        z[:, :N, p] = tokens[:, :N, d]
        phi = self.feature_layer(z)[..., :p]  # (B, N+1, p)
        ctx_x = torch.cat([phi[:, :N], self.ridge_anchors.expand(B, p, p)], 1)  # (B, N+p, p)
        ctx_y = torch.cat([tokens[:, :N, d], torch.zeros(B, p, dtype=torch.float64)], 1)  # (B, N+p)
        ctx = torch.cat([ctx_x, ctx_y[..., None]], -1)  # (B, N+p, p+1)
        query = torch.cat([phi[:, N:], torch.zeros(B, 1, 1, dtype=torch.float64)], -1)  # (B, 1, p+1)
        out = self.gd(torch.cat([ctx, query], 1))  # (B, N+p+1, p+1)
        return -out[:, -1, p]  # ŷ = −r_q


@dataclass
class InContextFeatureRidge:
    """The feature layer and the ridge GD network, with the numbers their bounds need."""

    network: FeatureRidgeNetwork
    ridge: Construction
    plan: InterpolationPlan
    d: int
    context: int
    lam: float
    steps: int
    lr: float
    a: float
    b: float

    @property
    def feature_layer(self) -> AttentionOnlyLayer:
        return self.network.feature_layer

    def features(self, x_ctx: np.ndarray, x_q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The feature layer's φ̃ for the context and the query: (B, N, 2d), (B, 2d)."""
        B, N, d = x_ctx.shape
        if d != self.d or N != self.context or x_q.shape != (B, d):
            raise InputError(
                f"expected x_ctx (B, {self.context}, {self.d}) and x_q (B, {self.d}), got {x_ctx.shape}, {x_q.shape}"
            )
        tok = np.zeros((B, N + 1, 2 * d + 1))  # (x, φ slots, y); y does not enter the features
        tok[:, :N, :d] = x_ctx
        tok[:, N, :d] = x_q
        with torch.no_grad():
            out = self.feature_layer(torch.as_tensor(tok)).numpy()  # (B, N+1, 2d+1)
        return out[:, :N, : 2 * d], out[:, N, : 2 * d]

    def predict(self, x_ctx: np.ndarray, y_ctx: np.ndarray, x_q: np.ndarray) -> np.ndarray:
        """ŷ_q of the whole network: feature layer, ridge anchors appended, k GD layers. (B,)."""
        x_ctx, y_ctx, x_q = (np.asarray(a, np.float64) for a in (x_ctx, y_ctx, x_q))
        B, N, d = x_ctx.shape
        if d != self.d or N != self.context or x_q.shape != (B, d) or y_ctx.shape != (B, N):
            raise InputError(
                f"expected x_ctx (B, {self.context}, {self.d}), y_ctx (B, {self.context}), x_q (B, {self.d}); "
                f"got {x_ctx.shape}, {y_ctx.shape}, {x_q.shape}"
            )
        tok = np.zeros((B, N + 1, d + 1))
        tok[:, :N, :d], tok[:, :N, d], tok[:, N, :d] = x_ctx, y_ctx, x_q
        with torch.no_grad():
            return self.network(torch.as_tensor(tok)).numpy()


def build_feature_layer(
    d: int, n_tokens: int, a: float, b: float, anchors: int, heads: int = 1
) -> tuple[AttentionOnlyLayer, InterpolationPlan]:
    """One residual attention-only layer writing Range_[a,b](x_c) into slot d + c of (x, 0_d, y) tokens.

    Head (c, h) is the truncated-linear head of paper B Thm 3.4 for y = x_c on sub-interval h (module
    docstring of `uatlab.constructions.paper_b.thm3_truncated_linear`); the m anchor tokens are shared
    by all heads (each head reads its own key/value channels of them).
    """
    if d < 1 or n_tokens < 1:
        raise InputError(f"d and n_tokens must be positive, got d={d}, n_tokens={n_tokens}")
    plan = plan_interpolation(a, b, anchors=anchors, heads=heads, n_dead=n_tokens, y_bound=max(abs(a), abs(b), 1.0))
    H, m, delta = plan.heads, plan.anchors, plan.delta
    width = 2 * d + 1
    # lifted channels: 0 constant | 1..d x | per sub-interval h: key1, key2, value at 1+d+3h ..
    d_model = 1 + d + 3 * H
    cfg = AttentionOnlyConfig(
        d_in=width,
        d_model=d_model,
        d_out=width,
        n_heads=d * H,
        head_dim=2,
        max_len=n_tokens,
        n_anchors=m,
        beta=plan.beta,
        positional_bias=True,
        sequence_map=False,
        residual=True,
        dtype="float64",
    )
    layer = AttentionOnlyLayer(cfg).zero_()
    dead_key = DEAD_SCORE / plan.beta
    k = torch.arange(m, dtype=torch.float64)
    with torch.no_grad():
        layer.in_proj[1 : 1 + d, :d] = torch.eye(d, dtype=torch.float64)  # x into channels 1..d
        layer.pos_bias[:, 0] = 1.0  # the query's constant (−1 slot)
        for h in range(H):
            a_h = plan.a + h * (m - 1) * delta
            L = a_h + k * delta  # (m,) anchors of sub-interval h
            c1, c2, cv = 1 + d + 3 * h, 2 + d + 3 * h, 3 + d + 3 * h
            layer.anchors[:, c1] = k * delta
            layer.anchors[:, c2] = k * delta * (L + L[0])
            layer.anchors[:, cv] = L - a_h + plan.a / H  # telescoping shift
            layer.pos_bias[:, c2] = dead_key  # data tokens as keys: score −β·C = −DEAD_SCORE
            for c in range(d):
                j = c * H + h  # head (c, h)
                layer.W_Q[j, 0, 1 + c] = 2.0  # query β(2 x_c, −1)
                layer.W_Q[j, 1, 0] = -1.0
                layer.W_K[j, 0, c1] = 1.0
                layer.W_K[j, 1, c2] = 1.0
                layer.W_V[j, 0, cv] = 1.0
                layer.W_O[j, d + c, 0] = 1.0  # into feature slot d + c (the residual keeps x and y)
    layer.freeze_anchors(False)
    return layer, plan


def build_incontext_features(
    d: int,
    context: int,
    lam: float,
    *,
    steps: int,
    lr: float,
    anchors: int = 33,
    heads: int = 4,
    a: float = 0.0,
    b: float = 1.0,
    eps: float = 1e-4,
) -> Construction:
    """Feature layer (Range_[a,b] per coordinate by anchor interpolation) + k ridge GD layers.

    Args:
        d: input dimension (p = 2d features); context: N context pairs; lam: ridge λ > 0.
        steps: k GD layers; lr: GD step η (η ≤ 1/(L + λ), L the largest eigenvalue of ΦᵀΦ/N, converges).
        anchors, heads: interpolation anchors per head and heads per coordinate of the feature layer.
        a, b: the truncation interval; eps: the GD layers' score scale ε.

    Raises:
        InputError: non-positive sizes or λ, a ≥ b.
        PrecisionError: the feature layer's temperature overflows float64.
    """
    if not (lam > 0 and math.isfinite(lam)):
        raise InputError(f"lam must be a positive number, got {lam}")
    if d < 1 or context < 1 or steps < 1:
        raise InputError(f"d, context and steps must be positive, got d={d}, context={context}, steps={steps}")
    layer, plan = build_feature_layer(d, context + 1, a, b, anchors, heads)
    ridge = build_incontext_ridge(2 * d, context, lam, steps=steps, lr=lr, eps=eps)
    network = FeatureRidgeNetwork(layer, ridge.model, d, context, lam)
    detail = InContextFeatureRidge(network, ridge, plan, d, context, lam, steps, lr, a, b)
    params = count_parameters(layer, nonzero=True) + int(ridge.facts["parameters"])
    facts = {
        "paper": PAPER_B,
        "theorem": "Thm 3.4 (interpolation over anchors) + Appendix B (in-context gradient descent)",
        "parameters": params,
        "parameters_counted": "non-zero entries of the feature layer + all entries of the GD layers",
        "layers": 1 + steps,
        "feature_heads": d * plan.heads,
        "anchors_per_head": plan.anchors,
        "beta": plan.beta,
        "steps": steps,
        "lr": lr,
        "lam": lam,
    }
    guarantee = {"feature_sup_error_bound": plan.bound}
    return Construction(model=network, guarantee=guarantee, facts=facts, detail=detail)
