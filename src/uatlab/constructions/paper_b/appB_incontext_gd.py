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
The query token is a key too, with score ±ε x_iᵀx_q − C (C = 60, positional bias): its weight a ≤ e^{εS−C}
changes each R(±ε) by ≤ 2aV/M, i.e. the update by ≤ 2η(M+N)V e^{εS−C}/(NεM) (added; ~e^{−60}).
This is `step_error_bound`, an **exact-arithmetic** bound.

Floating-point rounding (`float_step_error_bound`, `multi_step_float_bound`)
---------------------------------------------------------------------------
The difference R(ε) − R(−ε) is of size ~εS·NV/(M+N) while each head's output is ~NV/(M+N): it loses
~u/(εS) relative accuracy (u the unit roundoff of the model's dtype), and the output scale (η/N)(M+N)/(2ε)
turns an absolute error of u·NV/(M+N) per head into ~ηuV/ε. The exact bound tends to a constant (the sink
term) as ε → 0 while this grows like 1/ε, so it must be added. Model of arithmetic: Higham, *Accuracy and
Stability of Numerical Algorithms* (2nd ed.), fl(a op b) = (a op b)(1 + δ), |δ| ≤ u, dot products of n terms
within γ_n Σ|terms| (Lemma 3.1, any summation order), γ_n = nu/(1 − nu); the one assumption beyond IEEE 754
is that exp errs by ≤ k ulp (k = `DEFAULT_EXP_ULPS`, as in the certificates), a log-relative error
λ_exp = `exp_relative_error(u, k)`; ln M is computed by libm within 2 ulp. Per layer, with |r̂_j| ≤ V the
computed residuals, S ≥ max|x̂_iᵀx̂_j|, S₁ ≥ max Σ_k |x̂_ik x̂_jk|:

1. Stored parameters: ε̂ = fl(ε) (|ε̂/ε − 1| ≤ κ_ε = u in float32, 0 in float64), ln M̂ = fl(ln M)
   (|ln M̂ − ln M| ≤ μ = (4u₆₄ + u)|ln M|), the output scale ĉ = c(1 + κ_c), κ_c = (1+u₆₄)⁴(1+u) − 1.
   The layer is then exactly the construction with (ε̂, M̂) and output scale c·ρ, ρ = (ε̂/ε)(M+N)/(M̂+N) ∈
   [(1−κ_ε)e^{−μ}, (1+κ_ε)e^{μ}]: the exact bound holds with each term evaluated at its worst (ε̂, M̂)
   (each sink/curvature term is M'^a/(M'+N)^b, a ≤ 1, b ≤ 2, so ≤ e^{3μ} × its value at M), times ρ, plus
   |ρ − 1|·ηSV for the rescaled Σ s v.
2. Scores: the computed ŝ_j = fl(ε̂x_i)ᵀx_j differ from ε̂ s_j by Δ ≤ γ_{d+1} ε̂ S₁ (+ 2d underflow units);
   the sink score ln M̂ is exact (products by 0 and 1). Exact softmax weights move by a factor e^{±2Δ}.
3. Softmax (max-subtracted): the exponents t = ŝ − m̂ of the live keys (context and sink) satisfy
   |t| ≤ T = |ln M̂| + 2σ_c, σ_c = ε̂S₁(1+γ_{d+1}); fl(t) and exp give ê = e^t·e^{±λ}, λ = uT + λ_exp;
   the sum of N+2 positive terms errs by γ_{N+1}, the normalisation by 2 roundings; the query key's weight
   share is w_q ≤ e^{σ_c − C(1−γ_{d+2}) − ln M + μ}. So every live weight p̂_k = p̃_k e^{±Θ},
   Θ = 2λ + 2u/(1−u) + γ_{N+1}/(1−γ_{N+1}) + 2w_q, and the query key's weight is off by ≤ 3w_q.
4. Head output ô = fl(Σ p̂_k r̂_k) (N+1 non-zero terms): with P = NVe^{σ}/(M̂ + Ne^{−σ}) ≥ Σ_context p_k|r_k|
   (σ = ε̂S),  |ô − o| ≤ E_o = [expm1(2Δ) + (expm1(Θ) + γ_{N+1}e^{Θ}) e^{2Δ}]·P + 5w_qV + (N+1)·η_min,
   η_min the smallest subnormal.
5. Output: Û = fl(fl(ĉô⁻) − fl(ĉô⁺)) against the exact U = c(o⁻ − o⁺), |U| ≤ ηSV + (exact bound):
   |Û − U| ≤ (1+u)[κ_c(|U| + 2cE_o) + 2cE_o + (1+κ_c)cu(2P + 2w_qV + 2E_o)] + u|U|; the residual add
   fl(r̂ + Û) adds u(V + |U| + |Û − U|).
