"""Shared plotting helpers for experiments (matplotlib, Agg backend, PNG + SVG side by side)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from uatlab.io_safety import save_figure as save_figure_atomic


def new_figure(width: float = 7.0, height: float = 4.5) -> tuple[Figure, plt.Axes]:
    """A fresh figure and axes (not attached to pyplot's global state beyond creation)."""
    fig, ax = plt.subplots(figsize=(width, height))
    return fig, ax


def save_figure(
    fig: Figure, stem: str | os.PathLike, formats: Sequence[str] = ("png", "svg"), tight: bool = True
) -> list[str]:
    """Save ``fig`` as ``stem.png`` and ``stem.svg`` and close it; returns the paths.

    ``tight=True`` applies ``tight_layout`` first; pass False when the figure's layout was set by hand
    (a legend placed outside the axes with ``fig.legend``, which ``tight_layout`` would not leave room for).
    """
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    if tight:
        fig.tight_layout()
    paths = []
    for fmt in formats:
        path = stem.with_suffix(f".{fmt}")
        save_figure_atomic(fig, path, dpi=150 if fmt == "png" else None)
        paths.append(str(path))
    plt.close(fig)
    return paths


def hline(ax: plt.Axes, y: float, label: str, style: str = "--", color: str = "grey") -> None:
    """A labelled horizontal reference line."""
    ax.axhline(y, linestyle=style, color=color, linewidth=1.0, label=label)
