"""``uatlab approx …`` end to end: JSON rows, slopes, CSV and figure, clear errors."""

from __future__ import annotations

import json
import math

import pytest

from uatlab.cli import main


def _run_json(capsys, args):
    code = main(args + ["--json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


@pytest.mark.parametrize(
    "args,size_key",
    [
        (["approx", "truncated-linear", "--anchors", "11,21,41", "--points", "801"], "anchors"),
        (["approx", "heads", "--heads", "1,2,4", "--points", "801"], "heads"),
        (
            [
                "approx",
                "relu-network",
                "--nets",
                "1",
                "--anchors",
                "17,33",
                "--n",
                "3",
                "--d",
                "2",
                "--hidden",
                "2",
                "--samples",
                "8",
            ],
            "anchors",
        ),
        (["approx", "universal", "--grids", "3,4", "--samples", "200"], "grid"),
        (["approx", "gd-in-context", "--contexts", "8", "--eps", "0.01,0.001", "--d", "3", "--steps", "1"], "eps"),
    ],
)
def test_commands_print_rows_and_slopes(capsys, tmp_path, args, size_key):
    data = _run_json(capsys, args + ["--out", str(tmp_path)])
    assert data["rows"] and all(
        size_key in r and "sup_error" in r and "bound" in r and "params" in r for r in data["rows"]
    )
    assert all(r["sup_error"] <= r["bound"] for r in data["rows"])  # each row meets its proven bound
    assert data["slope"] and all(math.isfinite(v) for v in data["slope"].values())
    assert (tmp_path / data["csv"].split("/")[-1]).exists() and (tmp_path / data["figure"].split("/")[-1]).exists()


def test_truncated_linear_slope_and_bound(capsys, tmp_path):
    data = _run_json(
        capsys, ["approx", "truncated-linear", "--anchors", "11,21,41,81", "--points", "2001", "--out", str(tmp_path)]
    )
    assert -1.1 <= data["slope"]["sup_error_vs_anchors"] <= -0.9
    assert all(r["sup_error"] <= r["bound"] for r in data["rows"])


def test_bad_input_is_one_line_error(capsys, tmp_path):
    code = main(["approx", "truncated-linear", "--anchors", "x,y", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "--anchors" in err and "Traceback" not in err
    code = main(["approx", "truncated-linear", "--dtype", "float32", "--anchors", "81", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "float32" in err


def test_relu_network_two_layers_is_smaller_and_bounded(capsys, tmp_path):
    common = [
        "approx",
        "relu-network",
        "--nets",
        "1",
        "--anchors",
        "17,33,65",
        "--n",
        "4",
        "--d",
        "2",
        "--hidden",
        "3",
        "--samples",
        "16",
        "--out",
        str(tmp_path),
    ]
    one = _run_json(capsys, common)
    two = _run_json(capsys, common + ["--layers", "2"])
    assert all(r["layers"] == 2 and r["sup_error"] <= r["bound"] for r in two["rows"])
    assert -1.3 <= two["slope"]["mean_sup_error_vs_anchors"] <= -0.7
    assert max(r["params"] for r in two["rows"]) < min(r["params"] for r in one["rows"])
    assert any("anchor tokens appended" in item for item in two["summary"]["nonstandard"])
    code = main(common + ["--layers", "3"])
    err = capsys.readouterr().err
    assert code == 2 and "layers must be 1 or 2" in err


def test_relu_network_standard_forms(capsys, tmp_path):
    small = ["approx", "relu-network", "--nets", "1", "--n", "4", "--d", "2", "--hidden", "3", "--out", str(tmp_path)]
    two = _run_json(capsys, small + ["--layers", "2", "--standard", "--anchors", "17,33", "--samples", "8"])
    assert all(r["standard"] and r["layers"] == 2 and r["sup_error"] <= r["bound"] for r in two["rows"])
    assert two["summary"]["nonstandard"] == [] and two["name"] == "relu-network-standard"
    one = _run_json(capsys, small + ["--layers", "1", "--standard", "--pairs", "40"])
    (row,) = one["rows"]
    assert row["lower_bound"] > 0 and row["output_range_upper_bound"] > 0
    assert row["relative_lower_bound"] == row["lower_bound"] / row["output_range_upper_bound"]
    # the bound for every one-layer standard form (keys reading the data too; n = 4, d = 2)
    assert row["any_layer_lower_bound"] > 0
    assert row["relative_any_layer_lower_bound"] == row["any_layer_lower_bound"] / row["output_range_upper_bound"]
    assert (tmp_path / "relu-network-one-standard-layer.csv").exists()
    assert (tmp_path / "relu-network-one-standard-layer.png").exists()


def test_incontext_command_rows_and_errors(capsys, tmp_path):
    args = ["approx", "incontext", "--task", "relu-features", "--steps", "5,40", "--train-steps", "20"]
    data = _run_json(capsys, args + ["--test-tasks", "8", "--context", "8", "--out", str(tmp_path)])
    models = [r["model"] for r in data["rows"]]
    assert models[:3] == ["construction k=5", "construction k=40", "trained attention-only"]
    cons = data["rows"][:2]
    assert cons[1]["rel_sup"] < cons[0]["rel_sup"]
    assert (tmp_path / "incontext.csv").is_file()
    assert main(["approx", "incontext", "--task", "lasso", "--out", str(tmp_path)]) == 2
    assert "lasso" in capsys.readouterr().err
    out = tmp_path / "ridge"
    for flags, named in (
        (["--anchors", "5"], "--anchors has"),
        (["--anchors", "5", "--heads", "2"], "--anchors, --heads"),
    ):
        assert main(["approx", "incontext", "--quick", "--task", "ridge", *flags, "--out", str(out)]) == 2
        assert f"{named}" in capsys.readouterr().err and not out.exists()  # refused before any work, not ignored


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--standard", "--layers", "1", "--anchors", "9"], "--anchors has no effect with --layers 1 --standard"),
        (
            ["--standard", "--layers", "1", "--samples", "9", "--anchors", "9"],
            "--anchors, --samples have no effect with --layers 1 --standard",
        ),
        (["--pairs", "9"], "--pairs has no effect with compilation"),
    ],
)
def test_relu_network_refuses_options_it_would_ignore(capsys, tmp_path, extra, message):
    out = tmp_path / "out"
    code = main(["approx", "relu-network", "--nets", "1", "--n", "3", "--d", "2", "--out", str(out), *extra])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and f"error: {message}" in err, err
    assert not out.exists()  # refused before anything was written


@pytest.mark.parametrize(
    "command,sweep",
    [
        ("truncated-linear", "sweep_truncated_linear"),
        ("heads", "sweep_heads"),
        ("relu-network", "sweep_relu_network"),
        ("universal", "sweep_universal"),
        ("gd-in-context", "sweep_gd"),
    ],
)
def test_a_failing_sweep_restores_torch_thread_count(tmp_path, monkeypatch, command, sweep):
    """Each sweep runs torch on one thread; the caller's count comes back even when the sweep raises."""
    import torch

    from uatlab.experiments import approximation_sweeps as sw

    seen = []

    def failing(*args, **kwargs):
        seen.append(torch.get_num_threads())
        raise RuntimeError("sweep failed")

    monkeypatch.setattr(sw, sweep, failing)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(RuntimeError, match="sweep failed"):
            main(["approx", command, "--quick", "--out", str(tmp_path / "out"), "--json"])
        assert seen == [1]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
