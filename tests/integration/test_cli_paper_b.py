"""The paper-B experiment commands through the real CLI entry point."""

from __future__ import annotations

import csv
import json

from uatlab.cli import main


def test_heatmap_quick_writes_csv_figure_and_one_json_object(tmp_path, capsys):
    out = tmp_path / "heatmap"
    code = main(["experiment", "attention-heatmap", "--quick", "--out", str(out), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    data = json.loads(captured.out)  # exactly one JSON object on stdout
    assert data["experiment"] == "attention-heatmap" and data["finished"] == 2
    with (out / "attention-heatmap.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert {"run_id", "seed", "git_rev", "n_params", "wall_seconds", "test_mse", "test_sup", "cf_sup"} <= set(rows[0])
    assert all(float(r["cf_sup"]) < float(r["test_sup"]) for r in rows)  # the construction beats short training
    assert (out / "attention-heatmap.png").stat().st_size > 10_000
    # resumable: a second run reuses the stored trials and reports the same figures
    assert main(["experiment", "attention-heatmap", "--quick", "--out", str(out), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["rows"] == data["rows"]


def test_user_errors_exit_2_without_traceback(tmp_path, capsys):
    assert main(["experiment", "attention-heads", "--quick", "--full", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "--quick and --full" in err and "Traceback" not in err
    assert main(["experiment", "attention-range", "--quick", "--mode", "sideways", "--out", str(tmp_path)]) == 2
    assert "--mode must be one of" in capsys.readouterr().err
