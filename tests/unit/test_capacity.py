"""Capacity sweep: synthetic data, slope fit with CI, bit budgets, and a tiny resumable sweep."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from uatlab.data import from_lists
from uatlab.data.report import bit_budgets, data_report
from uatlab.errors import InputError
from uatlab.experiments.capacity import fit_slope, information_bits, run_capacity, synthetic_random_labels


def test_synthetic_random_labels_are_seeded_and_carry_log2k_bits_per_token():
    a = synthetic_random_labels(10, length=5, vocab=7, labels=4, seed=1)
    b = synthetic_random_labels(10, length=5, vocab=7, labels=4, seed=1)
    assert a.tokens == b.tokens and a.labels == b.labels
    assert a.tokens != synthetic_random_labels(10, length=5, vocab=7, labels=4, seed=2).tokens
    assert len(a) == 10 and a.num_tokens == 50 and set(a.label_set()) <= {"c0", "c1", "c2", "c3"}
    assert information_bits(a, "synthetic", 4)["bits"] == 100.0


def test_fit_slope_recovers_a_power_law_and_its_interval_covers_noise():
    ns = [10, 20, 40, 80, 160]
    exact = fit_slope(ns, [3.0 * n**0.5 for n in ns])
    assert exact["slope"] == pytest.approx(0.5) and exact["ci_high"] - exact["ci_low"] < 1e-9
    rng = np.random.default_rng(0)
    noisy = fit_slope(ns, [3.0 * n**0.7 * math.exp(rng.normal(0, 0.2)) for n in ns])
    assert noisy["ci_low"] < 0.7 < noisy["ci_high"] and noisy["ci_high"] - noisy["ci_low"] > 0.01
    assert fit_slope([1, 2], [1, 2]) is None


def test_bit_budgets_and_data_report_on_a_fixture():
    data = from_lists(
        [["a", "b"], ["a", "b"], ["a", "c"], ["d"]],
        [["O", "B-PER"], ["O", "B-LOC"], ["B-PER", "O"], ["O"]],
        source="fx.conll",
    )
    b = bit_budgets(data)
    # H(tag): counts O 4, B-PER 2, B-LOC 1 over 7 tokens
    h = -sum(c / 7 * math.log2(c / 7) for c in (4, 2, 1))
    assert b["H_tag_bits_per_token"] == pytest.approx(h)
    # H(tag|word): a {O,O,B-PER}, b {B-PER,B-LOC}, c {O}, d {O}
    h_cond = 3 / 7 * -(2 / 3 * math.log2(2 / 3) + 1 / 3 * math.log2(1 / 3)) + 2 / 7 * 1.0
    assert b["H_tag_given_word_bits_per_token"] == pytest.approx(h_cond)
    rep = data_report(data)
    assert rep["duplicate_sequences"] == 1 and rep["conflict_tokens"] == 1
    assert rep["ceiling_accuracy"] == pytest.approx(6 / 7)
    assert rep["conflicts"][0]["token"] == "b" and rep["conflicts"][0]["where"] == ["fx.conll:1", "fx.conll:2"]


def test_tiny_capacity_sweep_writes_results_and_never_recomputes(tmp_path):
    kw = dict(kind="synthetic", ns=(4, 8), grid=(2, 16), max_steps=150, length=4, vocab=6, labels=2, lr=2e-2)
    s = run_capacity(tmp_path, **kw)
    assert [r["N"] for r in s["rows"]] == [4, 8]
    assert any(r["reached"] for r in s["rows"])  # else the figures below would go unchecked
    for r in s["rows"]:
        if r["reached"]:
            assert r["bits"] == r["tokens"] * 1.0
            assert r["bits_per_parameter_non_embedding"] == pytest.approx(r["bits"] / r["parameters_non_embedding"])
    for r in s["rows"]:
        if r["reached"]:  # epochs trained: the trial's last metrics row (evaluated every 25 epochs here, 1 step each)
            tid = f"synthetic-N={r['N']}-d={r['d']}-ff={r['ff_width']}-seed=0"
            rows = (tmp_path / "runs" / tid / "metrics.jsonl").read_text().splitlines()
            assert r["epochs"] == json.loads(rows[-1])["epoch"] and r["epochs"] >= 25 * len(rows) - 24
    _check_trials_csv(tmp_path)
    for f in s["files"]:
        assert (tmp_path / f.split("/")[-1]).is_file()
    trials = sorted(p.name for p in (tmp_path / "trials").iterdir())
    stamps = {p: (tmp_path / "trials" / p).stat().st_mtime_ns for p in trials}
    again = run_capacity(tmp_path, **kw)
    assert again["rows"] == s["rows"]
    assert {p: (tmp_path / "trials" / p).stat().st_mtime_ns for p in trials} == stamps  # nothing recomputed
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert saved["rows"] == json.loads(json.dumps(s["rows"]))
    # trial results as earlier versions wrote them (history rows counted as epochs, no eval_every) are converted
    # when reused, in the summary and in the per-trial table alike
    for p in trials:
        path = tmp_path / "trials" / p
        r = json.loads(path.read_text())
        metrics = tmp_path / "runs" / p.removesuffix(".json") / "metrics.jsonl"
        r["epochs"] = len(metrics.read_text().splitlines())
        del r["eval_every"]
        path.write_text(json.dumps(r))
    old = run_capacity(tmp_path, **kw)
    assert old["rows"] == s["rows"]
    _check_trials_csv(tmp_path)


def _check_trials_csv(folder):
    """capacity_trials.csv gives every trial's epochs trained: the last row of its metrics."""
    with open(folder / "capacity_trials.csv", newline="") as fh:
        trials_csv = list(csv.DictReader(fh))
    assert any(t["reached"] in ("True", "False") for t in trials_csv)
    for t in trials_csv:
        if t["reached"] in ("True", "False"):
            rows = (folder / "runs" / t["trial"] / "metrics.jsonl").read_text().splitlines()
            assert int(t["epochs"]) == json.loads(rows[-1])["epoch"], t


