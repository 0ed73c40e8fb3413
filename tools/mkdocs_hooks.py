"""MkDocs hooks for the uatlab site: the CLI reference from the commands' own help, results pages in the nav.

* ``<!-- uatlab-cli-reference -->`` in a page is replaced by ``uatlab --help`` and every ``uatlab COMMAND
  --help`` (subcommand groups included), so the reference cannot drift from the code.
* Every ``docs/results/*.md`` page is listed under "Results" in the navigation, after ``results/index.md``.
"""

from __future__ import annotations

from pathlib import Path

MARKER = "<!-- uatlab-cli-reference -->"


def _help_pages() -> list[tuple[str, str]]:
    import typer
    from typer.testing import CliRunner

    from uatlab.cli import _load_commands
    from uatlab.cli.app import app

    _load_commands()
    runner = CliRunner()
    env = {"COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1"}
    out: list[tuple[str, str]] = []

    def walk(cmd, path: list[str], parent) -> None:
        result = runner.invoke(app, [*path[1:], "--help"], env=env, prog_name="uatlab")
        if result.exit_code != 0:
            raise RuntimeError(f"{' '.join(path)} --help failed: {result.output}")
        out.append((" ".join(path), result.output))
        if hasattr(cmd, "list_commands"):  # a group (typer vendors its own click)
            ctx = cmd.context_class(cmd, info_name=path[-1], parent=parent)
            for name in sorted(cmd.list_commands(ctx)):
                walk(cmd.get_command(ctx, name), [*path, name], ctx)

    walk(typer.main.get_command(app), ["uatlab"], None)
    return out


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 - MkDocs hook signature
    if MARKER not in markdown:
        return markdown
    parts = []
    for name, text in _help_pages():
        anchor = name.replace(" ", "-")
        parts.append(f"## `{name}` {{#{anchor}}}\n\n```text\n{text.rstrip()}\n```\n")
    return markdown.replace(MARKER, "\n".join(parts))


def on_config(config):
    docs = Path(config["docs_dir"])
    pages = sorted(p for p in (docs / "results").glob("*.md") if p.name != "index.md")
    for item in config["nav"]:
        if isinstance(item, dict) and "Results" in item:
            item["Results"] = ["results/index.md", *[f"results/{p.name}" for p in pages]]
    return config
