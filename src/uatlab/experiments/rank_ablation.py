"""Rank ablation of paper A's trained model (Kajitsuka & Sato, ICLR 2024, Section 5): attention rank 1, 2, 4, full.

Paper A's point: rank-1 attention (one head, W_Q, W_K ∈ R^{1×d}) already memorizes; higher rank is not
needed. One trial per rank (finished trials are never recomputed; an interrupted one resumes from its
checkpoint), one head each: rank r ∈ {1, 2, 4} uses a head of size r (so W_Qᵀ W_K has rank r), "full"
uses a head of size d. Outputs in ``out``: ``rank_table.csv`` (epochs to 0.9872 — the paper's figure —
to 0.9995 and to the ceiling, parameters, seconds per epoch), ``rank_ablation.png`` (accuracy vs epoch)
and ``summary.json``.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

import torch

from uatlab.data import baselines
from uatlab.errors import InputError
from uatlab.experiments.depth_ablation import claim_store, data_fingerprint, load_subset
from uatlab.experiments.executor import Trial, check_trial_folder, resume_trial, run_trials, trial_checkpoint
from uatlab.io_safety import atomic_write, save_figure, write_text_atomic
from uatlab.training.trainer import PAPER_ACCURACY, TrainConfig, train

TARGETS = (PAPER_ACCURACY, 0.9995)


def rank_config(rank: int | None, base: dict[str, Any]) -> dict[str, Any]:
    """TrainConfig fields for one rank (None = full: head size d)."""
    dim = int(base.get("dim", 128))
    return {**base, "layers": 1, "heads": 1, "rank": rank, "head_dim": dim if rank is None else rank}


def rank_trial(params: dict[str, Any]) -> dict[str, Any]:
    """Train one rank (top-level so that process pools can pickle it)."""
    torch.set_num_threads(int(params.get("threads", 1)))
    data = load_subset(params["data"], params.get("sentences"))
    cfg = TrainConfig(**params["config"])
    out = Path(params["out_dir"])
    resume = resume_trial(out)  # only a checkpoint this sweep wrote for this trial
    with trial_checkpoint(out):
        r = train(data, cfg, out, resume=resume, targets=TARGETS, progress=False, with_f1=False, stop_at_ceiling=True)
    s = r.unless_interrupted().summary()
    return {
        k: s[k]
        for k in ("status", "epochs", "train_accuracy", "epochs_to", "seconds_per_epoch", "parameters", "history")
    }


def run_rank_ablation(
    data_path: str | os.PathLike,
    out: str | os.PathLike,
    ranks: tuple[int | None, ...] = (1, 2, 4, None),
    sentences: int | None = None,
    config: dict[str, Any] | None = None,
    threads: int = 1,
    progress: bool = True,
    exact_sentences: bool = True,
) -> dict[str, Any]:
    """Train one model per rank and write the table, the figure and the summary (module docstring).

    ``sentences`` larger than the file is refused before anything is written, unless ``exact_sentences`` is
    False (then it is an upper bound: all the sentences are used)."""
    out = Path(out)
    dim = int((config or {}).get("dim", 128))
    for r in ranks:  # every trial's options, before any is trained
        if r is not None and r > dim:
            raise InputError(
                f"--ranks: rank {r} exceeds --dim {dim} (W_Q, W_K ∈ R^(r×d) have rank at most d); use ranks ≤ {dim}"
            )
        TrainConfig(**rank_config(r, dict(config or {})))
    data = load_subset(str(data_path), sentences, exact=exact_sentences)  # before anything is written
    name = {r: ("full" if r is None else str(r)) for r in ranks}
    trials = [
        Trial(
            f"rank={name[r]}",
            {
                "data": str(data_path),
                "sentences": sentences,
                "config": rank_config(r, dict(config or {})),
                "out_dir": str(out / "runs" / f"rank={name[r]}"),
                "threads": threads,
            },
        )
        for r in ranks
    ]
    for t in trials:  # before anything is written: a checkpoint the sweep did not write, a user's file a trial
        check_trial_folder(out, t)  # would replace
    claim_store(out, {"data": data_fingerprint(data_path, sentences), "config": dict(config or {})}, False)
    out.mkdir(parents=True, exist_ok=True)
    base = baselines(data)
    sweep = run_trials(trials, rank_trial, out, workers=1, retries=1, progress=progress, desc="ranks")
    table = []
    for r in ranks:
        res = sweep.results.get(f"rank={name[r]}")
        if res is None:
            continue
        table.append(
            {
                "rank": name[r],
                "status": res["status"],
                "parameters_non_embedding": res["parameters"]["non_embedding"],
                "epochs_run": res["epochs"],
                "final_train_accuracy": res["train_accuracy"],
                "epochs_to_0.9872": res["epochs_to"].get(f"{PAPER_ACCURACY:g}"),
                "epochs_to_0.9995": res["epochs_to"].get("0.9995"),
                "epochs_to_ceiling": res["epochs_to"].get("ceiling"),
                "seconds_per_epoch": res["seconds_per_epoch"],
                "history": [(h["epoch"], h["train_accuracy"]) for h in res["history"]],
            }
        )
    with atomic_write(out / "rank_table.csv", newline="") as fh:
        cols = [c for c in (table[0] if table else {}) if c != "history"]
        w = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(table)
    fig = plot_rank_ablation(table, base, out / "rank_ablation.png") if table else None
    summary = {
        "data": str(data_path),
        "sentences": len(data),
        "tokens": data.num_tokens,
        "baselines": base,
        "config": config,
        "table": [{k: v for k, v in row.items() if k != "history"} for row in table],
        "failed": sweep.failed,
        "files": [str(out / "rank_table.csv"), str(fig) if fig else "", str(out / "summary.json")],
    }
    write_text_atomic(out / "summary.json", json.dumps(summary, indent=1, default=str))
    return summary


def plot_rank_ablation(table: list[dict[str, Any]], base: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for row in table:
        ep, acc = zip(*row["history"], strict=True) if row["history"] else ((), ())
        ax.plot(ep, acc, label=f"rank {row['rank']}")
    ax.axhline(PAPER_ACCURACY, color="grey", ls=":", label="0.9872 (paper)")
    ax.axhline(base["ceiling"], color="k", ls="--", lw=1, label="ceiling")
    ax.set_xlabel("epoch")
    ax.set_ylabel("train token accuracy")
    ax.set_title("one layer, one head: attention rank ablation")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path