6. float32 only: the tokens are rounded to the dtype (|x̂ − x| ≤ u|x|, |ŷ − y| ≤ u|y|), so the exact GD on
   (x̂, ŷ) differs from the GD on (x, y) by e₀ = uV at the start and by ≤ η(2u+u²)S₁V_t per step
   (|x̂_iᵀx̂_j − x_iᵀx_j| ≤ (2u+u²)S₁); S and S₁ grow by (2u+u²)S₁ and (1+u)² for the rounded tokens.

The dominant term for small ε is 2cE_o + 2cuP ≈ (Θ + u)·ηV/ε: the rigorous bound is U-shaped in ε, like
the measured error (`gd_sweep`). The reference GD of the measurements runs in float64 numpy; its own rounding
(~(N+d)u₆₄ηSV per step) is far below the u·ηV/ε term and is not part of the bound.

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

from uatlab._util import check_integer
from uatlab.constructions.contract import PAPER_B, Construction, count_parameters
from uatlab.constructions.paper_b.thm3_truncated_linear import DEAD_SCORE
from uatlab.errors import InputError, PrecisionError
from uatlab.models.attention_only import AttentionOnlyConfig, AttentionOnlyLayer, AttentionOnlyNetwork
from uatlab.numerics.float_bounds import DEFAULT_EXP_ULPS, exp_relative_error, gamma, underflow_eta, unit_roundoff


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
    dtype: str = "float64"

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


def _sink_curvature_terms(N: int, M: float, eps: float, S: float, V: float) -> float:
    """The bracket of the module docstring's per-step bound (before the factor η/N), query key excluded."""
    g_max = (2 * M * N * (math.cosh(eps * S) - 1) + N * N * (math.cosh(2 * eps * S) - 1)) / (M + N) ** 2
    e = (N * N * V * S + M * N * V * S**3 * eps**2 * math.cosh(eps * S) / 2) / (M + N)
    return e + 4 * N * N * V * S**3 * eps**2 * math.cosh(2 * eps * S) / (M + N) + g_max * N * V * S


def _query_key_term(N: int, M: float, eps: float, S: float, V: float, lr: float) -> float:
    """Effect of the query token as a key (weight ≤ e^{εS−C}): ≤ 2η(M+N)V e^{εS−C}/(NεM)."""
    return 2 * lr * (M + N) * V * math.exp(eps * S - DEAD_SCORE) / (N * eps * M)


def step_error_bound(N: int, M: float, eps: float, S: float, V: float, lr: float) -> float:
    """Exact-arithmetic bound on one layer's error against one GD step (module docstring; no rounding).

    ``inf`` (a true, vacuous bound) when a term exceeds the float64 range, e.g. cosh(εS) for a large εS."""
    try:
        return lr / N * _sink_curvature_terms(N, M, eps, S, V) + _query_key_term(N, M, eps, S, V, lr)
    except OverflowError:
        return math.inf


def multi_step_bound(N: int, M: float, eps: float, S: float, V: float, lr: float, steps: int) -> float:
    """Exact-arithmetic sup-error bound on ŷ after k layers, propagating the per-step bound.

    The exact update r_i ← r_i − (η/N) Σ_j s_ij r_j is (1 + ηS)-Lipschitz in the max norm, and the exact
    residuals satisfy max|r^t| ≤ V (1 + ηS)^t. Layer t is applied to perturbed residuals (error e_t), so:

        e_{t+1} ≤ (1 + ηS) e_t + step_bound(V_t + e_t),   e_0 = 0,  V_t = V (1 + ηS)^t.

    Valid but loose for k > 1 (the factor (1 + ηS)^k is a worst case). It ignores rounding: the bound of a
    floating-point run is `multi_step_float_bound`.
    """
    e, vt, lip = 0.0, V, 1 + lr * S
    for _ in range(steps):
        e = lip * e + step_error_bound(N, M, eps, S, vt + e, lr)
        if not math.isfinite(e):
            return math.inf
        vt *= lip
    return e


def float_step_error_bound(
    N: int,
    M: float,
    eps: float,
    S: float,
    S_abs: float,
    V: float,
    lr: float,
    d: int,
    dtype: str,
    exp_ulps: float = DEFAULT_EXP_ULPS,
) -> float:
    """Bound on |computed layer output − one exact GD step| on the layer's own (rounded) tokens.

    Items 1–5 of "Floating-point rounding" in the module docstring. S ≥ max|x̂_iᵀx̂_j|, S_abs ≥
    max Σ_k|x̂_ik x̂_jk| (i any token, j a context token), V ≥ max|r̂_j| of the layer's input.
    ``inf`` (a true, vacuous bound) when a term exceeds the float64 range (large ε·S₁, e.g. d in the
    thousands), or when V is already infinite.
    """
    if not math.isfinite(V):
        return math.inf
    try:
        bound = _float_step_error_bound(N, M, eps, S, S_abs, V, lr, d, dtype, exp_ulps)
    except OverflowError:
        return math.inf
    return bound if not math.isnan(bound) else math.inf  # NaN only from an inf term times 0: still unbounded


