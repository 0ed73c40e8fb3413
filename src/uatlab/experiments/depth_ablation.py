"""Paper A's depth ablation (Section 5): 1, 3 and 6 blocks, rank 1.

Each depth is one trial of `uatlab.experiments.executor.run_trials` (finished trials are
never recomputed; a killed trial resumes from its own training checkpoint). Outputs in ``out``:

* ``depth_ablation.csv``: one row per (layers, epoch) with full-pass train loss/accuracy/errors;
* ``depth_table.csv``: per depth, epochs to 0.9872 (the paper's figure), to 0.999 and to the ceiling;
* ``depth_ablation.png`` / ``.svg``: accuracy and errors against epoch, with the paper's 0.9872,
  the all-O and per-word-majority baselines and the ceiling drawn;
* ``summary.json``.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from uatlab.data import baselines, ceiling_report, read_sequences
from uatlab.data.dataset import SequenceDataset
from uatlab.errors import InputError
from uatlab.experiments.executor import (
    Trial,
    check_store_options,
    check_trial_folder,
    resume_trial,
    run_trials,
    trial_checkpoint,
)
from uatlab.experiments.plots import hline, save_figure
from uatlab.io_safety import atomic_write, prefix_identity, write_text_atomic
from uatlab.training.batching import fit_encoding
from uatlab.training.trainer import PAPER_ACCURACY, TrainConfig, epochs_to_targets, init_model, train

TARGETS = (PAPER_ACCURACY, 0.999)


def load_subset(path: str, sentences: int | None, exact: bool = False) -> SequenceDataset:
    """The first ``sentences`` sequences of ``path`` (all if None, or if there are fewer and not ``exact``).

    With ``exact``, a file of fewer than ``sentences`` sequences is refused (InputError naming ``--sentences``
    and how many there are): a sweep asked for N sentences does not run on fewer without saying so."""
    data = read_sequences(path)
    if exact and sentences is not None and sentences > len(data):
        raise InputError(
            f"--sentences {sentences} is larger than the {len(data)} sentences of {path}; "
            f"give --sentences ≤ {len(data)} or leave it out"
        )
    if sentences is not None and sentences < len(data):
        data = data.subset(range(sentences))
    return data


def data_fingerprint(path: str | os.PathLike, sentences: int | None) -> dict[str, Any]:
    """What fixes the training data of a sweep: the SHA-256 of the file and how many sentences are used."""
    return {"sha256": prefix_identity(path, None)["sha256"], "sentences": sentences}


def claim_store(out: Path, options: dict[str, Any], report_only: bool) -> None:
    """Refuse ``out`` when its trials were run with other options; with ``report_only``, also when it holds
    nothing to report (see `uatlab.experiments.executor.check_store_options`)."""
    held = check_store_options(out, options, record=not report_only)
    if report_only and not held:
        raise InputError(f"{out} holds no finished or partial trials to report; run without --report-only first")


def depth_trial(params: dict[str, Any]) -> dict[str, Any]:
    """Train one depth (top-level so that process pools can pickle it)."""
    torch.set_num_threads(int(params.get("threads", 1)))
    data = load_subset(params["data"], params.get("sentences"))
    cfg = TrainConfig(**params["config"])
    out = Path(params["out_dir"])
    resume = resume_trial(out)  # only a checkpoint this sweep wrote for this trial
    with trial_checkpoint(out):
        result = train(data, cfg, out, resume=resume, targets=TARGETS, progress=False, with_f1=False)
    s = result.unless_interrupted().summary()  # SIGINT/SIGTERM: the checkpoint is saved; stop the whole sweep
    return {
        k: s[k]
        for k in ("status", "epochs", "train_accuracy", "epochs_to", "seconds_per_epoch", "parameters", "history")
    }


def _partial_result(t: Trial, data: SequenceDataset) -> dict[str, Any] | None:
    """A finished trial's stored result, else what its run wrote so far (status 'partial'), else None."""
    out_dir = Path(t.params["out_dir"])
    stored = out_dir.parent.parent / "trials" / f"{t.id}.json"
    if stored.is_file():
        return json.loads(stored.read_text())
    metrics = out_dir / "metrics.jsonl"
    if not metrics.is_file():
        return None
    history = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    cfg = TrainConfig(**t.params["config"])
    model = init_model(cfg, fit_encoding(data), data.max_len)
    return {
        "status": f"partial ({len(history)} of {cfg.epochs} epochs)",
        "epochs": len(history),
        "train_accuracy": history[-1]["train_accuracy"] if history else None,
        "epochs_to": epochs_to_targets(history, TARGETS, ceiling_report(data).conflict_tokens),
        "seconds_per_epoch": float(np.median([r["seconds_train"] for r in history])) if history else None,
        "parameters": {"total": model.num_parameters(), "non_embedding": model.num_parameters(non_embedding=True)},
        "history": history,
    }


