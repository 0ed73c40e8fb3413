"""Size sweeps of the approximation constructions: rows, fitted log-log slopes, CSV and figures.

Shared by ``uatlab approx …`` (`uatlab.cli.approx`) and the claims in
`uatlab.claims.approximation`. Every sweep returns a `Sweep` whose ``rows`` hold, per size,
the size parameters, ``sup_error``, ``bound`` (the proven bound, NaN where none is proved) and ``params``.
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from uatlab.constructions.paper_a.prop1_universal_approximator import (
    EXAMPLES,
    build_universal_approximator,
    example_error_bound,
)
from uatlab.constructions.paper_b.appB_incontext_gd import build_incontext_gd
from uatlab.constructions.paper_b.lem3_11_relu_network import compile_relu_network, random_relu_network
from uatlab.constructions.paper_b.thm3_truncated_linear import build_truncated_linear_attention
from uatlab.errors import InputError, PrecisionError
from uatlab.experiments.measure import (
    fit_loglog_slope,
    measure_approximation,
    measure_compiled,
    measure_sup_error,
    model_size,
    relative_error,
    yun_comparison,
)
from uatlab.io_safety import atomic_write, save_figure

Progress = Callable[[str], None]


@dataclass
class Sweep:
    """Result of one sweep: rows (one dict per size), fitted slopes, free-form summary."""

    name: str
    size_key: str
    rows: list[dict[str, Any]]
    slopes: dict[str, float] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "size_key": self.size_key,
            "rows": self.rows,
            "slope": self.slopes,
            "summary": self.summary,
            "seconds": round(self.seconds, 3),
        }


def _noop(_: str) -> None:
    pass


# ---------------------------------------------------------------------------- paper B: truncated linear
GOLDEN_FRACTION = (math.sqrt(5.0) - 1.0) / 2.0  # 1/φ: badly approximable, so k/φ mod 1 never lines up with a grid


def _probe_grid(a: float, b: float, points: int) -> np.ndarray:
    """``points`` y in [a − (b − a), b + (b − a)] (the interval of Range_[a,b] and as much again on each side,
    where the truncation acts; Hu et al. 2025, Definition 3.1), in increasing order: both ends; a and b and the
    floats next to them outside [a, b] (the error outside [a, b] is largest as y approaches a or b; with
    ``points`` ≥ 6); and the golden-ratio sequence lo + (hi − lo)·frac(k/φ), k = 1, 2, … for the rest.

    Why not equally spaced points: the anchors are equally spaced too (a + jΔ), and where the two spacings are
    commensurate every y falls on an anchor or halfway between two, where the interpolation error vanishes by
    symmetry: 20,001 equally spaced points against 1,000 heads of 11 anchors measured 1.6e-14 where the error
    reaches 7e-5. The golden-ratio sequence is equidistributed modulo any spacing Δ (1/φ is irrational), so its
    points fall at every phase between anchors, and its largest gap is below 3/points of the range (the
    three-gap theorem). The largest error over these points is still a sampled value: a lower estimate of the
    sup, never above it."""
    span = b - a
    lo, hi = a - span, b + span
    below, above = float(np.nextafter(a, -np.inf)), float(np.nextafter(b, np.inf))  # the outside's sup: at a⁻, b⁺
    fixed = [lo, below, a, b, above, hi] if points >= 6 else [lo, hi][:points]
    k = np.arange(1, max(points - len(fixed), 0) + 1, dtype=np.float64)
    return np.sort(np.concatenate([fixed, lo + (hi - lo) * np.mod(k * GOLDEN_FRACTION, 1.0)]))  # (points,)


def _truncated_linear_row(c: Any, r: dict[str, float], *, anchors: int, heads: int) -> dict[str, Any]:
    """The CSV/JSON row shared by the anchor and head sweeps of truncated-linear attention."""
    return {
        "anchors": anchors,
        "heads": heads,
        "beta": c.plan.beta,
        "sup_error": r["sup_error"],
        "sup_outside": r["sup_outside"],
        "bound": c.plan.bound,
        "clamp_bound": c.plan.clamp_bound,
        "params": c.params,
    }


def sweep_truncated_linear(
    anchors: Sequence[int] = (11, 21, 41, 81, 161),
    *,
    heads: int = 1,
    mode: str = "token",
    a: float = -1.0,
    b: float = 1.0,
    points: int = 20001,
    dtype: str = "float64",
    progress: Progress = _noop,
    stop_at_limit: bool = False,
) -> Sweep:
    """Sup error of Range_[a,b] against the anchor count m (y at the points of `_probe_grid` in [a − (b−a), b + (b−a)]).

    ``stop_at_limit``: when the construction cannot keep its accuracy in ``dtype`` at some m (PrecisionError:
    the inverse temperature grows like m², and float32 rounding of the scores exceeds the promised accuracy
    from m = 41 on [−1, 1]), stop there, keep the rows already measured and record the m and the reason in
    ``summary`` (``stopped_at_anchors``, ``stopped_because``); the first m must fit. Default: raise."""
    t0 = time.perf_counter()
    ys = _probe_grid(a, b, points)
    rows = []
    summary: dict[str, Any] = {}
    for m in anchors:
        n_tok = m if mode == "token" else 4
        try:
            c = build_truncated_linear_attention(
                [1.0], 0.0, a, b, anchors=m, heads=heads, mode=mode, dtype=dtype, n_tokens=n_tok
            ).detail
        except PrecisionError as exc:
            if not (stop_at_limit and rows):
                raise
            summary = {"stopped_at_anchors": m, "stopped_because": str(exc)}
            progress(f"truncated-linear m={m}: stopped, {dtype} cannot keep the accuracy ({exc})")
            break
        r = measure_sup_error(c, ys)
        rows.append(
            {
                **_truncated_linear_row(c, r, anchors=m, heads=heads),
                "mode": mode,
                "beta_delta2": c.plan.x,
                "sup_inside": r["sup_inside"],
                "spec_bound": c.plan.spec_bound,
                "half_spacing": c.plan.delta / 2,
            }
        )
        progress(f"truncated-linear m={m}: sup error {r['sup_error']:.4g} (bound {c.plan.bound:.4g})")
    slopes = {}
    if len(rows) > 1:
        slopes["sup_error_vs_anchors"] = fit_loglog_slope([r["anchors"] for r in rows], [r["sup_error"] for r in rows])
    return Sweep("truncated-linear", "anchors", rows, slopes, summary, seconds=time.perf_counter() - t0)


def sweep_heads(
    heads: Sequence[int] = (1, 2, 4, 8, 16),
    *,
    anchors: int = 11,
    a: float = -1.0,
    b: float = 1.0,
    points: int = 20001,
    progress: Progress = _noop,
) -> Sweep:
    """Sup error against the number of heads H (token mode, m anchors per head, n = m positions)."""
    t0 = time.perf_counter()
    ys = _probe_grid(a, b, points)
    rows = []
    for H in heads:
        c = build_truncated_linear_attention([1.0], 0.0, a, b, anchors=anchors, heads=H, mode="token").detail
        r = measure_sup_error(c, ys)
        rows.append(_truncated_linear_row(c, r, anchors=anchors, heads=H))
        progress(f"heads H={H}: sup error {r['sup_error']:.4g} (bound {c.plan.bound:.4g})")
    slopes = {}
    if len(rows) > 1:  # a slope needs two sizes (one gives no slope, not NaN), as in the anchor sweep
        slopes["sup_error_vs_heads"] = fit_loglog_slope([r["heads"] for r in rows], [r["sup_error"] for r in rows])
    return Sweep("heads", "heads", rows, slopes, seconds=time.perf_counter() - t0)


# ---------------------------------------------------------------------------- paper B: ReLU compiler
def sweep_relu_network(
    anchors: Sequence[int] = (33, 65, 129, 257),
    *,
    nets: int = 5,
    n: int = 20,
    d: int = 5,
    hidden: int = 10,
    samples: int = 100,
    seed: int = 0,
    layers: int = 1,
    standard: bool = False,
    adversarial: bool = True,
    progress: Progress = _noop,
) -> Sweep:
    """Compile ``nets`` random ReLU networks (paper B's shape) at several anchor counts; error vs anchors.

    ``layers=1``: `compile_relu_network` (one attention layer); ``layers=2``:
    `uatlab.constructions.paper_b.lem3_11_relu_network.compile_relu_network_two_layer` (two attention layers,
    far fewer parameters). ``standard=True`` (two layers only): `compile_relu_network_standard`, two STANDARD
    multi-head attention layers (no map across positions, no appended token); one standard layer has no
    compiler, see `sweep_one_standard_layer_bounds`.

    ``sup_error`` (name kept) = ``sampled_max_error``: the max error over ``samples`` inputs (2 box corners +
    uniform random), a lower estimate of the sup; ``adversarial=True`` adds ``adversarial_error``, the error at
    a linear-program-placed input (`uatlab.experiments.adversarial`), usually 1.5–2× larger. Relative figures
    divide by the network's output range over 100 reference inputs (``definition`` in the summary).
    """
    from uatlab.constructions.paper_b.lem3_11_relu_network import compile_relu_network_two_layer
    from uatlab.constructions.paper_b.lem3_11_standard_attention import compile_relu_network_standard

    if layers not in (1, 2):
        raise InputError(f"layers must be 1 or 2, got {layers}")
    if standard and layers != 2:
        raise InputError("the standard-attention compiler has two layers; one standard layer has only lower bounds")
    compile_fn = (
        compile_relu_network_standard
        if standard
        else (compile_relu_network if layers == 1 else compile_relu_network_two_layer)
    )
    t0 = time.perf_counter()
    rows = []
    nonstandard: list[str] = []
    for k in range(nets):
        net = random_relu_network(n, d, hidden, seed=seed + k)
        for m in anchors:
            c = compile_fn(net, anchors=m).detail
            nonstandard = list(c.nonstandard)
            r = measure_compiled(c, samples=samples, seed=seed + 1000 + k, adversarial=adversarial)
            definition = str(r["definition"])
            rows.append(
                {
                    "net": k,
                    "layers": layers,
                    "standard": standard,
                    "anchors": m,
                    "heads": c.heads,
                    "sup_error": r["sup_error"],  # = sampled_max_error (name kept)
                    "sampled_max_error": r["sampled_max_error"],
                    "relative_sup_error": r["relative_sup_error"],
                    "adversarial_error": r.get("adversarial_error", math.nan),
                    "relative_adversarial_error": r.get("relative_adversarial_error", math.nan),
                    "output_range": r["output_range"],
                    "bound": c.bound,
                    "params": c.params,
                    "net_params": net.params,
                }
            )
            adv = f", adversarial input {r['adversarial_error']:.4g}" if adversarial else ""
            progress(
                f"relu net {k} m={m}: max error over {samples} inputs {r['sup_error']:.4g} "
                f"= {100 * r['relative_sup_error']:.3g}% of range{adv}"
            )
    slopes = {}
    for k in range(nets):
        sub = [r for r in rows if r["net"] == k]
        if len(sub) > 1:
            slopes[f"net{k}_sup_error_vs_anchors"] = fit_loglog_slope(
                [r["anchors"] for r in sub], [r["sup_error"] for r in sub]
            )
    if slopes:
        slopes["mean_sup_error_vs_anchors"] = float(np.mean(list(slopes.values())))
    largest = max(anchors)
    at_largest = [r for r in rows if r["anchors"] == largest]
    summary = {
        "anchors": largest,
        "max_relative_sup_error": max(r["relative_sup_error"] for r in at_largest),
        "max_relative_adversarial_error": max(r["relative_adversarial_error"] for r in at_largest),
        "params": at_largest[0]["params"],
        "layers": layers,
        "nonstandard": nonstandard,
        "definition": definition,
    }
    name = "relu-network-standard" if standard else "relu-network"
    return Sweep(name, "anchors", rows, slopes, summary, seconds=time.perf_counter() - t0)


def sweep_one_standard_layer_bounds(
    *,
    nets: int = 5,
    n: int = 20,
    d: int = 5,
    hidden: int = 10,
    pairs: int = 2000,
    search: tuple[int, int] = (8, 3000),
    seed: int = 0,
    progress: Progress = _noop,
) -> Sweep:
    """Certified lower bounds on the sup error of ONE standard attention layer on random ReLU networks.

    No size helps (Hu et al. 2025, Sec. 3.3; the lemma of `uatlab.experiments.paper_b.one_layer_standard`):
    a standard layer whose keys read positions only is, for each fixed token x_i, affine in the other
    tokens at output i, so the midpoint defect over pairs sharing token i bounds its sup error from below
    (``lower_bound``); ``data_free_lower_bound`` is the weaker bound for scores that ignore the data.
    ``any_layer_lower_bound`` holds for EVERY one-layer standard form, keys reading the data included
    (`uatlab.experiments.paper_b.one_layer_data_keys`: symmetric cross-Hessian blocks; n ≥ 3 and d ≥ 2
    only, else None). Relative figures divide by an UPPER bound on the output range over the box (linear
    programs). ``search`` = (starts, moves) of the slice search behind ``any_layer_lower_bound``.
    """
    from uatlab.experiments.paper_b.one_layer_data_keys import data_key_error_lower_bound
    from uatlab.experiments.paper_b.one_layer_standard import (
        affine_error_lower_bound,
        output_range_upper_bound,
        positional_key_error_lower_bound,
    )

    t0 = time.perf_counter()
    rows = []
    for k in range(nets):
        net = random_relu_network(n, d, hidden, seed=seed + k)
        low = positional_key_error_lower_bound(net, pairs=pairs, seed=seed + k)["lower_bound"]
        free = affine_error_lower_bound(net, pairs=pairs, seed=seed + k)["lower_bound"]
        r_ub = output_range_upper_bound(net)
        anyl = None
        if n >= 3 and d >= 2:
            anyl = data_key_error_lower_bound(net, starts=search[0], steps=search[1], seed=seed + k)["lower_bound"]
        rows.append(
            {
                "net": k,
                "layers": 1,
                "standard": True,
                "lower_bound": low,
                "data_free_lower_bound": free,
                "any_layer_lower_bound": anyl,
                "output_range_upper_bound": r_ub,
                "relative_lower_bound": low / r_ub,
                "relative_data_free_lower_bound": free / r_ub,
                "relative_any_layer_lower_bound": None if anyl is None else anyl / r_ub,
                "pairs": pairs,
                "net_params": net.params,
            }
        )
        progress(f"one standard layer, net {k}: sup error ≥ {low:.4g} = {100 * low / r_ub:.3g}% of range (any size)")
    summary = {
        "min_relative_lower_bound": min(r["relative_lower_bound"] for r in rows),
        "holds_for": "every number of heads, width and positional encoding (keys reading positions only)",
        "any_layer_holds_for": "every one-layer standard form, keys reading the data included (n ≥ 3, d ≥ 2)",
        "not_covered": "keys reading the data when n = 2 (one layer is universal there) or d = 1",
    }
    return Sweep("relu-network-one-standard-layer", "net", rows, {}, summary, seconds=time.perf_counter() - t0)


# ---------------------------------------------------------------------------- paper A: FF∘SA∘FF
def sweep_universal(
    grids: Sequence[int] = (5, 10, 20, 30, 44),
    *,
    target: str = "product-mean",
    d: int = 1,
    n: int = 3,
    domain: tuple[float, float] = (0.0, 1.0),
    samples: int = 20000,
    seed: int = 0,
    progress: Progress = _noop,
) -> Sweep:
    """Paper A's FF∘SA∘FF for one example target at several grid sizes: sup/L² error, params, Yun et al. depth."""
    if target not in EXAMPLES:
        raise InputError(f"unknown target {target!r}; choose one of {sorted(EXAMPLES)}")
    f = EXAMPLES[target]
    t0 = time.perf_counter()
    rows = []
    for G in grids:
        ap = build_universal_approximator(f, domain, grid=G, n=n, d=d, seed=seed).detail
        meas = measure_approximation(ap, samples=samples, seed=seed)
        size = model_size(ap)
        yun = yun_comparison(G, n, d)
        rows.append(
            {
                "grid": G,
                "delta": ap.delta,
                "context_ids": ap.n_ids,
                "attention_scale_c": ap.scale_c,
                "min_id_gap": ap.min_gap,
                "exact_min_gap_lower_bound": ap.info["exact_min_gap_lower_bound"],
                "rounding_bound": ap.rounding_bound,
                "grid_check_max_error": ap.grid_check_max_error,
                "sup_error": meas["sup_error"],
                "sup_error_clean": meas["sup_error_clean"],
                "l2_error": meas["lp_error"],
                "misquantised_fraction": meas["misquantised_fraction"],
                "bound": example_error_bound(target, ap),  # proven for sup_error_clean (NaN: none derived)
                "params": size["params"],
                "largest_weight": size["largest_weight"],
                "attention_layers": 1,
                "yun_attention_layers": yun["yun_attention_layers"],
                "yun_value_mapping_ff_layers": yun["yun_value_mapping_ff_layers"],
            }
        )
        progress(f"universal {target} d={d} n={n} G={G}: L2 {meas['lp_error']:.4g}, sup {meas['sup_error']:.4g}")
    slopes = {}
    if len(rows) > 1:
        slopes["l2_error_vs_grid"] = fit_loglog_slope([r["grid"] for r in rows], [r["l2_error"] for r in rows])
        slopes["sup_error_clean_vs_grid"] = fit_loglog_slope(
            [r["grid"] for r in rows], [r["sup_error_clean"] for r in rows]
        )
    return Sweep(
        "universal", "grid", rows, slopes, {"target": target, "d": d, "n": n}, seconds=time.perf_counter() - t0
    )


# ---------------------------------------------------------------------------- in-context GD
def gd_sweep_bytes(contexts: Sequence[int], d: int, steps: Sequence[int], batch: int) -> int:
    """Estimated peak memory of `sweep_gd` in bytes (the largest of its runs; each is freed before the next).

    A layer's forward pass holds its float64 scores and softmax weights, two (B, 2 heads, N+1, N+2) tensors;
    the k-layer model holds per layer W_Q and W_K (2, d+2, d+4) and the lift (d+4, d+1), all float64, and
    building and measuring it takes about 1.5 layers' worth more (the ±εI blocks, the parameter count).
    Measured peaks: 1.6 GB at N = 800, d = 2, B = 64 (estimate 1.3 GB + the interpreter); 9.1 GB at N = 4,
    d = 10⁴, k = 1 (estimate 10 GB)."""
    attention = 2 * 8 * batch * 2 * (max(contexts) + 1) * (max(contexts) + 2)
    layer = 8 * (2 * 2 * (d + 2) * (d + 4) + (d + 4) * (d + 1))
    return int(attention + (max(steps) + 1.5) * layer)


def sweep_gd(
    contexts: Sequence[int] = (8, 16, 32, 64, 128),
    eps_values: Sequence[float] = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6),
    *,
    d: int = 8,
    steps: Sequence[int] = (1, 3),
    lr: float = 0.5,
    batch: int = 64,
    seed: int = 0,
    progress: Progress = _noop,
) -> Sweep:
    """Relative error of attention-GD against exact GD as context length and score scale ε (β) vary.

    ``bound``: the sup-error bound of the float64 run, rounding included (`multi_step_float_bound`);
    ``exact_arithmetic_bound`` and ``rounding_bound`` are its two parts.
    """
    t0 = time.perf_counter()
    rows = []
    torch.manual_seed(seed)
    for N in contexts:
        for eps in eps_values:
            for k in steps:
                g = build_incontext_gd(d, N, steps=k, lr=lr, eps=eps).detail
                r = relative_error(g, batch=batch, seed=seed)
                rows.append(
                    {
                        "context": N,
                        "eps": eps,
                        "steps": k,
                        "relative_error": r["relative_error"],
                        "sup_error": r["sup_error"],
                        "bound": r["bound"],
                        "exact_arithmetic_bound": r["exact_arithmetic_bound"],
                        "rounding_bound": r["rounding_bound"],
                        "params": int(sum(int((p != 0).sum()) for p in g.model.parameters())),
                    }
                )
        progress(f"gd-in-context N={N}: done")
    slopes = {}
    big = [r for r in rows if r["steps"] == 1 and r["eps"] >= 1e-3 and r["context"] == max(contexts)]
    if len(big) > 1:
        slopes["relative_error_vs_eps"] = fit_loglog_slope([r["eps"] for r in big], [r["relative_error"] for r in big])
    return Sweep("gd-in-context", "eps", rows, slopes, {"d": d}, seconds=time.perf_counter() - t0)


