"""Trained next-token capacity: the last-position forward pass, the width search and the resumable sweep."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from uatlab.experiments import next_token_training as ntt
from uatlab.experiments.next_token import random_next_token
from uatlab.training.checkpoint import CheckpointError


def test_last_position_logits_equal_the_full_forward_pass():
    tokens, _ = random_next_token(20, 9, 4, 5, seed=3)
    X = torch.from_numpy(tokens)
    for rank in (None, 1):
        model = ntt.build_model(4, 5, 9, 7, ntt.Recipe(d=6, rank=rank))
        with torch.no_grad():
            assert torch.allclose(ntt.last_logits(model, X), model(X)[:, -1], atol=1e-6)


def test_width_search_doubles_then_bisects_to_the_threshold(monkeypatch):
    calls = []

    def fake_train(tokens, labels, V, C, width, recipe, layers=1, **kw):
        calls.append(width)
        return None, {"width": width, "accuracy": 1.0 if width >= 37 else 0.5, "params": 10 * width}

    monkeypatch.setattr(ntt, "train_next_token", fake_train)
    res = ntt.smallest_width(np.zeros((4, 2)), np.zeros(4), 2, 2, ntt.Recipe(), start=4, resolution=0.125)
    assert calls[:5] == [4, 8, 16, 32, 64]  # doubling until the first success
    assert 37 <= res["width"] <= 37 * 1.125 and res["params"] == 10 * res["width"]
    assert len(calls) == len(set(calls))  # no width trained twice
    # resuming with the finished trials trains nothing new
    calls.clear()
    done = {t["width"]: t for t in res["trials"]}
    again = ntt.smallest_width(np.zeros((4, 2)), np.zeros(4), 2, 2, ntt.Recipe(), start=4, done=done)
    assert calls == [] and again["width"] == res["width"]


def test_training_is_deterministic_and_reports_its_own_accuracy():
    tokens, labels = random_next_token(24, 6, 3, 4, seed=1)
    recipe = ntt.Recipe(d=8, steps=60, check_every=20, lr=1e-2)
    m1, r1 = ntt.train_next_token(tokens, labels, 3, 4, 16, recipe)
    m2, r2 = ntt.train_next_token(tokens, labels, 3, 4, 16, recipe)
    assert r1["steps"] == r2["steps"] and r1["accuracy"] == r2["accuracy"]
    for a, b in zip(m1.parameters(), m2.parameters(), strict=True):
        assert torch.equal(a, b)
    with torch.no_grad():
        pred = m1(torch.from_numpy(tokens))[:, -1].argmax(-1).numpy()
    assert r1["accuracy"] == float((pred == labels).mean())


def test_capacity_command_writes_table_and_slopes_and_resumes(tmp_path, monkeypatch):
    from uatlab.cli.next_token import capacity_next_token_command

    state = capacity_next_token_command("12,24", False, False, tmp_path, True, steps=40, seed=0, max_width=8)
    table = state["table"]
    assert [r["N"] for r in table] == [12, 24] and all(r["compiled_certified"] for r in table)
    saved = json.loads((tmp_path / "next_token_capacity.json").read_text())
    assert saved["table"] == table and saved["slope_compiled"] is not None
    for r in table:  # the reported width is a trial that reached 100 %; anything smaller that was tried did not
        trials = saved["sweep"][str(r["N"])]["trials"]
        if r["trained_width"] is not None:
            assert trials[str(r["trained_width"])]["accuracy"] == 1.0
            assert all(t["accuracy"] < 1.0 for t in trials.values() if t["width"] < r["trained_width"])

    def no_training(*a, **k):
        raise AssertionError("a finished sweep was trained again")

    monkeypatch.setattr(ntt, "train_next_token", no_training)
    again = capacity_next_token_command("12,24", False, False, tmp_path, True, steps=40, seed=0, max_width=8)
    assert again["table"] == table


def test_capacity_command_grid_sets_the_first_and_largest_width(tmp_path, monkeypatch):
    from uatlab.cli.next_token import capacity_next_token_command

    tried: list[int] = []

    def fake_train(tokens, labels, V, C, width, recipe, layers=1, **kw):
        tried.append(width)
        acc = 1.0 if width >= 40 else 0.5
        return None, {
            "width": width,
            "accuracy": acc,
            "params": 10 * width,
            "steps": 1,
            "epochs": 1,
            "cpu_seconds": 0.0,
        }

    monkeypatch.setattr(ntt, "train_next_token", fake_train)
    state = capacity_next_token_command("12", False, False, tmp_path, True, steps=5, widths=[32, 64])
    assert tried[:2] == [32, 64] and all(32 < w < 64 for w in tried[2:])  # doubling from 32, then bisection
    assert state["setup"]["start_width"] == 32 and state["setup"]["max_width"] == 64
    assert 40 <= state["table"][0]["trained_width"] <= 48
    tried.clear()
    state = capacity_next_token_command("12", False, False, tmp_path / "b", True, steps=5, widths=[8, 16])
    assert tried == [8, 16] and state["table"][0]["trained_width"] is None  # 32 > the largest width: not tried


def test_an_interrupted_trial_resumes_from_its_checkpoint_to_the_same_numbers(tmp_path):
    tokens, labels = random_next_token(40, 6, 3, 5, seed=2)
    recipe = ntt.Recipe(d=8, steps=60, check_every=10, lr=1e-3, batch=16)
    m_full, r_full = ntt.train_next_token(tokens, labels, 3, 5, 16, recipe)
    assert r_full["steps"] == 60 and r_full["accuracy"] < 1.0  # the whole budget runs: the resume path is used
    assert [e["step"] for e in r_full["history"]] == [10, 20, 30, 40, 50, 60]  # the loss curve, one entry per check
    last = r_full["history"][-1]
    assert (last["accuracy"], last["loss"]) == (r_full["accuracy"], r_full["loss"])
    assert last["wrong"] == round((1 - r_full["accuracy"]) * 40)

    class Stop(Exception):
        pass

    def stop_at_50(entry):
        if entry["step"] == 50:
            raise Stop

    ck = tmp_path / "trial.pt"
    with pytest.raises(Stop):
        ntt.train_next_token(tokens, labels, 3, 5, 16, recipe, checkpoint=ck, checkpoint_every=20, on_check=stop_at_50)
    assert ck.is_file()  # written at step 40, the last multiple of 20 before the interruption
    m_res, r_res = ntt.train_next_token(tokens, labels, 3, 5, 16, recipe, checkpoint=ck, checkpoint_every=20)
    assert r_res["resumed_from"] == 40 and r_full["resumed_from"] is None
    assert (r_res["steps"], r_res["accuracy"], r_res["loss"]) == (r_full["steps"], r_full["accuracy"], r_full["loss"])
    drop = ("cpu_seconds",)
    assert [{k: v for k, v in e.items() if k not in drop} for e in r_res["history"]] == [
        {k: v for k, v in e.items() if k not in drop} for e in r_full["history"]
    ]
    for a, b in zip(m_full.parameters(), m_res.parameters(), strict=True):
        assert torch.equal(a, b)
    # the checkpoint belongs to width 16 on these data: another width is refused, naming the field
    with pytest.raises(CheckpointError, match="width"):
        ntt.train_next_token(tokens, labels, 3, 5, 32, recipe, checkpoint=ck, checkpoint_every=20)
    with pytest.raises(ValueError, match="multiple of check_every"):
        ntt.train_next_token(tokens, labels, 3, 5, 16, recipe, checkpoint=ck, checkpoint_every=15)


def test_accuracy_in_small_chunks_equals_the_whole_forward_pass(monkeypatch):
    tokens, labels = random_next_token(37, 6, 3, 4, seed=5)
    X, Y = torch.from_numpy(tokens), torch.from_numpy(labels)
    model = ntt.build_model(3, 4, 6, 16, ntt.Recipe(d=8))
    with torch.no_grad():
        z = model(X)[:, -1]
    want_acc = int((z.argmax(-1) == Y).sum()) / len(Y)
    want_loss = float(torch.nn.functional.cross_entropy(z, Y))
    monkeypatch.setattr(ntt, "EVAL_FLOATS", 16 * 5)  # 5 rows per chunk at width 16: 8 chunks, the last one short
    acc, loss = ntt.accuracy(model, X, Y)
    assert acc == want_acc and abs(loss - want_loss) < 1e-5
