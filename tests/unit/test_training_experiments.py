"""Depth ablation on a tiny fixture: trials stored and reused, table, figure, partial report."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

from uatlab.data import from_lists, write_jsonl
from uatlab.experiments.depth_ablation import run_depth_ablation


def test_depth_ablation_tiny(tmp_path):
    rng = random.Random(0)
    toks = [[f"w{rng.randint(0, 8)}" for _ in range(rng.randint(2, 6))] for _ in range(12)]
    labs = [[rng.choice(["O", "B-PER", "B-LOC"]) for _ in t] for t in toks]
    data = tmp_path / "d.jsonl"
    write_jsonl(from_lists(toks, labs), data)
    cfg = {"dim": 16, "epochs": 2, "batch_size": 4, "lr": 1e-2, "warmup_steps": 1}
    s = run_depth_ablation(data, tmp_path / "out", layers=(1, 2), config=cfg)
    assert [r["layers"] for r in s["table"]] == [1, 2] and not s["failed"]
    assert s["table"][1]["parameters_non_embedding"] > s["table"][0]["parameters_non_embedding"]
    with (tmp_path / "out" / "depth_ablation.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["layers"], r["epoch"]) for r in rows] == [("1", "1"), ("1", "2"), ("2", "1"), ("2", "2")]
    assert (tmp_path / "out" / "depth_ablation.png").stat().st_size > 0
    again = run_depth_ablation(data, tmp_path / "out", layers=(1, 2), config=cfg)
    assert sorted(again["reused"]) == ["layers=1", "layers=2"] and again["table"] == s["table"]
    # report-only: a depth whose run stopped after one epoch shows up as partial, nothing is trained
    (tmp_path / "out" / "trials" / "layers=2.json").unlink()
    metrics = tmp_path / "out" / "runs" / "layers=2" / "metrics.jsonl"
    metrics.write_text(metrics.read_text().splitlines()[0] + "\n")
    rep = run_depth_ablation(data, tmp_path / "out", layers=(1, 2), config=cfg, report_only=True)
    assert rep["table"][1]["status"] == "partial (1 of 2 epochs)" and rep["table"][1]["epochs_run"] == 1
    assert not (tmp_path / "out" / "trials" / "layers=2.json").exists()
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["table"][1]["epochs_run"] == 1


def test_depth_ablation_resumes_only_checkpoints_it_wrote(tmp_path):
    import shutil

    import pytest

    from uatlab.errors import InputError

    data = tmp_path / "d.jsonl"
    write_jsonl(from_lists([["a", "b"], ["b", "c"], ["c"]], [["O", "B-PER"], ["O", "O"], ["B-LOC"]]), data)
    cfg = {"dim": 8, "epochs": 1, "batch_size": 2, "warmup_steps": 0}
    run_depth_ablation(data, tmp_path / "a", layers=(1,), config=cfg)
    run_depth_ablation(data, tmp_path / "b", layers=(2,), config=cfg)  # a store of the same options
    (tmp_path / "b" / "runs" / "layers=1").mkdir()
    copied = Path(
        shutil.copy(tmp_path / "a" / "runs" / "layers=1" / "checkpoint.pt", tmp_path / "b" / "runs" / "layers=1")
    )
    with pytest.raises(InputError, match=r"layers=1/checkpoint.pt exists and is not a file uatlab experiment trial"):
        run_depth_ablation(data, tmp_path / "b", layers=(1, 2), config=cfg)
    assert not (tmp_path / "b" / "trials" / "layers=1.json").exists()  # another sweep's run is not this one's result
    assert copied.read_bytes() == (tmp_path / "a" / "runs" / "layers=1" / "checkpoint.pt").read_bytes()
