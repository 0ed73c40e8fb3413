"""The ``uatlab experiment`` sub-command group.

This module only creates the shared sub-typer `experiment`; command modules (training
experiments in `uatlab.cli.train`, the paper-B experiments in their own module) add their
commands to it with ``@experiment.command(...)``.
"""

from __future__ import annotations

from uatlab.cli.app import command_group

experiment = command_group(
    "experiment", "Long-running experiments (depth ablation, capacity sweep, ...): CSV, figures, summary."
)