def run_depth_ablation(
    data_path: str | os.PathLike,
    out: str | os.PathLike,
    layers: tuple[int, ...] = (1, 3, 6),
    sentences: int | None = None,
    config: dict[str, Any] | None = None,
    executor: str = "local",
    workers: int = 1,
    threads: int = 1,
    report_only: bool = False,
    exact_sentences: bool = True,
) -> dict[str, Any]:
    """Train one model per depth and write the CSVs, the figure and the summary (see module doc).

    ``report_only=True`` trains nothing: it draws the figure and table from the finished trials and,
    for unfinished ones, from the metrics their (interrupted) runs have written so far, marked partial.
    ``sentences`` larger than the file is refused before anything is written, unless ``exact_sentences`` is
    False (then it is an upper bound: all the sentences are used).
    """
    out = Path(out)
    base_cfg = dict(config or {})
    data = load_subset(str(data_path), sentences, exact=exact_sentences)  # before anything is written
    trials = [
        Trial(
            f"layers={L}",
            {
                "data": str(data_path),
                "sentences": sentences,
                "config": {**base_cfg, "layers": L},
                "out_dir": str(out / "runs" / f"layers={L}"),
                "threads": threads,
            },
        )
        for L in layers
    ]
    # before anything is written: a checkpoint the sweep did not write, a user's file a trial would replace
    for t in trials if not report_only else ():
        check_trial_folder(out, t)
    claim_store(out, {"data": data_fingerprint(data_path, sentences), "config": base_cfg}, report_only)
    out.mkdir(parents=True, exist_ok=True)
    base = baselines(data)
    if report_only:
        results, failed, reused = {}, {}, []
        for t in trials:
            partial = _partial_result(t, data)
            if partial is not None:
                results[t.params["config"]["layers"]] = partial
    else:
        sweep = run_trials(trials, depth_trial, out, executor=executor, workers=workers, retries=1, desc="depths")
        results = {t.params["config"]["layers"]: sweep.results[t.id] for t in trials if t.id in sweep.results}
        failed, reused = sweep.failed, sweep.reused
    ceiling_key = "ceiling"
    with atomic_write(out / "depth_ablation.csv", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["layers", "epoch", "train_loss", "train_accuracy", "train_errors", "seconds_train"])
        for L, r in results.items():
            for row in r["history"]:
                w.writerow(
                    [
                        L,
                        row["epoch"],
                        row["train_loss"],
                        row["train_accuracy"],
                        row["train_errors"],
                        row["seconds_train"],
                    ]
                )
    table = []
    for L, r in results.items():
        table.append(
            {
                "layers": L,
                "status": r["status"],
                "parameters_total": r["parameters"]["total"],
                "parameters_non_embedding": r["parameters"]["non_embedding"],
                "epochs_run": r["epochs"],
                "final_train_accuracy": r["train_accuracy"],
                "epochs_to_0.9872": r["epochs_to"].get(f"{PAPER_ACCURACY:g}"),
                "epochs_to_0.999": r["epochs_to"].get("0.999"),
                "epochs_to_ceiling": r["epochs_to"].get(ceiling_key),
                "seconds_per_epoch": r["seconds_per_epoch"],
            }
        )
    with atomic_write(out / "depth_table.csv", newline="") as fh:
        if table:
            w = csv.DictWriter(fh, fieldnames=list(table[0]))
            w.writeheader()
            w.writerows(table)
    figures = plot_depth_ablation(results, base, out / "depth_ablation")
    summary = {
        "data": str(data_path),
        "sentences": len(data),
        "tokens": data.num_tokens,
        "baselines": base,
        "config": base_cfg,
        "table": table,
        "failed": failed,
        "reused": reused,
        "files": [str(out / "depth_ablation.csv"), str(out / "depth_table.csv"), *figures, str(out / "summary.json")],
    }
    write_text_atomic(out / "summary.json", json.dumps(summary, indent=1, default=str))
    return summary


