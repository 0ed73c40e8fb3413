"""Memorization capacity: the smallest one-layer rank-1 Transformer that reaches the ceiling, against N.

For each data size N (nested random subsets of a CoNLL file, or synthetic random-label data), a
binary search over a grid of model sizes (the token dimension d with FF width ``ff_mult·d``, or
the FF width q at fixed d) finds the smallest model whose training reaches the data set's ceiling
(no errors beyond the inherent conflicts) within ``max_steps`` optimizer steps (the epoch count
is ``max_steps / steps_per_epoch``, so small N get as many updates as large N). Every (N, size) is one trial of
`uatlab.experiments.executor.run_trials`: stored as JSON, never recomputed, retried and
reported when it fails. The binary search assumes that success is monotone in size; the result is
the smallest size *found* (an upper bound on the true minimum for this training recipe).

Figures:

* parameters (non-embedding and total) against N on log-log axes, with the least-squares slope of
  log P on log N and its 95% confidence interval (Student t, N_points − 2 degrees of freedom);
* reference lines through the first point: √N (Kajitsuka & Sato 2025, next-token), √(nN) with
  nN = tokens (Kim et al. 2023, seq-to-seq), and N (a lookup table);
* bits per parameter = (information in the labels) / parameters next to the 2 bits/parameter
  (Allen-Zhu & Li) and 3.6 bits/parameter (Morris et al.) anchors. Synthetic labels are uniform and
  independent, so they carry exactly tokens·log2(#labels) bits; for CoNLL we use the empirical
  budgets tokens·H(tag|word) and tokens·H(tag) (orders of magnitude, see
  `uatlab.data.report`).
"""

from __future__ import annotations

import csv
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from uatlab.data import read_sequences
from uatlab.data.dataset import SequenceDataset
from uatlab.data.jsonl import format_by_name, sequence_format
from uatlab.data.report import bit_budgets
from uatlab.errors import InputError
from uatlab.experiments.executor import (
    TRIAL_CHECKPOINT,
    Trial,
    check_store_options,
    check_trial_folder,
    resume_trial,
    run_trials,
    trial_checkpoint,
)
from uatlab.experiments.plots import save_figure
from uatlab.io_safety import atomic_write, prefix_identity, write_text_atomic
from uatlab.training.trainer import TrainConfig, train, train_output_folder

