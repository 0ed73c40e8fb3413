"""The three truncated-linear sweeps of truncated.py (heads, anchors, |b−a|), at parity and corrected.

Parity (``mode="parity"``): the repository's settings exactly: n = 50 tokens, d = 10,
X ~ U[−5,5], width 32 = H·head_dim (heads shrink as they are added), out_dim 32 with the target in
channel 0, Adam 1e-3, batch 32, 50 epochs, 1000 samples split 800/200, (w, t) re-drawn per seed.
We report its metric (test MSE over all 32 channels) *and* the target-channel MSE and sup norm.

Corrected (``mode="corrected"``):
* sup norm and MSE on the target channel only (out_dim = 1);
* head size fixed (``head_dim = 8``) while heads grow (so H·head_dim grows);
* [a, b] chosen so that a controlled fraction of the targets is clipped (25 %), the measured
  fraction reported per run (in the range sweep the width is swept instead and the fraction reported);
* the target (w, t) and the samples fixed across seeds: the spread is optimisation variance only;
* trained to convergence (`uatlab.experiments.paper_b.train`), with the figures at epoch 50
  recorded beside the converged ones;
* a fresh 2000-sample test set.

Every trial also writes the closed-form construction (`.closed_form`) into a model of the same
class and configuration (hence the same parameter count) and evaluates it on the same test set.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch

from uatlab.constructions.paper_b.thm3_truncated_linear import build_truncated_linear_attention
from uatlab.errors import InputError, UatlabError
from uatlab.experiments.executor import Trial
from uatlab.experiments.measure import fit_loglog_slope
from uatlab.experiments.paper_b.closed_form import closed_form_model
from uatlab.experiments.paper_b.data import (
    corrected_truncated_linear_data,
    parity_truncated_linear_data,
    range_for_clipped_fraction,
)
from uatlab.experiments.paper_b.models import TruncatedAttentionConfig, TruncatedAttentionModel
from uatlab.experiments.paper_b.stacked import SeedRun, batch_orders, train_stacked
from uatlab.experiments.paper_b.train import embed_target, evaluate_truncated

SWEEPS = ("heads", "anchors", "range")
SCALES = ("quick", "default", "full")

#: the repository's anchors: heads / p / |b−a| → (mean, std) of its 32-channel test MSE
REPO_ANCHORS: dict[str, dict[int, tuple[float, float | None]]] = {
    "heads": {1: (0.129, 0.027), 2: (0.053, 0.017), 4: (0.031, 0.006), 8: (0.020, 0.003), 16: (0.015, 0.001)},
    "anchors": {10: (0.129, None), 70: (0.0039, 0.0018)},
    "range": {10: (0.0066, None), 50: (0.129, None)},
}


@lru_cache(maxsize=1)
def git_revision() -> str:
    """``git rev-parse HEAD`` of the working tree, or "unknown"."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, cwd=Path(__file__).parent
        )
        return out.stdout.strip() or "unknown"
    except Exception:
        return "unknown"


@dataclass(frozen=True)
class SweepPlan:
    """The settings of one scale of one sweep."""

    n: int
    d: int
    n_samples: int
    epochs: int  # parity: exact epoch count; corrected: the cap
    parity_seeds: tuple[int, ...]
    corrected_seeds: tuple[int, ...]
    values: dict[str, tuple[float, ...]]  # sweep -> swept values (parity)
    corrected_values: dict[str, tuple[float, ...]]
    patience: int = 20
    corrected_head_dim: int = 8
    clipped_fraction: float = 0.25


def plan(scale: str) -> SweepPlan:
    """quick (CI), default (parity values, first seed group) or full (the repository's 11 seeds)."""
    if scale == "quick":
        return SweepPlan(
            n=10,
            d=10,
            n_samples=300,
            epochs=15,
            parity_seeds=(1234, 1235),
            corrected_seeds=(1234, 1235),
            values={"heads": (1, 4, 16), "anchors": (2, 18), "range": (10, 50)},
            corrected_values={"heads": (1, 4), "anchors": (4, 16), "range": (10, 40)},
            patience=5,
        )
    parity_values = {"heads": (1, 2, 4, 8, 16), "anchors": (10, 20, 30, 40, 50, 60, 70), "range": (10, 20, 30, 40, 50)}
    corrected_values = {"heads": (1, 2, 4, 8, 16), "anchors": (5, 10, 20, 40, 80), "range": (10, 20, 30, 40, 50)}
    if scale == "default":
        return SweepPlan(
            50,
            10,
            1000,
            50,
            tuple(range(1234, 1238)),
            tuple(range(1234, 1237)),
            parity_values,
            corrected_values,
            patience=20,
        )
    if scale == "full":
        return SweepPlan(
            50,
            10,
            1000,
            50,
            tuple(range(1234, 1245)),
            tuple(range(1234, 1240)),
            parity_values,
            corrected_values,
            patience=20,
        )
    raise InputError(f"unknown scale {scale!r}: use one of {SCALES}")


