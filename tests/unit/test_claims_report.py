"""The reproduce report: one self-contained HTML file from the template, summary first, rounded numbers."""

from __future__ import annotations

import base64
import re
import shutil

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from uatlab.claims.registry import Claim, ClaimResult, ClaimRun  # noqa: E402
from uatlab.report.claims_report import render_value, sig, write_claims_report  # noqa: E402


def _png(path):
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1], [1, 0])
    fig.savefig(path)
    plt.close(fig)
    return path


def _runs(tmp_path):
    (tmp_path / "figures").mkdir()
    fig = _png(tmp_path / "figures" / "x.png")
    ok = ClaimRun(
        Claim("A.one", "Statement <one> & more.", "Kajitsuka & Sato, ICLR 2024", "Theorem 2", check=lambda c: None),
        ClaimResult(
            "pass",
            figures={
                "seconds": 0.35659749699999566,
                "margin": 0.999999998,
                "counts": {"1": 1000, "2": 17},
                "rows": [{"a": 1, "b": 2.123456789}],
                "big": 123456789,
                "tiny": 3.2e-12,
            },
            figure_files=[str(fig)],
            note="x" * 500,
            key_figure="margin",
        ),
        1.23456,
    )
    bad = ClaimRun(
        Claim("B.two/slash", "Another.", "Hu et al. 2025", "Thm 3.4", check=lambda c: None),
        ClaimResult("fail", figures={"error": 0.5}, figure_files=[str(fig)]),
        2.0,
    )
    flat = ClaimRun(
        Claim("B.three", "A flat dict as key figure.", "Hu et al. 2025", "Thm 3.4", check=lambda c: None),
        ClaimResult("pass", figures={"ablation": {"rank 1": 0.123456789, "rank 2": 1234.5678}}, key_figure="ablation"),
        1.0,
    )
    nested = ClaimRun(
        Claim("B.four", "A nested dict as key figure.", "Hu et al. 2025", "Thm 3.4", check=lambda c: None),
        ClaimResult("pass", figures={"sweep": {"heads": {"slope": -0.987654321}}}, key_figure="sweep"),
        1.0,
    )
    return [ok, bad, flat, nested], fig


def test_sig_rounds_to_significant_figures():
    assert sig(0.35659749699999566) == "0.3566"
    assert sig(123456789) == "123,456,789"
    assert sig(3.2e-12) == "3.200e-12"
    assert sig(0.999999998, 4) == "1"
    assert sig(12345678.9) == "1.235e+07"
    assert sig(1234.5678) == "1,235"
    assert sig(250.4, 2) == "250"


def test_nested_values_become_small_tables():
    html = str(render_value({"1": 1000, "2": 0.123456789}))
    assert html.startswith('<table class="nested">') and "1,000" in html and "0.1235" in html
    html = str(render_value([{"a": 1, "b": 2}, {"a": 3}]))
    assert html.count("<tr>") == 3 and "<th>a</th>" in html
    assert str(render_value(list(range(20)))).endswith("… (20 in all)")


def test_report_is_self_contained_with_summary_first_and_anchored_toc(tmp_path):
    runs, fig = _runs(tmp_path)
    paths = write_claims_report(runs, tmp_path / "out", quick=True, seconds=3.0)
    html = paths[-1].read_text()
    # the summary table comes before the first claim section; every TOC link has its anchor
    assert html.index('id="summary"') < html.index("<section")
    links = re.findall(r'<li><a href="#([^"]+)">', html)
    assert len(links) == 4 and all(f'<section id="{a}">' in html for a in links)
    # verdicts coloured by class, the key figure in the summary, numbers rounded, no raw JSON dict
    assert '<span class="verdict pass">' in html and '<span class="verdict fail">' in html
    summary = html[html.index('id="summary"') : html.index("<nav")]
    assert "margin = 1" in summary
    # a flat dict as key figure reads as one line, rounded; a nested one is a small table, rounded
    assert "ablation: rank 1 = 0.123, rank 2 = 1,235" in summary
    assert "{" not in summary and "0.123456789" not in html and "-0.987654321" not in html
    assert '<th>heads</th><td><table class="nested"><tr><th>slope</th><td class=num>-0.9877</td>' in summary
    assert "0.35659749699999566" not in html and "0.3566" in html
    assert '{"1": 1000' not in html and '<table class="nested">' in html
    assert "Statement &lt;one&gt; &amp; more." in html  # escaped
    assert 'class="note"' in html and "pre-wrap" in html
    # figures are embedded: no relative path, the data URI decodes to the file's bytes
    srcs = re.findall(r'<img src="([^"]+)"', html)
    assert len(srcs) == 2 and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert base64.b64decode(srcs[0].split(",", 1)[1]) == fig.read_bytes()
    # moving the file alone keeps the figures
    shutil.rmtree(tmp_path / "figures")
    moved = tmp_path / "elsewhere.html"
    shutil.move(paths[-1], moved)
    assert moved.read_text().count("data:image/png;base64,") == 2


def test_terminal_table_rounds_nested_figures_without_python_reprs() -> None:
    from uatlab.cli.reproduce import _terminal_value

    text = _terminal_value({"two-layer": {"err": 0.003537211247305473, "params": 190250}, "one": {"err": 0.5}})
    assert "{" not in text and "'" not in text, text
    assert "0.00354" in text and "0.003537211" not in text, text
    assert text.startswith("two-layer: ") and "; one: " in text, text
