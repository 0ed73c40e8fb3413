"""Paper A, Proposition 1: F_2^(FF) ∘ F^(SA) ∘ F_1^(FF) approximates a permutation-equivariant f, in closed form.

Kajitsuka & Sato (ICLR 2024), Proposition 1: one single-head,
rank-1 softmax attention layer between two feed-forward layers approximates any continuous
permutation-equivariant f: R^{d×n} → R^{d×n} on a compact domain in d_p. The paper gives no widths
or constants; this module builds the three layers explicitly for a box domain [lo, hi]^{n×d}.

Notation map (paper A → uatlab, tokens as rows ``(batch, n, d)``): grid step δ → ``(hi − lo)/grid``;
ramp width of the staircase → ``ramp``; W^(K)ᵀW^(Q) = c·w wᵀ → ``W_Q = c·wᵀ``, ``W_K = wᵀ``; W^(O) →
``wo · w/|w|²``; F_1^(FF) → ``model.input_ff``; F^(SA) → ``model.blocks[0].attn``; F_2^(FF) →
``model.blocks[0].ff``.

1. F_1^(FF) (quantisation). Coordinate x ∈ [lo, hi] falls in cell g = ⌊(x − lo)/δ⌋ ∈ {0..G−1} and is
   mapped to v_g = 1 + g/G ∈ [1, 2) (shifted away from 0 so that |wᵀt| ≥ r_min > 0):

       v(x) = 1 + (1/G) Σ_{k=1}^{G−1} clamp((x − θ_k)/η + 1/2, 0, 1),   θ_k = lo + kδ
       clamp(u/η + 1/2, 0, 1) = [ReLU(u + η/2) − ReLU(u − η/2)]/η

   With the skip connection, F_1(x) = x + W2 ReLU(W1 x + b1) + b2 must equal v(x), so one more unit
   −ReLU(x − lo) = lo − x (valid on the domain) cancels the skip. Width 2(G−1) + 1 per coordinate.
   Exact except on the *mis-quantised region* {x : |x − θ_k| < η/2 for some k, some coordinate},
   of relative measure ≤ n·d·(G−1)·η/(hi − lo); it is reported by `measure_approximation`.

2. F^(SA) (contextual mapping, paper A Theorem 2 with a data-dependent scale). With a(t) = wᵀt, the
   single rank-1 head gives token k the scalar s_k = Σ_j softmax_j(c a_k a_j) a_j (a Boltzmann-type
   average) and outputs t_k + wo·(w/|w|²)·s_k, so that ``z_k := wᵀ(output) = a_k + wo·s_k``.
   The paper's c would destroy separability in floating point.
   Instead c is chosen from the grid: for every multiset of grid tokens (all (G^d + n − 1 choose n) of
   them) and every distinct token in it, z is computed, and c is the candidate maximising the minimum
   gap between distinct ids. ``wo = g_a / (4 (a_max − a_min))`` with g_a the smallest gap between
   token values a makes the slabs of different query tokens disjoint. The certificate: the ids are
   computed in float64 with a rounding estimate κ = 8u (S_max + n + 4)(1 + wo) a_max (u = 2^-53,
   S_max = c a_max²: exp of a score with |score| ≤ S_max has relative error ≤ (S_max + 2)u, the
   normalised weighted sum adds ≤ (n + 2)u relative), c must give min gap > 4κ, and then the
   **exact** certificate `certify_ids_exact` encloses every id in a ball (python-flint arb,
   128 bits) and proves all ids distinct over the whole grid. Finally the float64 Transformer itself is
   run on every grid sequence (``grid_check_max_error``).

3. F_2^(FF) (value mapping recipe). Sort the ids z_(1) < … < z_(M) with targets
   T_m = f(cell centres)_k − q_m (the skip adds the attention output q_m back). Then
   g(z) = T_(1) + Σ_m (s_m − s_{m−1}) ReLU(z − z_(m)) − s_{M−1} ReLU(z − z_(M)) with slopes
   s_m = (T_(m+1) − T_(m))/(z_(m+1) − z_(m)) interpolates exactly and is constant outside [z_(1), z_(M)],
   so outputs on the mis-quantised region stay within the range of the targets. Width M, W1 = 1·wᵀ (rank 1).

Error (exact arithmetic, off the mis-quantised region and away from duplicate-cell effects): the model
equals f̄(X) = f(cell centres of X) exactly, so ``sup |f − g| ≤ ω_f(δ/2·√(nd))`` (modulus of continuity)
and d_p(f, g) ≤ d_p(f, f̄) + (measure of the mis-quantised region)^{1/p}·(range of f + range of f̄).

Comparison: Yun et al.'s construction on the same grid needs δ^{−d} + 1 = G^d + 1 attention
layers (selective shift), d/δ quantisation FF layers and ~n·G^{dn}/n! value-mapping FF layers; here 1
attention layer and 2 FF layers (`yun_comparison`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from uatlab._util import check_integer
from uatlab.constructions.contract import PAPER_A, Construction, count_parameters
from uatlab.errors import InputError, PrecisionError
from uatlab.models.transformer import Transformer, TransformerConfig
from uatlab.verify.universal_ids import certify_ids_exact

TargetFn = Callable[[np.ndarray], np.ndarray]  # (B, n, d) -> (B, n, d)

MAX_IDS = 400_000


def context_ids(grid: int, d: int, n: int) -> int | None:
    """C(G^d + n − 1, n)·n (the multisets of n of the G^d grid tokens, n ids each), or None above `MAX_IDS`.

    Computed with early exit, so huge G, d or n never build the (possibly million-digit) binomial."""
    if grid == 1:
        return n if n <= MAX_IDS else None
    if d * math.log2(grid) > math.log2(MAX_IDS) or n > MAX_IDS:  # G^d > MAX_IDS or n > MAX_IDS: C·n exceeds it
        return None
    tokens = grid**d
    c = 1
    for k in range(1, n + 1):  # C(T + k − 1, k) = C(T + k − 2, k − 1)·(T + k − 1)/k, increasing in k for T ≥ 2
        c = c * (tokens + k - 1) // k
        if c * n > MAX_IDS:
            return None
    return c * n


# ---------------------------------------------------------------------------- example targets
def product_with_mean(x: np.ndarray) -> np.ndarray:
    """f(X)_k = x_k ⊙ mean_j x_j (coordinate-wise), a permutation-equivariant target."""
    return x * x.mean(axis=1, keepdims=True)


def softmax_weighted_average(x: np.ndarray) -> np.ndarray:
    """f(X)_k = Σ_j softmax_j(x_kᵀ x_j) x_j (one step of self-attention with identity weights)."""
    s = np.einsum("bkd,bjd->bkj", x, x)  # (B, n, n)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bkj,bjd->bkd", p, x)


def smooth_rank(x: np.ndarray, tau: float = 0.1) -> np.ndarray:
    """f(X)_{k,c} = Σ_j sigmoid((x_{k,c} − x_{j,c})/τ): a smooth rank of x_k among the tokens, per coordinate."""
    diff = (x[:, :, None, :] - x[:, None, :, :]) / tau  # (B, n, n, d)
    return (1.0 / (1.0 + np.exp(-diff))).sum(axis=2)


EXAMPLES: dict[str, TargetFn] = {
    "product-mean": product_with_mean,
    "softmax-average": softmax_weighted_average,
    "smooth-rank": smooth_rank,
}


# ---------------------------------------------------------------------------- checks
def check_permutation_equivariant(
    f: TargetFn, n: int, d: int, lo: float, hi: float, samples: int = 64, seed: int = 0, rtol: float = 1e-9
) -> None:
    """Raise InputError when f(X[π]) ≠ f(X)[π] on random samples (naming the sample and permutation)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(lo, hi, size=(samples, n, d))
    fx = _call_target(f, x, n, d)
    scale = max(1.0, float(np.abs(fx).max()))
    for i in range(samples):
        perm = rng.permutation(n)
        if n > 1 and np.all(perm == np.arange(n)):
            perm = np.roll(perm, 1)
        fp = _call_target(f, x[i : i + 1, perm], n, d)[0]
        dev = float(np.abs(fp - fx[i, perm]).max())
        if dev > rtol * scale:
            raise InputError(
                f"the target is not permutation-equivariant: on random sample {i} the permutation {perm.tolist()} "
                f"changes f(X[π]) − f(X)[π] by {dev:.3g}; paper A's Proposition 1 (one attention layer between "
                f"two token-wise FF layers) only approximates permutation-equivariant functions"
            )


