"""Measurements of constructions: sup errors on samples and grids, model sizes, log-log slopes."""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch

from uatlab.constructions.paper_a.prop1_universal_approximator import (
    UniversalApproximator,
    _call_target,
)
from uatlab.constructions.paper_b.appB_incontext_gd import (
    InContextGD,
    gd_prediction,
    multi_step_bound,
    multi_step_float_bound,
)
from uatlab.constructions.paper_b.lem3_11_relu_network import CompiledReluNetwork
from uatlab.constructions.paper_b.thm3_truncated_linear import TruncatedLinearAttention
from uatlab.numerics.float_bounds import gamma, unit_roundoff


def measure_approximation(
    approx: UniversalApproximator, samples: int = 20000, dense: int | None = None, p: float = 2.0, seed: int = 0
) -> dict[str, float]:
    """Sup and L^p error of the model against f on random points plus a dense grid of the domain.

    ``lp_error`` = d_p(f, g) = (vol · mean ||f − g||_p^p)^{1/p},
    estimated by Monte Carlo. ``misquantised_fraction``: fraction of random points with a coordinate within
    η/2 of a cell boundary, where F_1 is not exact; ``sup_error_clean`` leaves them out.
    """
    rng = np.random.default_rng(seed)
    n, d, lo, hi = approx.n, approx.d, approx.lo, approx.hi
    x = rng.uniform(lo, hi, size=(samples, n, d))
    if dense is None:
        dense = max(2, int(round((4096) ** (1 / (n * d)))))
    axis = lo + (np.arange(dense) + 0.5) * (hi - lo) / dense
    xd = np.array(list(itertools.product(axis, repeat=n * d))).reshape(-1, n, d)
    g_rand = approx(x)
    f_rand = _call_target(approx.f, x, n, d)
    err_rand = np.abs(g_rand - f_rand)  # (S, n, d)
    err_dense = np.abs(approx(xd) - _call_target(approx.f, xd, n, d))
    thetas = lo + approx.delta * np.arange(1, approx.grid)
    if len(thetas):
        near = np.abs(x[..., None] - thetas).min(-1) < approx.ramp / 2  # (S, n, d)
        bad = near.reshape(samples, -1).any(-1)
    else:
        bad = np.zeros(samples, dtype=bool)
    vol = (hi - lo) ** (n * d)
    lp = (vol * np.mean((err_rand**p).sum(axis=(1, 2)))) ** (1 / p)
    clean = err_rand[~bad]
    return {
        "sup_error": float(max(err_rand.max(), err_dense.max())),
        "sup_error_clean": float(clean.max()) if clean.size else math.nan,
        "lp_error": float(lp),
        "p": p,
        "misquantised_fraction": float(bad.mean()),
        "misquantised_fraction_bound": float(min(1.0, n * d * (approx.grid - 1) * approx.ramp / (hi - lo))),
        "dense_points": int(xd.shape[0]),
        "random_points": samples,
    }


def model_size(approx: UniversalApproximator) -> dict[str, float]:
    """Parameters (rank-1 factors counted as in paper A) and the largest absolute weight."""
    largest = max(float(p.detach().abs().max()) for p in approx.model.parameters())
    return {"params": approx.model.num_parameters(), "largest_weight": largest}


def yun_comparison(grid: int, n: int, d: int) -> dict[str, float]:
    """Layer counts of Yun et al. (ICLR 2020) for the same grid δ = 1/G, next to ours.

    Yun et al.: quantisation by d/δ FF layers, contextual mapping by δ^{−d} + 1 selective-shift attention
    layers (2 heads of size 1: 8d parameters each), value mapping by ~n·δ^{−dn}/n! FF layers.
    """
    return {
        "yun_attention_layers": grid**d + 1,
        "yun_attention_params": (grid**d + 1) * 8 * d,
        "yun_quantisation_ff_layers": d * grid,
        "yun_value_mapping_ff_layers": n * grid ** (d * n) / math.factorial(n),
        "ours_attention_layers": 1,
        "ours_ff_layers": 2,
    }


