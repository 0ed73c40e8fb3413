"""`benchmarks/next_token.py --trained DIR,DIR`: the trained points merged from several capacity runs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("next_token_bench", ROOT / "benchmarks" / "next_token.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _capacity_run(folder: Path, steps: int, rows: list[tuple[int, int | None]], failed=None) -> Path:
    folder.mkdir()
    table = [
        {"N": N, "trained_params": p, "trained_width": p and p // 33, "trained_steps": p and steps // 2}
        for N, p in rows
    ]
    sweep = {
        str(N): {"trials": {str(w): {"width": w, "params": 33 * w, "accuracy": acc} for w, acc in trials}}
        for N, trials in (failed or {}).items()
    }
    state = {"setup": {"recipe": {"steps": steps}}, "table": table, "sweep": sweep}
    (folder / "next_token_capacity.json").write_text(json.dumps(state))
    return folder


def test_trained_points_take_the_fewest_parameters_reaching_100_percent_per_n(tmp_path):
    a = _capacity_run(tmp_path / "a", 1000, [(100, 3850), (1000, None)])
    b = _capacity_run(tmp_path / "b", 4000, [(100, 5000), (1000, 35002)])
    c = _capacity_run(tmp_path / "c", 20000, [(10000, None)], failed={10000: [(8, 0.9), (16, 0.99)], 1000: [(4, 0.5)]})
    pts = _bench().trained_points([a, b, c])
    assert [(p["N"], p["params"], p["budget_steps"]) for p in pts] == [(100, 3850, 1000), (1000, 35002, 4000)]
    assert pts[0]["folder"] == str(a) and pts[1]["folder"] == str(b)  # where each point came from
    # N = 10⁴ never reached 100 %: the largest finished trial is reported as a failure; N = 10³ is not (it succeeded)
    fails = _bench().trained_failures([a, b, c])
    assert [(f["N"], f["width"], f["accuracy"]) for f in fails] == [(10000, 16, 0.99)]


def test_a_run_stopped_after_its_first_width_contributes_its_finished_trial(tmp_path):
    """The sweep was stopped after width 16 reached 100 % (no table yet): that trial is a trained point."""
    d = tmp_path / "stopped"
    d.mkdir()
    trials = {
        "16": {"width": 16, "params": 528, "accuracy": 1.0, "steps": 700},
        "8": {"width": 8, "params": 264, "accuracy": 0.97},
    }
    state = {"setup": {"recipe": {"steps": 4000}}, "sweep": {"10000": {"trials": trials}}}
    (d / "next_token_capacity.json").write_text(json.dumps(state))
    pts = _bench().trained_points([d])
    assert [(p["N"], p["params"], p["width"], p["steps"], p["budget_steps"]) for p in pts] == [
        (10000, 528, 16, 700, 4000)
    ]
    assert _bench().trained_failures([d]) == []  # N = 10⁴ succeeded: not listed as a failure
