"""The claim registry and the report writer, with throw-away claims registered by the test."""

import json

from uatlab.claims.registry import _REGISTRY, ClaimContext, ClaimResult, register_claim, run_claim
from uatlab.report.claims_report import write_claims_report


def test_checks_run_errors_are_contained_and_reported(tmp_path):
    @register_claim(id="test.ok", statement="1+1=2", paper="arithmetic", theorem="T0")
    def ok(ctx):
        value = 1 + 1
        return ClaimResult("pass" if value == 2 else "fail", figures={"value": value})

    @register_claim(id="test.broken", statement="raises", paper="none", theorem="T1")
    def broken(ctx):
        raise ZeroDivisionError("boom")

    try:
        ctx = ClaimContext(quick=True, out_dir=tmp_path)
        runs = [run_claim(_REGISTRY["test.ok"], ctx), run_claim(_REGISTRY["test.broken"], ctx)]
        assert runs[0].result.verdict == "pass" and runs[0].result.figures == {"value": 2}
        assert runs[1].result.verdict == "error" and "ZeroDivisionError: boom" in runs[1].result.note
        paths = write_claims_report(runs, tmp_path, quick=True, seconds=0.5)
        data = json.loads(paths[0].read_text())
        assert [c["id"] for c in data["claims"]] == ["test.ok", "test.broken"]
        assert {"id", "verdict", "seconds", "figures"} <= set(data["claims"][0])
        assert "test.broken" in paths[1].read_text() and "<html" not in paths[1].read_text()
        assert "ZeroDivisionError" in paths[2].read_text()
    finally:
        _REGISTRY.pop("test.ok", None)
        _REGISTRY.pop("test.broken", None)