def measure_sup_error(
    construction: TruncatedLinearAttention,
    y_values: np.ndarray,
    chunk: int = 4096,
) -> dict[str, float]:
    """Sup error of a 1-D construction (d = 1, w = 1, t = 0) over the given y values.

    Every token of every sequence is a query, so the n positions are filled with consecutive y values.
    Returns ``sup_error`` (all y), ``sup_inside`` (y ∈ [a,b]) and ``sup_outside`` (clamp region).
    """
    n = construction.w.shape[0]
    y = np.asarray(y_values, dtype=np.float64)
    pad = (-len(y)) % n
    y_pad = np.concatenate([y, np.full(pad, y[-1])])
    x = torch.as_tensor(y_pad.reshape(-1, n, 1))  # (B, n, 1)
    sup_in = sup_out = 0.0
    a, b = construction.plan.a, construction.plan.b
    with torch.no_grad():
        for s in range(0, x.shape[0], max(1, chunk // n)):
            xb = x[s : s + max(1, chunk // n)]
            err = (construction(xb).to(torch.float64) - construction.target(xb)).abs()  # (B, n)
            yb = (xb[..., 0].to(torch.float64) * construction.w[:, 0]) + construction.t
            inside = (yb >= a) & (yb <= b)
            if bool(inside.any()):
                sup_in = max(sup_in, float(err[inside].max()))
            if bool((~inside).any()):
                sup_out = max(sup_out, float(err[~inside].max()))
    return {"sup_error": max(sup_in, sup_out), "sup_inside": sup_in, "sup_outside": sup_out}


def fit_loglog_slope(sizes: list[float], errors: list[float]) -> float:
    """Least-squares slope of log(error) against log(size).

    Points with a non-positive or non-finite size or error are dropped (a log-log fit cannot use them);
    NaN when fewer than two distinct sizes remain.
    """
    pairs = zip(sizes, errors, strict=True)
    pts = [(float(a), float(b)) for a, b in pairs if math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0]
    if len({a for a, _ in pts}) < 2:
        return math.nan
    xs = np.log(np.array([a for a, _ in pts], dtype=np.float64))
    ys = np.log(np.array([b for _, b in pts], dtype=np.float64))
    return float(np.polyfit(xs, ys, 1)[0])


#: inputs whose network outputs define the denominator ``output_range`` of every relative figure
REFERENCE_INPUTS = 100


def _box_inputs(rng: np.random.Generator, count: int, n: int, d: int, lo: float, hi: float) -> np.ndarray:
    """The all-lo corner, the all-hi corner, then uniform draws of the box: (count, n, d)."""
    x = rng.uniform(lo, hi, size=(count, n, d))
    x[0] = lo
    x[1 % count] = hi
    return x


def measure_compiled(
    compiled: CompiledReluNetwork, samples: int = 200, seed: int = 0, adversarial: bool = False
) -> dict[str, object]:
    """Errors of the compiled model against the network on the box [lo, hi]^{n×d} (paper B, Lemma 3.11).

    * ``sampled_max_error`` (also under the older name ``sup_error``): the max of |g − f| over ``samples``
      inputs, namely the two box corners (all lo, all hi) and ``samples`` − 2 uniform random inputs. It is a
      *lower estimate* of the true sup error, not the sup; ``definition`` says so.
    * ``output_range`` (the one denominator of every relative figure): max − min of the network's outputs,
      all coordinates, over `REFERENCE_INPUTS` reference inputs (the corners and the first uniform draws of
      the same seed: the evaluated inputs when ``samples`` = 100), whatever ``samples`` is.
      ``relative_sup_error`` = sampled_max_error / output_range.
    * ``adversarial=True`` (compiled networks with an interpolation plan): ``adversarial_error``, the error
      at the input found by `uatlab.experiments.adversarial.adversarial_error`, a rigorous lower bound on the
      true sup error, usually 1.5–2× the sampled maximum; ``relative_adversarial_error`` over the same
      denominator; ``max_error_lower_bound`` = the larger of the two.
    """
    lo, hi = compiled.domain
    n, d = compiled.net.n, compiled.net.d
    x = _box_inputs(np.random.default_rng(seed), samples, n, d, lo, hi)  # (samples, n, d)
    y = compiled.net(x)
    g = compiled(x)
    err = np.abs(g - y)
    # the reference inputs are the first REFERENCE_INPUTS of the same draws (corners included)
    if samples >= REFERENCE_INPUTS:
        y_ref = y[:REFERENCE_INPUTS]
    else:
        y_ref = compiled.net(_box_inputs(np.random.default_rng(seed), REFERENCE_INPUTS, n, d, lo, hi))
    out_range = float(y_ref.max() - y_ref.min())
    sampled = float(err.max())
    out: dict[str, object] = {
        "sup_error": sampled,
        "sampled_max_error": sampled,
        "mean_abs_error": float(err.mean()),
        "output_range": out_range,
        "relative_sup_error": sampled / out_range if out_range > 0 else math.nan,
        "samples": int(samples),
        "definition": f"sup_error = sampled_max_error = max |model − network| over {samples} inputs (the 2 box "
        f"corners + {max(samples - 2, 0)} uniform random), a lower estimate of the sup error; relative figures "
        f"divide by output_range = range of the network's outputs over {REFERENCE_INPUTS} reference inputs "
        "(drawn with the same seed as the inputs)",
    }
    if adversarial:
        from uatlab.experiments.adversarial import adversarial_error

        adv = float(adversarial_error(compiled)["adversarial_error"])
        out["adversarial_error"] = adv
        out["relative_adversarial_error"] = adv / out_range if out_range > 0 else math.nan
        out["max_error_lower_bound"] = max(adv, sampled)
        out["definition"] += (
            "; adversarial_error = error at an input placed by a linear program at the worst interpolation "
            "phases (a lower bound on the sup error)"
        )
    return out


def sample_regression(batch: int, context: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x ~ N(0, I_d), w* ~ N(0, I_d/d), y = w*ᵀx: returns x_ctx (B, N, d), y_ctx (B, N), x_query (B, d)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, context + 1, d))
    w = rng.standard_normal((batch, d)) / math.sqrt(d)
    y = np.einsum("bnd,bd->bn", x, w)
    return x[:, :context], y[:, :context], x[:, context]


def relative_error(model: InContextGD, batch: int = 64, seed: int = 0) -> dict[str, float]:
    """‖ŷ_attention − ŷ_GD‖ / ‖ŷ_GD‖ over a batch of regression tasks, and the sup-error bounds.

    ``bound`` is `multi_step_float_bound`: the bound on |ŷ_attention − ŷ_GD| of the model run in its own
    dtype, rounding included (rigorous under the assumption that exp errs by ≤ 5 ulp, paper B App. B
    construction, module `appB_incontext_gd`). ``exact_arithmetic_bound`` is `multi_step_bound` (no rounding)
    and ``rounding_bound`` = bound − exact_arithmetic_bound. The data bounds S, S₁ are computed in float64
    and enlarged by their own rounding (γ_d S₁).
    """
    xc, yc, xq = sample_regression(batch, model.context, model.d, seed)
    pred = model.predict(xc, yc, xq)
    exact = gd_prediction(xc, yc, xq, model.lr, model.steps)
    rel = float(np.linalg.norm(pred - exact) / max(np.linalg.norm(exact), 1e-300))
    xall = np.concatenate([xc, xq[:, None]], 1)  # (B, N+1, d): every token is a query, context tokens are keys
    S = float(np.abs(np.einsum("bnd,bmd->bnm", xall, xc)).max())
    g = gamma(model.d, unit_roundoff("float64"))
    S_abs = float(np.einsum("bnd,bmd->bnm", np.abs(xall), np.abs(xc)).max()) / (1 - g)
    S += g * S_abs
    V = float(np.abs(yc).max())
    exact_bound = multi_step_bound(model.context, model.sink, model.eps, S, V, model.lr, model.steps)
    bound = multi_step_float_bound(
        model.context, model.sink, model.eps, S, S_abs, V, model.lr, model.steps, model.d, model.dtype
    )
    return {
        "relative_error": rel,
        "sup_error": float(np.abs(pred - exact).max()),
        "bound": bound,
        "exact_arithmetic_bound": exact_bound,
        "rounding_bound": bound - exact_bound if math.isfinite(bound) else math.inf,
        "max_abs_prediction": float(np.abs(exact).max()),
    }