CORRECTED_MAX_EPOCHS = {"quick": 60, "default": 300, "full": 300}
CORRECTED_LR = 1e-2  # halved after patience // 4 epochs without a 1 % gain (see stacked.py)
SEED_GROUP = {"parity": 4, "corrected": 3}  # seeds trained together in one trial (stacked.py)


def seed_groups(seeds: tuple[int, ...], size: int) -> list[tuple[int, ...]]:
    """Consecutive groups of ``size`` seeds; the default scale's seeds are the full scale's first group."""
    return [tuple(seeds[i : i + size]) for i in range(0, len(seeds), size)]


def trials_for(sweep: str, scale: str, modes: tuple[str, ...] = ("parity", "corrected")) -> list[Trial]:
    """The trials of one sweep at one scale, one per (mode, value, seed group).

    Ids are ``[quick-]<mode>-<var>=<value>-seeds=<first>-<last>``. The default and full scales run
    the same settings and the default seeds are the full scale's first group, so a full run
    resumes a default one. Trials are ordered group-major: the first group of every point
    finishes before the second group starts, so a stopped run covers every point.
    """
    if sweep not in SWEEPS:
        raise InputError(f"unknown sweep {sweep!r}: use one of {SWEEPS}")
    pl = plan(scale)
    out: list[Trial] = []
    var = {"heads": "H", "anchors": "m", "range": "r"}[sweep]
    prefix = "quick-" if scale == "quick" else ""
    for mode in modes:
        values = pl.values[sweep] if mode == "parity" else pl.corrected_values[sweep]
        seeds = pl.parity_seeds if mode == "parity" else pl.corrected_seeds
        for group in seed_groups(seeds, SEED_GROUP[mode]):
            for v in values:
                params: dict[str, Any] = {
                    "experiment": f"attention-{sweep}",
                    "sweep": sweep,
                    "mode": mode,
                    "scale": scale,
                    "value": v,
                    "seeds": list(group),
                    "n": pl.n,
                    "d": pl.d,
                    "n_samples": pl.n_samples,
                    "lr": 1e-3,
                    "batch_size": 32,
                }
                if mode == "parity":
                    params.update(
                        epochs=pl.epochs,
                        converge=False,
                        width=32,
                        out_dim=32,
                        a=-25.0,
                        b=25.0,
                        n_heads=1,
                        n_anchors=10 if pl.n == 50 else 2,
                    )
                    if sweep == "heads":
                        params["n_heads"] = int(v)
                    elif sweep == "anchors":
                        params["n_anchors"] = int(v)
                    else:
                        params["a"], params["b"] = -v / 2, v / 2
                    params["head_dim"] = 32 // params["n_heads"]
                else:
                    params.update(
                        epochs=CORRECTED_MAX_EPOCHS[scale],
                        converge=True,
                        patience=pl.patience,
                        lr=CORRECTED_LR,
                        lr_decay=True,
                        width=32,
                        out_dim=1,
                        head_dim=pl.corrected_head_dim,
                        n_heads=1,
                        n_anchors=10,
                        clipped_fraction=pl.clipped_fraction,
                        interval_width=None,
                        target_seed=0,
                        data_seed=1,
                    )
                    if sweep == "heads":
                        params["n_heads"] = int(v)
                    elif sweep == "anchors":
                        params["n_anchors"] = int(v)
                    else:
                        params["interval_width"] = float(v)
                trial_id = f"{prefix}{mode}-{var}={v:g}-seeds={group[0]}-{group[-1]}"
                out.append(Trial(id=trial_id, params=params))
    return out


def _corrected_data(params: dict[str, Any]):
    n, d, n_total = int(params["n"]), int(params["d"]), int(params["n_samples"])
    kw = dict(
        n=n,
        d=d,
        target_seed=params["target_seed"],
        data_seed=params["data_seed"],
        n_train=int(0.8 * n_total),
        n_val=n_total - int(0.8 * n_total),
        n_test=2000 if n_total >= 1000 else 400,
    )
    width = params.get("interval_width")
    if width is None:
        return corrected_truncated_linear_data(clipped_fraction=params["clipped_fraction"], **kw)
    probe = corrected_truncated_linear_data(
        n_train=1, n_val=0, n_test=0, **{k: kw[k] for k in ("n", "d", "target_seed", "data_seed")}
    )
    a, b = range_for_clipped_fraction(probe.target.w, probe.target.t, 0.0, width=float(width))
    return corrected_truncated_linear_data(interval=(a, b), **kw)


