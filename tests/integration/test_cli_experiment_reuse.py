"""``uatlab experiment ...``: stored trials are reused only for the options they were run with; per-trial
options are checked before training; an all-failed sweep is an error; one job per --out; nothing stored to
report is an error; options a capacity task does not read are refused."""

from __future__ import annotations

import json
import random

import pytest

from uatlab.cli import main
from uatlab.data import from_lists, write_jsonl
from uatlab.io_safety import OutputLock


def _data(path, seed=0, sentences=10):
    rng = random.Random(seed)
    toks = [[f"w{rng.randint(0, 8)}" for _ in range(rng.randint(2, 5))] for _ in range(sentences)]
    labs = [[rng.choice(["O", "B-PER"]) for _ in t] for t in toks]
    write_jsonl(from_lists(toks, labs), path)
    return path


@pytest.fixture
def files(tmp_path):
    return _data(tmp_path / "a.jsonl"), _data(tmp_path / "b.jsonl", seed=1, sentences=6)


def run(capsys, argv):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


DEPTH = ["--layers", "1", "--epochs", "1", "--batch-size", "4", "--json"]


def test_depth_ablation_reuses_only_same_options_and_data(tmp_path, capsys, files):
    a, b = files
    out = str(tmp_path / "da")
    code, text, _ = run(capsys, ["experiment", "depth-ablation", str(a), "--out", out, "--dim", "8", *DEPTH])
    assert code == 0 and json.loads(text)["reused"] == []
    code, text, _ = run(capsys, ["experiment", "depth-ablation", str(a), "--out", out, "--dim", "8", *DEPTH])
    assert code == 0 and json.loads(text)["reused"] == ["layers=1"]  # same options: reused
    code, text, err = run(capsys, ["experiment", "depth-ablation", str(a), "--out", out, "--dim", "16", *DEPTH])
    assert code == 2 and text == ""
    assert f"error: {out} holds trials for other options (config.dim: 8 → 16); use another --out" in err
    code, text, err = run(capsys, ["experiment", "depth-ablation", str(b), "--out", out, "--dim", "8", *DEPTH])
    assert code == 2 and "holds trials for other options (data.sha256: " in err and "Traceback" not in err
    # a folder written before options were recorded is refused, never silently reused
    (tmp_path / "da" / "sweep_options.json").unlink()
    code, _, err = run(capsys, ["experiment", "depth-ablation", str(a), "--out", out, "--dim", "8", *DEPTH])
    assert code == 2 and "holds trials for other options (data.sha256: not recorded → " in err


def test_rank_ablation_refuses_other_data_and_impossible_rank(tmp_path, capsys, files):
    a, b = files
    out = tmp_path / "ra"
    argv = ["--ranks", "1", "--epochs", "1", "--dim", "8", "--batch-size", "4", "--json"]
    code, _, _ = run(capsys, ["experiment", "rank-ablation", str(a), "--out", str(out), *argv])
    assert code == 0
    code, _, err = run(capsys, ["experiment", "rank-ablation", str(b), "--out", str(out), *argv])
    assert code == 2 and "holds trials for other options (data.sha256: " in err
    code, _, err = run(capsys, ["experiment", "rank-ablation", str(a), "--out", str(out), *argv[:-1], "--lr", "0.1"])
    assert code == 2 and "(config.lr: 0.003 → 0.1)" in err
    # rank above the dimension: refused before any training, nothing written
    bad = tmp_path / "rab"
    code, text, err = run(
        capsys, ["experiment", "rank-ablation", str(a), "--out", str(bad), "--ranks", "1000", "--dim", "8"]
    )
    assert code == 2 and "rank 1000 exceeds --dim 8" in err and "Traceback" not in err and text == ""
    assert not bad.exists()


