"""``uatlab experiment attention-*``: paper B's experiments at parity, corrected, beside the closed form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from uatlab.cli.app import console, err_console, format_value, print_json
from uatlab.cli.experiment import exit_if_all_failed, experiment, out_lock, with_experiment_exit_codes
from uatlab.cli.options import check_workers, finite, one_of, path_value, refuse_given
from uatlab.errors import InputError
from uatlab.io_safety import check_output_dir

QUICK = typer.Option(False, "--quick", help="CI-sized run (seconds to a minute).")
FULL = typer.Option(False, "--full", help="The repository's parity settings (all seeds; long).")
EXECUTOR = typer.Option(
    "local", "--executor", help="'local' (default) or 'ray' (needs uatlab[ray]).", callback=one_of("local", "ray")
)
WORKERS = typer.Option(
    1, "--workers", min=1, max=1024, help="Parallel trials (local process pool when > 1; at most 4 per available core)."
)
JSON = typer.Option(False, "--json", help="Print one JSON object instead of tables.")
MODE = typer.Option("both", "--mode", help="'parity', 'corrected' or 'both'.")
STORED = typer.Option(False, "--stored-only", help="Run nothing: summarise the trials already stored in --out.")


def _scale(quick: bool, full: bool) -> str:
    if quick and full:
        raise InputError("--quick and --full exclude each other")
    return "quick" if quick else ("full" if full else "default")


def _modes(mode: str) -> tuple[str, ...]:
    choices = {"parity": ("parity",), "corrected": ("corrected",), "both": ("parity", "corrected")}
    if mode not in choices:
        raise InputError(f"--mode must be one of {sorted(choices)}, got {mode!r}")
    return choices[mode]


def _pm(s: dict[str, Any], col: str) -> str:
    """``mean ± std`` with three significant digits ("-" when the column is absent)."""
    if f"{col}_mean" not in s or s[f"{col}_mean"] != s[f"{col}_mean"]:
        return "-"
    return f"{s[f'{col}_mean']:.3g} ± {s[f'{col}_std']:.2g}"


def _refuse_runners_if_stored(ctx: typer.Context, stored_only: bool) -> None:
    """With --stored-only nothing runs: --executor and --workers are refused, not ignored."""
    if stored_only:
        refuse_given(ctx, "--stored-only (nothing is run)", ("executor", "workers"))


def _sweep_command(
    sweep: str,
    quick: bool,
    full: bool,
    mode: str,
    out: Path | None,
    executor: str,
    workers: int,
    json_out: bool,
    stored_only: bool,
) -> None:
    from uatlab.experiments.paper_b.runner import run_truncated_sweep

    scale = _scale(quick, full)
    out = out or Path("uatlab-runs") / f"attention-{sweep}"
    check_workers(executor, workers)
    check_output_dir(out)
    err_console.print(f"attention-{sweep} ({scale}) → {out}", highlight=False)
    with out_lock(out, f"attention-{sweep}", (f"attention-{sweep}.csv", f"attention-{sweep}.png")):
        data = run_truncated_sweep(
            sweep, scale, out, _modes(mode), executor, workers, progress=True, stored_only=stored_only
        )
    if json_out:
        print_json(data)
    else:
        table = Table(title=f"attention-{sweep} ({scale}): mean ± std over seeds", show_lines=False)
        for col in (
            "mode",
            "value",
            "seeds",
            "params",
            "MSE 32 ch (repo)",
            "MSE target",
            "sup target",
            "sup @50 ep",
            "closed-form sup",
        ):
            table.add_column(col)
        for s in data["summary"]:
            table.add_row(
                s["mode"],
                format_value(s["value"]),
                str(s["seeds"]),
                str(s["n_params"]),
                _pm(s, "test_mse_all_channels"),
                _pm(s, "test_mse"),
                _pm(s, "test_sup"),
                _pm(s, "at50_sup"),
                _pm(s, "cf_sup"),
            )
        console.print(table)
        for k, v in data["slopes"].items():
            console.print(f"log-log slope {k}: {v:.3f}")
        console.print(
            f"CSV: {data['csv']}  figure: {data['figure']}  trials finished {data['trials_finished']}/{data['trials']}"
        )
        if data["failed"]:
            err_console.print(f"[red]failed trials:[/] {data['failed']}")
    exit_if_all_failed(data["failed"], data["finished"])  # exit 1 when every trial failed, in either mode


def _register_sweep(sweep: str, doc: str) -> None:
    """``uatlab experiment attention-<sweep>``: one of paper B's truncated-linear sweeps (same options)."""

    def command(
        ctx: typer.Context,
        quick: bool = QUICK,
        full: bool = FULL,
        mode: str = MODE,
        out: Path = typer.Option(
            None, "--out", parser=path_value, help=f"Output folder (default uatlab-runs/attention-{sweep})."
        ),
        executor: str = EXECUTOR,
        workers: int = WORKERS,
        json_out: bool = JSON,
        stored_only: bool = STORED,
    ) -> None:
        _refuse_runners_if_stored(ctx, stored_only)
        _sweep_command(sweep, quick, full, mode, out, executor, workers, json_out, stored_only)

    command.__name__ = command.__qualname__ = f"attention_{sweep}"
    command.__doc__ = doc
    experiment.command(f"attention-{sweep}")(with_experiment_exit_codes(command))


