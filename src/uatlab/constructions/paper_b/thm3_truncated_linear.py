"""Paper B's interpolation attention: softmax attention computing ``Range_[a,b](w_iᵀx_i + t_i)`` in closed form.

Target (paper B, Definition 3.1):

    Range_[a,b](y) = min(max(y, a), b)          ("truncated linear" / ramp / clamp)
    target token i:  Range_[a,b](w_iᵀ x_i + t_i)   written into output coordinate ``out_channel``

Construction (the paper, §3.4; paper B Thm 3.4 sequence-wise and Thm 3.9 token-wise; the exact
constants of the paper are not available, this is our derivation)
---------------------------------------------------------------------------------------------
Split [a,b] into H sub-intervals [a_h, b_h] of equal length and give head h the m anchors
``L^h_k = a_h + kΔ``, ``k = 0..m−1``, ``Δ = (b−a)/(H(m−1))``. With ``y_i = w_iᵀx_i + t_i``:

    query_i   = β (2 y_i, −1)                               (W_Q^h ∘ A, linear in the lifted token)
    key_k^h   = (kΔ, kΔ (L^h_k + L^h_0))                    (anchor k of head h)
    score     = β kΔ (2y − L^h_k − L^h_0) = −β[(y − L^h_k)² − (y − L^h_0)²]
    value_k^h = L^h_k − a_h + a/H                           (telescoping shift)
    out_i     = Σ_h Σ_k softmax_k(score) value_k^h
              ≈ a + Σ_h (Range_[a_h,b_h](y_i) − a_h) = Range_[a,b](y_i)      (telescoping identity)

The softmax over k is ∝ exp(−β (y − L^h_k)²): a Gaussian kernel over the anchors that tends to
"nearest anchor" as β → ∞.

* ``mode='token'`` (paper B Thm 3.9, a valid Transformer layer): the anchors are the n *positions*;
  keys and values come from the per-position bias B of A (a positional encoding). Needs m ≤ n;
  positions j ≥ m get a "dead" key (0, C) whose score −βC ≤ −60 removes them. A token-wise A is
  shared by the positions, so w must be the same for every token (t_i may differ): a per-token
  w_i is a bilinear function of (position, token) that one token-wise affine map cannot form.
* ``mode='sequence'`` (paper B Thm 3.4): m anchor tokens are appended to the sequence (``anchors``)
  and, when the w_i differ, a linear map across positions (``seq_map``) puts w_iᵀx_i in column i.
  Neither operation exists in a standard Transformer. Data tokens
  get the dead key (0, C).

Sup-error bound (proved here; improves the simple bound Δ + (b−a)·m·e^{−βΔ²})
---------------------------------------------------------------------------
Write x = βΔ², q = e^{−x}. Fix one head with anchors L_0 < … < L_{m−1} spaced Δ and let
p_k ∝ exp(−β(y − L_k)²) be its softmax weights.

*Inside* (y ∈ [L_0, L_{m−1}]). Let L_lo ≤ y ≤ L_hi be the bracketing anchors, s = y − L_lo.
(i) The pair contributes |p_lo(L_lo − y) + p_hi(L_hi − y)| ≤ (p_lo + p_hi)·f(s) with
f(s) = (s·w_lo + (Δ−s)·w_hi)/(w_lo + w_hi), w = unnormalised weights. For s ≤ Δ/2 we have w_hi ≤ w_lo, so
f(s) = s + (Δ − 2s)·w_hi/(w_lo + w_hi) ≤ s + (Δ − 2s)/2 = Δ/2 (symmetric for s ≥ Δ/2). (ii) An anchor j
steps beyond the pair (j ≥ 1) is at distance D = jΔ + u with u ∈ {s, Δ−s}, while the nearest anchor is
at distance r_0 ≤ u; so D² − r_0² ≥ j²Δ², its weight is ≤ e^{−xj²} and its error ≤ (j+1)Δ. Hence:

    |out − y| ≤ Δ/2 + 2Δ Σ_{j=1}^{m−1} (j+1) e^{−x j²}   =: Δ/2 + T_in

*Outside* (y ≥ L_{m−1}, target L_{m−1}; y ≤ L_0 symmetric). The nearest anchor is L_{m−1} at distance
u ≥ 0, anchor m−1−j is at distance u + jΔ, (u + jΔ)² − u² ≥ j²Δ²:

    |out − Range(y)| ≤ Δ Σ_{j=1}^{m−1} j e^{−x j²}   =: T_out        (no Δ/2 term: clamping is exact)

*Dead keys* (positions beyond the anchors, or data tokens in sequence mode): score −βC ≤ −K while the
best anchor scores ≥ 0 (anchor 0 scores exactly 0), so their total weight is π ≤ n_dead·e^{−K} and
they move a head's output by ≤ π·(|v_dead| + max|value|) =: T_dead.

*Telescoping over H heads.* For y in head h*'s interval the others clamp, so:

    sup_y |out − Range_[a,b](y)| ≤ Δ/2 + T_in + (H−1)·T_out + H·T_dead       (y ∈ [a,b])
                                 ≤ H·T_out + H·T_dead                           (y ∉ [a,b])

Since Δ = (b−a)/(H(m−1)), the error falls as 1/(mH) once x is large enough that T_in, T_out ≪ Δ/2.
The simple bound Δ + (b−a)·m·e^{−x} (with Δ the per-head spacing, per head) is also reported; the
reported ``bound`` is the smaller of the two. Both hold in exact arithmetic. In floating point the
scores |s| ≤ S_max are rounded to within η ≈ 4u·S_max (u = unit roundoff), which multiplies each
weight by at most e^{±2η}; the estimate ``float_term = H(e^{2η} − 1)(b − a)/H + 4 p u max|L|`` is
added to the bound (an estimate, not a proof: it ignores the rounding of y itself).

Choice of β (inverse temperature): x = βΔ² is the smallest value on a fine log grid with
T_in + (H−1)T_out ≤ ``tail_fraction``·Δ/2 (``anchors=`` given) or ≤ ε/4 (``eps=`` given, with Δ ≤ ε
so Δ/2 ≤ ε/2). The construction refuses (PrecisionError) when β·S_max overflows the dtype or when
``float_term`` exceeds the accuracy target — typical in float32 where β ~ m² makes scores large.

Notation map (paper B → here): p (precision / number of interpolation points) → ``anchors`` m per
head; H → ``heads``; β → ``beta``; A (token-wise with bias) → ``in_proj`` + ``pos_bias``; A
(sequence-wise) → ``seq_map`` + ``anchors`` of `uatlab.models.attention_only.AttentionOnlyLayer`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import torch

from uatlab._util import check_integer
from uatlab.constructions.contract import PAPER_B, Construction
from uatlab.errors import InputError, PrecisionError
from uatlab.models.attention_only import AttentionOnlyConfig, AttentionOnlyLayer
from uatlab.numerics.float_bounds import unit_roundoff

Mode = Literal["token", "sequence"]

#: score gap given to dead keys (positions that are not anchors, data tokens in sequence mode)
DEAD_SCORE = 60.0


def truncated_linear(y: torch.Tensor | np.ndarray, a: float, b: float):
    """Range_[a,b](y) = clamp(y, a, b) (paper B, Definition 3.1)."""
    if isinstance(y, torch.Tensor):
        return y.clamp(a, b)
    return np.clip(y, a, b)


def tail_inside(delta: float, x: float, m: int) -> float:
    """T_in = 2Δ Σ_{j=1}^{m−1} (j+1) e^{−x j²} (module docstring, 'Inside')."""
    j = np.arange(1, max(m, 2), dtype=np.float64)
    return float(2.0 * delta * np.sum((j + 1.0) * np.exp(-x * j * j)))


def tail_outside(delta: float, x: float, m: int) -> float:
    """T_out = Δ Σ_{j=1}^{m−1} j e^{−x j²} (module docstring, 'Outside')."""
    j = np.arange(1, max(m, 2), dtype=np.float64)
    return float(delta * np.sum(j * np.exp(-x * j * j)))


@dataclass(frozen=True)
class InterpolationPlan:
    """Sizes, temperature and the proven error bound of one truncated-linear construction.

    Attributes:
        a, b: the clamp interval.
        heads: H; anchors: m per head; delta: Δ = (b−a)/(H(m−1)).
        beta: inverse temperature; x: βΔ².
        bound_inside / bound_outside: proven sup-error bounds for y ∈ [a,b] / y ∉ [a,b] (exact arithmetic).
        spec_bound: the simple bound H·(Δ + (b_h−a_h)·m·e^{−x}) for comparison.
        float_term: rounding estimate added to ``bound``.
        bound: min(bound_inside, spec_bound) + float_term — the exact-arithmetic bound plus the rounding
            *estimate* (the exact part is proven, the estimate is not; see the module docstring).
        y_bound: |y| ≤ y_bound assumed for the score magnitude S_max.
        max_score: S_max.
    """

    a: float
    b: float
    heads: int
    anchors: int
    delta: float
    beta: float
    x: float
    bound_inside: float
    bound_outside: float
    spec_bound: float
    float_term: float
    y_bound: float
    max_score: float
    dtype: str
    notes: list[str] = field(default_factory=list)

    @property
    def bound(self) -> float:
        return min(self.bound_inside, self.spec_bound) + self.float_term

    @property
    def clamp_bound(self) -> float:
        return self.bound_outside + self.float_term


def _bounds(a: float, b: float, heads: int, m: int, beta: float, n_dead: int) -> tuple[float, float, float]:
    delta = (b - a) / (heads * (m - 1))
    x = beta * delta * delta
    vmax = max(abs(a), abs(b)) + (b - a)  # |value| ≤ |L − a_h + a/H| ≤ this; dead values are 0
    t_dead = n_dead * math.exp(-DEAD_SCORE) * 2.0 * vmax
    inside = delta / 2 + tail_inside(delta, x, m) + (heads - 1) * tail_outside(delta, x, m) + heads * t_dead
    outside = heads * (tail_outside(delta, x, m) + t_dead)
    spec = heads * (delta + (b - a) / heads * m * math.exp(-x)) + heads * t_dead
    return inside, outside, spec


def _float_term(a: float, b: float, heads: int, m: int, beta: float, y_bound: float, dtype: str, p: int):
    u = unit_roundoff(dtype)
    delta = (b - a) / (heads * (m - 1))
    lmax = max(abs(a), abs(b))
    # S_max = β · max_k kΔ · (2|y| + |L_k + L_0|) ≤ β (m−1)Δ (2 y_bound + 2 lmax)
    s_max = beta * (m - 1) * delta * (2 * y_bound + 2 * lmax)
    eta = 4 * u * max(s_max, DEAD_SCORE)
    term = heads * math.expm1(min(2 * eta, 700.0)) * (b - a) / heads + 4 * p * u * (lmax + (b - a))
    return term, s_max


def plan_in_dtype(plan: InterpolationPlan, dtype: str, n_dead: int = 0) -> InterpolationPlan:
    """The same plan (m, β, exact bounds) with the rounding estimate ``float_term`` of a model run in ``dtype``.

    For weights placed by a float64 plan into a model of another dtype; unlike `plan_interpolation` it does
    not refuse when the estimate is large (the model exists), it only reports it.
    """
    if dtype not in ("float32", "float64"):
        raise InputError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
    fterm, s_max = _float_term(
        plan.a, plan.b, plan.heads, plan.anchors, plan.beta, plan.y_bound, dtype, plan.anchors + n_dead
    )
    return replace(plan, float_term=fterm, max_score=s_max, dtype=dtype)


def _either(options: list[str]) -> str:
    """'a, b or c' (the remedies a message offers)."""
    return options[0] if len(options) == 1 else f"{', '.join(options[:-1])} or {options[-1]}"


def plan_interpolation(
    a: float,
    b: float,
    *,
    eps: float | None = None,
    anchors: int | None = None,
    heads: int = 1,
    beta: float | None = None,
    dtype: str = "float64",
    y_bound: float | None = None,
    n_dead: int = 0,
    tail_fraction: float = 1e-3,
) -> InterpolationPlan:
    """Choose m, β for Range_[a,b] to accuracy ``eps`` (or with ``anchors`` per head) and prove the bound.

    Args:
        a, b: clamp interval, a < b.
        eps: target sup error (> 0). Exactly one of ``eps`` / ``anchors`` is given.
        anchors: anchors per head m ≥ 2.
        heads: H ≥ 1 (telescoping split of [a,b]).
        beta: explicit inverse temperature (default: chosen, see module docstring).
        dtype: "float64" or "float32".
        y_bound: |y| ≤ y_bound on the inputs of interest (default max(|a|,|b|) + (b − a)).
        n_dead: number of dead keys per query (see module docstring).
        tail_fraction: with ``anchors``, β makes the exponential tails ≤ tail_fraction·Δ/2.

    Raises:
        InputError: a ≥ b, eps ≤ 0, both or neither of eps/anchors, anchors < 2, heads < 1.
        PrecisionError: when the scores overflow the dtype, rounding alone exceeds the target, or (``eps``
            given) the bound with the rounding estimate exceeds ``eps``.
    """
    if not (math.isfinite(a) and math.isfinite(b)) or a >= b:
        raise InputError(f"need finite a < b, got a={a}, b={b}")
    if (eps is None) == (anchors is None):
        raise InputError("give exactly one of eps (target accuracy) or anchors (anchors per head)")
    heads = check_integer(heads, "heads", 1, None)  # a fraction is refused, not truncated
    if anchors is not None:
        check_integer(anchors, "anchors per head", 2, None)
    if dtype not in ("float32", "float64"):
        raise InputError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
    if eps is not None:
        if not (eps > 0) or not math.isfinite(eps):
            raise InputError(f"eps must be a positive number, got {eps}")
        m = max(2, math.ceil((b - a) / (heads * eps) - 1e-12) + 1)  # Δ ≤ eps, so Δ/2 ≤ eps/2
        target_tail = eps / 4
        target_total = eps
    else:
        m = int(anchors)
        if m < 2:
            raise InputError(f"anchors per head must be ≥ 2, got {anchors}")
        target_tail = None
        target_total = None
    delta = (b - a) / (heads * (m - 1))
    if not delta * delta > 1e-280:  # β = x/Δ² with x up to 1e4 must stay far below the float64 maximum
        raise InputError(
            f"interval [a, b] = [{a:g}, {b:g}] is too narrow: b − a = {b - a:g} gives anchor spacing Δ = {delta:g}, "
            f"and the inverse temperature x/Δ² overflows; use b − a of at least ~1e-120 per anchor"
        )
    if target_tail is None:
        target_tail = tail_fraction * delta / 2
    if y_bound is None:
        y_bound = max(abs(a), abs(b)) + (b - a)
    if beta is None:
        x = None
        for cand in np.geomspace(0.5, 1e4, 2000):
            tails = tail_inside(delta, cand, m) + (heads - 1) * tail_outside(delta, cand, m)
            if tails <= target_tail:
                x = float(cand)
                break
        if x is None:  # pragma: no cover - the tails vanish long before x = 1e4
            raise PrecisionError("no inverse temperature reaches the requested accuracy")
        beta = x / (delta * delta)
    else:
        if not (beta > 0) or not math.isfinite(beta):
            raise InputError(f"beta must be a positive finite number, got {beta}")
        x = beta * delta * delta
    inside, outside, spec = _bounds(a, b, heads, m, beta, n_dead)
    p_keys = m + n_dead
    fterm, s_max = _float_term(a, b, heads, m, beta, y_bound, dtype, p_keys)
    fmax = float(torch.finfo(torch.float64 if dtype == "float64" else torch.float32).max)
    wider = ["float64"] if dtype != "float64" else []  # advice only for a dtype that is not already the widest
    if not math.isfinite(s_max) or s_max > fmax / 16:
        raise PrecisionError(
            f"beta={beta:.4g} makes attention scores up to {s_max:.3g}, which overflows {dtype} "
            f"(max {fmax:.3g}); use {_either(['fewer anchors', 'a smaller y range', *wider])}"
        )
    notes = []
    limit = target_total if target_total is not None else delta / 2
    if fterm > limit:
        raise PrecisionError(
            f"beta={beta:.4g} makes attention scores up to {s_max:.3g}; in {dtype} their rounding alone moves "
            f"the output by ~{fterm:.3g}, above the accuracy {limit:.3g} this construction promises; use "
            f"{_either([*wider, 'fewer anchors per head (more heads)', 'a smaller input range'])}"
        )
    if target_total is not None and min(inside, spec) + fterm > target_total * (1 + 1e-9):
        raise PrecisionError(
            f"eps={target_total:.4g} cannot be guaranteed in {dtype}: with {m} anchors per head the bound is "
            f"{min(inside, spec):.3g} (exact arithmetic) + {fterm:.3g} (rounding estimate) = "
            f"{min(inside, spec) + fterm:.3g} > eps; use {_either([*wider, 'more heads', 'a larger eps'])}"
        )
    return InterpolationPlan(
        a=float(a),
        b=float(b),
        heads=heads,
        anchors=m,
        delta=delta,
        beta=float(beta),
        x=float(x),
        bound_inside=inside,
        bound_outside=outside,
        spec_bound=spec,
        float_term=fterm,
        y_bound=float(y_bound),
        max_score=s_max,
        dtype=dtype,
        notes=notes,
    )


@dataclass
class TruncatedLinearAttention:
    """A built construction: the attention-only layer, its plan (β, bound) and the target it approximates."""

    layer: AttentionOnlyLayer
    plan: InterpolationPlan
    w: torch.Tensor  # (n, d)
    t: torch.Tensor  # (n,)
    mode: Mode
    out_channel: int = 0

    def target(self, x: torch.Tensor) -> torch.Tensor:
        """Range_[a,b](w_iᵀx_i + t_i), shape (B, n)."""
        n = x.shape[1]
        y = (x.to(torch.float64) * self.w[:n]).sum(-1) + self.t[:n]  # (B, n)
        return truncated_linear(y, self.plan.a, self.plan.b)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """The constructed approximation, shape (B, n) (the output channel holding the value)."""
        return self.layer(x)[..., self.out_channel]

    @property
    def params(self) -> int:
        """Non-zero parameters of the construction (zeros of unused slots are not counted)."""
        return int(sum(int((p != 0).sum()) for p in self.layer.parameters()))


def build_truncated_linear_attention(
    w: torch.Tensor | np.ndarray,
    t: torch.Tensor | np.ndarray | float,
    a: float,
    b: float,
    eps: float | None = None,
    anchors: int | None = None,
    *,
    heads: int = 1,
    mode: Mode = "token",
    beta: float | None = None,
    dtype: str = "float64",
    n_tokens: int | None = None,
    d_out: int = 1,
    out_channel: int = 0,
    y_bound: float | None = None,
) -> Construction:
    """Closed-form attention-only layer computing Range_[a,b](w_iᵀx_i + t_i) for every token i.

    Args:
        w: (d,) shared weights or (n, d) per-token weights (per-token needs ``mode='sequence'``).
        t: scalar or (n,) per-token offsets.
        a, b: clamp interval.
        eps / anchors: target sup error, or anchors per head (exactly one).
        heads: H heads, each interpolating one of H equal sub-intervals (error ∝ 1/(mH)).
        mode: "token" (anchors = positions, positional bias; needs n ≥ m) or "sequence" (m appended anchor tokens).
        beta: inverse temperature (default from the accuracy target, see `plan_interpolation`).
        dtype: "float64" or "float32".
        n_tokens: sequence length n (default: rows of w, or m in token mode when w is shared).
        d_out, out_channel: size of the output tokens and the coordinate holding the value (others are 0).
        y_bound: |w_iᵀx_i + t_i| ≤ y_bound on the inputs of interest (for the rounding estimate).

    Returns:
        `uatlab.constructions.contract.Construction`: ``model`` the attention-only layer,
        ``guarantee`` the sup-error bounds inside [a, b] and in the clamp region (proven in exact arithmetic,
        plus a rounding estimate ``rounding_estimate``; valid for |y| ≤ ``y_bound``), ``detail`` the
        `TruncatedLinearAttention` (plan, target, the value channel as a callable).

    Raises:
        InputError: bad shapes, per-token w in token mode, too few positions for the anchors, bad mode.
        PrecisionError: the temperature overflows / loses the accuracy in ``dtype``.
    """
    if mode not in ("token", "sequence"):
        raise InputError(f"mode must be 'token' or 'sequence', got {mode!r}")
    w_t = torch.as_tensor(np.asarray(w, dtype=np.float64))
    if w_t.dim() == 1:
        w_t = w_t[None, :]
    if w_t.dim() != 2 or w_t.shape[1] < 1:
        raise InputError(f"w must have shape (d,) or (n, d), got {tuple(w_t.shape)}")
    if not torch.isfinite(w_t).all():
        raise InputError("w contains NaN or infinite entries")
    d = w_t.shape[1]
    shared_w = bool((w_t == w_t[0:1]).all())
    t_arr = torch.as_tensor(np.asarray(t, dtype=np.float64)).reshape(-1)
    check_integer(d_out, "d_out", 1, None)
    check_integer(out_channel, "out_channel", 0, None)
    if n_tokens is not None:  # before it is used as a count
        check_integer(n_tokens, "n_tokens", 1, None)
    # plan first (it validates a, b, eps/anchors, heads, dtype)
    m_probe = anchors
    n = n_tokens
    if n is None:
        n = max(w_t.shape[0], t_arr.shape[0])
        if mode == "token" and n == 1:
            n = m_probe if m_probe is not None else None
    plan0 = plan_interpolation(a, b, eps=eps, anchors=anchors, heads=heads, beta=beta, dtype=dtype, y_bound=y_bound)
    m = plan0.anchors
    if n is None:
        n = m
    if mode == "token" and not shared_w:
        raise InputError(
            "token mode needs the same w for every token: a token-wise affine map (shared weights plus a "
            "positional bias) cannot form w_iᵀx_i with position-dependent w_i; use mode='sequence' "
            "(which adds a linear map across positions, not available in a standard Transformer)"
        )
    if mode == "token" and n < m:
        raise InputError(
            f"token mode uses the {n} positions as anchors, but {m} anchors per head are needed; "
            f"use a longer sequence (n_tokens ≥ {m}), more heads, or mode='sequence'"
        )
    if w_t.shape[0] not in (1, n):
        raise InputError(f"w has {w_t.shape[0]} rows for a sequence of {n} tokens")
    if t_arr.shape[0] not in (1, n):
        raise InputError(f"t has {t_arr.shape[0]} entries for a sequence of {n} tokens")
    if not torch.isfinite(t_arr).all():
        raise InputError("t contains NaN or infinite entries")
    if not (0 <= out_channel < d_out):
        raise InputError(f"out_channel {out_channel} is outside [0, {d_out})")
    n_dead = (n - m) if mode == "token" else n
    plan = plan_interpolation(
        a, b, eps=eps, anchors=anchors, heads=heads, beta=beta, dtype=dtype, y_bound=y_bound, n_dead=n_dead
    )
    w_full = w_t.expand(n, d).clone()  # (n, d)
    t_full = t_arr.expand(n).clone()  # (n,)
    H, delta = plan.heads, plan.delta
    # channels of the lifted token z ∈ R^{d'}:  0: constant 1 (queries) | 1: y | per head h: 2+3h key1, 3+3h key2, 4+3h value
    d_model = 2 + 3 * H
    n_anchor_tokens = m if mode == "sequence" else 0
    cfg = AttentionOnlyConfig(
        d_in=d,
        d_model=d_model,
        d_out=d_out,
        n_heads=H,
        head_dim=2,
        max_len=n,
        n_anchors=n_anchor_tokens,
        beta=plan.beta,
        positional_bias=True,
        sequence_map=(mode == "sequence" and not shared_w),
        residual=False,
        dtype=dtype,
    )
    layer = AttentionOnlyLayer(cfg).zero_()
    dead_key = DEAD_SCORE / plan.beta  # query (·, −β) against key (0, C): score −βC = −DEAD_SCORE
    k = torch.arange(m, dtype=torch.float64)  # anchor index
    with torch.no_grad():
        # A: y_i = w_iᵀ x_i + t_i into channel 1; constant 1 into channel 0 (the query's "−1" slot)
        if cfg.sequence_map:
            for i in range(n):
                layer.seq_map[i, 1, i, :] = w_full[i]  # M[i, y-channel, i, :] = w_i   (sequence-wise, non-standard)
        else:
            layer.in_proj[1, :] = w_full[0]  # shared w: token-wise
        layer.pos_bias[:, 0] = 1.0
        layer.pos_bias[:, 1] = t_full  # t_i: per-position bias (a positional encoding)
        for h in range(H):
            a_h = plan.a + h * (m - 1) * delta  # head h covers [a_h, a_h + (m−1)Δ]
            L = a_h + k * delta  # (m,) anchors L^h_k
            key1 = k * delta  # kΔ
            key2 = k * delta * (L + L[0])  # kΔ (L_k + L_0)
            value = L - a_h + plan.a / H  # telescoping: Σ_h (Range_h − a_h) + a
            c1, c2, cv = 2 + 3 * h, 3 + 3 * h, 4 + 3 * h
            if mode == "token":
                layer.pos_bias[:m, c1] = key1  # anchors = positions 0..m−1 (keys from the positional bias)
                layer.pos_bias[:m, c2] = key2
                layer.pos_bias[:m, cv] = value
                layer.pos_bias[m:, c2] = dead_key  # positions beyond the anchors: dead keys
            else:
                layer.anchors[:, c1] = key1  # appended anchor tokens (sequence-wise A)
                layer.anchors[:, c2] = key2
                layer.anchors[:, cv] = value
                layer.pos_bias[:, c2] = dead_key  # data tokens as keys: dead
            # W_Q^h z = (2 y, −1) ; β is the layer's explicit inverse temperature
            layer.W_Q[h, 0, 1] = 2.0
            layer.W_Q[h, 1, 0] = -1.0
            # W_K^h z = (key1, key2)
            layer.W_K[h, 0, c1] = 1.0
            layer.W_K[h, 1, c2] = 1.0
            # W_V^h z = (value, 0); W_O^h writes it to out_channel
            layer.W_V[h, 0, cv] = 1.0
            layer.W_O[h, out_channel, 0] = 1.0
    if mode == "sequence" and layer.anchors is not None:
        layer.anchors.requires_grad_(True)
    detail = TruncatedLinearAttention(layer=layer, plan=plan, w=w_full, t=t_full, mode=mode, out_channel=out_channel)
    facts = {
        "paper": PAPER_B,
        "theorem": "Theorem 3.9 (token-wise A)" if mode == "token" else "Theorem 3.4 (sequence-wise A)",
        "parameters": detail.params,
        "parameters_counted": "non-zero entries",
        "heads": plan.heads,
        "anchors_per_head": plan.anchors,
        "beta": plan.beta,
        "dtype": dtype,
        "notes": list(plan.notes),
        "guarantee_definition": "sup over inputs with |w_iᵀx_i + t_i| ≤ y_bound of |out − Range_[a,b]|: the "
        "bound proven in exact arithmetic (Thm 3.4 / 3.9) plus rounding_estimate, an estimate of the rounding "
        "in dtype (not proven: it ignores the rounding of y)",
    }
    guarantee = {
        "sup_error_bound": plan.bound,
        "clamp_error_bound": plan.clamp_bound,
        "rounding_estimate": plan.float_term,
        "y_bound": plan.y_bound,
    }
    return Construction(model=layer, guarantee=guarantee, facts=facts, detail=detail)
