"""uatlab's command line: ``uatlab --help`` lists every command in one line each.

Command modules register on the shared :data:`uatlab.cli.app.app`; they are imported here.
"""

from __future__ import annotations

import importlib
import sys

from uatlab.cli.app import app, err_console
from uatlab.errors import UatlabError

# One module per area; each adds its commands to ``app`` on import.
COMMAND_MODULES: list[str] = [
    "uatlab.cli.reproduce",
    "uatlab.cli.experiment",
    "uatlab.cli.train",
    "uatlab.cli.theory",
    "uatlab.cli.paper_b",
    "uatlab.cli.compile",
    "uatlab.cli.approx",
    "uatlab.cli.boltzmann",
    "uatlab.cli.rank_ablation",
    "uatlab.cli.export",
    "uatlab.cli.predict",
]


def _load_commands() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(name)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``uatlab`` script."""
    _load_commands()
    try:
        app(args=argv, prog_name="uatlab")  # standalone: click handles usage errors and --help
    except UatlabError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False)
        return 2
    except KeyboardInterrupt:
        err_console.print("[bold red]interrupted[/] (partial results, if any, were kept)")
        return 130
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
