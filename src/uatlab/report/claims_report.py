"""Writing the ``uatlab reproduce`` report: claims.json, report.md and one self-contained report.html.

The HTML report is rendered from the jinja2 template ``templates/report.html.j2``: a summary table
first (claim, paper and theorem, verdict, key figure, seconds), a table of contents, then one section
per claim with its measured figures (numbers to significant figures, nested dicts and lists as small
tables), its note and its figures embedded as ``data:`` URIs, so the file can be moved or mailed alone.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import math
import os
import platform
import re
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from uatlab._util import to_jsonable
from uatlab.claims.registry import ClaimRun
from uatlab.io_safety import write_text_atomic

MIME = {".png": "image/png", ".svg": "image/svg+xml", ".jpg": "image/jpeg", ".jpeg": "image/jpeg"}
MAX_LIST = 12  # longer lists are cut with "… (N in all)"


def sig(v: Any, digits: int = 4) -> str:
    """A number to ``digits`` significant figures (integers exact, with thousands separators)."""
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        if v == 0:
            return "0"
        if min(1e3, 10**digits) <= abs(v) < 1e6:  # whole units read better than 1.23e+03 or 2.5e+02
            return f"{round(v):,}"
        if 1e-4 <= abs(v) < 1e6:
            text = f"{v:.{digits}g}"
            return text if "e" not in text else f"{v:.{digits - 1}e}"
        return f"{v:.{digits - 1}e}"
    return str(v)


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


def render_value(v: Any, depth: int = 0) -> Markup:
    """HTML for one measured value: scalars rounded, dicts and lists of dicts as small tables."""
    v = to_jsonable(v)
    if _is_scalar(v):
        return escape(sig(v))
    if isinstance(v, dict):
        if not v:
            return Markup("—")
        rows = "".join(
            f"<tr><th>{escape(str(k))}</th><td{' class=num' if isinstance(x, (int, float)) else ''}>"
            f"{render_value(x, depth + 1)}</td></tr>"
            for k, x in v.items()
        )
        return Markup(f'<table class="nested">{rows}</table>')
    if isinstance(v, list):
        if all(_is_scalar(x) for x in v):
            shown = ", ".join(sig(x) for x in v[:MAX_LIST])
            more = f", … ({len(v)} in all)" if len(v) > MAX_LIST else ""
            return escape(shown + more)
        if all(isinstance(x, dict) for x in v):
            cols = list(dict.fromkeys(k for x in v for k in x))
            head = "".join(f"<th>{escape(str(c))}</th>" for c in cols)
            body = "".join(
                "<tr>" + "".join(f"<td>{render_value(x.get(c, ''), depth + 1)}</td>" for c in cols) + "</tr>"
                for x in v[:MAX_LIST]
            )
            more = f"<tr><td colspan={len(cols)}>… ({len(v)} rows in all)</td></tr>" if len(v) > MAX_LIST else ""
            return Markup(f'<table class="nested"><tr>{head}</tr>{body}{more}</table>')
        return Markup("<br>".join(str(render_value(x, depth + 1)) for x in v[:MAX_LIST]))
    return escape(str(v))


def short_text(v: Any, digits: int = 3, max_items: int = 4) -> str | None:
    """A value as one short line with rounded numbers, or None if it is nested (dicts in dicts).

    Scalars: `sig`. A dict of scalars: ``k = v, k = v`` (at most ``max_items``, then "… (N in all)").
    A list of scalars: ``v, v, v``, cut likewise.
    """
    v = to_jsonable(v)
    if _is_scalar(v):
        return sig(v, digits)
    if isinstance(v, dict) and all(_is_scalar(x) for x in v.values()):
        parts = [f"{k} = {sig(x, digits)}" for k, x in list(v.items())[:max_items]]
        more = f", … ({len(v)} in all)" if len(v) > max_items else ""
        return ", ".join(parts) + more if parts else "—"
    if isinstance(v, list) and all(_is_scalar(x) for x in v):
        more = f", … ({len(v)} in all)" if len(v) > max_items else ""
        return ", ".join(sig(x, digits) for x in v[:max_items]) + more
    return None


def key_figure(figures: dict[str, Any], preferred: str | None = None) -> Markup | None:
    """The summary table's cell: ``preferred`` if given, else the first numeric figure.

    A scalar reads ``name = value``, a flat dict or list ``name: k = v, k = v``, numbers to 3
    significant figures; a nested value is shown as a small table under its name.
    """
    name = preferred if preferred and preferred in figures else None
    if name is None:
        name = next(
            (
                k
                for k, v in figures.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool) and "second" not in k
            ),
            None,
        )
    if name is None:
        return None
    value = to_jsonable(figures[name])
    text = short_text(value)
    if text is not None:
        return escape(f"{name} = {text}" if _is_scalar(value) else f"{name}: {text}")
    return Markup(f"{escape(name)}{render_value(figures[name])}")


def embed_image(path: str | os.PathLike) -> str:
    """The file as a ``data:`` URI (base64)."""
    p = Path(path)
    mime = MIME.get(p.suffix.lower(), "application/octet-stream")
    return f"data:{mime};base64," + base64.b64encode(p.read_bytes()).decode("ascii")


def _anchor(claim_id: str) -> str:
    return "claim-" + re.sub(r"[^A-Za-z0-9_-]+", "-", claim_id)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("uatlab.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["sig"] = sig
    return env


def render_html(runs: list[ClaimRun], quick: bool, seconds: float, generated: str) -> str:
    """The self-contained HTML report as text."""
    rows = []
    for r in runs:
        figs = r.result.figures
        images = [
            {"src": embed_image(f), "alt": f"{r.claim.id}: {Path(f).stem.split('__')[-1]}", "name": Path(f).name}
            for f in r.result.figure_files
            if Path(f).suffix.lower() in MIME and Path(f).is_file()
        ]
        measured = [
            (k, Markup(f"<td{' class=num' if isinstance(v, (int, float)) else ''}>{render_value(v)}</td>"))
            for k, v in figs.items()
        ]
        rows.append(
            {
                "id": r.claim.id,
                "anchor": _anchor(r.claim.id),
                "statement": r.claim.statement,
                "paper": r.claim.paper,
                "theorem": r.claim.theorem,
                "verdict": r.result.verdict,
                "seconds": r.seconds,
                "key": key_figure(figs, getattr(r.result, "key_figure", None)),
                "measured": measured,
                "note": r.result.note.strip(),
                "images": images,
            }
        )
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            runs=rows,
            quick=quick,
            seconds=seconds,
            generated=generated,
            python=platform.python_version(),
            passed=sum(r.result.verdict == "pass" for r in runs),
            total=len(runs),
        )
    )


def _rounded(v: Any) -> Any:
    """``v`` with every float rounded to 4 significant figures (for nested values in report.md)."""
    if isinstance(v, float) and math.isfinite(v):
        return float(f"{v:.4g}")
    if isinstance(v, dict):
        return {k: _rounded(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_rounded(x) for x in v]
    return v


def _md_value(v: object) -> str:
    text = short_text(v, digits=4, max_items=12)
    if text is None:
        text = json.dumps(_rounded(to_jsonable(v)))
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
    write_text_atomic(json_path, json.dumps(to_jsonable(payload), indent=2))

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
    write_text_atomic(md_path, "\n".join(md) + "\n")

    html_path = out / "report.html"
    write_text_atomic(html_path, render_html(runs, quick, seconds, stamp))
    return [json_path, md_path, html_path]
