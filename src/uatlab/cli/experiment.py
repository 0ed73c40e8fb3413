"""The ``uatlab experiment`` sub-command group.

This module only creates the shared sub-typer `experiment`; command modules (training
experiments in `uatlab.cli.train`, the paper-B experiments in their own module) add their
commands to it with ``@experiment.command(...)``.
"""

from __future__ import annotations

import typer

from uatlab.cli.app import app

experiment = typer.Typer(
    name="experiment",
    help="Long-running experiments (depth ablation, capacity sweep, ...): CSV, figures, summary.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

app.add_typer(experiment, name="experiment")
