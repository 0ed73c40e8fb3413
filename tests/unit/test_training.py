"""Trainer: schedule, batching, entity F1, memorization, exact resumption, and every bad input."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import torch

from uatlab.data import from_lists
from uatlab.errors import InputError
from uatlab.models import save_model
from uatlab.training.batching import collate, encode, epoch_batches, fit_encoding
from uatlab.training.checkpoint import CheckpointError
from uatlab.training.metrics import entity_f1
from uatlab.training.trainer import TrainConfig, TrainingError, epochs_to_targets, learning_rate, train

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG"]


def tiny_ner(n_seq: int = 40, seed: int = 0):
    """Random IOB2-ish sentences over a small vocabulary; the same word gets labels by context."""
    rng = random.Random(seed)
    toks, labs = [], []
    for _ in range(n_seq):
        n = rng.randint(2, 9)
        t = [f"w{rng.randint(0, 14)}" for _ in range(n)]
        y = []
        for k in range(n):
            lab = rng.choice(LABELS)
            if lab.startswith("I-") and (k == 0 or y[-1][2:] != lab[2:]):
                lab = "B-" + lab[2:]
            y.append(lab)
        toks.append(t)
        labs.append(y)
    return from_lists(toks, labs, source="tiny.conll")


SMALL = dict(dim=32, ff_mult=4, lr=1e-2, batch_size=8, warmup_steps=5, embed_std=0.1)


def test_learning_rate_warmup_then_cosine_to_floor():
    cfg = TrainConfig(lr=1.0, warmup_steps=10, min_lr_ratio=0.1, schedule="cosine")
    lrs = [learning_rate(s, 110, cfg) for s in range(110)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:], strict=False))  # non-increasing after warmup
    assert learning_rate(110, 110, cfg) == pytest.approx(0.1)
    assert learning_rate(60, 110, cfg) == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi * 0.5)))
    const = TrainConfig(lr=0.5, warmup_steps=0, schedule="constant")
    assert {learning_rate(s, 100, const) for s in range(100)} == {0.5}


def test_epoch_batches_cover_everything_once_bucketed_and_deterministic():
    lengths = np.array([random.Random(i).randint(1, 50) for i in range(203)])
    b1 = epoch_batches(lengths, 16, seed=3, epoch=5)
    assert sorted(np.concatenate(b1).tolist()) == list(range(203))
    assert all(len(b) <= 16 for b in b1)
    assert [b.tolist() for b in b1] == [b.tolist() for b in epoch_batches(lengths, 16, 3, 5)]
    assert [b.tolist() for b in b1] != [b.tolist() for b in epoch_batches(lengths, 16, 3, 6)]
    # bucketing: padding is far below what random batches would need
    pad = sum(len(b) * lengths[b].max() - lengths[b].sum() for b in b1)
    rand = np.random.default_rng(0).permutation(203)
    pad_random = sum(len(c) * lengths[c].max() - lengths[c].sum() for c in np.array_split(rand, len(b1)))
    assert pad < pad_random / 4


def test_collate_pads_and_masks():
    data = from_lists([["a", "b", "c"], ["a"]], [["O", "B-PER", "O"], ["O"]])
    enc = encode(data, fit_encoding(data))
    b = collate(enc, [0, 1])
    assert b.inputs.shape == (2, 3) and b.mask.tolist() == [[True, True, True], [True, False, False]]
    assert b.targets[1, 1:].tolist() == [-100, -100]


def test_entity_f1_counts_whole_entities():
    # gold entities: PER(0-1), LOC(3), MISC(5, an I- start counts as an entity); predicted: PER(0-1), ORG(3),
    # MISC(5-6) -> one exact match of three each: precision = recall = 1/3
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "I-MISC", "O"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"], ["O", "I-MISC", "I-MISC"]]
    assert entity_f1(gold, pred) == pytest.approx(1 / 3)
    assert entity_f1(gold, gold) == 1.0
    assert entity_f1([["0", "1"]], [["0", "0"]]) is None  # not IOB labels: no entity F1


def test_unknown_label_at_evaluation_is_named():
    train_data = from_lists([["a", "b"]], [["O", "B-PER"]], source="train.conll")
    valid = from_lists([["a", "b"]], [["O", "B-XYZ"]], source="valid.conll")
    with pytest.raises(InputError, match=r"valid\.conll:1: label 'B-XYZ' \(sequence 0, position 1\)"):
        encode(valid, fit_encoding(train_data), role="validation")


def test_memorizes_tiny_data_and_writes_files(tmp_path):
    data = tiny_ner(20)
    cfg = TrainConfig(epochs=60, **{**SMALL, "lr": 2e-2})
    r = train(data, cfg, tmp_path / "run", progress=False, stop_at_ceiling=True)
    assert r.status == "ceiling"
    assert r.history[-1]["train_errors"] <= r.data["conflict_tokens"]
    assert r.epochs_to["ceiling"] == r.epochs
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [x["epoch"] for x in rows] == list(range(1, r.epochs + 1))

    saved = (tmp_path / "run" / "model.safetensors").read_bytes()
    again = train(data, cfg, tmp_path / "run", progress=False, stop_at_ceiling=True, resume=True)
    assert again.status == "ceiling" and again.epochs == r.epochs and again.history == r.history  # nothing trained
    assert (tmp_path / "run" / "model.safetensors").read_bytes() == saved  # the model file kept, not rewritten
    assert (tmp_path / "run" / "metrics.csv").read_text().startswith("epoch,")
    assert (tmp_path / "run" / "model.safetensors").is_file()
    s = r.summary()
    assert {"epochs", "train_accuracy", "history", "epochs_to", "seconds_per_epoch"} <= set(s)
    # accuracy comes from a full pass: recompute it from the saved model
    from uatlab.models.io import load

    model = load(tmp_path / "run" / "model.safetensors")
    assert model.encoding.unknown_token == "<unk>" and model.encoding.id_to_token[0] == "<unk>"
    enc = encode(data, model.encoding)
    b = collate(enc, range(len(enc)))
    with torch.no_grad():
        pred = model(b.inputs, attend_mask=b.mask).argmax(-1)
    assert int(((pred == b.targets) & b.mask).sum()) == data.num_tokens - r.history[-1]["train_errors"]
    # a checkpoint from inside an epoch is not a stopped run's: the rest of the epoch is trained, then evaluated
    from uatlab.training.checkpoint import load_checkpoint, save_checkpoint

    ckpt = tmp_path / "run" / "checkpoint.pt"
    state = {k: v for k, v in load_checkpoint(ckpt).items() if k != "format"}
    save_checkpoint({**state, "epoch": r.epochs - 1, "batch_in_epoch": 1, "history": r.history[:-1]}, ckpt)
    mid = train(data, cfg, tmp_path / "run", progress=False, stop_at_ceiling=True, resume=True)
    assert mid.status == "ceiling" and mid.epochs == r.epochs and len(mid.history) == len(r.history)
    assert mid.history[-1]["seconds_train"] != r.history[-1]["seconds_train"]  # the last epoch was run again
    # other labels for the same sequences (in memory: no file hash to compare): evaluated again, not at the
    # ceiling there, so training goes on
    labels = [list(ys) for ys in data.labels]
    y = labels[-1][-1]
    labels[-1][-1] = next(o for o in labels[0] if o != y)  # a label seen before: the same label vocabulary
    assert sum(row.count(y) for row in labels) > 0  # and the old one still occurs
    flipped = from_lists(data.tokens, labels, source="tiny.conll")
    more = train(flipped, cfg, tmp_path / "run", progress=False, stop_at_ceiling=True, resume=True)
    assert more.epochs > r.epochs and len(more.history) > len(r.history)


def test_epochs_counts_epochs_trained_when_evaluated_every_few_epochs(tmp_path):
    """With eval_every > 1 the history has a row per evaluated epoch (and the last); ``epochs`` is the number of
    epochs trained, not of rows."""
    data = tiny_ner(12, seed=4)
    r = train(data, TrainConfig(epochs=7, **SMALL), tmp_path / "run", progress=False, eval_every=3)
    assert r.status == "completed" and [row["epoch"] for row in r.history] == [3, 6, 7]
    assert r.epochs == 7 and r.summary()["epochs"] == 7
    stopped = train(
        data, TrainConfig(epochs=7, **SMALL), tmp_path / "stop", progress=False, eval_every=3, stop_after_steps=9
    )  # 2 batches an epoch: stops in epoch 5, after 4 completed
    assert stopped.status == "interrupted" and stopped.epochs == 4 and [row["epoch"] for row in stopped.history] == [3]
    early = train(data, TrainConfig(epochs=7, **SMALL), tmp_path / "early", progress=False, stop_after_steps=1)
    assert early.history == [] and "metrics_csv" not in early.files  # no row yet: no metrics file is named
    assert not (tmp_path / "early" / "metrics.csv").exists() and (tmp_path / "early" / "checkpoint.pt").is_file()
    # checkpoints every 4 epochs, stopped in epoch 7: metrics.jsonl holds the summary's rows, not the last checkpoint's
    late = train(
        data,
        TrainConfig(epochs=9, **SMALL),
        tmp_path / "late",
        progress=False,
        checkpoint_every=4,
        stop_after_steps=13,
    )
    rows = [json.loads(x)["epoch"] for x in (tmp_path / "late" / "metrics.jsonl").read_text().splitlines()]
    assert late.status == "interrupted" and rows == [r["epoch"] for r in late.history] == list(range(1, 7))
    assert json.loads((tmp_path / "late" / "summary.json").read_text())["epochs"] == 6


def test_resume_keeps_the_runs_evaluation_interval(tmp_path):
    """The checkpoint records eval_every: a resume with another interval is refused (the history would mix both),
    the same interval resumes, and a history missing one of its evaluated epochs is refused naming them."""
    from uatlab.training.checkpoint import load_checkpoint, save_checkpoint

    data = tiny_ner(12, seed=4)
    cfg = TrainConfig(epochs=7, **SMALL)
    part = train(data, cfg, tmp_path / "run", progress=False, eval_every=3, stop_after_steps=13)  # in epoch 7
    assert part.status == "interrupted" and part.epochs == 6 and [r["epoch"] for r in part.history] == [3, 6]
    ckpt = tmp_path / "run" / "checkpoint.pt"
    assert load_checkpoint(ckpt)["eval_every"] == 3
    with pytest.raises(CheckpointError, match="evaluated every 3 epochs; this run evaluates every 1"):
        train(data, cfg, tmp_path / "run", progress=False, resume=True)
    state = {k: v for k, v in load_checkpoint(ckpt).items() if k != "format"}
    save_checkpoint({**state, "history": state["history"][1:]}, ckpt)  # the row of epoch 3 dropped
    with pytest.raises(CheckpointError, match="rows for epochs 3, 6"):
        train(data, cfg, tmp_path / "run", progress=False, resume=True, eval_every=3)
    # a checkpoint of an earlier version (no eval_every recorded): the refusal names the interval its rows fit
    save_checkpoint({k: v for k, v in state.items() if k != "eval_every"}, ckpt)
    with pytest.raises(CheckpointError, match=r"rows for epochs 3, 6.*every 3 epochs.*resume with eval_every=3"):
        train(data, cfg, tmp_path / "run", progress=False, resume=True)
    save_checkpoint(state, ckpt)
    done = train(data, cfg, tmp_path / "run", progress=False, resume=True, eval_every=3)
    assert done.status == "completed" and done.epochs == 7 and [r["epoch"] for r in done.history] == [3, 6, 7]
    # the finished run's checkpoint (its last epoch evaluated, though not a multiple of 3) resumes to nothing
    again = train(data, cfg, tmp_path / "run", progress=False, resume=True, eval_every=3)
    assert again.status == "completed" and again.history == done.history


def test_interrupted_mid_epoch_resumes_to_identical_numbers(tmp_path):
    data = tiny_ner(30, seed=2)
    cfg = TrainConfig(epochs=4, **SMALL)
    full = train(data, cfg, tmp_path / "full", progress=False)
    part = train(data, cfg, tmp_path / "part", progress=False, stop_after_steps=6)  # epoch 2, batch 2 of 4
    assert part.status == "interrupted" and part.epochs == 1
    done = train(data, cfg, tmp_path / "part", progress=False, resume=True)
    assert done.status == "completed"
    strip = [{k: v for k, v in row.items() if not k.startswith("seconds")} for row in full.history]
    assert [{k: v for k, v in row.items() if not k.startswith("seconds")} for row in done.history] == strip
    from uatlab.models import load_model

    a, _ = load_model(tmp_path / "full" / "model.safetensors")
    b, _ = load_model(tmp_path / "part" / "model.safetensors")
    for (k, v), w in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(v, w), k


def test_bad_checkpoints_are_clear_errors(tmp_path):
    data = tiny_ner(12)
    cfg = TrainConfig(epochs=1, **SMALL)
    train(data, cfg, tmp_path / "run", progress=False)
    with pytest.raises(CheckpointError, match="already exists"):
        train(data, cfg, tmp_path / "run", progress=False)
    other = TrainConfig(epochs=1, **{**SMALL, "dim": 16})
    with pytest.raises(CheckpointError, match=r"different run[\s\S]*dim: checkpoint has 32, this run asks for 16"):
        train(data, other, tmp_path / "run", progress=False, resume=True)
    ckpt = tmp_path / "run" / "checkpoint.pt"
    ckpt.write_bytes(ckpt.read_bytes()[: ckpt.stat().st_size // 2])  # truncated
    with pytest.raises(CheckpointError, match="unreadable"):
        train(data, cfg, tmp_path / "run", progress=False, resume=True)
    with pytest.raises(CheckpointError, match="does not exist"):
        train(data, cfg, tmp_path / "none", progress=False, resume=True)


def test_a_checkpoint_with_a_non_finite_weight_is_refused_naming_the_tensor(tmp_path):
    from uatlab.training.checkpoint import load_checkpoint, save_checkpoint

    data = tiny_ner(12)
    cfg = TrainConfig(epochs=2, **SMALL)
    part = train(data, cfg, tmp_path / "run", progress=False, stop_after_steps=1)
    assert part.status == "interrupted"
    ckpt = tmp_path / "run" / "checkpoint.pt"
    state = load_checkpoint(ckpt)
    name = sorted(state["model"])[1]
    state["model"][name].view(-1)[0] = math.nan
    state["model"][name].view(-1)[-1] = math.inf
    save_checkpoint({k: v for k, v in state.items() if k != "format"}, ckpt)
    with pytest.raises(CheckpointError, match=rf"checkpoint.pt: tensor {name} has 2 non-finite entries \(NaN"):
        train(data, cfg, tmp_path / "run", progress=False, resume=True)


def test_nan_loss_stops_naming_the_batch_and_keeps_the_checkpoint(tmp_path):
    data = tiny_ner(16)
    run = tmp_path / "run"
    cfg = TrainConfig(epochs=1, **SMALL)
    first = train(data, cfg, run, progress=False)
    # a model whose readout holds the largest finite weight: its logits overflow to ±inf, the first batch's
    # loss is NaN (a NaN weight itself is refused when the file is loaded)
    from uatlab.models import load_model

    model, extra = load_model(run / "model.safetensors")
    with torch.no_grad():
        model.readout.weight[:, :] = torch.finfo(model.readout.weight.dtype).max
    save_model(model, tmp_path / "huge.safetensors", extra=extra)
    good = (run / "checkpoint.pt").read_bytes()
    bad = TrainConfig(epochs=2, init=str(tmp_path / "huge.safetensors"), **SMALL)
    with pytest.raises(
        TrainingError, match=r"loss became nan at epoch 1, batch 1/2 \(step 1, first sentence tiny"
    ) as e:
        train(data, bad, tmp_path / "nanrun", progress=False)
    assert "--" not in str(e.value) and "learning rate (lr)" in str(e.value)  # the library names fields, not flags
    from uatlab.cli.train import in_flags

    assert "Lower --lr or keep --clip on." in in_flags(str(e.value))  # what `uatlab train` says instead
    assert (run / "checkpoint.pt").read_bytes() == good and first.status == "completed"


def test_init_from_a_saved_model_continues_from_its_weights(tmp_path):
    data = tiny_ner(20)
    trained = train(data, TrainConfig(epochs=15, **SMALL), tmp_path / "a", progress=False)
    cont = TrainConfig(epochs=1, init=str(tmp_path / "a" / "model.safetensors"), **{**SMALL, "lr": 1e-5})
    r = train(data, cont, tmp_path / "b", progress=False)
    assert r.history[0]["train_accuracy"] >= trained.history[-1]["train_accuracy"] - 0.02
    fresh = train(data, TrainConfig(epochs=1, **{**SMALL, "lr": 1e-5}), tmp_path / "c", progress=False)
    assert r.history[0]["train_accuracy"] > fresh.history[0]["train_accuracy"]
    unknown = from_lists([["zzz"]], [["O"]], source="new.conll")
    with pytest.raises(InputError, match="token 'zzz' is not in the vocabulary of the init model"):
        train(unknown, cont, tmp_path / "d", progress=False)


def test_epochs_to_targets():
    hist = [
        {"epoch": e, "train_accuracy": a, "train_errors": n} for e, a, n in [(1, 0.9, 10), (2, 0.99, 1), (3, 1.0, 0)]
    ]
    assert epochs_to_targets(hist, (0.95, 0.999, 1.1), ceiling_errors=1) == {
        "0.95": 2,
        "0.999": 3,
        "1.1": None,
        "ceiling": 2,
    }


def test_init_from_a_compiled_memorizer(tmp_path):
    from uatlab.constructions.paper_a import cor1_memorizer as memorizer

    data = tiny_ner(20)
    res = memorizer.compile_dataset(data, run_certificate=False)
    path = memorizer.save_compiled(res.model, tmp_path / "compiled.safetensors")
    valid = from_lists([["never-seen-word", data.tokens[0][0]]], [[data.labels[0][0], data.labels[0][0]]])
    said: list[str] = []
    r = train(
        data,
        TrainConfig(epochs=1, init=str(path), lr=1e-7, warmup_steps=1),
        tmp_path / "run",
        progress=False,
        valid_data=valid,
        log=said.append,
    )
    assert r.model_config["positional"] == "given" and r.model_config["rank"] == 1
    assert r.history[0]["train_errors"] <= r.data["conflict_tokens"]  # the compiled model starts at the ceiling
    # a compiled model has no <unk>: unknown validation words are counted and the reading is said out loud
    assert r.data["valid_unknown_tokens"] == 1
    assert any("has no <unk> token; 1 validation tokens" in m for m in said)


def test_time_budget_checkpoints_and_resume_finishes(tmp_path):
    data = tiny_ner(12)
    cfg = TrainConfig(epochs=2, **SMALL)
    r = train(data, cfg, tmp_path / "run", progress=False, max_minutes=1e-9)
    assert r.status == "time budget" and r.epochs == 0 and (tmp_path / "run" / "checkpoint.pt").is_file()
    assert not (tmp_path / "run" / "model.safetensors").exists()
    done = train(data, cfg, tmp_path / "run", progress=False, resume=True)
    assert done.status == "completed" and done.epochs == 2


def test_a_budget_spent_before_the_first_step_still_makes_progress_on_every_resume(tmp_path):
    from uatlab.training.checkpoint import load_checkpoint

    data = tiny_ner(12)
    cfg = TrainConfig(epochs=2, **SMALL)
    steps = []
    for i in range(3):  # a budget of 0 minutes: already spent on start-up, every time
        r = train(data, cfg, tmp_path / "run", progress=False, resume=i > 0, max_minutes=1e-9)
        assert r.status == "time budget"
        steps.append(load_checkpoint(tmp_path / "run" / "checkpoint.pt")["step"])
    assert steps == [1, 2, 3]  # one optimizer step per run, never stuck at the same one


def test_resume_warns_when_the_thread_count_differs(tmp_path):
    data = tiny_ner(12)
    cfg = TrainConfig(epochs=2, **SMALL)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        train(data, cfg, tmp_path / "run", progress=False, max_minutes=1e-9)
        torch.set_num_threads(2)
        said: list[str] = []
        done = train(data, cfg, tmp_path / "run", progress=False, resume=True, log=said.append)
    finally:
        torch.set_num_threads(before)
    assert done.status == "completed"
    warning = next(m for m in said if "written with 1 torch threads" in m)
    assert "call torch.set_num_threads(1)" in warning and "--" not in warning  # the library names no CLI flag
    from uatlab.cli.train import in_flags

    assert "pass --threads 1 for a bit-identical" in in_flags(warning)


def test_focus_loss_is_the_mean_margin_shortfall_over_hard_tokens_only():
    from uatlab.training.batching import IGNORE
    from uatlab.training.trainer import focus_loss

    z = torch.tensor([[2.0, 0.0, 0.0], [0.0, 1.0, 0.5], [0.0, 0.0, 3.0]])
    y = torch.tensor([0, 1, IGNORE])
    # margins: 2.0 and 0.5 (the padded row is ignored)
    assert float(focus_loss(z, y, 1.0)) == pytest.approx(0.5)  # only the second token is hard
    assert float(focus_loss(z, y, 3.0)) == pytest.approx((1.0 + 2.5) / 2)
    assert float(focus_loss(z, y, 0.25)) == 0.0  # nobody hard
    # one hard token among many easy ones gets the whole weight (cross-entropy would give it 1/T)
    T = 500
    big = torch.zeros(T, 3)
    big[:, 0] = 5.0
    tgt = torch.zeros(T, dtype=torch.long)
    tgt[7] = 1
    big.requires_grad_(True)
    focus_loss(big, tgt, 1.0).backward()
    g = big.grad
    assert float(g[7, 1]) == pytest.approx(-1.0) and float(g[7, 0]) == pytest.approx(1.0)
    assert float(g.abs().sum()) == pytest.approx(2.0)
    big.grad = None
    torch.nn.functional.cross_entropy(big, tgt).backward()
    assert abs(float(big.grad[7, 1])) < 2.0 / T


def test_focus_and_float64_change_training_and_are_recorded(tmp_path):
    data = tiny_ner(12)
    base = train(data, TrainConfig(epochs=2, **SMALL), tmp_path / "a", progress=False)
    foc = train(data, TrainConfig(epochs=2, focus=2.0, focus_margin=0.5, **SMALL), tmp_path / "b", progress=False)
    f64 = train(data, TrainConfig(epochs=1, dtype="float64", **SMALL), tmp_path / "c", progress=False)
    assert foc.config["focus"] == 2.0 and foc.config["focus_margin"] == 0.5
    assert foc.history[-1]["train_loss"] != base.history[-1]["train_loss"]
    from uatlab.models.io import load

    assert load(tmp_path / "c" / "model.safetensors").embed.weight.dtype == torch.float64
    assert f64.model_config["dtype"] == "float64"
    for bad in (dict(focus=-1.0), dict(focus_margin=0.0), dict(dtype="float16")):
        with pytest.raises(InputError):
            TrainConfig(**bad)


def test_replay_deals_hard_sequences_round_robin_and_deterministically():
    from uatlab.training.batching import with_replay

    lengths = np.array([random.Random(i).randint(1, 20) for i in range(50)])
    batches = epoch_batches(lengths, 8, seed=1, epoch=2)
    hard = [3, 17, 41]
    out = with_replay(batches, hard, 2, seed=1, epoch=2)
    assert all(np.array_equal(a, b) for a, b in zip(out, with_replay(batches, hard, 2, seed=1, epoch=2), strict=True))
    for a, b in zip(batches, out, strict=True):
        assert np.array_equal(b[: len(a)], a)  # ordinary sequences first, unchanged
        extra = b[len(a) :]
        assert set(extra.tolist()) <= set(hard) and len(set(extra.tolist())) == len(extra) <= 2
        assert not set(extra.tolist()) & set(a.tolist())
    counts = {h: sum(int(h in b[len(a) :]) for a, b in zip(batches, out, strict=True)) for h in hard}
    # 7 batches x 2 slots dealt over 3 sequences: 4 or 5 each, minus the one batch already holding it
    assert len(batches) == 7 and sum(counts.values()) >= 14 - 3 and min(counts.values()) >= 3
    assert with_replay(batches, [], 2, seed=1, epoch=2) is batches
    assert with_replay(batches, hard, 0, seed=1, epoch=2) is batches


def test_replay_trains_on_the_wrong_sequences_and_resumes_exactly(tmp_path):
    data = tiny_ner(24, seed=5)
    cfg = TrainConfig(epochs=4, replay=3, **SMALL)
    full = train(data, cfg, tmp_path / "full", progress=False)
    part = train(data, cfg, tmp_path / "part", progress=False, stop_after_steps=5)
    assert part.status == "interrupted"
    again = train(data, cfg, tmp_path / "part", progress=False, resume=True)
    drop = ("seconds_train", "seconds_eval")
    assert [{k: v for k, v in r.items() if k not in drop} for r in again.history] == [
        {k: v for k, v in r.items() if k not in drop} for r in full.history
    ]
    plain = train(data, TrainConfig(epochs=4, **SMALL), tmp_path / "plain", progress=False)
    assert plain.history[0] | {"seconds_train": 0, "seconds_eval": 0} == full.history[0] | {
        "seconds_train": 0,
        "seconds_eval": 0,
    }  # nothing to replay before the first full pass
    assert plain.history[-1]["train_loss"] != full.history[-1]["train_loss"]


def test_resume_refuses_a_checkpoint_for_another_token_vocabulary(tmp_path):
    """Same source, sequence and token counts and label set, other words: every token id would mean another word."""
    data = tiny_ner(12)
    renamed = from_lists([[t.replace("w", "v") for t in s] for s in data.tokens], data.labels, source=data.source)
    cfg = TrainConfig(epochs=1, **SMALL)
    train(data, cfg, tmp_path / "run", progress=False, with_f1=False)
    kept = (tmp_path / "run" / "checkpoint.pt").read_bytes()
    with pytest.raises(CheckpointError, match=r"different run[\s\S]*tokens vocabulary: checkpoint has \d+ \('w"):
        train(renamed, cfg, tmp_path / "run", progress=False, with_f1=False, resume=True)
    assert (tmp_path / "run" / "checkpoint.pt").read_bytes() == kept
    train(data, cfg, tmp_path / "run", progress=False, with_f1=False, resume=True)  # its own data resumes
