"""Writing the ``uatlab reproduce`` report: claims.json, report.md and report.html with figures."""

from __future__ import annotations

import datetime as _dt
import html
import json
import os
import platform
from pathlib import Path

from uatlab._util import to_jsonable
from uatlab.claims.registry import ClaimRun


def _md_value(v: object) -> str:
    text = json.dumps(to_jsonable(v)) if not isinstance(v, str) else v
    return text.replace("|", "\\|")


def write_claims_report(runs: list[ClaimRun], out: Path, quick: bool, seconds: float) -> list[Path]:
    """Write claims.json, report.md and report.html into ``out``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    stamp = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    payload = {
        "generated": stamp,
        "quick": quick,
        "seconds": round(seconds, 2),
        "python": platform.python_version(),
        "claims": [r.to_json() for r in runs],
    }
    json_path = out / "claims.json"
    tmp = json_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(to_jsonable(payload), indent=2))
    os.replace(tmp, json_path)

    md = [f"# uatlab reproduce{' --quick' if quick else ''}", "", f"Generated {stamp}, {seconds:.1f} s.", ""]
    md += ["| claim | paper, theorem | verdict | seconds |", "|---|---|---|---|"]
    for r in runs:
        md.append(f"| `{r.claim.id}` | {r.claim.paper}, {r.claim.theorem} | **{r.result.verdict}** | {r.seconds:.1f} |")
    for r in runs:
        md += ["", f"## `{r.claim.id}`: {r.result.verdict}", "", r.claim.statement, ""]
        if r.result.figures:
            md += ["| measured | value |", "|---|---|"]
            md += [f"| {k} | {_md_value(v)} |" for k, v in r.result.figures.items()]
        if r.result.note:
            md += ["", "```", r.result.note.strip(), "```"]
        for f in r.result.figure_files:
            rel = os.path.relpath(f, out)
            if rel.endswith((".png", ".svg")):
                md += ["", f"![{r.claim.id}]({rel})"]
    md_path = out / "report.md"
    md_path.write_text("\n".join(md) + "\n")

    rows = []
    for r in runs:
        figs = "".join(
            f'<div><img src="{html.escape(os.path.relpath(f, out))}" style="max-width:640px"></div>'
            for f in r.result.figure_files
            if f.endswith((".png", ".svg"))
        )
        measured = "".join(
            f"<tr><td>{html.escape(str(k))}</td><td>{html.escape(_md_value(v))}</td></tr>"
            for k, v in r.result.figures.items()
        )
        colour = "#1b7837" if r.result.verdict == "pass" else "#b2182b"
        rows.append(
            f"<h2><code>{html.escape(r.claim.id)}</code> "
            f'<span style="color:{colour}">{r.result.verdict}</span> ({r.seconds:.1f} s)</h2>'
            f"<p>{html.escape(r.claim.statement)}<br><em>{html.escape(r.claim.paper)}, "
            f"{html.escape(r.claim.theorem)}</em></p><table border=1 cellpadding=3>{measured}</table>"
            f"<pre>{html.escape(r.result.note)}</pre>{figs}"
        )
    html_path = out / "report.html"
    html_path.write_text(
        "<!doctype html><meta charset=utf-8><title>uatlab reproduce</title>"
        f"<h1>uatlab reproduce{' --quick' if quick else ''}</h1><p>Generated {stamp}.</p>" + "".join(rows)
    )
    return [json_path, md_path, html_path]