def _float_step_error_bound(
    N: int, M: float, eps: float, S: float, S_abs: float, V: float, lr: float, d: int, dtype: str, exp_ulps: float
) -> float:
    u, u64, eta = unit_roundoff(dtype), unit_roundoff("float64"), underflow_eta(dtype)
    kap_e = u if dtype == "float32" else 0.0
    mu = (4 * u64 + u) * abs(math.log(M))
    kap_c = (1 + u64) ** 4 * (1 + u) - 1
    eps_hi, eps_lo = eps * (1 + kap_e), eps * (1 - kap_e)
    rho_hi = (1 + kap_e) * math.exp(mu)
    # 1. exact bound at the stored (ε̂, M̂), rescaled by ρ, plus |ρ − 1|·ηSV
    exact = rho_hi * (
        lr / N * math.exp(3 * mu) * _sink_curvature_terms(N, M, eps_hi, S, V)
        + math.exp(2 * mu) * _query_key_term(N, M, eps_lo, S, V, lr)
    )
    exact += (rho_hi - 1) * lr * S * V
    big_u = lr * S * V + exact  # |U| ≤ ηSV + exact part
    # 2. scores
    g_d1 = gamma(d + 1, u)
    delta = g_d1 * eps_hi * S_abs + 2 * d * eta
    # 3. softmax
    sig, sig_c = eps_hi * S, eps_hi * S_abs * (1 + g_d1)
    big_t = abs(math.log(M)) + mu + 2 * sig_c
    lam = u * big_t + exp_relative_error(u, exp_ulps)
    w_q = math.exp(sig_c - DEAD_SCORE * (1 - gamma(d + 2, u)) - math.log(M) + mu)
    g_n = gamma(N + 1, u)
    theta = 2 * lam + 2 * u / (1 - u) + g_n / (1 - g_n) + 2 * w_q
    # 4. one head's output
    P = N * V * math.exp(sig) / (M * math.exp(-mu) + N * math.exp(-sig))
    e_o = (math.expm1(2 * delta) + (math.expm1(theta) + g_n * math.exp(theta)) * math.exp(2 * delta)) * P
    e_o += 5 * w_q * V + (N + 1) * eta
    # 5. output scale, head sum, residual add
    c = lr / N * (M + N) / (2 * eps)
    d_u = kap_c * (big_u + 2 * c * e_o) + 2 * c * e_o + (1 + kap_c) * c * u * (2 * P + 2 * w_q * V + 2 * e_o)
    uu = (1 + u) * d_u + u * big_u
    return exact + uu + u * (V + big_u + uu)