KW = dict(kind="synthetic", ns=(8,), grid=(4,), max_steps=40, length=4, vocab=6, labels=2, lr=2e-2)
TRIAL = "synthetic-N=8-d=4-ff=16-seed=0"  # the one trial of KW


def _interrupt_first_trial(monkeypatch, steps=3):
    """The sweep's first training stops after ``steps`` steps as if Ctrl-C came (checkpoint saved)."""
    import uatlab.experiments.capacity as capacity

    real, calls = capacity.train, []

    def once(*args, **kw):
        calls.append(1)
        return real(*args, **kw, stop_after_steps=steps if len(calls) == 1 else None)

    monkeypatch.setattr(capacity, "train", once)


def test_an_interrupted_capacity_sweep_resumes_its_own_checkpoint(tmp_path, monkeypatch):
    whole = run_capacity(tmp_path / "whole", **KW)
    _interrupt_first_trial(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        run_capacity(tmp_path / "cut", **KW)
    ckpt = tmp_path / "cut" / "runs" / TRIAL / "checkpoint.pt"
    assert ckpt.is_file() and not (tmp_path / "cut" / "trials").exists()
    resumed = run_capacity(tmp_path / "cut", **KW)
    assert resumed["rows"] == whole["rows"]  # resumed to the numbers of an uninterrupted sweep
    assert not ckpt.exists()  # the sweep's own checkpoint: removed once the result is stored


def test_capacity_never_resumes_or_deletes_a_checkpoint_it_did_not_write(tmp_path, monkeypatch):
    _interrupt_first_trial(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        run_capacity(tmp_path / "other", **KW)
    good = (tmp_path / "other" / "runs" / TRIAL / "checkpoint.pt").read_bytes()  # a valid checkpoint, same config
    run_capacity(tmp_path / "new", **(KW | {"ns": (4,)}))  # a store of these options, without the trial N=8
    before = sorted(p.name for p in (tmp_path / "new" / "trials").iterdir())
    for content in (good, b"my own file\n"):
        (tmp_path / "new" / "runs" / TRIAL).mkdir(parents=True, exist_ok=True)
        mine = tmp_path / "new" / "runs" / TRIAL / "checkpoint.pt"
        mine.write_bytes(content)  # copied from another sweep, or a user's file: not this sweep's
        with pytest.raises(InputError, match=f"{mine} exists and is not a file uatlab experiment trial wrote there"):
            run_capacity(tmp_path / "new", **KW)
        assert mine.read_bytes() == content
        assert sorted(p.name for p in (tmp_path / "new" / "trials").iterdir()) == before  # nothing trained
    # and a trial that meets one anyway (placed after the sweep began) fails, keeping the file
    from uatlab.experiments.capacity import capacity_trial

    t = {"kind": "synthetic", "N": 8, "length": 4, "vocab": 6, "labels": 2, "data_seed": 0, "out_dir": str(mine.parent)}
    t["config"] = {"dim": 4, "ff_width": 16, "epochs": 40, "batch_size": 32}
    with pytest.raises(InputError, match="a trial resumes only a checkpoint the sweep wrote for it"):
        capacity_trial(t)
    assert mine.read_bytes() == b"my own file\n"


def test_a_users_runs_folder_is_not_a_trial_store(tmp_path):
    (tmp_path / "runs" / "notes").mkdir(parents=True)
    (tmp_path / "runs" / "notes" / "todo.txt").write_text("mine\n")
    s = run_capacity(tmp_path, **KW)
    assert s["trials"] == 1 and not s["failed"]
    assert (tmp_path / "runs" / "notes" / "todo.txt").read_text() == "mine\n"


def test_a_file_sweep_reads_the_file_once_in_the_parent(tmp_path, monkeypatch):
    """The parent reads the data file once (the count of sequences and the compiled sizes); each trial, run in
    this process here, reads it once more."""
    import uatlab.experiments.capacity as capacity
    from uatlab.data import write_jsonl

    rng = np.random.default_rng(0)
    toks = [[f"w{t}" for t in rng.integers(0, 6, 3)] for _ in range(8)]
    write_jsonl(from_lists(toks, [["O", "B-PER", "O"]] * 8), tmp_path / "d.jsonl")
    real, reads = capacity.read_sequences, []
    monkeypatch.setattr(capacity, "read_sequences", lambda *a, **k: reads.append(a) or real(*a, **k))
    s = run_capacity(tmp_path / "out", kind="conll", data=str(tmp_path / "d.jsonl"), ns=(4, 8), grid=(4,), max_steps=4)
    assert s["trials"] == 2 and s["compiled"]["available"]
    assert len(reads) == 1 + s["trials"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"axis": "dim", "fixed": 65536, "grid": (4, 65536)}, r"ff_width .* got 4294967296 .*grid size 65536"),
        ({"ns": (1,), "max_steps": 10**9, "batch_size": 1, "grid": (4,)}, r"epochs .* max_steps 1000000000"),
        ({"lr": 0.0}, r"lr must be .* got 0\.0$"),  # a field given as it is: no grid explanation
    ],
)
def test_a_trial_out_of_range_is_refused_before_any_trial_runs(tmp_path, monkeypatch, options, message):
    import uatlab.experiments.capacity as capacity

    ran = []
    monkeypatch.setattr(capacity, "run_trials", lambda *a, **k: ran.append(a))
    out = tmp_path / "cap"
    with pytest.raises(InputError, match=message):
        run_capacity(out, **{"ns": (16,), "max_steps": 5, **options})
    assert not ran and not out.exists()


def test_epochs_of_results_from_versions_that_stored_history_rows():
    """Trial results written before ``eval_every`` was stored counted history rows: a trial that reached the ceiling
    stopped at its k-th evaluation (every 25 // batches epochs) or at its final epoch; one that did not ran all."""
    from uatlab.experiments.capacity import epochs_trained, evaluation_interval

    cfg = {"epochs": 1000, "batch_size": 32}
    assert evaluation_interval(50, 32) == 12 and evaluation_interval(400, 32) == 1
    assert epochs_trained({"N": 50, "reached": True, "epochs": 16, "config": cfg}) == 192
    assert epochs_trained({"N": 50, "reached": True, "epochs": 84, "config": cfg}) == 1000  # the final epoch
    assert epochs_trained({"N": 50, "reached": False, "epochs": 84, "config": cfg}) == 1000
    assert epochs_trained({"N": 400, "reached": True, "epochs": 127, "config": cfg}) == 127
    assert epochs_trained({"N": 50, "reached": True, "epochs": 190, "eval_every": 12, "config": cfg}) == 190
    assert epochs_trained({"N": 50, "error": "worker died", "config": cfg}) is None  # a failed trial: no count