def plot_depth_ablation(results: dict[int, dict[str, Any]], base: dict[str, Any], stem: Path) -> list[str]:
    """Accuracy (top) and tokens wrong (bottom, log scale) against epoch, one curve per depth.

    Both panels share the epoch axis and draw the same reference lines in the same styles (paper A's
    0.9872, the per-word majority, the all-majority-label baseline and the ceiling); one legend, right of
    the panels and off the data, names every line; each depth's label carries its epochs to 0.9872.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(10, 7.5), sharex=True)
    fig.subplots_adjust(left=0.09, right=0.68, top=0.93, bottom=0.08, hspace=0.08)
    tokens = base["tokens"]
    paper_key = f"{PAPER_ACCURACY:g}"
    for L, r in sorted(results.items()):
        ep = [row["epoch"] for row in r["history"]]
        reached = r.get("epochs_to", {}).get(paper_key)
        when = f"{paper_key} at epoch {reached}" if reached is not None else f"{paper_key} not reached"
        status = "" if r.get("status") == "completed" else f", {r.get('status', 'partial').split(' (')[0]}"
        label = f"{L} layer{'s' * (L > 1)}: {len(ep)} epochs{status};\n{when}"
        (line,) = ax.plot(ep, [row["train_accuracy"] for row in r["history"]], marker=".", label=label)
        ax2.plot(ep, [max(row["train_errors"], 0.5) for row in r["history"]], marker=".", color=line.get_color())
    references = (
        (PAPER_ACCURACY, f"paper A: {PAPER_ACCURACY} after 800 epochs\n(Kajitsuka & Sato, ICLR 2024)", "--", "red"),
        (base["per_word_majority"], f"per-word majority {base['per_word_majority']:.4f}", "--", "tab:brown"),
        (
            base["all_majority_label"],
            f"all-{base['majority_label']} {base['all_majority_label']:.4f}",
            ":",
            "black",
        ),
        (base["ceiling"], f"ceiling {base['ceiling']:.6f}\n(inherent label conflicts)", "-.", "green"),
    )
    for acc, label, style, color in references:
        hline(ax, acc, label, style, color)
        ax2.axhline(max((1 - acc) * tokens, 0.5), linestyle=style, color=color, linewidth=1.0)
    ax.set_ylim(max(0.0, base["all_majority_label"] - 0.02), 1.002)
    ax.set_ylabel("train token accuracy (full pass)")
    ax.set_title("Rank-1 Transformers memorizing the training set: depth ablation")
    ax2.set_yscale("log")
    ax2.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax2.set_xlabel("epoch")
    ax2.set_ylabel(f"tokens wrong of {tokens:,} (log; 0 drawn at 0.5)")
    ax.grid(True, ls=":", lw=0.5)
    ax2.grid(True, which="both", ls=":", lw=0.5)
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="center left", bbox_to_anchor=(0.69, 0.5), frameon=False)
    return save_figure(fig, stem, tight=False)
