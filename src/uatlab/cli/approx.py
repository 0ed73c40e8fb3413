"""``uatlab approx``: closed-form universal-approximation constructions of paper A and paper B, swept by size.

Each command builds the construction at several sizes, measures its sup error, writes ``<name>.csv`` and
a log-log figure ``<name>.png`` (error against size, the proven bound dashed, the fitted slope in the
legend) into ``--out``, and prints a table (or, with ``--json``, one object with ``rows`` and ``slope``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from uatlab.cli.app import command_group, console, err_console, format_value, print_json, rows_table
from uatlab.cli.options import (
    SEED_MAX,
    finite,
    list_items,
    one_of,
    path_value,
    refuse_given,
    reject_overridden,
    with_exit_codes,
)
from uatlab.errors import InputError
from uatlab.io_safety import OutputFolder, check_output_dir
from uatlab.memory_guard import MAX_MEMORY_HELP, check_memory, set_memory_limit
from uatlab.threads import single_torch_thread

approx = command_group(
    "approx", "Closed-form approximators (paper A FF∘SA∘FF, paper B attention-only) swept by size, with proven bounds."
)

LIST_MAX = 100_000  # largest anchor count, grid, head count or context length accepted in a sweep list
OUT = typer.Option(Path("approx-out"), "--out", parser=path_value, help="Folder for the CSV and the figure.")
OUT_TABLE = typer.Option(
    Path("approx-out"), "--out", parser=path_value, help="Folder for the CSV (a table, no figure)."
)
QUICK = typer.Option(False, "--quick", help="Smaller sweep (seconds).")
JSON = typer.Option(False, "--json", help="Print one JSON object (rows, slope) instead of tables.")
JSON_TABLE = typer.Option(False, "--json", help="Print one JSON object (rows, the CSV's path) instead of a table.")
# the y values of the truncated-linear sweeps (`uatlab.experiments.approximation_sweeps._probe_grid`)
POINTS = typer.Option(
    20001,
    "--points",
    min=3,
    max=10**7,
    help="y values sampled on [a−(b−a), b+(b−a)]: both ends, a, b and their outside neighbours, and a "
    "golden-ratio sequence (never in step with the anchors); sup_error is their largest error, a lower estimate "
    "of the sup.",
)

if TYPE_CHECKING:
    from uatlab.experiments import approximation_sweeps as sw


def _ints(text: str, name: str) -> list[int]:
    vals = list_items(text, f"--{name}", int, "integers")
    if any(v < 1 for v in vals):
        raise InputError(f"--{name} needs positive integers, got {text!r}")
    if any(v > LIST_MAX for v in vals):
        raise InputError(f"--{name}: values above {LIST_MAX} are not supported (memory), got {text!r}")
    return vals


def _anchor_counts(text: str) -> list[int]:
    """The anchor counts of ``--anchors``: each ≥ 2 (a head interpolates between at least two anchors)."""
    vals = _ints(text, "anchors")
    if min(vals) < 2:
        raise InputError(
            f"--anchors {text!r}: each anchor count must be ≥ 2 (a head interpolates between at least 2 anchors), "
            f"got {min(vals)}"
        )
    return vals


def _floats(text: str, name: str) -> list[float]:
    vals = list_items(text, f"--{name}", float, "numbers")
    if any(not (v > 0 and math.isfinite(v)) for v in vals):
        raise InputError(f"--{name} needs positive numbers, got {text!r}")
    return vals


def _open_out(ctx: typer.Context, out: Path, stem: str, figure: bool = True) -> None:
    """Check ``--out`` before any work and keep it open as the `OutputFolder` of this subcommand until it ends:
    the files this run writes, ``STEM.csv`` and (``figure``) ``STEM.png``, replace a file only if an earlier run
    of the same subcommand wrote it. ``stem`` is the exact name the run writes under (its mode's, not a glob):
    a file of another mode, or the user's under a similar name, is neither refused nor touched."""
    check_output_dir(out)
    names = (f"{stem}.csv", f"{stem}.png") if figure else (f"{stem}.csv",)
    ctx.with_resource(OutputFolder(out, f"approx {ctx.info_name}", names))


def _progress(json_out: bool):
    def say(msg: str) -> None:
        err_console.print(f"[dim]{msg}[/]", highlight=False)

    return say


def _finish(sweep: sw.Sweep, out: Path, json_out: bool, x_key: str, columns: list[str], **plot: Any) -> None:
    from uatlab.experiments import approximation_sweeps as sw

    csv_path = sw.write_csv(sweep, out / f"{sweep.name}.csv")
    fig_path = sw.plot_sweep(sweep, out / f"{sweep.name}.png", x_key, **plot)
    data = sweep.to_json()
    data["csv"], data["figure"] = str(csv_path), str(fig_path)
    if json_out:
        print_json(data)
        return
    table = rows_table(f"uatlab approx {sweep.name}", columns, sweep.rows, "", "right", header_style="bold")
    console.print(table, width=max(console.width, 170))  # wide tables: do not squeeze the numbers
    for k, v in sweep.slopes.items():
        console.print(f"fitted slope {k} = {v:.4f}")
    for k, v in sweep.summary.items():
        console.print(f"{k}: {format_value(v)}")
    console.print(f"CSV: {csv_path}   figure: {fig_path}   ({sweep.seconds:.1f} s)")


MIN_WIDTH = 1e-9  # truncated-linear: smallest b − a relative to max(1, |a|, |b|)
MAX_GD_EPS = 1.0  # gd-in-context: largest score scale ε (the bound is already ~1e14 at ε = 1)


@approx.command("truncated-linear")
@with_exit_codes()
@single_torch_thread()
def truncated_linear_cmd(
    ctx: typer.Context,
    anchors: str = typer.Option("11,21,41,81,161", "--anchors", help="Anchor counts m to sweep."),
    mode: str = typer.Option(
        "token",
        "--mode",
        help="'token' (positional bias) or 'sequence' (appended anchors).",
        callback=one_of("token", "sequence"),
    ),
    a: float = typer.Option(-1.0, "--a", help="Lower clamp value.", callback=finite(-1e6, 1e6)),
    b: float = typer.Option(1.0, "--b", help="Upper clamp value.", callback=finite(-1e6, 1e6)),
    points: int = POINTS,
    dtype: str = typer.Option("float64", "--dtype", help="float64 or float32.", callback=one_of("float64", "float32")),
    out: Path = OUT,
    quick: bool = QUICK,
    json_out: bool = JSON,
) -> None:
    """Paper B: attention computing the clamp min(max(y, a), b); sup error vs anchors m, with the proven bound.

    In float32 the sweep stops at the first m whose scores the dtype cannot round accurately enough (m = 41
    on [−1, 1]), keeps the rows before it and says so (a warning, and ``stopped_at_anchors`` in the JSON).
    """
    from uatlab.experiments import approximation_sweeps as sw

    reject_overridden(ctx, quick, "anchors", "points")
    if not a < b:
        raise InputError(f"--a must be smaller than --b, got a={a}, b={b}")
    if b - a < MIN_WIDTH * max(1.0, abs(a), abs(b)):
        raise InputError(
            f"--b − --a = {b - a:g} is too small: need b − a ≥ {MIN_WIDTH:g}·max(1, |a|, |b|) "
            "(narrower intervals lose the anchors to rounding and overflow the inverse temperature x/Δ²)"
        )
    ms = [11, 21, 41, 81] if quick else _anchor_counts(anchors)
    stem = f"truncated-linear-{mode}"
    _open_out(ctx, out, stem)
    s = sw.sweep_truncated_linear(
        ms,
        mode=mode,
        a=a,
        b=b,
        points=4001 if quick else points,
        dtype=dtype,
        progress=_progress(json_out),
        stop_at_limit=True,
    )
    s.name = stem
    if "stopped_at_anchors" in s.summary:
        err_console.print(
            f"warning: stopped at m = {s.summary['stopped_at_anchors']} anchors ({dtype} cannot keep the "
            f"construction's accuracy there; see stopped_because); rows up to m = {s.rows[-1]['anchors']} kept",
            highlight=False,
            soft_wrap=True,
        )
    _finish(
        s,
        out,
        json_out,
        "anchors",
        ["anchors", "beta", "sup_error", "bound", "sup_outside", "clamp_bound", "spec_bound", "params"],
        slope_key="sup_error_vs_anchors",
        bound_label="bound (exact + rounding estimate)",
        title=f"Range_[{a},{b}] by softmax attention ({mode} mode)",
    )


@approx.command("heads")
@with_exit_codes()
@single_torch_thread()
def heads_cmd(
    ctx: typer.Context,
    heads: str = typer.Option("1,2,4,8,16", "--heads", help="Head counts H to sweep."),
    anchors: int = typer.Option(11, "--anchors", min=2, max=100_000, help="Anchors per head (= positions n)."),
    points: int = POINTS,
    out: Path = OUT,
    quick: bool = QUICK,
    json_out: bool = JSON,
) -> None:
    """Paper B: multi-head telescoping split of [−1,1]; sup error vs heads H, with the proven bound."""
    from uatlab.experiments import approximation_sweeps as sw

    reject_overridden(ctx, quick, "points")
    _ints(heads, "heads")
    _open_out(ctx, out, "heads")
    s = sw.sweep_heads(
        _ints(heads, "heads"), anchors=anchors, points=4001 if quick else points, progress=_progress(json_out)
    )
    _finish(
        s,
        out,
        json_out,
        "heads",
        ["heads", "anchors", "sup_error", "bound", "sup_outside", "clamp_bound", "params"],
        slope_key="sup_error_vs_heads",
        bound_label="bound (exact + rounding estimate)",
        title="Range_[-1,1] with H heads (token mode)",
    )


@approx.command("relu-network")
@with_exit_codes()
@single_torch_thread()
def relu_cmd(
    ctx: typer.Context,
    nets: int = typer.Option(5, "--nets", min=1, max=10_000, help="Number of random ReLU networks (paper B's shape)."),
    anchors: str = typer.Option("33,65,129,257", "--anchors", help="Anchor counts to sweep."),
    n: int = typer.Option(20, "--n", min=1, max=10_000, help="Sequence length."),
    d: int = typer.Option(5, "--d", min=1, max=10_000, help="Token dimension."),
    hidden: int = typer.Option(10, "--hidden", min=1, max=100_000, help="Hidden ReLU units."),
    samples: int = typer.Option(
        100,
        "--samples",
        min=1,
        max=10**7,
        help="Inputs per network (2 box corners + uniform random): the sampled_max_error column.",
    ),
    seed: int = typer.Option(0, "--seed", min=0, max=SEED_MAX, help="Seed of the first network."),
    layers: int = typer.Option(1, "--layers", help="Attention layers of the compiled model: 1 or 2."),
    standard: bool = typer.Option(
        False,
        "--standard",
        help="Standard multi-head attention only (no map across positions, no appended tokens). With --layers 2: "
        "the standard compiler; with --layers 1: certified lower bounds (no one-layer standard form reaches them).",
    ),
    pairs: int = typer.Option(
        2000, "--pairs", min=1, max=10**6, help="Point pairs for the lower bound (--layers 1 --standard only)."
    ),
    out: Path = OUT,
    quick: bool = QUICK,
    json_out: bool = JSON,
) -> None:
    """Paper B: compile random one-hidden-layer ReLU networks into attention; sup error vs anchors."""
    from uatlab.experiments import approximation_sweeps as sw

    reject_overridden(ctx, quick, "anchors", "nets", "samples", "pairs")
    _anchor_counts(anchors)
    if layers not in (1, 2):
        raise InputError(f"--layers must be 1 or 2, got {layers}")
    bounds_only = standard and layers == 1
    if bounds_only:
        refuse_given(ctx, "--layers 1 --standard (lower bounds, nothing is compiled)", ("anchors", "samples"))
    else:
        refuse_given(ctx, "compilation", ("pairs",))
    stem = "relu-network-one-standard-layer" if bounds_only else "relu-network-standard" if standard else "relu-network"
    _open_out(ctx, out, stem)
    if bounds_only:
        bounds = sw.sweep_one_standard_layer_bounds(
            nets=2 if quick else nets,
            n=n,
            d=d,
            hidden=hidden,
            pairs=400 if quick else pairs,
            search=(4, 1500) if quick else (8, 3000),
            seed=seed,
            progress=_progress(json_out),
        )
        bounds.name = stem  # the name the output folder was checked for
        _finish_bounds(bounds, out, json_out)
        return
    s = sw.sweep_relu_network(
        [65, 257] if quick else _anchor_counts(anchors),
        nets=2 if quick else nets,
        n=n,
        d=d,
        hidden=hidden,
        samples=32 if quick else samples,
        seed=seed,
        layers=layers,
        standard=standard,
        progress=_progress(json_out),
    )
    s.name = stem  # the name the output folder was checked for
    _finish(
        s,
        out,
        json_out,
        "anchors",
        [
            "net",
            "layers",
            "anchors",
            "heads",
            "sampled_max_error",
            "relative_sup_error",
            "adversarial_error",
            "relative_adversarial_error",
            "output_range",
            "bound",
            "params",
        ],
        y_key="adversarial_error",
        bound_label="bound (exact + rounding estimate)",
        group_key="net",
        title=f"ReLU network compiled into {layers} {'standard ' if standard else ''}softmax attention "
        f"layer{'s' if layers > 1 else ''}",
    )


def _finish_bounds(sweep: sw.Sweep, out: Path, json_out: bool) -> None:
    """CSV, a bar figure (lower bound per net against 1 %) and the table of `sweep_one_standard_layer_bounds`."""
    from uatlab.experiments import approximation_sweeps as sw
    from uatlab.report.figures import plot_bars

    csv_path = sw.write_csv(sweep, out / f"{sweep.name}.csv")
    fig_path = plot_bars(
        {f"net {r['net']}": 100.0 * r["relative_lower_bound"] for r in sweep.rows},
        out / f"{sweep.name}.png",
        ylabel="certified lower bound, % of the output range",
        title="one standard attention layer (keys read positions), any size",
        threshold=("1 % of the range", 1.0),
    )
    data = sweep.to_json()
    data["csv"], data["figure"] = str(csv_path), str(fig_path)
    if json_out:
        print_json(data)
        return
    columns = {  # row key → header
        "net": "net",
        "lower_bound": "sup error ≥",
        "output_range_upper_bound": "range ≤",
        "relative_lower_bound": "relative ≥",
        "data_free_lower_bound": "data-free ≥",
        "relative_data_free_lower_bound": "relative ≥ (data-free)",
        "any_layer_lower_bound": "any layer ≥",
        "relative_any_layer_lower_bound": "relative ≥ (any layer)",
        "pairs": "pairs",
    }
    table = Table(title=f"uatlab approx {sweep.name} (any number of heads)", header_style="bold")
    for header in columns.values():
        table.add_column(header, justify="right")
    for r in sweep.rows:
        table.add_row(*("—" if r[c] is None else format_value(r[c]) for c in columns))
    console.print(table, width=max(console.width, 170))
    for k, v in sweep.summary.items():
        console.print(f"{k}: {format_value(v)}")
    console.print(f"CSV: {csv_path}   figure: {fig_path}   ({sweep.seconds:.1f} s)")


@approx.command("universal")
@with_exit_codes()
@single_torch_thread()
def universal_cmd(
    ctx: typer.Context,
    target: str = typer.Option(
        "product-mean",
        "--target",
        help="product-mean, softmax-average, smooth-rank or first-token-product (positional encoding).",
        callback=one_of("product-mean", "softmax-average", "smooth-rank", "first-token-product"),
    ),
    d: int = typer.Option(1, "--d", min=1, max=64, help="Token dimension."),
    n: int = typer.Option(3, "--n", min=1, max=10_000, help="Sequence length."),
    grids: str = typer.Option("5,10,20,30,44", "--grids", help="Cells per coordinate G to sweep."),
    samples: int = typer.Option(20000, "--samples", min=1, max=10**7, help="Random points for the sup and L² error."),
    out: Path = OUT,
    quick: bool = QUICK,
    json_out: bool = JSON,
) -> None:
    """Paper A: FF∘SA∘FF with one rank-1 attention layer; error, params vs grid, next to Yun et al.'s depth.

    ``--target first-token-product`` is the non-equivariant f(X)_k = x_k·x_1 with the positional encoding
    z_k = x_k + k (d = 1); ``--grids`` are then cells per unit interval.
    """
    from uatlab.experiments import approximation_sweeps as sw

    reject_overridden(ctx, quick, "grids", "samples")
    if target == "first-token-product":
        refuse_given(ctx, "--target first-token-product (it prints its table and writes no file)", ("out",))
        _positional_universal(d, n, [2, 4] if quick else _ints(grids, "grids"), 2000 if quick else samples, json_out)
        return
    gs = ([2, 3, 4] if d > 1 else [5, 10, 20]) if quick else _ints(grids, "grids")
    stem = f"universal-{target}-d{d}-n{n}"
    _open_out(ctx, out, stem)
    s = sw.sweep_universal(
        gs, target=target, d=d, n=n, samples=2000 if quick else samples, progress=_progress(json_out)
    )
    s.name = stem
    _finish(
        s,
        out,
        json_out,
        "grid",
        [
            "grid",
            "context_ids",
            "params",
            "largest_weight",
            "sup_error",
            "sup_error_clean",
            "bound",
            "l2_error",
            "misquantised_fraction",
            "attention_layers",
            "yun_attention_layers",
        ],
        y_key="sup_error_clean",
        bound_key="bound",
        slope_key="sup_error_clean_vs_grid",
        extra_keys=["l2_error"],
        title=f"paper A FF∘SA∘FF, {target}, d={d}, n={n}",
    )


def _positional_universal(d: int, n: int, cells: list[int], samples: int, json_out: bool) -> None:
    from uatlab.constructions.paper_a.prop1_positional_encoding import sweep_positional

    if d != 1:
        raise InputError(f"--target first-token-product is built for d = 1, got --d {d}")
    if n < 2:
        raise InputError(f"--n must be ≥ 2, got {n}")
    rows = sweep_positional(cells, n=n, samples=samples)
    if json_out:
        print_json({"target": "first-token-product", "positional_encoding": "z_k = x_k + k", "rows": rows})
        return
    cols = ["cells_per_unit", "grid", "context_ids", "params", "sup_error", "bound", "l2_error", "no_pe_lower_bound"]
    table = Table(title=f"FF∘SA∘FF with positional encoding, f(X)_k = x_k·x_1, n={n}")
    for c in cols:
        table.add_column(c, justify="right")
    for r in rows:
        table.add_row(*(f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c]) for c in cols))
    console.print(table)


