"""Paper B's seq2seq experiment (Hu et al. 2025, Sec. 3.3): training stops by epochs or convergence, never by
the clock unless a wall-time cap is asked for; stored trials are reused only for the same parameters."""

from __future__ import annotations

import json

import pytest

from uatlab.errors import InputError
from uatlab.experiments.paper_b import seq2seq
from uatlab.experiments.paper_b.runner import run_seq2seq
from uatlab.experiments.paper_b.seq2seq import run_seq2seq_trial, seq2seq_trials


def _trained(trials):
    return [t for t in trials if t.params["mode"] in ("attention", "feedforward")]


def test_quick_and_default_scales_have_no_wall_time_cap():
    for scale in ("quick", "default"):
        trials = _trained(seq2seq_trials(scale))
        assert trials and all(t.params["max_seconds"] is None for t in trials)
        assert not any("cap=" in t.id for t in trials)
    capped = _trained(seq2seq_trials("quick", max_seconds=5))
    assert all(t.params["max_seconds"] == 5.0 and t.id.endswith("-cap=5") for t in capped)


class _SlowClock:
    """A clock on which every reading is 100 s after the previous one (a heavily loaded machine)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 100.0
        return self.now


def _tiny(params, **over):
    return {**params, "num_train": 200, "epochs": 3, "patience": 6, **over}


def test_the_same_seed_gives_the_same_result_however_slow_the_machine(monkeypatch):
    params = _tiny(_trained(seq2seq_trials("quick", ("attention",)))[0].params)
    fast = run_seq2seq_trial(params)
    monkeypatch.setattr(seq2seq.time, "perf_counter", _SlowClock())
    slow = run_seq2seq_trial(params)
    assert slow["epochs_run"] == fast["epochs_run"] == 3
    assert slow["test_mse"] == fast["test_mse"] and slow["wall_cap_fired"] is False
    capped = run_seq2seq_trial(dict(params, max_seconds=50.0))
    assert capped["epochs_run"] == 1 and capped["wall_cap_fired"] is True


def test_stored_trial_reused_only_for_the_same_parameters():
    from uatlab.experiments.paper_b.seq2seq import stored_trial_conflict

    params = {"mode": "attention", "lr": 3e-3, "epochs": 30, "max_seconds": None}
    assert stored_trial_conflict({**params, "test_mse": 1.0}, params) is None
    assert stored_trial_conflict({**params, "lr": 1e-2}, params) == "lr: 0.01 → 0.003"
    old = {**params, "max_seconds": 20}
    # an old capped record whose cap stopped training is not the uncapped trial; one whose cap never fired is
    assert "the wall-time cap stopped" in stored_trial_conflict({**old, "converged": False, "epochs_run": 21}, params)
    assert stored_trial_conflict({**old, "converged": True, "epochs_run": 21}, params) is None
    assert stored_trial_conflict({**old, "converged": False, "epochs_run": 30}, params) is None
    assert stored_trial_conflict({**old, "wall_cap_fired": True, "converged": True}, params) is not None


def test_store_with_a_capped_trial_is_refused_before_training(tmp_path):
    trial = _trained(seq2seq_trials("quick", ("attention",)))[0]
    record = {"trial_id": trial.id, **trial.params, "max_seconds": 20, "converged": False, "epochs_run": 21}
    (tmp_path / "trials").mkdir()
    (tmp_path / "trials" / f"{trial.id}.json").write_text(json.dumps(record))
    with pytest.raises(InputError, match=rf"holds trial {trial.id} run with other options \(max_seconds: 20"):
        run_seq2seq("quick", tmp_path, ("attention",), progress=False, n_seeds=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trials"]
