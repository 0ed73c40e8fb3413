"""Run a paper-B experiment through the shared executor and write its tidy CSV, summary and figures.

Layout of an output folder ``out``:

    out/trials/<run id>.json     one file per finished trial (resumable: never recomputed)
    out/<experiment>.csv         tidy table, one row per run id (rewritten from the trial files)
    out/summary.json             mean ± std over seeds, fitted slopes, failures
    out/*.png                    figures
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from uatlab.errors import InputError
from uatlab.experiments.executor import SweepResult, Trial, run_trials
from uatlab.io_safety import atomic_write, write_text_atomic


def write_csv(path: Path, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    """A tidy CSV (atomic write): the listed columns first, in order; missing values left empty."""
    with atomic_write(path, newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(columns), extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c, "") for c in columns})


def execute(
    trials: Sequence[Trial],
    fn,
    out: Path,
    executor: str = "local",
    workers: int = 1,
    progress: bool = True,
    desc: str = "",
    stored_only: bool = False,
) -> tuple[list[dict[str, Any]], SweepResult]:
    """Run (or resume) the trials; rows come back in trial order with ``run_id`` set.

    ``stored_only`` runs nothing: only the trials already stored under ``out`` are read.
    """
    if stored_only:
        trials = [t for t in trials if (Path(out) / "trials" / f"{t.id}.json").is_file()]
        if not trials:
            folder = Path(out) / "trials"
            others = sorted(folder.glob("*.json")) if folder.is_dir() else []
            if others:  # trials of another scale or other options: say so, not "none"
                raise InputError(
                    f"{out} holds {len(others)} stored trial(s), none of {desc or 'this experiment'} with these "
                    "options (scale, modes, seeds): pass the options they were run with (e.g. --quick), or run "
                    "without --stored-only"
                )
            raise InputError(
                f"{out} holds no stored trials of {desc or 'this experiment'}; run it without --stored-only"
            )
    res = run_trials(trials, fn, out, executor=executor, workers=workers, progress=progress, desc=desc or "trials")
    rows = []
    for r in res.ordered(trials):
        if "per_seed" in r:  # a stacked trial: one row per seed
            rows.extend(dict(row, trial_id=r.get("trial_id")) for row in r["per_seed"])
            continue
        r = dict(r)
        r["run_id"] = r.get("trial_id")
        rows.append(r)
    return rows, res


def write_summary(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(data, indent=1, default=str))


# --------------------------------------------------------------------------- the five experiments
FIXED_TEXT = {
    "parity": "n=50, d=10, X~U[−5,5], width 32 = H·head, Adam 1e-3, batch 32, 50 epochs; (w,t) redrawn per seed",
    "corrected": "n=50, d=10, head size 8, 25% clipped, (w,t) and data fixed, converged (1%/K epochs)",
}
SWEEP_DEFAULTS_TEXT = {
    "heads": {"parity": "p=60 (10 anchors), [a,b]=[−25,25]", "corrected": "10 anchors"},
    "anchors": {"parity": "H=1, [a,b]=[−25,25]", "corrected": "H=1"},
    "range": {"parity": "H=1, p=60, a=−r/2, b=r/2", "corrected": "H=1, 10 anchors, [a,b] of width r at the median"},
}


def run_truncated_sweep(
    sweep: str,
    scale: str,
    out: Path,
    modes: tuple[str, ...] = ("parity", "corrected"),
    executor: str = "local",
    workers: int = 1,
    progress: bool = True,
    stored_only: bool = False,
) -> dict[str, Any]:
    """One of the three truncated.py sweeps: trials → CSV, summary.json, figure; returns the summary."""
    from uatlab.experiments.paper_b.plots import plot_truncated_sweep
    from uatlab.experiments.paper_b.sweeps import (
        CSV_COLUMNS,
        REPO_ANCHORS,
        run_truncated_trial,
        slopes,
        summarise,
        trials_for,
    )

    out = Path(out)
    trials = trials_for(sweep, scale, modes)
    rows, res = execute(
        trials,
        run_truncated_trial,
        out,
        executor,
        workers,
        progress,
        desc=f"attention-{sweep}",
        stored_only=stored_only,
    )
    csv_path = out / f"attention-{sweep}.csv"
    write_csv(csv_path, rows, CSV_COLUMNS)
    summary = summarise(rows)
    fig = out / f"attention-{sweep}.png"
    if rows:
        fixed = {m: f"{FIXED_TEXT[m]}; {SWEEP_DEFAULTS_TEXT[sweep][m]}" for m in ("parity", "corrected")}
        plot_truncated_sweep(summary, sweep, fig, fixed)
    data = {
        "experiment": f"attention-{sweep}",
        "scale": scale,
        "csv": str(csv_path),
        "figure": str(fig) if rows else None,
        "trials": len(trials),
        "trials_finished": len(res.results),
        "finished": len(rows),
        "reused": len(res.reused),
        "failed": {k: v.splitlines()[-1] if v else "" for k, v in res.failed.items()},
        "summary": summary,
        "slopes": slopes(summary, sweep),
        "repository_anchors": {str(k): v for k, v in REPO_ANCHORS.get(sweep, {}).items()},
    }
    write_summary(out / "summary.json", data)
    return data


def run_heatmap(
    scale: str, out: Path, executor: str = "local", workers: int = 1, progress: bool = True, stored_only: bool = False
) -> dict[str, Any]:
    """attn_map.py: trained and closed-form attention maps for several |b−a|."""
    from uatlab.experiments.paper_b.heatmap import HEATMAP_RANGES, run_heatmap_trial
    from uatlab.experiments.paper_b.plots import plot_heatmaps
    from uatlab.experiments.paper_b.sweeps import RUN_COLUMNS

    quick = scale == "quick"
    ranges = (0.5, 3.0) if quick else HEATMAP_RANGES
    trials = [
        Trial(
            id=f"{'quick-' if quick else ''}r={r:g}-seed=1234",  # default = full: the repository's settings
            params={
                "experiment": "attention-heatmap",
                "mode": "parity",
                "scale": scale,
                "range": r,
                "value": r,
                "seed": 1234,
                "n": 30,
                "d": 10,
                "n_samples": 200 if quick else 1000,
                "epochs": 5 if quick else 100,
                "num_examples": 2,
            },
        )
        for r in ranges
    ]
    rows, res = execute(
        trials, run_heatmap_trial, out, executor, workers, progress, desc="attention-heatmap", stored_only=stored_only
    )
    cols = [
        *RUN_COLUMNS,
        "test_mse_all_channels",
        "test_mse",
        "test_sup",
        "clipped_fraction_test",
        "trained_max_weight",
        "cf_n_params",
        "cf_mse",
        "cf_sup",
        "cf_max_weight",
        "cf_beta",
        "value_channel",
    ]
    csv_path = out / "attention-heatmap.csv"
    write_csv(csv_path, rows, cols)
    fig = plot_heatmaps(rows, out / "attention-heatmap.png") if rows else None
    data = {
        "experiment": "attention-heatmap",
        "scale": scale,
        "csv": str(csv_path),
        "figure": str(fig) if fig else None,
        "finished": len(rows),
        "failed": {k: v.splitlines()[-1] if v else "" for k, v in res.failed.items()},
        "rows": [{c: r.get(c) for c in cols} for r in rows],
    }
    write_summary(out / "summary.json", data)
    return data


def run_seq2seq(
    scale: str,
    out: Path,
    modes: tuple[str, ...] = ("parity", "attention", "feedforward"),
    executor: str = "local",
    workers: int = 1,
    progress: bool = True,
    stored_only: bool = False,
    n_seeds: int | None = None,
    max_seconds: float | None = None,
) -> dict[str, Any]:
    """seq2seq.py at parity and corrected, the feed-forward baseline, the mean and least-squares baselines.

    ``n_seeds`` / ``max_seconds``: see `uatlab.experiments.paper_b.seq2seq.seq2seq_trials`.
    """
    from uatlab.experiments.paper_b.plots import plot_seq2seq
    from uatlab.experiments.paper_b.seq2seq import (
        SEQ2SEQ_CSV_COLUMNS,
        run_seq2seq_any,
        seq2seq_trials,
        stored_trial_conflict,
    )
    from uatlab.experiments.paper_b.sweeps import summarise_columns

    trials = seq2seq_trials(scale, modes, n_seeds=n_seeds, max_seconds=max_seconds)
    for t in trials:  # stored results stand for a trial only when they were run with its parameters
        path = Path(out) / "trials" / f"{t.id}.json"
        try:
            record = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            record = None  # not a JSON record: the executor refuses it, naming the file
        why = stored_trial_conflict(record, t.params) if record is not None else None
        if why is not None:
            raise InputError(f"{out} holds trial {t.id} run with other options ({why}); use another --out")
    rows, res = execute(
        trials, run_seq2seq_any, out, executor, workers, progress, desc="attention-seq2seq", stored_only=stored_only
    )
    csv_path = out / "attention-seq2seq.csv"
    write_csv(csv_path, rows, SEQ2SEQ_CSV_COLUMNS)
    summary = summarise_columns(
        rows,
        ("test_mse", "test_sup", "mean_predictor_mse", "least_squares_mse", "epochs_run", "n_params", "wall_seconds"),
    )
    fig = None
    if rows:
        n = rows[0]["n"]
        fixed = f"n={n}, d=5, 10 hidden units, X~U[0,1]; corrected: normalised targets, real test set, converged"
        fig = plot_seq2seq(summary, out / "attention-seq2seq.png", fixed)
    best = {}
    for mode in ("attention", "feedforward", "parity", "closed-form", "closed-form-2layer"):
        ss = [s for s in summary if s["mode"] == mode]
        if ss:
            b = min(ss, key=lambda s: s["test_mse_mean"])
            best[mode] = {
                "heads": b["value"],
                "test_mse_mean": b["test_mse_mean"],
                "test_mse_std": b["test_mse_std"],
                "n_params": b["n_params_mean"],
            }
    capped = [r["run_id"] for r in rows if r.get("wall_cap_fired")]
    for s in summary:  # trials of the group stopped by the wall-time cap (0 without --max-seconds)
        s["wall_cap_fired"] = sum(
            bool(r.get("wall_cap_fired")) for r in rows if r["mode"] == s["mode"] and float(r["value"]) == s["value"]
        )
    data = {
        "experiment": "attention-seq2seq",
        "scale": scale,
        "csv": str(csv_path),
        "figure": str(fig) if fig else None,
        "finished": len(rows),
        "wall_cap_fired": capped,  # trials stopped by --max-seconds: their results depend on the machine's load
        "failed": {k: v.splitlines()[-1] if v else "" for k, v in res.failed.items()},
        "summary": summary,
        "best": best,
    }
    write_summary(out / "summary.json", data)
    return data
