"""`uatlab reproduce --quick` renders in headless Chromium: no console errors, every figure decodes.

Needs Debian's ``chromium`` (CI installs it before running this file). Set ``UATLAB_REPORT_SCREENSHOT``
to a path to keep a screenshot of the page.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from uatlab.cli import main

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]

# appended to a copy of the report: records load errors and the decoded size of every image, in the DOM
CHECKER = """
<script>
window.__errors = [];
window.addEventListener('error', e => window.__errors.push(String(e.message || (e.target && e.target.src || '').slice(0, 60))), true);
window.addEventListener('load', () => {
  // after 'load' every image has been fetched and decoded: a broken one has naturalWidth 0
  const res = Array.from(document.images).map(i => (i.complete ? [i.naturalWidth, i.naturalHeight] : [0, 0]));
  const out = document.createElement('pre');
  out.id = 'uatlab-check';
  out.textContent = JSON.stringify({images: res, errors: window.__errors, sections: document.querySelectorAll('section').length});
  document.body.appendChild(out);
});
</script>
"""


def _chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess:
    cmd = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory):
    """`uatlab reproduce --quick` once for the module: (claims as in claims.json, report folder)."""
    out = tmp_path_factory.mktemp("report")
    code = main(["reproduce", "--quick", "--out", str(out)])
    claims = json.loads((out / "claims.json").read_text())["claims"]
    return code, claims, out


@pytest.mark.timeout(3600)  # the whole `reproduce --quick`: minutes on an idle machine, longer when shared
def test_every_claim_passes_and_has_a_figure(quick_report):
    code, claims, _ = quick_report
    assert code == 0, [c["id"] for c in claims if c["verdict"] != "pass"]
    assert [c["id"] for c in claims if not c["figures"]] == []


@pytest.mark.timeout(3600)
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_report_renders_without_errors_and_every_image_decodes(quick_report, tmp_path):
    _, claims, out = quick_report
    html = (out / "report.html").read_text()
    assert html.count("<section") == len(claims)
    checked = tmp_path / "checked.html"
    checked.write_text(html.replace("</body>", CHECKER + "</body>"))
    run = _chromium(["--virtual-time-budget=20000", "--dump-dom", checked.as_uri()], tmp_path / "profile1")
    console = [line for line in run.stderr.splitlines() if "CONSOLE" in line]
    assert console == []
    found = re.search(r'<pre id="uatlab-check">(.*?)</pre>', run.stdout, re.S)
    assert found, run.stderr[-2000:]
    result = json.loads(found.group(1).replace("&quot;", '"'))
    assert result["errors"] == []
    assert result["sections"] == len(claims)
    assert len(result["images"]) == sum(f.endswith((".png", ".svg")) for c in claims for f in c["figures"]) > 0
    assert all(w > 0 and h > 0 for w, h in result["images"]), result["images"]

    shot = Path(os.environ.get("UATLAB_REPORT_SCREENSHOT", tmp_path / "report.png"))
    _chromium([f"--screenshot={shot}", "--window-size=1400,3000", (out / "report.html").as_uri()], tmp_path / "p2")
    assert shot.is_file() and shot.stat().st_size > 10_000
