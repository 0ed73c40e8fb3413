"""`benchmarks/compile.py --quick` runs in CI: every case compiles, certifies, and out of core changes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "compile.py"


@pytest.mark.timeout(1500)  # about a minute on an idle 2-core machine; several times that when it is shared
def test_compile_benchmark_quick(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--cases", "synthetic", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=1400,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    # every timed process read cached bytecode, written once under the run's own folder (never the checkout)
    bytecode = doc["machine"]["bytecode"]
    assert bytecode["pycache_prefix"].endswith("pycache") and isinstance(bytecode["dont_write_bytecode_was_set"], bool)
    assert str(BENCH.parents[1]) not in bytecode["pycache_prefix"]
    assert not Path(bytecode["pycache_prefix"]).parent.exists()  # the run's own folder is gone with it
    rows = {r["case"]: r for r in doc["cases"]}
    whole, chunked = rows["synthetic-N2000-f64"], rows["synthetic-N2000-f64-chunked"]
    for r in rows.values():
        assert "error" not in r, r
        assert r["certified"] is True and r["certified_tokens"] == r["ceiling_tokens"] == r["correct_tokens"]
        assert r["peak_rss_mb"] > 0 and r["wall_seconds"] > 0 and r["cpu_seconds"] > 0
        assert r["threads"]["threads"] >= 1 and r["threads"]["blas"]
    assert whole["buckets"] == 1 and chunked["buckets"] == 8
    for key in (
        "params_non_embedding",
        "ff_width",
        "min_certified_margin",
        "max_abs_weight",
        "distinct_contexts",
        "model_hash",
        "certificate_digest",
    ):
        assert whole[key] == chunked[key], key
    # every stage has a measured bound and a ratio; stage CPU adds up to the process CPU
    for stage in ("startup", "read + encode", "attention (h per token)", "group contexts per word", "certify", "save"):
        assert whole["bound_seconds"][stage] > 0, stage
        assert whole["ratio"][stage] == whole["stage_seconds"][stage] / whole["bound_seconds"][stage]
    assert abs(whole["total_stage_cpu_seconds"] - whole["cpu_seconds"]) <= 0.05 * whole["cpu_seconds"] + 0.1
    assert whole["bound_inputs"]["ff_pairs"] >= whole["tokens"]  # at least one candidate unit per token
    # the certify bound counts PyTorch's spot check: the tokens the run's certificate checked, each costing the
    # model's non-embedding matrix entries in multiply-adds, at the measured BLAS rate
    inputs = whole["bound_inputs"]
    assert inputs["spot_check_tokens"] == whole["torch_spot_check"]["tokens"] > 0
    assert 0 < inputs["spot_check_multiply_adds_per_token"] <= whole["params_total"]
    assert inputs["spot_check_gflops"] == inputs["blas_gflops"]  # a float64 model: the float64 rate
    spot = (
        2 * inputs["spot_check_tokens"] * inputs["spot_check_multiply_adds_per_token"] / (inputs["blas_gflops"] * 1e9)
    )
    assert inputs["certify_parts"]["spot_check"] == pytest.approx(spot, rel=1e-12)
    assert whole["bound_seconds"]["certify"] == pytest.approx(sum(inputs["certify_parts"].values()), rel=1e-12)
    assert "ratio" in proc.stdout and "figures written to" in proc.stdout


@pytest.mark.parametrize("how", ["default exists", "out is a folder", "no such folder"])
def test_benchmark_refuses_an_output_it_would_replace_or_cannot_write_before_it_runs(tmp_path, how):
    earlier = tmp_path / "benchmark-compile.json"
    earlier.write_text('{"earlier": "figures"}')
    args = {
        "default exists": [],
        "out is a folder": ["--out", str(tmp_path)],
        "no such folder": ["--out", str(tmp_path / "missing" / "b.json")],
    }[how]
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--cases", "synthetic", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1
    assert earlier.read_text() == '{"earlier": "figures"}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["benchmark-compile.json"]