@approx.command("gd-in-context")
@with_exit_codes()
@single_torch_thread()
def gd_cmd(
    ctx: typer.Context,
    contexts: str = typer.Option("8,16,32,64,128", "--contexts", help="Context lengths N."),
    eps: str = typer.Option("0.1,0.01,0.001,0.0001,1e-05,1e-06", "--eps", help="Score scales ε (inverse temperature)."),
    d: int = typer.Option(8, "--d", min=1, max=10_000, help="Input dimension."),
    steps: str = typer.Option("1,3", "--steps", help="GD steps k (one layer each)."),
    lr: float = typer.Option(0.5, "--lr", help="GD step size η.", callback=finite(0, 100, lo_open=True)),
    max_memory: str | None = typer.Option(None, "--max-memory", help=MAX_MEMORY_HELP),
    out: Path = OUT,
    quick: bool = QUICK,
    json_out: bool = JSON,
) -> None:
    """Attention-only layers running k GD steps of in-context linear regression; error vs N and ε.

    ``bound`` is the sup-error bound of the float64 run with rounding included; ``rounding_bound`` is its
    rounding part (∝ 1/ε), the rest is the exact-arithmetic bound. A bound beyond the float64 range (large
    ε·d) is reported as inf: true, but vacuous.
    """
    from uatlab.experiments import approximation_sweeps as sw

    reject_overridden(ctx, quick, "contexts", "eps")
    _ints(contexts, "contexts"), _floats(eps, "eps"), _ints(steps, "steps")
    too_big = [e for e in _floats(eps, "eps") if e > MAX_GD_EPS]
    if too_big:
        raise InputError(
            f"--eps {too_big[0]:g}: the score scale ε must be ≤ {MAX_GD_EPS:g} (the construction is a small-ε "
            "expansion; its error bound grows like cosh(ε·S) and overflows for large ε)"
        )
    set_memory_limit(max_memory)
    ns, batch = [16, 64] if quick else _ints(contexts, "contexts"), 32 if quick else 64
    check_memory(
        sw.gd_sweep_bytes(ns, d, _ints(steps, "steps"), batch),
        "gd-in-context",
        f"attention over N = {max(ns)} context pairs for {batch} tasks, k = {max(_ints(steps, 'steps'))} layer(s) "
        f"at d = {d}",
    )
    _open_out(ctx, out, "gd-in-context")
    s = sw.sweep_gd(
        ns,
        [1e-1, 1e-2, 1e-3, 1e-4] if quick else _floats(eps, "eps"),
        d=d,
        steps=_ints(steps, "steps"),
        lr=lr,
        batch=batch,
        progress=_progress(json_out),
    )
    _finish(
        s,
        out,
        json_out,
        "eps",
        ["context", "eps", "steps", "relative_error", "sup_error", "bound", "rounding_bound", "params"],
        y_key="sup_error",
        bound_key="bound",
        bound_label="bound (rounding included)",
        group_key="context",
        where={"steps": _ints(steps, "steps")[0]},
        title=f"in-context GD by softmax attention, d={d}, k={_ints(steps, 'steps')[0]} step(s)",
    )


