"""The typer application shared by every command module, and the output helpers.

Every command takes ``--json``: it then prints exactly one JSON object on stdout and nothing else
(progress goes to stderr). Otherwise it prints rich tables. User errors (`UatlabError`)
become one line ``error: ...`` on stderr and exit code 2, without a traceback.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from uatlab._util import to_jsonable

# Help texts are plain text: rich markup would swallow "[a, b]" or "uatlab[ray]" as tags.
_SETTINGS: dict[str, Any] = {
    "no_args_is_help": True,
    "add_completion": False,
    "pretty_exceptions_enable": False,
    "rich_markup_mode": None,
}
app = typer.Typer(
    name="uatlab",
    help="Executable theory of softmax attention: constructions, certificates, trained counterparts.",
    **_SETTINGS,
)


def command_group(name: str, help: str) -> typer.Typer:
    """A group of ``uatlab`` sub-commands (``uatlab <name> ...``) with the top level's settings."""
    group = typer.Typer(name=name, help=help, **_SETTINGS)
    app.add_typer(group, name=name)
    return group


def _print_version(value: bool) -> None:
    if value:
        from uatlab import __version__

        typer.echo(f"uatlab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_print_version, is_eager=True, help="Print the uatlab version and exit."
    ),
) -> None:
    """uatlab: what softmax attention can express, made executable."""


_interrupt_line: list[str] = []  # what the running command kept, said when Ctrl-C or SIGTERM ends it


def say_on_interrupt(line: str) -> None:
    """Say ``line`` (what the command saved or kept) instead of the generic one if an interrupt ends it now."""
    _interrupt_line[:] = [line]


def interrupt_line(default: str) -> str:
    """The line `say_on_interrupt` left (taken: the next command starts with none), else ``default``."""
    return _interrupt_line.pop() if _interrupt_line else default


console = Console()
err_console = Console(stderr=True)


def print_json(data: dict[str, Any]) -> None:
    """Print one JSON object on stdout (non-finite floats become strings)."""
    sys.stdout.write(json.dumps(to_jsonable(data), indent=2, sort_keys=False) + "\n")
    sys.stdout.flush()


def key_value_table(title: str, rows: dict[str, Any]) -> Table:
    """A two-column rich table of figures."""
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("quantity")
    table.add_column("value", overflow="fold")
    for k, v in rows.items():
        table.add_row(str(k), format_value(v))
    return table


def rows_table(
    title: str,
    columns: list[str],
    rows: Iterable[dict[str, Any]],
    missing: Any = None,
    justify: str = "left",
    **style: Any,
) -> Table:
    """A rich table with one column per name in ``columns`` and one row per dict of ``rows`` (values through
    `format_value`; ``missing`` where a row lacks a column); ``style``: further `rich.table.Table` options."""
    table = Table(title=title, **style)
    for c in columns:
        table.add_column(c, justify=justify)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*(format_value(row.get(c, missing)) for c in columns))
    return table


def format_value(v: Any) -> str:
    if isinstance(v, float):
        if v == 0 or (1e-3 <= abs(v) < 1e6):
            return f"{v:.6g}"
        return f"{v:.4e}"
    if isinstance(v, (list, tuple)) and len(v) > 12:
        return ", ".join(map(format_value, v[:12])) + f", … ({len(v)} in all)"
    if isinstance(v, (list, tuple)):
        return ", ".join(map(format_value, v))
    return str(v)