@pytest.mark.filterwarnings("ignore:No artists with labels")  # an empty legend on older versions
def test_capacity_token_refuses_other_synthetic_data(tmp_path, capsys):
    out = str(tmp_path / "cap")
    argv = ["experiment", "capacity", "--out", out, "--ns", "4", "--max-steps", "4", "--grid", "2", "--json"]
    code, _, _ = run(capsys, [*argv, "--length", "3", "--vocab", "6"])
    assert code == 0
    code, _, err = run(capsys, [*argv, "--length", "3", "--vocab", "50"])
    assert code == 2 and "holds trials for other options (data.vocab: 6 → 50)" in err
    code, _, err = run(capsys, [*argv, "--length", "3", "--vocab", "6", "--lr", "0.05"])
    assert code == 2 and "(config.lr: 0.01 → 0.05)" in err


def test_every_trial_failed_is_not_success(tmp_path, capsys, files, monkeypatch):
    import uatlab.experiments.depth_ablation as da

    def broken(params):
        raise RuntimeError("simulated trial crash")

    monkeypatch.setattr(da, "depth_trial", broken)
    code, text, err = run(capsys, ["experiment", "depth-ablation", str(files[0]), "--out", str(tmp_path / "x"), *DEPTH])
    assert code == 1 and json.loads(text)["table"] == []
    assert "error: every trial failed (1); layers=1: RuntimeError: simulated trial crash" in err


def test_second_job_on_the_same_out_is_refused(tmp_path, capsys, files):
    out = tmp_path / "busy"
    with OutputLock(out):  # another job holds the folder
        code, _, err = run(capsys, ["experiment", "depth-ablation", str(files[0]), "--out", str(out), *DEPTH])
        assert code == 2 and "another uatlab job" in err and f"is writing {out}" in err
        code, _, err = run(capsys, ["experiment", "rank-ablation", str(files[0]), "--out", str(out), "--ranks", "1"])
        assert code == 2 and "another uatlab job" in err
    assert not (out / "trials").exists()


def test_report_or_stored_only_on_an_empty_folder_is_an_error(tmp_path, capsys, files):
    none = tmp_path / "none"
    code, _, err = run(capsys, ["experiment", "depth-ablation", str(files[0]), "--out", str(none), "--report-only"])
    assert code == 2 and "holds no finished or partial trials to report" in err
    assert not none.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run(capsys, ["experiment", "attention-heads", "--quick", "--stored-only", "--out", str(empty)])
    assert code == 2 and "holds no stored trials" in err
    assert list(empty.iterdir()) == []  # no empty CSV or summary written


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["attention-heads", "--quick", "--stored-only", "--workers", "4"],
            "--workers has no effect with --stored-only",
        ),
        (["attention-seq2seq", "--quick", "--stored-only", "--executor", "ray"], "--executor has no effect with"),
        (["attention-heatmap", "--quick", "--stored-only", "--workers", "2"], "--workers has no effect with"),
        (["depth-ablation", "DATA", "--report-only", "--workers", "2"], "--workers has no effect with --report-only"),
        (["depth-ablation", "DATA", "--report-only", "--threads", "2"], "--threads has no effect with --report-only"),
    ],
)
def test_runner_options_are_refused_when_nothing_runs(tmp_path, capsys, files, argv, says):
    """--stored-only and --report-only run nothing: --executor, --workers (and --threads) are refused, not ignored,
    before anything is written."""
    out = tmp_path / "o"
    argv = [str(files[0]) if a == "DATA" else a for a in argv]
    code, _, err = run(capsys, ["experiment", *argv, "--out", str(out)])
    assert code == 2 and err.startswith(f"error: {says}"), err
    assert not out.exists()


def test_stored_only_with_other_options_than_the_stored_trials_says_so(tmp_path, capsys):
    out = tmp_path / "ah"
    argv = ["experiment", "attention-heads", "--quick", "--mode", "parity", "--out", str(out)]
    assert run(capsys, argv)[0] == 0
    code, _, err = run(
        capsys, ["experiment", "attention-heads", "--mode", "parity", "--stored-only", "--out", str(out)]
    )
    stored = len(list((out / "trials").glob("*.json")))
    assert stored > 0  # the first run stored its trials: "none of" them match is the claim checked
    assert code == 2 and f"holds {stored} stored trial(s), none of" in err and "e.g. --quick" in err
    assert run(capsys, [*argv, "--stored-only"])[0] == 0  # with the options they were run with


