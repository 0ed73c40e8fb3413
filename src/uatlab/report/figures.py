"""Figures of the claim checks that have no experiment module of their own (matplotlib, Agg backend).

Conventions of every uatlab figure: legends outside the data (or in an empty corner), every drawn line
in the legend, both axes labelled with units or definitions, the paper cited as in the claim.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from uatlab.io_safety import save_figure


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_margin_histogram(margins: np.ndarray, path: Path, title: str) -> Path:
    """Histogram of per-token certified margins; the exact margin of paper A's memorizer is 1.

    Two panels: the margins themselves, and the part lost to the rounding analysis (1 − margin, log scale),
    where the margins crowd against 1.
    """
    plt = _plt()
    m = np.asarray(margins, dtype=np.float64)
    m = m[np.isfinite(m)]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.4), constrained_layout=True)
    ax1.hist(
        m,
        bins=np.linspace(min(0.0, float(m.min(initial=0.0))), max(1.0, float(m.max(initial=1.0))) + 1e-3, 41),
        color="#3a7ebf",
        label="tokens",
    )
    ax1.axvline(0.0, color="#b2182b", lw=1, ls="--", label="0: not certified below")
    ax1.set_xlabel("certified margin lower bound of L_y − max L_c")
    ax1.set_ylabel("tokens")
    ax1.legend(loc="upper left", frameon=False, fontsize=8)
    lost = 1.0 - m[(m > 0) & (m < 1)]
    if lost.size:
        ax2.hist(np.log10(lost), bins=40, color="#7f7f7f")
    ax2.set_xlabel("log10(1 − certified margin)  (rounding allowance)")
    ax2.set_ylabel("tokens")
    ax2.set_title(f"{int((m > 0).sum()):,} of {m.size:,} tokens certified", fontsize=9)
    fig.suptitle(title, fontsize=10)
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def plot_params_vs_paper_a(
    sizes: Sequence[int],
    ours_non_embedding: Sequence[int],
    ours_total: Sequence[int],
    paper_a: Sequence[int],
    path: Path,
    title: str,
) -> Path:
    """Parameters of the compiled memorizer against paper A's count 4(s+d) + d(2nN + d), by data-set size N."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.2, 3.8), constrained_layout=True)
    ax.loglog(sizes, paper_a, "s--", color="#b2182b", label="paper A's count 4(s+d)+d(2nN+d) (Kajitsuka & Sato 2024)")
    ax.loglog(sizes, ours_total, "o-", color="#7f7f7f", label="uatlab compiled, all parameters")
    ax.loglog(sizes, ours_non_embedding, "o-", color="#3a7ebf", label="uatlab compiled, non-embedding")
    ax.set_xticks(list(sizes), [f"{k:,}" for k in sizes])
    ax.minorticks_off()
    ax.set_xlabel("sequences N (fixed length n, vocabulary, classes)")
    ax.set_ylabel("parameters")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), frameon=False, fontsize=8)
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def plot_curve(
    xs: Sequence[float],
    series: dict[str, Sequence[float]],
    path: Path,
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    logx: bool = False,
    logy: bool = False,
    hlines: dict[str, float] | None = None,
) -> Path:
    """Lines of ``series`` against ``xs`` (every line and reference line labelled), legend below the axes."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.2, 3.8), constrained_layout=True)
    for name, ys in series.items():
        ax.plot(xs, ys, "o-", ms=3, label=name)
    for name, y in (hlines or {}).items():
        ax.axhline(y, ls="--", lw=1, color="#7f7f7f" if "ceiling" not in name else "#1b7837", label=name)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False, fontsize=8, ncol=2)
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def plot_panels(panels: Sequence[dict], path: Path, title: str) -> Path:
    """Side-by-side panels; each dict: xs, series {name: ys}, xlabel, ylabel, optional logx/logy, title.

    Panels share the legend convention (below the axes) and, when both are log-log, the same scale type.
    """
    plt = _plt()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.9), constrained_layout=True, squeeze=False)
    for ax, p in zip(axes[0], panels, strict=True):
        for name, ys in p["series"].items():
            ax.plot(p["xs"], ys, "o-", ms=3, label=name)
        for name, y in p.get("hlines", {}).items():
            ax.axhline(y, ls="--", lw=1, color="#7f7f7f", label=name)
        if p.get("logx"):
            ax.set_xscale("log")
            ax.set_xticks(list(p["xs"]), [f"{x:g}" for x in p["xs"]])
            ax.minorticks_off()
        if p.get("logy"):
            ax.set_yscale("log")
        ax.set_xlabel(p["xlabel"])
        ax.set_ylabel(p["ylabel"])
        ax.set_title(p.get("title", ""), fontsize=9)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False, fontsize=8)
    fig.suptitle(title, fontsize=10)
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def plot_bars(
    values: dict[str, float],
    path: Path,
    *,
    ylabel: str,
    title: str,
    logy: bool = False,
    threshold: tuple[str, float] | None = None,
) -> Path:
    """One bar per named value (labels on the x axis), an optional dashed threshold in the legend."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.2, 3.8), constrained_layout=True)
    names = list(values)
    ax.bar(range(len(names)), [values[k] for k in names], color="#3a7ebf")
    ax.set_xticks(range(len(names)), names, rotation=15, ha="right", fontsize=8)
    if threshold is not None:
        ax.axhline(threshold[1], ls="--", lw=1, color="#b2182b", label=threshold[0])
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), frameon=False, fontsize=8)
    if logy:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


def plot_bar_panels(panels: Sequence[tuple[dict[str, float], str, str]], path: Path, title: str) -> Path:
    """Side-by-side bar charts; each panel is (values by name, y label, panel title)."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), constrained_layout=True, squeeze=False)
    for ax, (values, ylabel, sub) in zip(axes[0], panels, strict=True):
        names = list(values)
        ax.bar(range(len(names)), [values[k] for k in names], color=["#3a7ebf", "#b2182b", "#7f7f7f"][: len(names)])
        ax.set_xticks(range(len(names)), names, fontsize=7, rotation=10)
        ax.set_ylabel(ylabel)
        ax.set_title(sub, fontsize=9)
    fig.suptitle(title, fontsize=10)
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path