def multi_step_float_bound(
    N: int,
    M: float,
    eps: float,
    S: float,
    S_abs: float,
    V: float,
    lr: float,
    steps: int,
    d: int,
    dtype: str,
    exp_ulps: float = DEFAULT_EXP_ULPS,
) -> float:
    """Sup-error bound on ŷ of the k-layer model run in ``dtype`` against exact GD on the float64 tokens.

    The recursion of `multi_step_bound` with `float_step_error_bound` per layer and, in float32, the
    rounding of the tokens (item 6 of the module docstring):

        e_{t+1} ≤ (1 + ηS) e_t + η(2u_in + u_in²) S₁ (V_t + e_t) + float_step(V_t + e_t),  e_0 = u_in V,

    u_in = u for float32 (tokens rounded) and 0 for float64. S ≥ max|x_iᵀx_j|, S_abs ≥ max Σ_k|x_ik x_jk|
    (i any token, j a context token), V ≥ max|y_j| of the float64 tokens. Rigorous under the stated
    assumption on exp (≤ ``exp_ulps`` ulp) and on libm's log (≤ 2 ulp).
    """
    u_in = unit_roundoff(dtype) if dtype == "float32" else 0.0
    ds = (2 * u_in + u_in**2) * S_abs
    S_r, S_abs_r = S + ds, S_abs * (1 + u_in) ** 2
    e, vt, lip = u_in * V, V, 1 + lr * S
    for _ in range(steps):
        vin = vt + e
        e = lip * e + lr * ds * vin + float_step_error_bound(N, M, eps, S_r, S_abs_r, vin, lr, d, dtype, exp_ulps)
        if not math.isfinite(e):  # vacuous from here on (and 0·inf would make it NaN)
            return math.inf
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

    Returns:
        A `Construction` whose ``guarantee`` holds for data in the unit envelope (max|x_iᵀx_j| ≤ 1,
        max Σ_k|x_ik x_jk| ≤ 1, max|y_j| ≤ 1): ``sup_error_bound_unit_data`` bounds |ŷ − ŷ_GD| of the run in
        ``dtype`` (rounding included, `multi_step_float_bound`), ``exact_arithmetic_bound_unit_data`` the same
        in exact arithmetic (`multi_step_bound`); ``eps_min`` is the smallest ε accepted in ``dtype``. For
        other data the bound is `multi_step_float_bound` with the data's S, S₁, V (``facts["bound"]``).

    Raises:
        InputError: non-positive sizes, eps or lr.
        PrecisionError: ln M + scores overflow, or float32 with a small ε.
    """
    for name, value in (("d", d), ("context", context), ("steps", steps)):
        check_integer(value, name, 1, None, "build_incontext_gd()")
    if dtype not in ("float32", "float64"):
        raise InputError(f"build_incontext_gd(): dtype must be 'float32' or 'float64', got {dtype!r}")
    if not (eps > 0 and math.isfinite(eps)) or not (lr > 0 and math.isfinite(lr)):
        raise InputError(f"eps and lr must be positive numbers, got eps={eps}, lr={lr}")
    M = float(sink) if sink is not None else 1e8 * context
    if not (M > 0 and math.isfinite(math.log(M))):
        raise InputError(f"sink weight must be positive and finite, got {sink}")
    u = 2.0**-53 if dtype == "float64" else 2.0**-24
    if u / eps > 1e-2:
        least = 100 * u  # u/eps ≤ 1e-2; printed rounded up to 3 digits, so the printed value is accepted
        step = 10.0 ** (math.floor(math.log10(least)) - 2)
        larger = f"a larger eps (at least {math.ceil(least / step) * step:.3g} in {dtype})"
        raise PrecisionError(
            f"eps={eps:g} is too small for {dtype}: the difference of the ± heads loses ~{u / eps:.2g} relative "
            f"accuracy; use {larger if dtype == 'float64' else 'float64 or ' + larger}"
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
                # ±ε x_i; built in the layer's dtype (a float32 eye would round ε in a float64 model)
                layer.W_Q[h, :d, :d] = sgn * eps * torch.eye(d, dtype=layer.W_Q.dtype)
                layer.W_Q[h, d, cc] = math.log(M)  # pairs with the sink flag: score ln M
                layer.W_Q[h, d + 1, cc] = 1.0  # pairs with −C·query flag
                layer.W_K[h, :d, :d] = torch.eye(d)  # x_j
                layer.W_K[h, d, cs] = 1.0
                layer.W_K[h, d + 1, cq] = -DEAD_SCORE  # the query token is not a key
                layer.W_V[h, 0, cr] = 1.0  # value r_j
                layer.W_O[h, cr, 0] = -sgn * scale  # r_i ← r_i − (η/N)(M+N)(R(ε) − R(−ε))/(2ε)
        layers.append(layer)
    detail = InContextGD(
        model=AttentionOnlyNetwork(layers), d=d, context=N, steps=steps, lr=lr, eps=eps, sink=M, dtype=dtype
    )
    facts = {
        "paper": PAPER_B,
        "theorem": "Appendix B (in-context gradient descent)",
        "parameters": count_parameters(detail.model),
        "steps": steps,
        "lr": lr,
        "eps": eps,
        "sink": M,
        "dtype": dtype,
    }
    # the error bound depends on the data through S ≥ max|x_iᵀx_j|, S₁ ≥ max Σ_k|x_ik x_jk| and V ≥ max|y_j|;
    # the guarantee states it for data inside the unit envelope S = S₁ = V = 1 (any other data: call
    # multi_step_float_bound with its own S, S₁, V, as `uatlab.experiments.measure.relative_error` does)
    guarantee = {
        "sup_error_bound_unit_data": multi_step_float_bound(N, M, eps, 1.0, 1.0, 1.0, lr, steps, d, dtype),
        "exact_arithmetic_bound_unit_data": multi_step_bound(N, M, eps, 1.0, 1.0, lr, steps),
        "eps_min": 100 * u,  # the smallest ε accepted in this dtype (u/ε ≤ 10⁻²); any lr > 0 is accepted
    }
    facts["bound"] = (
        "data-dependent: multi_step_float_bound(N, M, eps, S, S_abs, V, lr, steps, d, dtype) with "
        "S ≥ max|x_i·x_j|, S_abs ≥ max Σ_k|x_ik x_jk| (i any token, j a context token), V ≥ max|y_j|; "
        "the guarantee's *_unit_data entries are it at S = S_abs = V = 1"
    )
    return Construction(model=detail.model, guarantee=guarantee, facts=facts, detail=detail)