def test_capacity_options_the_task_does_not_read_are_refused(tmp_path, capsys):
    from uatlab.experiments.next_token_training import Recipe

    out = str(tmp_path / "c")
    base = ["experiment", "capacity", "--task", "next-token", "--out", out, "--ns", "10"]
    for flag, value in (("--batch-size", "7"), ("--length", "3"), ("--vocab", "5"), ("--kind", "conll")):
        code, _, err = run(capsys, [*base, flag, value])
        assert code == 2 and f"error: {flag} has no effect with --task next-token" in err
    code, _, err = run(capsys, ["experiment", "capacity", "--out", out, "--ns", "4", "--blocks"])
    assert code == 2 and "error: --blocks has no effect with --task token" in err
    # the next-token search doubles from the first width to the largest: a middle value or another order is refused
    for grid in ("4,5,16", "16,4"):
        code, _, err = run(capsys, [*base, "--grid", grid])
        assert code == 2 and f"error: --grid {grid} with --task next-token: give the first and the largest" in err
    assert not (tmp_path / "c").exists()
    code, text, _ = run(capsys, ["experiment", "capacity", "--help"])
    help_text = " ".join(text.split())
    assert f"next-token {Recipe().lr:g}" in help_text and "[default: 0.01]" not in help_text


def test_next_token_capacity_names_the_differing_option(tmp_path, capsys):
    argv = ["experiment", "capacity", "--task", "next-token", "--out", str(tmp_path / "nt"), "--ns", "10"]
    argv += ["--max-steps", "30", "--grid", "4,8", "--json"]
    code, _, _ = run(capsys, argv)
    assert code == 0
    code, _, err = run(capsys, [*argv, "--lr", "0.1"])
    assert code == 2 and "holds a run for other options (recipe.lr: 0.005 → 0.1); use another --out" in err


