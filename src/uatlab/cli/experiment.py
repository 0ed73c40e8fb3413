"""The ``uatlab experiment`` sub-command group.

This module only creates the shared sub-typer `experiment`; command modules (training
experiments in `uatlab.cli.train`, the paper-B experiments in their own module) add their
commands to it with ``@experiment.command(...)``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import typer

from uatlab.cli.app import command_group, err_console, say_on_interrupt
from uatlab.cli.options import note_leftover_temps, with_exit_codes
from uatlab.io_safety import OutputFolder, OutputLock

experiment = command_group(
    "experiment", "Long-running experiments (depth ablation, capacity sweep, ...): CSV, figures, summary."
)


# what every experiment with stored trials writes into its --out (besides its own CSV and figures)
EXPERIMENT_FILES = ("summary.json", "sweep_options.json", "trials/*.json")

# the exit codes every experiment command has, appended to its help (`with_experiment_exit_codes`)
EXIT_CODES_HELP = """

\b
Exit codes:
  0    the sweep ran (trials finished, or reused from --out)
  1    no trial finished: every one failed (the first failure is named)
  2    a user error, one 'error:' line
  130  interrupted (Ctrl-C, SIGTERM): finished trials are kept in --out; run
       the same command again to go on from them
"""


with_experiment_exit_codes = with_exit_codes(EXIT_CODES_HELP)  # apply it below ``@experiment.command``


@contextlib.contextmanager
def out_lock(
    out: Path,
    kind: str,
    names: Iterable[str],
    inputs: Iterable[Path | None] = (),
    trials: bool = True,
    folders: Iterable[str] = (),
) -> Iterator[None]:
    """The lock `compile` and `train` take on their output, here on an experiment's ``--out`` folder (a second
    job on the same folder stops with an error naming the first job's pid instead of writing the same trials),
    and the folder opened as an `OutputFolder` of ``experiment KIND``: a file of ``names`` (and of
    `EXPERIMENT_FILES` when the experiment stores ``trials``) that an earlier run of the same experiment did
    not write there is refused before any work, never replaced; so is a file where the experiment makes a folder
    (``trials``, or one of ``folders``: ``runs`` for the trained trials' own folders)."""
    files = (*names, *EXPERIMENT_FILES) if trials else tuple(names)
    folder = OutputFolder(out, f"experiment {kind}", files, inputs, folders=folders)
    with OutputLock(out, hint="use another --out"), folder:
        for name in files:  # temporary files a killed run left beside its outputs: named, never deleted
            if not any(c in name for c in "*?["):
                note_leftover_temps(out / name)
        say_on_interrupt(
            f"interrupted: the trials finished so far are kept in {out}; run the same command again to go on from them"
        )
        yield


def exit_if_all_failed(failed: Mapping[str, str], finished: int) -> None:
    """An experiment none of whose trials finished is an error (exit 1), not a result: name the first failure."""
    if failed and finished == 0:
        tid, text = next(iter(failed.items()))
        lines = [line for line in str(text).strip().splitlines() if line.strip()]
        err_console.print(
            f"error: every trial failed ({len(failed)}); {tid}: {lines[-1].strip() if lines else '?'}",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(code=1)
