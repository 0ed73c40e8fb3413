"""Figures of the paper-B experiments (matplotlib, Agg backend; plotting kept apart from running)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402

from uatlab.experiments.paper_b.sweeps import REPO_ANCHORS  # noqa: E402
from uatlab.io_safety import save_figure

X_LABELS = {
    "heads": "number of heads H",
    "anchors": "anchor tokens m = p − n",
    "range": "interval width |b − a| (target units)",
}


X_SCALE = {  # one x scale per sweep, shared by both panels
    "heads": ("log", {"base": 2}),
    "anchors": ("log", {}),
    "range": ("linear", {}),
}


def _band(ax, xs, mean, std, label, color, style="-o"):
    xs, mean, std = (np.asarray(v, dtype=float) for v in (xs, mean, std))
    ax.plot(xs, mean, style, color=color, label=label, lw=2)
    lo = np.maximum(mean - std, mean * 0.05)  # keep the band positive on log axes
    ax.fill_between(xs, lo, mean + std, color=color, alpha=0.2)


def _series(summary: list[dict[str, Any]], mode: str, col: str):
    ss = [s for s in summary if s["mode"] == mode and f"{col}_mean" in s]
    return [s["value"] for s in ss], [s[f"{col}_mean"] for s in ss], [s.get(f"{col}_std", 0.0) for s in ss]


def _seeds(summary: list[dict[str, Any]], mode: str) -> str:
    """'4 seeds' (or '3–4 seeds' when the sweep points differ) of one mode's summary rows."""
    counts = sorted({int(s["seeds"]) for s in summary if s["mode"] == mode and "seeds" in s})
    if not counts:
        return "? seeds"
    text = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}–{counts[-1]}"
    return f"{text} seed{'s' * (counts[-1] > 1)}"


def plot_truncated_sweep(summary: list[dict[str, Any]], sweep: str, path: Path, fixed: dict[str, str]) -> Path:
    """Parity (repository metric, 50 epochs) and corrected (sup norm, converged) panels, each with the closed
    form; a panel is drawn only for a mode that has results, the seed count is in every trained series' label,
    and the legends sit below the axes (off the data). Both panels share one x scale."""
    modes = [m for m in ("parity", "corrected") if any(s["mode"] == m for s in summary)]
    if not modes:
        raise ValueError(f"attention-{sweep}: no parity or corrected results to plot")
    fig, axes = plt.subplots(1, len(modes), figsize=(6.5 * len(modes), 6.6), sharex=True, squeeze=False)
    panels = dict(zip(modes, axes[0], strict=True))
    if "parity" in panels:
        ax = panels["parity"]
        xs, m, s = _series(summary, "parity", "test_mse_all_channels")
        _band(ax, xs, m, s, f"trained, 50 epochs (mean ± std over {_seeds(summary, 'parity')})", "#1b7837")
        xs2, m2, _ = _series(summary, "parity", "cf_mse_all_channels")
        ax.plot(xs2, m2, "--s", color="#762a83", label="closed form, same architecture & parameter count")
        anchors = REPO_ANCHORS.get(sweep, {})
        if anchors:
            ax.plot(
                list(anchors),
                [v[0] for v in anchors.values()],
                "kx",
                ms=10,
                mew=2,
                label="authors' code (truncated.py) run at its settings, mean of 11 seeds",
            )
        ax.set_ylabel("test MSE over all 32 output channels (target units²)")
        ax.set_title("Parity: truncated.py settings\n" + textwrap.fill(fixed.get("parity", ""), 75), fontsize=9)
    if "corrected" in panels:
        ax = panels["corrected"]
        seeds = _seeds(summary, "corrected")
        xs, m, s = _series(summary, "corrected", "test_sup")
        _band(ax, xs, m, s, f"trained to convergence: sup |error| (mean ± std over {seeds})", "#2166ac")
        xs5, m5, s5 = _series(summary, "corrected", "at50_sup")
        ax.plot(xs5, m5, ":^", color="#92c5de", label="same runs at epoch 50")
        xs3, m3, _ = _series(summary, "corrected", "test_mse")
        ax.plot(xs3, np.sqrt(m3), "-.d", color="#f4a582", label="trained: RMSE (√MSE) on the target channel")
        xs4, m4, _ = _series(summary, "corrected", "cf_sup")
        ax.plot(xs4, m4, "--s", color="#762a83", label="closed form, same parameter count: sup |error|")
        ax.set_ylabel("error on the target channel (target units)")
        ax.set_title(
            "Corrected: target channel, converged\n" + textwrap.fill(fixed.get("corrected", ""), 75), fontsize=9
        )
    for ax in panels.values():
        ax.set_xscale(X_SCALE[sweep][0], **X_SCALE[sweep][1])  # one x scale for both panels
        ax.set_yscale("log")
        ax.set_xlabel(X_LABELS[sweep])
        ax.grid(True, which="both", ls=":", lw=0.5)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), frameon=False)  # off the data
        ax.set_xticks(sorted({float(s["value"]) for s in summary}))  # a tick at every swept value
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # plain 10, 20, 50
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.tick_params(axis="x", labelbottom=True)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def plot_heatmaps(rows: list[dict[str, Any]], path: Path) -> Path:
    """Rows = |b−a|; columns = (trained, closed form) for each example sample."""
    rows = sorted(rows, key=lambda r: r["range"])
    k = len(rows[0]["trained_maps"])
    fig, axes = plt.subplots(
        len(rows), 2 * k, figsize=(3.4 * 2 * k + 1, 3.2 * len(rows)), squeeze=False, constrained_layout=True
    )
    for i, r in enumerate(rows):
        for j in range(k):
            for c, (key, name) in enumerate((("trained_maps", "trained"), ("cf_maps", "closed form"))):
                ax = axes[i, 2 * j + c]
                im = ax.imshow(np.asarray(r[key][j]).T, origin="lower", cmap="magma", vmin=0, vmax=1, aspect="auto")
                ax.set_title(f"|b−a|={r['range']:g}, sample {j}: {name}", fontsize=9)
                ax.set_xlabel("query token i")
                ax.set_ylabel("key token k")
    fig.colorbar(im, ax=axes, shrink=0.6, label="attention weight")
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