def test_local_workers_above_the_cap_refused_before_any_file(tmp_path, capsys, files):
    """Every experiment with --workers refuses more local threads than 4 per available core in all (workers ×
    threads per trial) with one error line, before its --out exists; the same numbers pass with Ray, which
    places its workers itself (checked up to the point where Ray would be needed)."""
    from uatlab.threads import max_threads

    a, _ = files
    cap = max_threads()
    cases = [
        ["experiment", "depth-ablation", str(a), *DEPTH, "--workers", str(cap + 1)],
        ["experiment", "depth-ablation", str(a), *DEPTH, "--workers", "2", "--threads", str(cap // 2 + 1)],
        ["experiment", "capacity", "--quick", "--workers", str(cap + 1)],
        ["experiment", "attention-heads", "--quick", "--workers", str(cap + 1)],
        ["experiment", "attention-heatmap", "--quick", "--workers", str(cap + 1)],
        ["experiment", "attention-seq2seq", "--quick", "--workers", str(cap + 1)],
    ]
    for i, argv in enumerate(cases):
        out = tmp_path / f"out{i}"
        code, _, err = run(capsys, [*argv, "--out", str(out)])
        assert code == 2, (argv, err)
        assert "error: --workers" in err and f"at most {cap} local worker processes" in err, err
        assert not out.exists(), argv


@pytest.mark.parametrize(
    ("command", "module", "trial"),
    [
        (["attention-heads", "--mode", "parity"], "uatlab.experiments.paper_b.sweeps", "run_truncated_trial"),
        (["attention-heatmap"], "uatlab.experiments.paper_b.heatmap", "run_heatmap_trial"),
        (["attention-seq2seq", "--mode", "parity"], "uatlab.experiments.paper_b.seq2seq", "run_seq2seq_trial"),
    ],
)
@pytest.mark.parametrize("json_out", [False, True])
def test_paper_b_sweep_whose_every_trial_failed_exits_1(
    tmp_path, capsys, monkeypatch, command, module, trial, json_out
):
    import importlib

    def broken(params):
        raise RuntimeError("simulated trial crash")

    monkeypatch.setattr(importlib.import_module(module), trial, broken)
    argv = ["experiment", *command, "--quick", "--out", str(tmp_path / "x"), *(["--json"] if json_out else [])]
    code, _, err = run(capsys, argv)
    assert code == 1 and "error: every trial failed (" in err and "RuntimeError: simulated trial crash" in err


@pytest.mark.parametrize(
    ("argv", "blocked"),
    [
        (["experiment", "attention-heads", "--quick", "--mode", "parity"], "trials"),
        (["experiment", "capacity", "--ns", "4", "--max-steps", "4", "--grid", "2", "--length", "3"], "runs"),
        (["experiment", "capacity", "--ns", "4", "--max-steps", "4", "--grid", "2", "--length", "3"], "trials"),
        (["reproduce", "--quick", "--only", "A.thm2.causal-exact"], "figures"),
    ],
)
def test_a_file_where_a_run_makes_its_folder_is_refused_before_any_work(tmp_path, capsys, argv, blocked):
    out = tmp_path / "x"
    out.mkdir()
    (out / blocked).write_text("the user's notes\n")
    code, text, err = run(capsys, [*argv, "--out", str(out)])
    assert code == 2 and text == ""
    assert f"{out / blocked} is a file, where this run writes a folder of its files" in err
    assert sorted(p.name for p in out.iterdir()) == [blocked]  # nothing run, nothing written
    assert (out / blocked).read_text() == "the user's notes\n"


@pytest.mark.parametrize(
    ("argv", "run_dir"),
    [
        (["depth-ablation", "DATA", "--dim", "8", *DEPTH], "runs/layers=1"),
        (["rank-ablation", "DATA", "--ranks", "1", "--epochs", "1", "--dim", "8", "--json"], "runs/rank=1"),
        (
            ["capacity", "--ns", "4", "--grid", "2", "--max-steps", "1", "--json"],
            "runs/synthetic-N=4-d=2-ff=8-seed=0",
        ),
    ],
)
def test_a_users_file_in_a_trials_folder_stops_the_sweep_before_it_starts(tmp_path, capsys, files, argv, run_dir):
    """A file of the user's where a trial's training writes its model: exit 2 naming it before any work, the file
    kept and nothing else written (the trial failed after the sweep began, and the summary, CSV and figure were
    written with every trial failed)."""
    out = tmp_path / "o"
    mine = out / run_dir / "model.safetensors"
    mine.parent.mkdir(parents=True)
    mine.write_text("mine\n")
    argv = [str(files[0]) if a == "DATA" else a for a in argv]
    code, _, err = run(capsys, ["experiment", *argv, "--out", str(out)])
    assert code == 2 and err.startswith(f"error: --out {mine.parent}: {mine} exists and is not a file uatlab"), err
    assert mine.read_text() == "mine\n"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        "runs",
        run_dir,
        f"{run_dir}/model.safetensors",
    ]


def test_a_finished_trials_edited_run_file_does_not_stop_a_rerun(tmp_path, capsys, files):
    """A finished trial is reused, never trained again: a file of its run folder the user edited since (a metrics
    CSV opened and saved) is left alone and does not stop the sweep."""
    out = tmp_path / "d"
    argv = ["experiment", "depth-ablation", str(files[0]), "--out", str(out), "--dim", "8", *DEPTH]
    assert run(capsys, argv)[0] == 0
    metrics = out / "runs" / "layers=1" / "metrics.csv"
    metrics.write_text(metrics.read_text() + " \n")
    edited = metrics.read_bytes()
    code, text, err = run(capsys, argv)
    assert code == 0, err
    assert json.loads(text)["reused"] == ["layers=1"] and metrics.read_bytes() == edited


def test_a_temporary_file_a_killed_run_left_is_named_and_kept(tmp_path, capsys, files):
    """SIGKILL between a figure's temporary file and its rename leaves `.NAME.<hex>.tmp` in --out: the next run
    names it (it said nothing) and leaves it, as compile and synth do."""
    out = tmp_path / "d"
    out.mkdir()
    stale = out / ".depth_ablation.png.339be90d.tmp"
    stale.write_bytes(b"half a figure")
    argv = ["experiment", "depth-ablation", str(files[0]), "--out", str(out), "--dim", "8", *DEPTH]
    code, _, err = run(capsys, argv)
    assert code == 0, err
    assert "1 temporary file" in err and stale.name in err, err
    assert stale.read_bytes() == b"half a figure"
