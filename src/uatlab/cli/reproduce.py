"""``uatlab reproduce``: run every registered claim check, print a table, write a report."""

from __future__ import annotations

import fnmatch
import os
import time
from pathlib import Path

import typer
from rich.table import Table

from uatlab.claims.registry import CONLL_DIR_ENV, ClaimContext, ClaimRun, all_claims, run_claims
from uatlab.cli.app import app, console, err_console, format_value, print_json, say_on_interrupt
from uatlab.cli.options import SEED_MAX, list_items, path_value
from uatlab.errors import InputError
from uatlab.io_safety import OutputFolder, OutputLock, check_output_dir

# what a run writes into --out (figures: ``figures/<claim id>__<name>``); replaced only if a reproduce run wrote it
REPRODUCE_OUTPUTS = ("claims.json", "report.md", "report.html", "figures/*__*")


@app.command()
def reproduce(
    quick: bool = typer.Option(False, "--quick", help="CI-sized version of every check (minutes)."),
    out: Path = typer.Option(
        Path("uatlab-report"), "--out", parser=path_value, help="Folder for claims.json, report and figures."
    ),
    only: list[str] = typer.Option(
        [],
        "--only",
        help="Run only claims whose id matches this glob (e.g. 'A.*'); repeat it or separate globs by commas for several.",
    ),
    seed: int = typer.Option(0, "--seed", min=0, max=SEED_MAX, help="Seed passed to every check."),
    data_dir: Path | None = typer.Option(
        None,
        "--data-dir",
        parser=path_value,
        help="Folder with CoNLL-2003 train.txt (default: $UATLAB_CONLL_DIR; else synthetic). Refused when no "
        "selected claim reads it (some read it in full mode only, not with --quick).",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
) -> None:
    """Run every registered claim of both papers and write claims.json plus a report.

    \b
    Exit codes:
      0    every selected claim passed (or was skipped, saying why)
      1    a claim failed or raised: claims.json and the report are still written
      2    a user error, one 'error:' line (bad option, a file in --out that is not a report's)
      130  interrupted (Ctrl-C, SIGTERM)
    """
    if data_dir is not None:
        _check_data_dir(data_dir)
    patterns = list_items(",".join(only), "--only") if only else []
    for pattern in patterns:  # every glob must select something: a typo is not silently dropped
        if not any(fnmatch.fnmatch(c.id, pattern) for c in all_claims()):
            ids = ", ".join(c.id for c in all_claims()[:8])
            raise InputError(f"--only {pattern!r} matches no claim (ids look like {ids}, …)")
    select = (lambda c: any(fnmatch.fnmatch(c.id, p) for p in patterns)) if patterns else None
    chosen = [c for c in all_claims() if select is None or select(c)]
    if data_dir is not None:
        _refuse_unread_data_dir(chosen, quick, patterns)
    _check_train_file(data_dir, chosen, quick)
    check_output_dir(out)
    folder = OutputFolder(out, "reproduce", REPRODUCE_OUTPUTS).check()  # a user's report.md is never replaced
    with OutputLock(out, hint="use another --out"), folder:
        _reproduce(out, quick, seed, data_dir, select, json_out)


def _check_data_dir(data_dir: Path, name: str = "--data-dir") -> None:
    """``--data-dir`` (or ``name``, e.g. ``$UATLAB_CONLL_DIR``) must be an existing folder holding CoNLL-2003
    ``train.txt``: say which of these it is not."""
    if not data_dir.exists():
        raise InputError(f"{name} {data_dir} does not exist; give the folder that holds CoNLL-2003 train.txt")
    if not data_dir.is_dir():
        parent = f" ({name} {data_dir.parent})" if data_dir.name == "train.txt" else ""
        raise InputError(
            f"{name} {data_dir} is a file, not a folder; give the folder that holds CoNLL-2003 train.txt{parent}"
        )
    if not (data_dir / "train.txt").is_file():
        raise InputError(f"{name} {data_dir}: no train.txt there (CoNLL-2003 train.txt is read from it)")


def _check_train_file(data_dir: Path | None, chosen: list, quick: bool) -> None:
    """Read the CoNLL-2003 ``train.txt`` the ``chosen`` claims would read (``--data-dir``, else
    ``$UATLAB_CONLL_DIR``) before any claim runs: a malformed file is one ``file:line`` error (exit 2), not a
    claim that fails after the others have run. ``$UATLAB_CONLL_DIR`` set to a folder without train.txt is an
    error as ``--data-dir`` is (the claims would run on synthetic data instead)."""
    from uatlab.data import read_conll

    if not any(c.reads_conll_in(quick) for c in chosen):
        return
    env = os.environ.get(CONLL_DIR_ENV)
    if data_dir is None and env:  # set, but wrong: the claims would fall back to synthetic data, as if it were not
        _check_data_dir(Path(env), f"${CONLL_DIR_ENV}")
    train = ClaimContext(quick=quick, out_dir=Path("."), data_dir=data_dir).conll_train()
    if train is not None:
        read_conll(train)


def _refuse_unread_data_dir(chosen: list, quick: bool, patterns: list[str]) -> None:
    """``--data-dir`` is refused, naming the option that makes it unused, when none of the ``chosen`` claims reads
    CoNLL-2003 in this mode (`uatlab.claims.registry.Claim.reads_conll`)."""
    if any(c.reads_conll_in(quick) for c in chosen):
        return
    full_only = [c.id for c in chosen if c.reads_conll == "full"]
    if quick and full_only:
        raise InputError(
            f"--data-dir has no effect with --quick: the selected claims read CoNLL-2003 in full mode only "
            f"({', '.join(full_only[:4])}); drop --quick or --data-dir"
        )
    readers = [c.id for c in all_claims() if c.reads_conll_in(quick)]
    only = f"--only {','.join(patterns)}" if patterns else ("--quick" if quick else "these options")
    raise InputError(
        f"--data-dir has no effect with {only}: no selected claim reads CoNLL-2003"
        + (f" (those that do{' with --quick' if quick else ''}: {', '.join(readers[:4])})" if readers else "")
    )


def _reproduce(out: Path, quick: bool, seed: int, data_dir: Path | None, select, json_out: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    ctx = ClaimContext(quick=quick, out_dir=out, seed=seed, data_dir=data_dir)
    t0 = time.perf_counter()

    finished: list[ClaimRun] = []

    def progress(run: ClaimRun) -> None:
        finished.append(run)
        err_console.print(
            f"[{'green' if run.result.verdict == 'pass' else 'red'}]{run.result.verdict:>7}[/] "
            f"{run.claim.id}  ({run.seconds:.1f} s)",
            highlight=False,
        )

    figures = out / "figures"
    made = not figures.exists()
    try:
        runs = run_claims(ctx, select=select, on_done=progress)
    except KeyboardInterrupt:
        done = f"{len(finished)} claim(s) had finished" if finished else "no claim had finished"
        figures_note = " (figures of the claims that finished were written anew)" if finished else ""
        say_on_interrupt(
            f"interrupted ({done}): no verdict was recorded; {out}'s claims.json and report (if any) are those of "
            f"the last complete run{figures_note}"
        )
        raise
    except OSError:  # the disk, not a claim (`run_claim`): leave no empty figures folder this run made
        if made and figures.is_dir() and not any(figures.iterdir()):
            figures.rmdir()
        raise
    from uatlab.report.claims_report import write_claims_report  # jinja2: loaded by this command only

    paths = write_claims_report(runs, out, quick=quick, seconds=time.perf_counter() - t0)
    data = {
        "quick": quick,
        "out": str(out),
        "report": [str(p) for p in paths],
        "claims": [r.to_json() for r in runs],
        "passed": sum(r.result.verdict == "pass" for r in runs),
        "total": len(runs),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    failed = data["total"] - data["passed"] - sum(r.result.verdict == "skipped" for r in runs)
    if json_out:
        print_json(data)
    else:
        _print_table(runs, quick, data)
    if failed:
        raise typer.Exit(code=1)


def _terminal_value(v: object) -> str:
    """A figure as one short line, numbers to 3 significant figures; a dict of dicts as ``k: a = x, …; k: …``."""
    from uatlab.report.claims_report import short_text

    text = short_text(v)
    if text is not None:
        return text
    if isinstance(v, dict):
        return "; ".join(f"{k}: {short_text(x) or format_value(x)}" for k, x in v.items())
    return format_value(v)


def _print_table(runs: list[ClaimRun], quick: bool, data: dict) -> None:
    table = Table(title=f"uatlab reproduce{' --quick' if quick else ''}", show_lines=True)
    for col in ("claim", "measured", "verdict", "seconds"):
        table.add_column(col, overflow="fold")
    for r in runs:
        measured = "\n".join(f"{k} = {_terminal_value(v)}" for k, v in list(r.result.figures.items())[:8])
        colour = "green" if r.result.verdict == "pass" else "red"
        table.add_row(r.claim.id, measured, f"[{colour}]{r.result.verdict}[/]", f"{r.seconds:.1f}")
    console.print(table)
    console.print(f"{data['passed']}/{data['total']} claims pass; report: {', '.join(data['report'])}")