def run_truncated_trial(params: dict[str, Any]) -> dict[str, Any]:
    """Train one sweep point for a group of seeds (stacked), evaluate each and its same-size closed form.

    Returns ``{"per_seed": [row, ...]}``, one row per seed with the CSV's columns.
    """
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    n, d = int(params["n"]), int(params["d"])
    cfg = TruncatedAttentionConfig(
        n=n,
        d=d,
        n_anchors=int(params["n_anchors"]),
        width=int(params["width"]),
        n_heads=int(params["n_heads"]),
        head_dim=int(params["head_dim"]),
        out_dim=int(params["out_dim"]),
    )
    parity = params["mode"] == "parity"
    epochs, bs = int(params["epochs"]), int(params["batch_size"])
    runs, datas = [], []
    shared = None if parity else _corrected_data(params)
    for seed in params["seeds"]:
        if parity:  # the repository's order: seed, data (X, w, t), split, model init, per-epoch shuffles
            data = parity_truncated_linear_data(
                int(seed), n=n, d=d, a=params["a"], b=params["b"], num_samples=int(params["n_samples"])
            )
        else:  # target and samples fixed; the seed draws the initialisation and the shuffles
            data = shared
            torch.manual_seed(int(seed))
        model = TruncatedAttentionModel(cfg)
        runs.append(
            SeedRun(
                model,
                data.x_train,
                embed_target(data.y_train, cfg.out_dim),
                batch_orders(data.x_train.shape[0], epochs, bs),
            )
        )
        datas.append(data)
    snapshots: dict[int, list[dict[str, float]]] = {}

    def at_epoch(epoch: int, stacked) -> None:
        if epoch == 50 and not parity:
            snapshots[50] = [
                evaluate_truncated(stacked.unstack(s), dd.x_test, dd.y_test).as_dict("") for s, dd in enumerate(datas)
            ]

    validate = None
    if not parity:
        x_val = torch.stack([dd.x_val for dd in datas])  # (S, N_val, n, d)
        y_val = torch.stack([embed_target(dd.y_val, cfg.out_dim) for dd in datas])

        def validate(stacked):
            return ((stacked(x_val) - y_val) ** 2).mean(dim=(1, 2, 3))

    res = train_stacked(
        runs,
        epochs=epochs,
        lr=float(params["lr"]),
        batch_size=bs,
        validate=validate,
        patience=int(params.get("patience", 20)),
        lr_decay=bool(params.get("lr_decay", False)),
        on_epoch=at_epoch,
    )
    train_seconds = time.perf_counter() - t0
    rows = []
    library = None
    for s, (seed, data) in enumerate(zip(params["seeds"], datas, strict=True)):
        model = res["model"].unstack(s)
        test = evaluate_truncated(model, data.x_test, data.y_test)
        closed = TruncatedAttentionModel(cfg)
        info = closed_form_model(closed, data.target, data.x_train, data.y_train)
        cf = evaluate_truncated(closed, data.x_test, data.y_test)
        if not parity and library is None:  # same target for every seed: compute once
            library = library_construction_errors(data, cfg.n_anchors, cfg.n_heads)
        at50 = snapshots[50][s] if 50 in snapshots else (test.as_dict("") if parity else {})
        rows.append(
            {
                "run_id": f"{'quick-' if params['scale'] == 'quick' else ''}{params['mode']}-"
                f"{ {'heads': 'H', 'anchors': 'm', 'range': 'r'}[params['sweep']] }={params['value']:g}-seed={seed}",
                **{
                    k: params[k]
                    for k in (
                        "experiment",
                        "mode",
                        "scale",
                        "value",
                        "n_heads",
                        "head_dim",
                        "n_anchors",
                        "width",
                        "out_dim",
                    )
                },
                "seed": int(seed),
                "git_rev": git_revision(),
                "n_params": model.num_parameters(),
                "wall_seconds": train_seconds / len(datas),
                "a": data.target.a,
                "b": data.target.b,
                "clipped_fraction_test": data.target.clipped_fraction(data.x_test),
                "target_std": float(data.y_test.std()),
                **test.as_dict("test_"),
                "epochs_run": res["epochs"][s],
                "converged": res["converged"][s],
                **{f"at50_{k}": v for k, v in at50.items()},
                "cf_n_params": closed.num_parameters(),
                **cf.as_dict("cf_"),
                "cf_sharpness": info["sharpness"],
                "cf_beta": info["beta"],
                "cf_grid_spacing": info["delta"],
                **(library or {}),
                "train_loss_curve": [round(v, 6) for v in res["train_loss"][s]],
                "val_loss_curve": [round(v, 6) for v in res["val_loss"][s]],
            }
        )
    return {"per_seed": rows, "group_seconds": train_seconds}


