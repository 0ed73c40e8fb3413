"""Figures of the docs: legends off the data, every drawn line named, point labels that do not overlap."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from uatlab.experiments import depth_ablation, plots  # noqa: E402
from uatlab.experiments.paper_b import plots as paper_b_plots  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _capture(monkeypatch, module, name: str) -> list:
    """Replace ``module.name`` (a save function) by one that keeps the figure open and records it."""
    figs: list = []

    def keep(fig, *args, **kwargs):
        fig.canvas.draw()
        figs.append(fig)
        return []

    monkeypatch.setattr(module, name, keep)
    return figs


def _history(epochs: int, start: float) -> list[dict]:
    return [
        {"epoch": e, "train_accuracy": 1 - start / e, "train_errors": int(2000 * start / e)}
        for e in range(1, epochs + 1)
    ]


def test_depth_ablation_legend_is_off_both_panels_and_names_every_line(monkeypatch, tmp_path):
    figs = _capture(monkeypatch, depth_ablation, "save_figure")
    base = {"tokens": 2000, "per_word_majority": 0.97, "all_majority_label": 0.83, "majority_label": "O"}
    base["ceiling"] = 0.999
    results = {
        1: {"status": "completed", "history": _history(12, 0.05), "epochs_to": {"0.9872": 4}},
        3: {"status": "partial (5 of 12 epochs)", "history": _history(5, 0.06), "epochs_to": {"0.9872": None}},
    }
    depth_ablation.plot_depth_ablation(results, base, tmp_path / "d")
    (fig,) = figs
    (legend,) = fig.legends
    box = legend.get_window_extent()
    for ax in fig.axes:
        assert not _overlaps(box, ax.get_window_extent())
    labels = [t.get_text() for t in legend.get_texts()]
    assert len(labels) == len(fig.axes[0].get_lines())  # every line of the top panel is named
    assert "4" in labels[0] and "not reached" in labels[1] and "partial" in labels[1]
    assert any("Kajitsuka & Sato, ICLR 2024" in t for t in labels)
    # the bottom panel draws the same curves and reference lines, in the same colours
    top = [line.get_color() for line in fig.axes[0].get_lines()]
    assert sorted(map(str, top)) == sorted(map(str, (line.get_color() for line in fig.axes[1].get_lines())))
    plt.close(fig)


@pytest.mark.parametrize("modes", [("parity",), ("parity", "corrected")])
def test_paper_b_sweep_legends_below_the_axes_and_seed_counts_named(monkeypatch, tmp_path, modes):
    figs = _capture(monkeypatch, paper_b_plots, "save_figure")
    summary = []
    for mode in modes:
        for v in (1, 2, 4):
            row = {"mode": mode, "value": v, "seeds": 4 if mode == "parity" else 3}
            for col in ("test_mse_all_channels", "cf_mse_all_channels", "test_sup", "at50_sup", "test_mse", "cf_sup"):
                row[f"{col}_mean"], row[f"{col}_std"] = 0.1 / v, 0.01
            summary.append(row)
    paper_b_plots.plot_truncated_sweep(summary, "heads", tmp_path / "h.png", {"parity": "p", "corrected": "c"})
    (fig,) = figs
    assert len(fig.axes) == len(modes)  # no empty panel for a mode that was not run
    for ax in fig.axes:
        legend = ax.get_legend()
        assert not _overlaps(legend.get_window_extent(), ax.get_window_extent())
        texts = [t.get_text() for t in legend.get_texts()]
        assert len(texts) == len([line for line in ax.get_lines() if not line.get_label().startswith("_")])
        assert not any("issue" in t for t in texts)
    parity_labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("over 4 seeds" in t for t in parity_labels) and any("authors' code" in t for t in parity_labels)
    assert fig.axes[0].get_xscale() == fig.axes[-1].get_xscale() == "log"
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["1", "2", "4"]  # every swept value
    plt.close(fig)


def _memorization_benchmark():
    spec = importlib.util.spec_from_file_location("memorization_bench", ROOT / "benchmarks" / "memorization.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_memorization_point_numbers_do_not_overlap_and_stay_in_the_axes():
    bench = _memorization_benchmark()
    fig, ax = plt.subplots(figsize=(8, 5))
    pts = [("a", 1e4, 1e6), ("b", 1e4, 1.1e6), ("c", 1.05e4, 1.05e6), ("d", 1e5, 1e3), ("e", 1e6, 9e7)]
    ax.scatter([p[1] for p in pts], [p[2] for p in pts])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(3e3, 3e6)
    ax.set_ylim(1e2, 1e8)
    bench._number_points(ax, pts)
    fig.canvas.draw()
    boxes = [t.get_window_extent() for t in ax.texts]
    assert [t.get_text() for t in ax.texts] == ["1", "2", "3", "4", "5"]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not _overlaps(a, b)
    frame = ax.get_window_extent()
    for b in boxes:  # every number inside the axes (none runs off)
        assert frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1
    plt.close(fig)


def test_save_figure_untight_keeps_a_hand_set_layout(tmp_path):
    fig, ax = plt.subplots()
    fig.subplots_adjust(right=0.5)
    paths = plots.save_figure(fig, tmp_path / "f", formats=("png",), tight=False)
    assert paths == [str(tmp_path / "f.png")] and (tmp_path / "f.png").stat().st_size > 0
    assert ax.get_position().x1 == pytest.approx(0.5)