DIM_GRID = (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
FF_GRID = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
ANCHORS_BITS_PER_PARAMETER = {"Allen-Zhu & Li (2 bits/param)": 2.0, "Morris et al. (3.6 bits/param)": 3.6}


def synthetic_random_labels(
    n_sequences: int, length: int = 8, vocab: int = 16, labels: int = 2, seed: int = 0
) -> SequenceDataset:
    """N sequences of ``length`` uniform random tokens ``w0..w{vocab-1}``, each token with a uniform
    random label ``c0..c{labels-1}``, independent of everything (pure memorization; the labels
    carry N·length·log2(labels) bits)."""
    g = np.random.default_rng(seed)
    toks = g.integers(0, vocab, size=(n_sequences, length))
    labs = g.integers(0, labels, size=(n_sequences, length))
    return SequenceDataset(
        [[f"w{t}" for t in row] for row in toks],
        [[f"c{y}" for y in row] for row in labs],
        source=f"synthetic(N={n_sequences},n={length},V={vocab},k={labels},seed={seed})",
    )


def capacity_dataset(params: dict[str, Any], parsed: SequenceDataset | None = None) -> SequenceDataset:
    """The data of one trial: a nested random subset of a file (``parsed``: the file already read), or
    synthetic random labels."""
    n = int(params["N"])
    if params["kind"] == "synthetic":
        return synthetic_random_labels(n, params["length"], params["vocab"], params["labels"], params["data_seed"])
    data = parsed if parsed is not None else read_sequences(params["data"], params.get("format", "auto"))
    if n > len(data):
        raise InputError(f"N={n} is larger than the {len(data)} sequences of {params['data']}")
    perm = np.random.default_rng(params["data_seed"]).permutation(len(data))  # nested: first N of one permutation
    return data.subset(sorted(perm[:n].tolist()))


def information_bits(data: SequenceDataset, kind: str, labels: int | None = None) -> dict[str, float]:
    """The bits the labels carry (see the module docstring)."""
    if kind == "synthetic":
        return {"bits": data.num_tokens * math.log2(labels or len(data.label_set()))}
    b = bit_budgets(data)
    return {"bits": b["bits_H_tag_given_word"], "bits_H_tag": b["bits_H_tag"]}


def evaluation_interval(sequences: int, batch_size: int) -> int:
    """Epochs between a capacity trial's full evaluation passes: about every 25 steps."""
    return max(1, 25 // math.ceil(sequences / batch_size))


def epochs_trained(result: dict[str, Any]) -> int | None:
    """A trial result's epochs trained. Results without ``eval_every`` come from versions that stored the number
    of history rows as ``epochs``: a trial that reached the ceiling stopped at its last evaluated epoch, row k of
    the evaluations every ``evaluation_interval`` epochs, or at the final epoch (evaluated too); one that did not
    ran every epoch of its config."""
    if "eval_every" in result or "reached" not in result:  # a failed trial's record has no count to convert
        return result.get("epochs")
    cfg = result["config"]
    total = int(cfg["epochs"])
    if not result["reached"]:
        return total
    return min(int(result["epochs"]) * evaluation_interval(int(result["N"]), int(cfg["batch_size"])), total)


def capacity_trial(params: dict[str, Any]) -> dict[str, Any]:
    """Train one (N, size) to the ceiling or ``max_epochs`` (top-level: picklable for process pools)."""
    torch.set_num_threads(int(params.get("threads", 1)))
    data = capacity_dataset(params)
    cfg = TrainConfig(**params["config"])
    out = Path(params["out_dir"])
    every = evaluation_interval(len(data), cfg.batch_size)
    resume = resume_trial(out)  # only a checkpoint this sweep wrote for this trial
    with trial_checkpoint(out) as own:
        result = train(
            data,
            cfg,
            out,
            resume=resume,
            targets=(),
            progress=False,
            with_f1=False,
            stop_at_ceiling=True,
            eval_every=every,
            checkpoint_every=20 * every,
        )
        result.unless_interrupted()  # SIGINT/SIGTERM: the checkpoint is saved; stop the whole sweep
        own.remove(TRIAL_CHECKPOINT)  # the JSON result is what the sweep keeps
    train_output_folder(out).remove("model.safetensors")
    last = result.history[-1]
    return {
        "reached": result.status == "ceiling",
        "epochs": result.epochs,  # epochs trained
        "eval_every": every,
        "train_accuracy": last["train_accuracy"],
        "train_errors": last["train_errors"],
        "conflict_tokens": result.data["conflict_tokens"],
        "tokens": data.num_tokens,
        "parameters_total": result.parameters["total"],
        "parameters_non_embedding": result.parameters["non_embedding"],
        "seconds_per_epoch": result.seconds_per_epoch,
        **information_bits(data, params["kind"], params.get("labels")),
    }


def fit_slope(ns: list[float], ps: list[float], level: float = 0.95) -> dict[str, float] | None:
    """Least-squares slope of log P on log N with its ``level`` confidence interval (None if < 3 points)."""
    if len(ns) < 3:
        return None
    from scipy import stats

    x, y = np.log(np.asarray(ns, float)), np.log(np.asarray(ps, float))
    res = stats.linregress(x, y)
    t = stats.t.ppf(0.5 + level / 2, len(x) - 2)
    return {
        "slope": float(res.slope),
        "ci_low": float(res.slope - t * res.stderr),
        "ci_high": float(res.slope + t * res.stderr),
        "stderr": float(res.stderr),
        "intercept": float(res.intercept),
        "r2": float(res.rvalue**2),
        "points": len(x),
    }


def _why(message: str, n: int, size: int, axis: str, fixed: int, max_steps: int, batch_size: int) -> str:
    """Where a capacity trial's refused field comes from, for its error: the grid size (d or the FF width), or
    max_steps (the epochs); '' for a field given as it is (lr, seed, ...)."""
    if "epochs" in message:  # the steps of one epoch are the N sequences' batches
        return f" (the trial N = {n}: max_steps {max_steps} at {math.ceil(n / batch_size)} batches per epoch)"
    if "ff_width" in message or "dim" in message or "rank" in message:
        sizes = f"d = {size}, FF width {fixed}·d" if axis == "dim" else f"FF width {size}, d = {fixed}"
        return f" (the trial N = {n}, grid size {size}: {sizes})"
    return ""


def run_capacity(
    out: str | os.PathLike,
    kind: str = "synthetic",
    ns: tuple[int, ...] = (16, 32, 64, 128),
    data: str | None = None,
    axis: str = "dim",
    grid: tuple[int, ...] | None = None,
    fixed: int = 4,
    length: int = 8,
    vocab: int = 16,
    labels: int = 2,
    max_steps: int = 3000,
    lr: float = 1e-2,
    batch_size: int = 32,
    seed: int = 0,
    executor: str = "local",
    workers: int = 1,
    threads: int = 1,
    fmt: str = "auto",
) -> dict[str, Any]:
    """Run the sweep and write ``capacity.csv``, ``capacity_trials.csv``, the figure and ``summary.json``.

    ``axis='dim'`` sweeps d over ``grid`` with FF width ``fixed·d``; ``axis='ff'`` sweeps the FF
    width over ``grid`` at d = ``fixed``. ``fmt``: how ``data`` is read (`uatlab.data.jsonl.sequence_format`:
    'auto', 'conll' or 'jsonl'); the summary's ``format`` says how it was.
    """
    if kind not in ("synthetic", "conll"):
        raise InputError(f"kind must be 'synthetic' or 'conll', got {kind!r}")
    if kind == "conll" and not data:
        raise InputError("the CoNLL capacity sweep needs a data file (--data)")
    if axis not in ("dim", "ff"):
        raise InputError(f"axis must be 'dim' or 'ff', got {axis!r}")
    if fmt not in ("auto", "conll", "jsonl"):
        raise InputError(f"fmt must be 'auto', 'conll' or 'jsonl', got {fmt!r}")
    if kind == "synthetic" and fmt != "auto":
        raise InputError(f"fmt={fmt!r}: the synthetic sweep reads no file")
    grid = tuple(grid or (DIM_GRID if axis == "dim" else FF_GRID))
    out = Path(out)
    parsed = None  # the data file, read once here (each trial's worker reads it again, the same way)
    reading = None  # 'conll' or 'jsonl': how the file is read
    if kind == "synthetic":  # the generator's parameters fix the data
        data_fp: dict[str, Any] = {"kind": kind, "length": length, "vocab": vocab, "labels": labels, "seed": seed}
    else:
        reading = sequence_format(data, fmt)  # 'auto' refuses a file of prose, naming its line
        data_fp = {"kind": kind, "sha256": prefix_identity(data, None)["sha256"], "seed": seed}
        if reading != format_by_name(data):  # read other than its name implies: other data than earlier versions
            data_fp["format"] = reading
        parsed = read_sequences(data, reading, chosen=fmt)
        if max(ns) > len(parsed):  # every trial's data, before any is trained
            raise InputError(f"--ns {max(ns)} is larger than the {len(parsed)} sequences of {data}")
    recipe = {"layers": 1, "rank": 1, "warmup_steps": 50, "embed_std": 0.1}
    recipe |= {"axis": axis, "fixed": fixed, "max_steps": max_steps, "lr": lr, "batch_size": batch_size, "seed": seed}

    def trial(n: int, size: int) -> Trial:
        dim, ff = (size, fixed * size) if axis == "dim" else (fixed, size)
        tid = f"{kind}-N={n}-d={dim}-ff={ff}-seed={seed}"
        cfg = {
            "layers": recipe["layers"],
            "rank": recipe["rank"],
            "dim": dim,
            "ff_width": ff,
            "epochs": max(1, math.ceil(max_steps / math.ceil(n / batch_size))),
            "lr": lr,
            "batch_size": batch_size,
            "warmup_steps": recipe["warmup_steps"],
            "embed_std": recipe["embed_std"],
            "seed": seed,
        }
        params = {
            **data_params(kind, n, data, length, vocab, labels, seed),
            **({"format": reading} if reading else {}),
            "config": cfg,
            "out_dir": str(out / "runs" / tid),
            "threads": threads,
            "size": size,
        }
        return Trial(tid, params)

    for n in ns:  # before any work: every trial's configuration, as its worker will build it (TrainConfig)
        for size in grid:
            try:
                TrainConfig(**trial(n, size).params["config"])
            except InputError as e:
                raise InputError(f"{e}{_why(str(e), n, size, axis, fixed, max_steps, batch_size)}") from None
    for n in ns:  # before any work: a checkpoint in a trial's folder that the sweep did not write, a user's file
        for size in grid:  # a trial would replace
            check_trial_folder(out, trial(n, size))
    check_store_options(out, {"data": data_fp, "config": recipe})
    out.mkdir(parents=True, exist_ok=True)

    # Binary search per N, all N advancing together (one run_trials call per round):
    # lo = index of the largest size known to fail, hi = index of the smallest known to succeed.
    bounds = {n: [-1, len(grid)] for n in ns}
    all_results: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    while True:
        todo = [trial(n, grid[(lo + hi) // 2]) for n, (lo, hi) in bounds.items() if hi - lo > 1]
        if not todo:
            break
        sweep = run_trials(todo, capacity_trial, out, executor=executor, workers=workers, retries=1, desc="capacity")
        failed.update(sweep.failed)
        for t in todo:
            n, mid = t.params["N"], grid.index(t.params["size"])
            r = sweep.results.get(t.id)
            all_results[t.id] = r if r is not None else {"error": sweep.failed.get(t.id, "?"), **t.params}
            if r is not None and r["reached"]:
                bounds[n][1] = mid
            else:
                bounds[n][0] = mid  # a failed trial counts as not reaching (reported in 'failed')
    rows = []
    for n in ns:
        hi = bounds[n][1]
        if hi >= len(grid):
            rows.append({"N": n, "reached": False, "size": None})
            continue
        r = all_results[trial(n, grid[hi]).id]
        rows.append(
            {
                "N": n,
                "reached": True,
                "size": grid[hi],
                "d": r["config"]["dim"],
                "ff_width": r["config"]["ff_width"],
                "tokens": r["tokens"],
                "parameters_non_embedding": r["parameters_non_embedding"],
                "parameters_total": r["parameters_total"],
                "epochs": epochs_trained(r),
                "bits": r["bits"],
                "bits_per_parameter_non_embedding": r["bits"] / r["parameters_non_embedding"],
                "bits_per_parameter_total": r["bits"] / r["parameters_total"],
                **({"bits_H_tag": r["bits_H_tag"]} if "bits_H_tag" in r else {}),
            }
        )
    ok = [r for r in rows if r["reached"]]
    fits = {
        "non_embedding": fit_slope([r["N"] for r in ok], [r["parameters_non_embedding"] for r in ok]),
        "total": fit_slope([r["N"] for r in ok], [r["parameters_total"] for r in ok]),
    }
    compiled = compiled_sizes(kind, ns, data, length, vocab, labels, seed, parsed)
    _write_csv(out / "capacity.csv", rows)
    _write_csv(out / "capacity_trials.csv", [_flat(k, v) for k, v in all_results.items()])
    figures = plot_capacity(ok, fits, compiled, kind, out / "capacity")
    summary = {
        "kind": kind,
        "format": reading,
        "axis": axis,
        "grid": list(grid),
        "fixed": fixed,
        "max_steps": max_steps,
        "lr": lr,
        "ns": list(ns),
        "rows": rows,
        "fits": fits,
        "anchors_bits_per_parameter": ANCHORS_BITS_PER_PARAMETER,
        "compiled": compiled,
        "trials": len(all_results),
        "failed": failed,
        "files": [str(out / "capacity.csv"), str(out / "capacity_trials.csv"), *figures, str(out / "summary.json")],
    }
    write_text_atomic(out / "summary.json", json.dumps(summary, indent=1, default=str))
    return summary


def data_params(kind, n, data, length, vocab, labels, seed) -> dict[str, Any]:
    """The trial parameters that fix one data set (what `capacity_dataset` reads)."""
    return {"kind": kind, "N": n, "data": data, "length": length, "vocab": vocab, "labels": labels, "data_seed": seed}


def compiled_sizes(kind, ns, data, length, vocab, labels, seed, parsed=None) -> dict[str, Any]:
    """Parameter counts of the closed-form memorizer of ``uatlab compile`` on the same data sets (``parsed``:
    the data file already read)."""
    from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset

    sizes = {}
    for n in ns:
        params = data_params(kind, n, data, length, vocab, labels, seed)
        try:
            model = compile_dataset(capacity_dataset(params, parsed), run_certificate=False).model
            sizes[n] = {"total": model.num_parameters(), "non_embedding": model.num_parameters(non_embedding=True)}
        except Exception as exc:  # an optional comparison must never break the sweep
            return {"available": False, "note": f"compile_dataset failed: {type(exc).__name__}: {exc}"}
    return {"available": True, "sizes": sizes}


def _flat(tid: str, r: dict[str, Any]) -> dict[str, Any]:
    cfg = r.get("config", {})
    keep = ("N", "reached", "epochs", "train_accuracy", "train_errors", "parameters_non_embedding", "parameters_total")
    return {
        "trial": tid,
        "d": cfg.get("dim"),
        "ff_width": cfg.get("ff_width"),
        **{k: r.get(k) for k in keep},
        "epochs": epochs_trained(r),
        "error": r.get("error", "")[:200],
    }


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with atomic_write(path, newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def plot_capacity(rows, fits, compiled, kind: str, stem: Path) -> list[str]:
    """Log-log parameters vs N (left) and bits per parameter vs N (right)."""
    import matplotlib.pyplot as plt

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 6.5), sharex=True)  # one N axis; legends below, off the data
    if rows:
        n = np.array([r["N"] for r in rows], float)
        tok = np.array([r["tokens"] for r in rows], float)
        for key, marker, label in (
            ("parameters_non_embedding", "o", "non-embedding"),
            ("parameters_total", "s", "total"),
        ):
            p = np.array([r[key] for r in rows], float)
            fit = fits["non_embedding" if key.endswith("non_embedding") else "total"]
            text = f" (slope {fit['slope']:.2f}, 95% CI [{fit['ci_low']:.2f}, {fit['ci_high']:.2f}])" if fit else ""
            ax.loglog(n, p, marker, label=f"smallest model reaching the ceiling, {label}{text}")
            if fit:
                ax.loglog(
                    n,
                    np.exp(fit["intercept"]) * n ** fit["slope"],
                    "-",
                    linewidth=1,
                    color=ax.lines[-1].get_color(),  # the fit in its points' colour
                    label=f"least-squares fit, {label}",
                )
        p0 = rows[0]["parameters_non_embedding"]
        same = bool(np.allclose(tok / tok[0], n / n[0]))  # one sequence length: √(nN) ∝ √N, the same line
        ax.loglog(n, p0 * np.sqrt(tok / tok[0]), "-.", label="∝ √(nN) (Kim et al., ICLR 2023)")
        ax.loglog(
            n,
            p0 * np.sqrt(n / n[0]),
            ":",
            lw=2.5,
            label="∝ √N (Kajitsuka & Sato, ICLR 2025, next-token capacity)"
            + (": the same line as √(nN), every sequence has one length" if same else ""),
        )
        ax.loglog(n, p0 * n / n[0], "--", label="∝ N (lookup table)")
        if compiled.get("available"):
            cs = compiled["sizes"]
            ax.loglog(
                list(cs), [v["non_embedding"] for v in cs.values()], "x", label="closed-form memorizer (uatlab compile)"
            )
        for key, marker, label in (
            ("bits_per_parameter_non_embedding", "o", "non-embedding"),
            ("bits_per_parameter_total", "s", "total"),
        ):
            bx.semilogx(n, [r[key] for r in rows], marker + "-", label=label)
    for name, v in ANCHORS_BITS_PER_PARAMETER.items():
        bx.axhline(v, linestyle="--", color="grey" if v < 3 else "black", linewidth=1, label=name)
    ax.set_xlabel("N (sequences)")
    ax.set_ylabel("parameters")
    ax.set_title(f"Memorization capacity, 1 layer, rank 1 ({kind})")
    if ax.get_legend_handles_labels()[0]:  # nothing drawn when no size reached the ceiling
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    bx.set_xlabel("N (sequences)")
    bx.set_ylabel("bits per parameter" + (" (H(tag|word) budget)" if kind == "conll" else " (random labels)"))
    bx.set_yscale("log")
    from matplotlib.ticker import FuncFormatter

    for axis in (ax.xaxis, bx.xaxis, bx.yaxis):  # plain numbers (0.2, 1, 20), not 2×10^-1
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    bx.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    fig.tight_layout()
    return save_figure(fig, stem)