def library_construction_errors(data, n_anchors: int, n_heads: int) -> dict[str, Any]:
    """Errors of `uatlab.constructions.paper_b.thm3_truncated_linear.build_truncated_linear_attention`.

    The library's sequence-wise construction (Thm 3.4) with the same anchors and heads, float64,
    its own β; its parameter count is its number of non-zero parameters. NaN when it refuses
    (e.g. a PrecisionError) or with fewer than two anchors.
    """
    nan = float("nan")
    if n_anchors < 2:
        return {"lib_n_params": nan, "lib_mse": nan, "lib_sup": nan}
    try:
        tgt = data.target
        con = build_truncated_linear_attention(
            tgt.w.double(),
            tgt.t.double(),
            tgt.a,
            tgt.b,
            anchors=n_anchors,
            heads=n_heads,
            mode="sequence",
            dtype="float64",
        ).detail
        with torch.no_grad():
            err = torch.cat(
                [
                    con(data.x_test[i : i + 250].double()) - data.y_test[i : i + 250].double()
                    for i in range(0, data.x_test.shape[0], 250)
                ]
            )
        return {"lib_n_params": con.params, "lib_mse": float(err.pow(2).mean()), "lib_sup": float(err.abs().max())}
    except UatlabError as exc:  # a refusal of the library construction is recorded, not fatal
        return {"lib_n_params": nan, "lib_mse": nan, "lib_sup": nan, "lib_error": f"{type(exc).__name__}: {exc}"}


# --------------------------------------------------------------------------- summaries
#: The columns every paper-B trial CSV starts with (which run, which setting, how big, how long).
RUN_COLUMNS = [
    "run_id",
    "experiment",
    "mode",
    "scale",
    "value",
    "seed",
    "git_rev",
    "n_params",
    "wall_seconds",
]
CSV_COLUMNS = [
    *RUN_COLUMNS,
    "test_mse_all_channels",
    "test_mse",
    "test_sup",
    "epochs_run",
    "converged",
    "at50_mse_all_channels",
    "at50_mse",
    "at50_sup",
    "clipped_fraction_test",
    "a",
    "b",
    "n_heads",
    "head_dim",
    "n_anchors",
    "width",
    "out_dim",
    "cf_n_params",
    "cf_mse_all_channels",
    "cf_mse",
    "cf_sup",
    "cf_sharpness",
    "cf_grid_spacing",
    "lib_n_params",
    "lib_mse",
    "lib_sup",
]


def summarise_columns(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> list[dict[str, Any]]:
    """Mean ± std (sample std) and median over seeds per (mode, value) of the given columns."""
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["mode"], float(r["value"])), []).append(r)
    out = []
    for (mode, value), rs in sorted(groups.items()):
        s: dict[str, Any] = {"mode": mode, "value": value, "seeds": len(rs)}
        if "n_params" in rs[0]:
            s["n_params"] = rs[0]["n_params"]
        for col in columns:
            vals = np.array([float(r[col]) for r in rs if r.get(col) is not None], dtype=float)
            if vals.size:
                s[f"{col}_mean"] = float(vals.mean())
                s[f"{col}_std"] = float(vals.std(ddof=1)) if vals.size > 1 else 0.0
                s[f"{col}_median"] = float(np.median(vals))
        s["converged_fraction"] = float(np.mean([bool(r.get("converged")) for r in rs]))
        out.append(s)
    return out


ERROR_COLUMNS = (
    "test_mse_all_channels",
    "test_mse",
    "test_sup",
    "at50_mse_all_channels",
    "at50_mse",
    "at50_sup",
    "cf_mse_all_channels",
    "cf_mse",
    "cf_sup",
    "lib_mse",
    "lib_sup",
    "lib_n_params",
    "clipped_fraction_test",
    "epochs_run",
    "wall_seconds",
)


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean ± std and median over seeds per (mode, value) for the error columns."""
    return summarise_columns(rows, ERROR_COLUMNS)


def slopes(summary: list[dict[str, Any]], sweep: str) -> dict[str, float]:
    """Fitted log-log slopes of the mean errors against the swept value, per mode and metric; ``*_median_slope``
    fits the median over seeds instead (robust to one seed stopping on a plateau)."""
    res: dict[str, float] = {}
    for mode in ("parity", "corrected"):
        ss = [s for s in summary if s["mode"] == mode]
        if len(ss) < 2:
            continue
        xs = [s["value"] for s in ss]
        for col in ("test_sup", "test_mse", "test_mse_all_channels", "cf_sup", "at50_sup"):
            if all(f"{col}_mean" in s for s in ss):
                res[f"{mode}_{col}_slope"] = fit_loglog_slope(xs, [s[f"{col}_mean"] for s in ss])
        if all("test_sup_median" in s for s in ss):
            res[f"{mode}_test_sup_median_slope"] = fit_loglog_slope(xs, [s["test_sup_median"] for s in ss])
    return res
