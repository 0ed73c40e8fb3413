"""The error and twin analysis of a model trained by `uatlab.training.train` (paper A, Theorem 2:
twins — same word, same position, other label — are told apart only by the attention value h)."""

from __future__ import annotations

import random

from uatlab.data import from_lists, write_conll
from uatlab.experiments.conll_ceiling import analyse_trained
from uatlab.training.trainer import TrainConfig, train


def test_analyse_trained_counts_the_trainers_errors_and_finds_twins(tmp_path):
    rng = random.Random(3)
    toks = [[f"w{rng.randint(0, 5)}" for _ in range(rng.randint(3, 7))] for _ in range(30)]
    labs = [[rng.choice(["O", "B-PER", "B-LOC"]) for _ in s] for s in toks]
    path = tmp_path / "t.conll"
    write_conll(from_lists(toks, labs, source=str(path)), path)
    cfg = TrainConfig(epochs=3, dim=16, ff_mult=2, lr=1e-2, batch_size=8, warmup_steps=2, embed_std=0.1)
    r = train(from_lists(toks, labs, source=str(path)), cfg, tmp_path / "run", progress=False, with_f1=False)
    res = analyse_trained(str(tmp_path / "run" / "model.safetensors"), str(path))
    assert res["tokens"] == sum(len(s) for s in toks)
    assert res["errors"] == r.history[-1]["train_errors"] > 0  # 3 epochs do not memorize random labels
    # twins computed independently: same (word, position) seen with two different labels
    seen: dict[tuple[str, int], set[str]] = {}
    for s, y in zip(toks, labs, strict=True):
        for k, (w, lab) in enumerate(zip(s, y, strict=True)):
            seen.setdefault((w, k), set()).add(lab)
    twins = sum(
        1
        for s, y in zip(toks, labs, strict=True)
        for k, (w, lab) in enumerate(zip(s, y, strict=True))
        if len(seen[(w, k)] - {lab}) > 0
    )
    assert res["tokens_with_twin"] == twins > 0
    for e in res["error_examples"]:
        assert e["gold"] != e["pred"] and (e["twin_dh"] is None or e["twin_dh"] >= 0)
    assert analyse_trained(str(tmp_path / "run" / "model.safetensors"), str(path), sentences=10)["tokens"] == sum(
        len(s) for s in toks[:10]
    )