def plot_seq2seq(summary: list[dict[str, Any]], path: Path, fixed: str) -> Path:
    """Left: test MSE against heads. Right: test MSE against parameter count, with the closed forms."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 6.4))
    styles = {
        "parity": ("#1b7837", "repository settings, 3 epochs (parity)"),
        "attention": ("#2166ac", "attention-only (2 layers), trained"),
        "feedforward": ("#b2182b", "feed-forward Transformer, same parameter count"),
    }
    base = [s for s in summary if "least_squares_mse_mean" in s and s["mode"] in ("attention", "feedforward")]
    base = base or [s for s in summary if "least_squares_mse_mean" in s]
    for ax, xkey in zip(axes, ("value", "n_params_mean"), strict=True):
        for mode, (color, label) in styles.items():
            ss = sorted((s for s in summary if s["mode"] == mode), key=lambda s: s[xkey])
            if ss:
                _band(
                    ax,
                    [s[xkey] for s in ss],
                    [s["test_mse_mean"] for s in ss],
                    [s["test_mse_std"] for s in ss],
                    f"{label} (mean ± std, {ss[0]['seeds']} seed(s))",
                    color,
                )
        if base:
            ax.axhline(base[0]["mean_predictor_mse_mean"], color="grey", ls="--", label="mean predictor")
            ax.axhline(base[0]["least_squares_mse_mean"], color="black", ls=":", label="linear least squares")
        ax.set_yscale("log")
        ax.set_ylabel("test MSE, unnormalised target (target units²)")
        ax.grid(True, which="both", ls=":", lw=0.5)
    closed = {
        "closed-form": ("--s", "#762a83", "closed form, 1 layer (relu_compiler, sequence-wise map), m anchors"),
        "closed-form-2layer": (
            "-.D",
            "#e08214",
            "closed form, 2 attention layers (relu_compiler_two_layer), m anchors",
        ),
    }
    for mode, (style, color, label) in closed.items():
        cf = sorted((s for s in summary if s["mode"] == mode), key=lambda s: s["n_params_mean"])
        if cf:
            axes[1].plot(
                [s["n_params_mean"] for s in cf], [s["test_mse_mean"] for s in cf], style, color=color, label=label
            )
            for s in cf:
                axes[1].annotate(f"m={s['value']:g}", (s["n_params_mean"], s["test_mse_mean"]), fontsize=8)
    axes[0].set_xscale("log", base=2)
    axes[0].set_xlabel("number of heads H per attention layer")
    axes[0].set_title("Two layers on a random ReLU seq2seq target\n" + textwrap.fill(fixed, 75), fontsize=9)
    axes[1].set_xscale("log")
    axes[1].set_xlabel("parameters (closed form: non-zero parameters)")
    axes[1].set_title("Trained against constructed, by parameter count", fontsize=10)
    # one legend below both panels (the right panel holds every series; its points fill every corner)
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=2, frameon=False)
    fig.tight_layout(rect=(0, 0.17, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path
