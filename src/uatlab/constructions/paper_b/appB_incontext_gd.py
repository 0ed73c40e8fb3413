"""Softmax attention that runs gradient descent in context (paper B, App. B / v1 Sec. 4), in closed form.

Task: in-context linear regression. Tokens z_i = (x_i, y_i) for the N context pairs, then the query
token (x_q, 0) at the last position. Least squares L(w) = (1/2N) Σ_i (wᵀx_i − y_i)², gradient descent
from w_0 = 0 with step η:

    w_{t+1} = w_t − (η/N) Σ_i (w_tᵀx_i − y_i) x_i ,      prediction ŷ_k = w_kᵀ x_q

Residual form (von Oswald et al. 2023 for *linear* attention): keep r_i = y_i − w_tᵀx_i in every token
(r_q = −w_tᵀx_q for the query). One GD step is the token update:

    r_i ← r_i − (η/N) Σ_{j context} r_j x_jᵀ x_i          and ŷ_k = −r_q after k steps.

Softmax version (ours; the paper's App. B construction is not available item 3)
-------------------------------------------------------------------------------------------
The update needs Σ_j s_j v_j with s_j = x_iᵀx_j, v_j = r_j: *linear* attention. Two softmax heads with
scores ±ε s_j plus one **sink** key of score ln M and value 0 (an appended anchor token) give:

    R(±ε) = Σ_j e^{±ε s_j} v_j / (M + Σ_j e^{±ε s_j}),    (M + N)(R(ε) − R(−ε))/(2ε) ≈ Σ_j s_j v_j

Exact identity: R(ε) − R(−ε) = 2[M Σ_j v_j sinh(εs_j) + Σ_{j,k} v_j sinh(ε(s_j − s_k))]/Den with
Den = Bd(ε)Bd(−ε) = (M+N)²(1+γ), 0 ≤ γ ≤ γ_max = [2MN(cosh εS − 1) + N²(cosh 2εS − 1)]/(M+N)²
(Cauchy–Schwarz gives (Σe^{εs})(Σe^{−εs}) ≥ N²). With |sinh(t)/ε − s| ≤ |s|·ε²s²cosh(εs)/2 and
Σ_{j,k} v_j (s_j − s_k) = NΣvs − ΣvΣs, one step of the layer satisfies, with S = max|s_j|, V = max|v_j|:

    |(M+N)(R(ε)−R(−ε))/(2ε) − Σ_j s_j v_j|
        ≤ [N² V S + M N V S³ ε² cosh(εS)/2 + 4 N² V S³ ε² cosh(2εS)] / (M+N) + γ_max N V S

so the error of one GD step is ≤ (η/N) × this: O(N/M) from the sink and O(ε²S²) from the curvature of exp.
In float64 the difference R(ε) − R(−ε) loses ~u/(εS) relative accuracy (u = 2^-53), so ε cannot be too
small: the error against ε is U-shaped (measured by `gd_sweep`).

Layer parametrisation (`uatlab.models.attention_only.AttentionOnlyLayer`, residual on):
lifted token z = (x (d), r, 1, sink flag, query flag); the query flag comes from the positional bias of
the last position (C = 60 pushes the query out of the keys: a positional encoding); the sink is the one
appended anchor token (a sequence-wise operation, as in paper B Thm 3.4). Head ± has W_Q z = (±ε x, ln M, 1),
W_K z = (x, sink, −C·query flag), W_V z = r, W_O = ∓(η/N)(M+N)/(2ε) into the r channel. Paper B's layers
have no skip connection; the k-step network uses one (``residual=True``), reported as a deviation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from uatlab.constructions.contract import PAPER_B, Construction, count_parameters
from uatlab.constructions.paper_b.thm3_truncated_linear import DEAD_SCORE
from uatlab.errors import InputError, PrecisionError
from uatlab.models.attention_only import AttentionOnlyConfig, AttentionOnlyLayer, AttentionOnlyNetwork


@dataclass
class InContextGD:
    """The attention-only network computing k GD steps, with its parameters and per-step bound inputs."""

    model: AttentionOnlyNetwork
    d: int
    context: int
    steps: int
    lr: float
    eps: float
    sink: float

    def predict(self, x_ctx: np.ndarray, y_ctx: np.ndarray, x_query: np.ndarray) -> np.ndarray:
        """ŷ for each batch element: x_ctx (B, N, d), y_ctx (B, N), x_query (B, d) → (B,)."""
        tokens = make_tokens(x_ctx, y_ctx, x_query)  # (B, N+1, d+1)
        with torch.no_grad():
            out = self.model(torch.as_tensor(tokens))  # (B, N+1, d+1)
        return -out[:, -1, self.d].numpy()  # ŷ = −r_q


def make_tokens(x_ctx: np.ndarray, y_ctx: np.ndarray, x_query: np.ndarray) -> np.ndarray:
    """Tokens (x_i, y_i) for the context and (x_q, 0) for the query: (B, N+1, d+1)."""
    x_ctx, y_ctx, x_query = (np.asarray(a, np.float64) for a in (x_ctx, y_ctx, x_query))
    if x_ctx.ndim != 3 or y_ctx.shape != x_ctx.shape[:2] or x_query.shape != (x_ctx.shape[0], x_ctx.shape[2]):
        raise InputError(
            f"expected x_ctx (B, N, d), y_ctx (B, N), x_query (B, d); got {x_ctx.shape}, {y_ctx.shape}, {x_query.shape}"
        )
    B, N, d = x_ctx.shape
    tok = np.zeros((B, N + 1, d + 1))
    tok[:, :N, :d] = x_ctx
    tok[:, :N, d] = y_ctx
    tok[:, N, :d] = x_query
    return tok


def gd_prediction(x_ctx: np.ndarray, y_ctx: np.ndarray, x_query: np.ndarray, lr: float, steps: int) -> np.ndarray:
    """Exact k-step gradient descent from w = 0 on (1/2N)Σ(wᵀx − y)²: returns w_kᵀx_q, shape (B,)."""
    B, N, d = x_ctx.shape
    w = np.zeros((B, d))
    for _ in range(steps):
        resid = np.einsum("bnd,bd->bn", x_ctx, w) - y_ctx  # (B, N)
        w = w - lr / N * np.einsum("bn,bnd->bd", resid, x_ctx)
    return np.einsum("bd,bd->b", w, x_query)


def step_error_bound(N: int, M: float, eps: float, S: float, V: float, lr: float) -> float:
    """The per-step bound of the module docstring, times η/N."""
    g_max = (2 * M * N * (math.cosh(eps * S) - 1) + N * N * (math.cosh(2 * eps * S) - 1)) / (M + N) ** 2
    e = (N * N * V * S + M * N * V * S**3 * eps**2 * math.cosh(eps * S) / 2) / (M + N)
    e += 4 * N * N * V * S**3 * eps**2 * math.cosh(2 * eps * S) / (M + N) + g_max * N * V * S
    return lr / N * e


def multi_step_bound(N: int, M: float, eps: float, S: float, V: float, lr: float, steps: int) -> float:
    """Sup-error bound on ŷ after k layers, propagating the per-step bound.

    The exact update r_i ← r_i − (η/N) Σ_j s_ij r_j is (1 + ηS)-Lipschitz in the max norm, and the exact
    residuals satisfy max|r^t| ≤ V (1 + ηS)^t. Layer t is applied to perturbed residuals (error e_t), so:

        e_{t+1} ≤ (1 + ηS) e_t + step_bound(V_t + e_t),   e_0 = 0,  V_t = V (1 + ηS)^t.

    Valid but loose for k > 1 (the factor (1 + ηS)^k is a worst case).
    """
    e, vt, lip = 0.0, V, 1 + lr * S
    for _ in range(steps):
        e = lip * e + step_error_bound(N, M, eps, S, vt + e, lr)
        vt *= lip
    return e


def build_incontext_gd(
    d: int,
    context: int,
    *,
    steps: int = 1,
    lr: float = 1.0,
    eps: float = 1e-4,
    sink: float | None = None,
    dtype: str = "float64",
) -> Construction:
    """k attention-only layers (2 softmax heads + a sink token each) approximating k GD steps.

    Args:
        d: input dimension; context: N context pairs (the query is token N).
        steps: k GD steps (one layer each). lr: step η. eps: score scale ε of the ± heads (inverse temperature).
        sink: sink weight M (default 1e8·N). dtype: "float64" (float32 loses the difference R(ε) − R(−ε)).

    Raises:
        InputError: non-positive sizes, eps or lr.
        PrecisionError: ln M + scores overflow, or float32 with a small ε.
    """
    if d < 1 or context < 1 or steps < 1:
        raise InputError(f"d, context and steps must be positive, got d={d}, context={context}, steps={steps}")
    if not (eps > 0 and math.isfinite(eps)) or not (lr > 0 and math.isfinite(lr)):
        raise InputError(f"eps and lr must be positive numbers, got eps={eps}, lr={lr}")
    M = float(sink) if sink is not None else 1e8 * context
    if not (M > 0 and math.isfinite(math.log(M))):
        raise InputError(f"sink weight must be positive and finite, got {sink}")
    u = 2.0**-53 if dtype == "float64" else 2.0**-24
    if u / eps > 1e-2:
        raise PrecisionError(
            f"eps={eps:g} is too small for {dtype}: the difference of the ± heads loses ~{u / eps:.2g} relative "
            f"accuracy; use float64 or a larger eps"
        )
    N = context
    d_in = d + 1  # token (x, r)
    d_model = d + 4  # (x, r, const, sink flag, query flag)
    cr, cc, cs, cq = d, d + 1, d + 2, d + 3
    scale = lr / N * (M + N) / (2 * eps)
    layers = []
    for _ in range(steps):
        cfg = AttentionOnlyConfig(
            d_in=d_in,
            d_model=d_model,
            d_out=d_in,
            n_heads=2,
            head_dim=d + 2,
            max_len=N + 1,
            n_anchors=1,
            beta=1.0,
            positional_bias=True,
            sequence_map=False,
            residual=True,
            dtype=dtype,
        )
        layer = AttentionOnlyLayer(cfg).zero_()
        with torch.no_grad():
            layer.in_proj[: d + 1, : d + 1] = torch.eye(d + 1)  # x and r pass through
            layer.pos_bias[:, cc] = 1.0  # constant channel (positional bias)
            layer.pos_bias[N, cq] = 1.0  # the last position is the query: flag it
            layer.anchors[0, cs] = 1.0  # the sink token: only its sink flag is set (x = r = 0)
            for h, sgn in enumerate((1.0, -1.0)):
                layer.W_Q[h, :d, :d] = sgn * eps * torch.eye(d)  # ±ε x_i
                layer.W_Q[h, d, cc] = math.log(M)  # pairs with the sink flag: score ln M
                layer.W_Q[h, d + 1, cc] = 1.0  # pairs with −C·query flag
                layer.W_K[h, :d, :d] = torch.eye(d)  # x_j
                layer.W_K[h, d, cs] = 1.0
                layer.W_K[h, d + 1, cq] = -DEAD_SCORE  # the query token is not a key
                layer.W_V[h, 0, cr] = 1.0  # value r_j
                layer.W_O[h, cr, 0] = -sgn * scale  # r_i ← r_i − (η/N)(M+N)(R(ε) − R(−ε))/(2ε)
        layers.append(layer)
    detail = InContextGD(model=AttentionOnlyNetwork(layers), d=d, context=N, steps=steps, lr=lr, eps=eps, sink=M)
    facts = {
        "paper": PAPER_B,
        "theorem": "Appendix B (in-context gradient descent)",
        "parameters": count_parameters(detail.model),
        "steps": steps,
        "lr": lr,
        "eps": eps,
        "sink": M,
    }
    # the error bound depends on the data (|x| ≤ S, |y| ≤ V): multi_step_bound(N, M, eps, S, V, lr, steps)
    return Construction(model=detail.model, guarantee={}, facts=facts, detail=detail)