@approx.command("incontext")
@with_exit_codes()
def incontext_cmd(
    ctx: typer.Context,
    task: str = typer.Option(
        "all", "--task", help="'ridge', 'relu-features' or 'all'.", callback=one_of("all", "ridge", "relu-features")
    ),
    d: int = typer.Option(2, "--d", min=1, max=64, help="Input dimension d."),
    context: int = typer.Option(16, "--context", min=1, max=4096, help="Context pairs N."),
    noise: float = typer.Option(
        1.0, "--noise", help="Label noise σ (λ = σ²/N).", callback=finite(0, 1e6, lo_open=True)
    ),
    steps: str = typer.Option("20,100,200", "--steps", help="GD layers k of the construction."),
    anchors: int = typer.Option(33, "--anchors", min=2, max=4096, help="Interpolation anchors per head."),
    heads: int = typer.Option(4, "--heads", min=1, max=256, help="Interpolation heads per coordinate."),
    train_steps: int = typer.Option(
        4000, "--train-steps", min=1, max=10**7, help="Optimizer steps of the trained model."
    ),
    test_tasks: int = typer.Option(256, "--test-tasks", min=1, max=10**6, help="Held-out regression tasks."),
    seed: int = typer.Option(0, "--seed", min=0, max=SEED_MAX, help="Seed."),
    out: Path = OUT_TABLE,
    quick: bool = QUICK,
    json_out: bool = JSON_TABLE,
) -> None:
    """In-context ridge and ridge on (x, ReLU(x)): constructions and a trained attention-only model vs the closed form."""
    import csv

    from uatlab.experiments.incontext import TASKS, TaskSpec, incontext_table
    from uatlab.io_safety import atomic_write

    reject_overridden(ctx, quick, "steps", "train_steps", "test_tasks")
    if task == "ridge":  # the interpolation of ReLU(x) is the relu-features task's only
        refuse_given(
            ctx, "--task ridge (they set the ReLU interpolation of --task relu-features)", ("anchors", "heads")
        )
    ks = _ints(steps, "steps")
    _open_out(ctx, out, "incontext", figure=False)  # a table only
    if quick:
        ks, train_steps, test_tasks = [20, 100], 800, 64
    specs = [TaskSpec(t, d=d, context=context, noise=noise) for t in (TASKS if task == "all" else (task,))]
    size = {"batch": 64, "lr": 5e-3} if quick else {"batch": 128, "lr": 3e-3}
    rows = incontext_table(specs, ks, train_steps, test_tasks, seed, anchors, heads, size)
    cols = ["task", "model", "layers", "parameters", "rel_sup", "rel_rms", "cpu_seconds"]
    out.mkdir(parents=True, exist_ok=True)
    with atomic_write(out / "incontext.csv", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=sorted({k for r in rows for k in r}), extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    if json_out:
        print_json({"rows": rows, "csv": str(out / "incontext.csv")})
        return
    table = rows_table(
        f"in-context regression vs the closed form (d={d}, N={context}, λ={noise**2 / context:.4g})",
        cols,
        rows,
        "",
        "right",
    )
    console.print(table)
    console.print(f"CSV: {out / 'incontext.csv'}")