for _sweep, _doc in (
    ("heads", "Paper B heads sweep (truncated.py): parity, corrected (fixed head size), closed form."),
    ("anchors", "Paper B anchor-token sweep (truncated.py p): parity, corrected, closed form."),
    ("range", "Paper B |b−a| sweep (truncated.py): parity, corrected (clipped fraction reported), closed form."),
):
    _register_sweep(_sweep, _doc)


@experiment.command("attention-heatmap")
@with_experiment_exit_codes
def attention_heatmap(
    ctx: typer.Context,
    quick: bool = QUICK,
    full: bool = FULL,
    out: Path = typer.Option(Path("uatlab-runs/attention-heatmap"), "--out", parser=path_value, help="Output folder."),
    executor: str = EXECUTOR,
    workers: int = WORKERS,
    json_out: bool = JSON,
    stored_only: bool = STORED,
) -> None:
    """Attention maps for several |b−a| (attn_map.py), trained beside the closed form."""
    from uatlab.experiments.paper_b.runner import run_heatmap

    _refuse_runners_if_stored(ctx, stored_only)
    scale = _scale(quick, full)
    check_workers(executor, workers)
    check_output_dir(out)
    with out_lock(out, "attention-heatmap", ("attention-heatmap.csv", "attention-heatmap.png")):
        data = run_heatmap(scale, out, executor, workers, stored_only=stored_only)
    if json_out:
        print_json(data)
    else:
        table = Table(title=f"attention-heatmap ({scale})")
        for col in (
            "|b−a|",
            "clipped",
            "trained MSE (all ch)",
            "trained sup",
            "trained max weight",
            "closed sup",
            "closed max weight",
        ):
            table.add_column(col)
        for r in data["rows"]:
            table.add_row(
                *(
                    format_value(r[c])
                    for c in (
                        "value",
                        "clipped_fraction_test",
                        "test_mse_all_channels",
                        "test_sup",
                        "trained_max_weight",
                        "cf_sup",
                        "cf_max_weight",
                    )
                )
            )
        console.print(table)
        console.print(f"CSV: {data['csv']}  figure: {data['figure']}")
    exit_if_all_failed(data["failed"], data["finished"])  # exit 1 when every trial failed, in either mode


@experiment.command("attention-seq2seq")
@with_experiment_exit_codes
def attention_seq2seq(
    ctx: typer.Context,
    quick: bool = QUICK,
    full: bool = FULL,
    mode: str = typer.Option("all", "--mode", help="'parity', 'attention', 'feedforward' or 'all'."),
    out: Path = typer.Option(Path("uatlab-runs/attention-seq2seq"), "--out", parser=path_value, help="Output folder."),
    executor: str = EXECUTOR,
    workers: int = WORKERS,
    json_out: bool = JSON,
    stored_only: bool = STORED,
    seeds: int | None = typer.Option(None, "--seeds", min=1, max=64, help="Run only the first N seeds of the scale."),
    max_seconds: float | None = typer.Option(
        None,
        "--max-seconds",
        help="Opt-in wall-time cap per trained trial (seconds; the best validation epoch is kept). Without it "
        "training stops by epochs or convergence only, so a seed gives the same result on any machine; trials "
        "the cap stopped are flagged (their results depend on the machine's load).",
        callback=finite(0, 1e7, lo_open=True),
    ),
) -> None:
    """Two attention-only layers on a random ReLU seq2seq target vs feed-forward, mean and least squares."""
    from uatlab.experiments.paper_b.runner import run_seq2seq
    from uatlab.experiments.paper_b.seq2seq import SEQ2SEQ_MODES

    _refuse_runners_if_stored(ctx, stored_only)
    scale = _scale(quick, full)
    if mode != "all" and mode not in SEQ2SEQ_MODES:
        raise InputError(f"--mode must be 'all' or one of {SEQ2SEQ_MODES}, got {mode!r}")
    check_workers(executor, workers)
    check_output_dir(out)
    with out_lock(out, "attention-seq2seq", ("attention-seq2seq.csv", "attention-seq2seq.png")):
        data = run_seq2seq(
            scale,
            out,
            SEQ2SEQ_MODES if mode == "all" else (mode,),
            executor,
            workers,
            stored_only=stored_only,
            n_seeds=seeds,
            max_seconds=max_seconds,
        )
    if json_out:
        print_json(data)
    else:
        table = Table(title=f"attention-seq2seq ({scale}): test MSE, unnormalised, mean ± std over seeds")
        for col in ("model", "heads", "seeds", "params", "test MSE", "mean predictor", "least squares", "epochs"):
            table.add_column(col)
        for s in data["summary"]:
            table.add_row(
                s["mode"],
                format_value(s["value"]),
                str(s["seeds"]),
                format_value(s["n_params_mean"]),
                _pm(s, "test_mse"),
                _pm(s, "mean_predictor_mse"),
                _pm(s, "least_squares_mse"),
                format_value(s["epochs_run_mean"]),
            )
        console.print(table)
        if data["wall_cap_fired"]:
            console.print(
                f"note: the wall-time cap (--max-seconds) stopped {len(data['wall_cap_fired'])} trial(s) before their "
                f"epochs or convergence: {', '.join(data['wall_cap_fired'])}; their results depend on the machine's load"
            )
        console.print(f"CSV: {data['csv']}  figure: {data['figure']}")
    exit_if_all_failed(data["failed"], data["finished"])  # exit 1 when every trial failed, in either mode