def _call_target(f: TargetFn, x: np.ndarray, n: int, d: int) -> np.ndarray:
    y = np.asarray(f(x), dtype=np.float64)
    if y.shape != x.shape:
        raise InputError(f"the target must map (batch, {n}, {d}) arrays to the same shape, got {y.shape}")
    if not np.isfinite(y).all():
        raise InputError("the target returned NaN or infinite values on the domain")
    return y


# ---------------------------------------------------------------------------- construction
@dataclass
class UniversalApproximator:
    """The built model and the facts of its construction."""

    model: Transformer
    f: TargetFn
    n: int
    d: int
    lo: float
    hi: float
    grid: int
    ramp: float
    scale_c: float
    wo: float
    w: np.ndarray
    n_ids: int
    min_gap: float
    rounding_bound: float
    certified: bool
    grid_check_max_error: float
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def delta(self) -> float:
        return (self.hi - self.lo) / self.grid

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The model on numpy inputs (B, n, d), evaluated in chunks (the FF_2 hidden layer is wide)."""
        x = np.asarray(x, dtype=np.float64)
        width = max(self.info.get("ff2_width", 1), self.info.get("ff1_width", 1))
        chunk = max(1, int(2_000_000 // (self.n * width)))
        out = []
        with torch.no_grad():
            for s in range(0, x.shape[0], chunk):
                out.append(self.model(torch.as_tensor(x[s : s + chunk])).numpy())  # (chunk, n, d)
        return np.concatenate(out, axis=0) if out else np.zeros_like(x)

    def quantised_target(self, x: np.ndarray) -> np.ndarray:
        """f̄(X) = f(cell centres of X): what the model equals off the mis-quantised region."""
        g = np.clip(np.floor((x - self.lo) / self.delta), 0, self.grid - 1)
        return _call_target(self.f, self.lo + (g + 0.5) * self.delta, self.n, self.d)


def _token_direction(grid: int, d: int) -> np.ndarray:
    """w with a(t) = wᵀt injective on grid tokens t ∈ {1 + g/G}^d: mixed-radix weights (1, 1/(2G), 1/(2G)^2, …)."""
    return np.array([(1.0 / (2 * grid + 1)) ** i for i in range(d)], dtype=np.float64)


def _ids(tok_a: np.ndarray, ms: np.ndarray, c: float, wo: float) -> tuple[np.ndarray, np.ndarray]:
    """z[m, k] = a_k + wo · Σ_j softmax_j(c a_k a_j) a_j for multiset rows ms (M, n) of token indices."""
    a = tok_a[ms]  # (M, n)
    s = c * a[:, :, None] * a[:, None, :]  # (M, n_query, n_key)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    ctx = (p * a[:, None, :]).sum(-1)  # (M, n)
    return a + wo * ctx, ctx


def build_universal_approximator(
    f: TargetFn,
    domain: tuple[float, float] | None,
    eps: float | None = None,
    grid: int | None = None,
    *,
    n: int,
    d: int,
    ramp: float | None = None,
    check_equivariance: bool = True,
    scale_candidates: int = 24,
    verify_grid: bool = True,
    seed: int = 0,
) -> Construction:
    """Build F_2^(FF) ∘ F^(SA) ∘ F_1^(FF) (one single-head rank-1 attention layer) approximating f.

    Args:
        f: target, numpy (B, n, d) → (B, n, d), continuous and permutation-equivariant.
        domain: (lo, hi): the compact box [lo, hi]^{n×d}. Required.
        eps: target sup error of the grid approximation f̄ (the grid is refined until a sampled
            estimate of sup|f − f̄| ≤ eps); or give ``grid``.
        grid: G cells per coordinate.
        n, d: sequence length and token dimension.
        ramp: width η of the staircase ramps (default δ·1e-4).
        check_equivariance: test f on random samples and refuse a non-equivariant target.
        scale_candidates: number of attention scales c tried (log grid).
        verify_grid: run the built model on every grid sequence and record the max error there.

    Raises:
        InputError: domain missing / not a finite box, eps ≤ 0, neither or both of eps/grid, target not
            equivariant, grid too large (more than MAX_IDS context ids).
        PrecisionError: no attention scale separates the ids with a certified float64 margin.
    """
    if domain is None:
        raise InputError("a compact domain is required: give domain=(lo, hi) for the box [lo, hi]^{n×d}")
    try:
        lo, hi = (float(v) for v in domain)
    except (TypeError, ValueError) as exc:
        raise InputError(f"domain must be a pair (lo, hi), got {domain!r}") from exc
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
        raise InputError(f"domain [{lo}, {hi}] is not a compact box: need finite lo < hi")
    check_integer(n, "n", 1, None, "build_universal_approximator()")
    check_integer(d, "d", 1, None, "build_universal_approximator()")
    if (eps is None) == (grid is None):
        raise InputError("give exactly one of eps (target accuracy) or grid (cells per coordinate)")
    if grid is not None:  # a fraction is refused, not truncated
        check_integer(grid, "grid", 1, None, "build_universal_approximator()")
    check_integer(seed, "seed", 0, None, "build_universal_approximator()")
    if eps is not None and not (eps > 0 and math.isfinite(eps)):
        raise InputError(f"eps must be a positive number, got {eps}")
    if check_equivariance:
        check_permutation_equivariant(f, n, d, lo, hi, seed=seed)
    if grid is None:
        grid = _grid_for_eps(f, n, d, lo, hi, eps, seed)
    grid = int(grid)
    if grid < 1:
        raise InputError(f"grid must be ≥ 1, got {grid}")
    if context_ids(grid, d, n) is None:
        raise InputError(
            f"grid {grid} in d = {d} with n = {n}: the multisets of {n} of the {grid}^{d} grid tokens give more "
            f"than {MAX_IDS} context ids (multisets × n); use a coarser grid, a smaller d or a smaller n"
        )
    n_tokens = grid**d
    n_multisets = math.comb(n_tokens + n - 1, n)
    delta = (hi - lo) / grid
    eta = delta * 1e-4 if ramp is None else float(ramp)
    if not (0 < eta < delta):
        raise InputError(f"ramp must lie in (0, δ={delta}), got {eta}")

    # ---- grid tokens and their projections a(t) = wᵀt
    w = _token_direction(grid, d)  # (d,)
    cells = np.array(list(itertools.product(range(grid), repeat=d)), dtype=np.int64)  # (T, d)
    tokens = 1.0 + cells / grid  # (T, d) quantised token values v_g
    tok_a = tokens @ w  # (T,)
    order = np.sort(tok_a)
    gap_a = float(np.diff(order).min()) if len(order) > 1 else 1.0
    a_min, a_max = float(order[0]), float(order[-1])
    wo = gap_a / (4 * max(a_max - a_min, 1e-12))
    ms = np.array(list(itertools.combinations_with_replacement(range(n_tokens), n)), dtype=np.int64)  # (M, n)

    # ---- choose the attention scale c: maximise the minimum id gap (certified in float64)
    u = 2.0**-53
    best = None
    for c in np.geomspace(0.05, 60.0, scale_candidates) / (a_max * a_max):
        z, _ = _ids(tok_a, ms, float(c), wo)
        zu, first = _unique_ids(z, ms)
        gap = float(np.diff(np.sort(zu)).min()) if len(zu) > 1 else math.inf
        kappa = 8 * u * (c * a_max * a_max + n + 4) * (1 + wo) * a_max
        if best is None or gap / kappa > best[1] / best[2]:
            best = (float(c), gap, kappa)
    c, min_gap, kappa = best
    certified = min_gap > 4 * kappa
    if not certified:
        raise PrecisionError(
            f"no attention scale separates the {n_multisets} grid multisets in float64: best minimum gap "
            f"{min_gap:.3g} ≤ 4× rounding bound {kappa:.3g} (c={c:.3g}); use a coarser grid"
        )
    z, ctx = _ids(tok_a, ms, c, wo)
    zu, first = _unique_ids(z, ms)
    exact_ok, exact_gap = certify_ids_exact(tok_a, ms, first, c, wo)
    if not exact_ok:
        raise PrecisionError(
            f"ball arithmetic could not certify that the {len(zu)} context ids are distinct (c={c:.3g}); "
            f"use a coarser grid"
        )
    # representatives: the cell centres of each multiset, target value of each id
    centres = lo + (cells + 0.5) * delta  # (T, d)
    x_rep = centres[ms]  # (M, n, d)
    f_rep = _call_target(f, x_rep, n, d)  # (M, n, d)
    mi, ki = first[:, 0], first[:, 1]
    q_ids = tokens[ms[mi, ki]] + wo * ctx[mi, ki][:, None] * (w / (w @ w))[None, :]  # attention output q_m (M_ids, d)
    targets = f_rep[mi, ki] - q_ids  # (M_ids, d): what F_2 must add (its skip adds q back)
    srt = np.argsort(zu)
    zs, ts = zu[srt], targets[srt]

    # ---- assemble the Transformer
    width1 = d * (2 * (grid - 1) + 1)
    n_ids = len(zs)
    width2 = n_ids + 1
    cfg = TransformerConfig(
        d_model=d,
        n_layers=1,
        n_heads=1,
        head_dim=1,
        rank=1,
        ff_width=width2,
        vocab_size=None,
        num_labels=None,
        positional="none",
        attention="softmax",
        beta=1.0,
        input_ff_width=width1,
        dtype="float64",
        meta={"construction": "paper A Proposition 1 (FF∘SA∘FF)", "grid": grid, "domain": [lo, hi], "c": c},
    )
    model = Transformer(cfg)
    dt = torch.float64
    with torch.no_grad():
        # F_1: per coordinate j: units [G−1 ramps up (+η/2)], [G−1 ramps down (−η/2)], [−ReLU(x − lo)]
        W1 = torch.zeros(width1, d, dtype=dt)
        b1 = torch.zeros(width1, dtype=dt)
        W2 = torch.zeros(d, width1, dtype=dt)
        thetas = torch.tensor([lo + k * delta for k in range(1, grid)], dtype=dt)  # (G−1,)
        per = 2 * (grid - 1) + 1
        for j in range(d):
            o = j * per
            g1 = grid - 1
            W1[o : o + 2 * g1, j] = 1.0
            b1[o : o + g1] = -thetas + eta / 2  # ReLU(x − θ_k + η/2)
            b1[o + g1 : o + 2 * g1] = -thetas - eta / 2  # ReLU(x − θ_k − η/2)
            W2[j, o : o + g1] = 1.0 / (grid * eta)  # + (1/G)·[…]/η
            W2[j, o + g1 : o + 2 * g1] = -1.0 / (grid * eta)
            W1[o + 2 * g1, j] = 1.0  # −ReLU(x − lo) cancels the skip: x + lo − x = lo
            b1[o + 2 * g1] = -lo
            W2[j, o + 2 * g1] = -1.0
        model.input_ff.hidden.weight.copy_(W1)
        model.input_ff.hidden.bias.copy_(b1)
        model.input_ff.output.weight.copy_(W2)
        model.input_ff.output.bias.copy_(torch.full((d,), 1.0 - lo, dtype=dt))  # v = lo + b2 + Σ/G = 1 + Σ/G
        # F^(SA): W_Q = c·wᵀ, W_K = W_V = wᵀ (rank 1, s = 1); W_O = wo · w/|w|² so that wᵀ W_O = wo
        attn = model.blocks[0].attn
        wt = torch.as_tensor(w, dtype=dt)
        one = torch.ones(1, 1, 1, dtype=dt)
        attn.W_Q.set_factors(one * c, wt[None, None, :])  # (1,1,1) @ (1,1,d)
        attn.W_K.set_factors(one, wt[None, None, :])
        attn.W_V.set_factors(one, wt[None, None, :])
        attn.W_O.set_factors((wt / (wt @ wt))[None, :, None] * wo, one)  # (1,d,1) @ (1,1,1)
        # F_2: z = wᵀ out; g(z) = T_(1) + Σ_m (s_m − s_{m−1}) ReLU(z − z_(m)) − s_{M−1} ReLU(z − z_(M))
        if n_ids > 1:
            slopes = np.diff(ts, axis=0) / np.diff(zs)[:, None]  # (M−1, d)
        else:
            slopes = np.zeros((0, d))
        coef = np.zeros((n_ids + 1, d))
        prev = np.zeros(d)
        for m in range(n_ids - 1):
            coef[m] = slopes[m] - prev
            prev = slopes[m]
        coef[n_ids - 1] = -prev  # flat beyond the last id
        ff = model.blocks[0].ff
        ff.hidden.weight.copy_(torch.as_tensor(np.tile(w, (width2, 1))))  # rank 1: 1·wᵀ
        bias = np.concatenate([-zs, [-zs[-1] - 1.0]])
        ff.hidden.bias.copy_(torch.as_tensor(bias))
        ff.output.weight.copy_(torch.as_tensor(coef.T))  # (d, width2)
        ff.output.bias.copy_(torch.as_tensor(ts[0]))
    approx = UniversalApproximator(
        model=model,
        f=f,
        n=n,
        d=d,
        lo=lo,
        hi=hi,
        grid=grid,
        ramp=eta,
        scale_c=c,
        wo=wo,
        w=w,
        n_ids=n_ids,
        min_gap=min_gap,
        rounding_bound=kappa,
        certified=certified,
        grid_check_max_error=math.nan,
        info={
            "n_multisets": n_multisets,
            "ff1_width": width1,
            "ff2_width": width2,
            "exact_min_gap_lower_bound": exact_gap,
        },
    )
    if verify_grid:
        approx.grid_check_max_error = float(np.abs(approx(x_rep) - f_rep).max())
    guarantee = {"id_rounding_bound": kappa, "min_id_gap": min_gap}
    if math.isfinite(approx.grid_check_max_error):
        guarantee["grid_check_max_error"] = approx.grid_check_max_error
    facts = {
        "paper": PAPER_A,
        "theorem": "Proposition 1",
        "parameters": count_parameters(model),
        "grid": grid,
        "n": n,
        "d": d,
        "domain": (lo, hi),
        "context_ids": n_ids,
        "ff1_width": width1,
        "ff2_width": width2,
    }
    certificate = {"context_ids_distinct": certified, "exact_min_gap_lower_bound": exact_gap}
    return Construction(model=model, guarantee=guarantee, facts=facts, certificate=certificate, detail=approx)


def _grid_for_eps(f: TargetFn, n: int, d: int, lo: float, hi: float, eps: float, seed: int) -> int:
    """Smallest G (doubling, then bisection) with a sampled estimate of sup|f − f̄| ≤ eps."""
    rng = np.random.default_rng(seed + 1)
    x = rng.uniform(lo, hi, size=(2000, n, d))
    fx = _call_target(f, x, n, d)

    def err(g: int) -> float:
        delta = (hi - lo) / g
        cell = np.clip(np.floor((x - lo) / delta), 0, g - 1)
        return float(np.abs(_call_target(f, lo + (cell + 0.5) * delta, n, d) - fx).max())

    g = 1
    while err(g) > eps:
        g *= 2
        if context_ids(g, d, n) is None:
            raise InputError(f"accuracy eps={eps} needs a grid finer than {g // 2} cells per coordinate: too many ids")
    lo_g = max(1, g // 2)
    while lo_g < g:
        mid = (lo_g + g) // 2
        if err(mid) <= eps:
            g = mid
        else:
            lo_g = mid + 1
    return g


# ---------------------------------------------------------------------------- measurement


def example_error_bound(target: str, approx: UniversalApproximator) -> float:
    """Proven sup error off the mis-quantised region for the shipped examples (NaN when none is derived).

    Off the mis-quantised region the model equals f̄(X) = f(C) with C the cell centres, |x − c| ≤ δ/2 per
    coordinate, up to the float64 error measured on all grid sequences (``grid_check_max_error``; the
    model is evaluated at C there, and F_1 maps every clean X to the same tokens as C). With R = max(|lo|, |hi|):

    * product-mean, f_k = x_k ⊙ m:  |x_k m − c_k m_C| ≤ |x_k − c_k||m| + |c_k||m − m_C| ≤ R δ/2 + R δ/2 = R δ;
    * smooth-rank, f_{k,c} = Σ_{j≠k} σ((x_{k,c} − x_{j,c})/τ) + σ(0): each term is 1/(4τ)-Lipschitz in an argument
      that moves by ≤ δ, so the error is ≤ (n − 1) δ/(4τ) with τ = 0.1;
    * softmax-average: no bound derived (NaN).

    The bound is exact-arithmetic plus the measured float64 error on the grid sequences; the rounding of
    F_1 on off-grid inputs (≈ u/η per ramp, ~1e-12 here) is not included.
    """
    delta = approx.delta
    R = max(abs(approx.lo), abs(approx.hi))
    if target == "product-mean":
        base = R * delta
    elif target == "smooth-rank":
        base = (approx.n - 1) * delta / (4 * 0.1)
    else:
        return math.nan
    return base + (approx.grid_check_max_error if math.isfinite(approx.grid_check_max_error) else math.inf)


def _unique_ids(z: np.ndarray, ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One id per (multiset, distinct token): returns the z values and their (multiset, position) indices."""
    keep = np.ones(ms.shape, dtype=bool)
    keep[:, 1:] = ms[:, 1:] != ms[:, :-1]  # multisets are sorted: equal tokens are adjacent
    idx = np.argwhere(keep)  # (K, 2)
    return z[keep], idx