# ---------------------------------------------------------------------------- output
def write_csv(sweep: Sweep, path: Path) -> Path:
    """One CSV line per row (overwrites: a rerun never appends to stale results)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    keys: list[str] = []
    for r in sweep.rows:
        keys.extend(k for k in r if k not in keys)
    with atomic_write(path, newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        for r in sweep.rows:
            w.writerow(r)
    return path


def plot_sweep(
    sweep: Sweep,
    path: Path,
    x_key: str,
    y_key: str = "sup_error",
    bound_key: str | None = "bound",
    group_key: str | None = None,
    slope_key: str | None = None,
    title: str = "",
    where: dict[str, Any] | None = None,
    extra_keys: Sequence[str] = (),
    bound_label: str | None = None,
) -> Path:
    """Log-log figure of y against x (one line per group), the bound dashed, the fitted slope in the legend.

    ``bound_label`` names the dashed line (default "bound"); say there whether it includes a rounding estimate.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    base = [r for r in sweep.rows if all(r.get(k) == v for k, v in (where or {}).items())]
    groups = sorted({r.get(group_key) for r in base}) if group_key else [None]
    for gval in groups:
        rows = [r for r in base if group_key is None or r.get(group_key) == gval]
        xs = [r[x_key] for r in rows]
        ys = [r[y_key] for r in rows]
        label = f"{y_key}" + (f" ({group_key}={gval})" if group_key else "")
        if slope_key and slope_key in sweep.slopes and group_key is None:
            label += f", slope {sweep.slopes[slope_key]:.3f}"
        ax.loglog(xs, ys, "o-", label=label)
        for extra in extra_keys:
            ax.loglog(xs, [r[extra] for r in rows], "s:", label=extra)
        if bound_key and all(isinstance(r.get(bound_key), float) and math.isfinite(r[bound_key]) for r in rows):
            ax.loglog(
                xs,
                [r[bound_key] for r in rows],
                "--",
                label=(bound_label or bound_key) + (f" ({gval})" if group_key else ""),
            )
    ax.set_xlabel(x_key)
    ax.set_ylabel(y_key if not extra_keys else "error")
    ax.set_title(title or sweep.name)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
    return path
