"""Claims about trained rank-1 Transformers (paper A, Section 5).

The data is CoNLL-2003 train when it is given (`ClaimContext.conll_train`: ``--data-dir`` or
``$UATLAB_CONLL_DIR``), otherwise synthetic random labels (the note says which).
Quick mode trains on a small subset; the full mode on a larger one.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from uatlab.claims.registry import NO_CONLL, ClaimContext, ClaimResult, register_claim
from uatlab.threads import single_torch_thread


def conll_or_synthetic(ctx: ClaimContext, sentences: int, seed: int):
    """The first ``sentences`` of CoNLL-2003 train (`ClaimContext.conll_train`) if given, else random labels."""
    from uatlab.data import read_conll
    from uatlab.experiments.capacity import synthetic_random_labels

    path = ctx.conll_train()
    if path is not None:
        data = read_conll(path)
        return data.subset(range(min(sentences, len(data)))), f"first {min(sentences, len(data))} sentences of {path}"
    data = synthetic_random_labels(max(sentences // 4, 4), length=8, vocab=16, labels=2, seed=seed)
    return data, f"synthetic random labels ({NO_CONLL})"


def rank1_config(ctx: ClaimContext, layers: int, epochs: int):
    """The training setup of paper A's Section 5 checks: ``layers`` blocks of one rank-1 head (head_dim 1),
    AdamW with warm-up, the small width and step sizes in quick mode; a `uatlab.training.trainer.TrainConfig`."""
    from uatlab.training.trainer import TrainConfig

    return TrainConfig(
        layers=layers,
        rank=1,
        heads=1,
        head_dim=1,
        dim=32 if ctx.quick else 128,
        ff_mult=4,
        lr=1e-2 if ctx.quick else 3e-3,
        batch_size=8 if ctx.quick else 32,
        warmup_steps=10 if ctx.quick else 100,
        embed_std=0.1,
        epochs=epochs,
        seed=ctx.seed,
    )


def train_to_ceiling(data, cfg):
    """`uatlab.training.trainer.train` on one torch thread into a temporary folder, stopping at the ceiling.

    A run stopped by SIGINT or SIGTERM (the trainer checkpoints and returns) raises KeyboardInterrupt: its partial
    figures are not the claim's, so no verdict may be drawn from them (the checkpoint is in a temporary folder)."""
    from uatlab.training.trainer import train

    with single_torch_thread(), tempfile.TemporaryDirectory() as tmp:
        result = train(data, cfg, tmp, progress=False, with_f1=False, stop_at_ceiling=True, targets=())
    return result.unless_interrupted()


@register_claim(
    id="A.sec5.rank1-trained-memorization",
    statement=(
        "A one-layer, single-head, rank-1 softmax Transformer trained by gradient descent memorizes "
        "its training sentences up to the data set's ceiling, beyond the context-free per-word baseline."
    ),
    paper="Kajitsuka & Sato, ICLR 2024",
    theorem="Section 5 (experiment), Corollary 1 (memorization)",
    reads_conll="always",
)
def check_trained_memorization(ctx: ClaimContext) -> ClaimResult:
    from uatlab.data import baselines

    data, source = conll_or_synthetic(ctx, 40 if ctx.quick else 1000, ctx.seed)
    base = baselines(data)
    cfg = rank1_config(ctx, layers=1, epochs=80 if ctx.quick else 100)
    r = train_to_ceiling(data, cfg)
    acc = r.train_accuracy
    reached = r.status == "ceiling"
    beats = acc > base["per_word_majority"] or base["per_word_majority"] >= base["ceiling"]
    return ClaimResult(
        verdict="pass" if (reached and beats) else "fail",
        figures={
            "sentences": len(data),
            "tokens": data.num_tokens,
            "train_accuracy": acc,
            "ceiling": base["ceiling"],
            "per_word_majority": base["per_word_majority"],
            "all_majority_label": base["all_majority_label"],
            "epochs": r.epochs,
            "epochs_to_ceiling": r.epochs_to.get("ceiling"),
            "parameters_non_embedding": r.parameters["non_embedding"],
            "parameters_total": r.parameters["total"],
            "seconds_per_epoch": r.seconds_per_epoch,
        },
        figure_files=[str(_accuracy_figure(ctx, r.history, base))],
        key_figure="train_accuracy",
        note=f"data: {source}; d={cfg.dim}, FF {cfg.feedforward_width}, AdamW lr {cfg.lr}, batch {cfg.batch_size}",
    )


def _accuracy_figure(ctx: ClaimContext, history: list[dict], base: dict) -> Path:
    from uatlab.report.figures import plot_curve

    epochs = [h["epoch"] for h in history]
    return plot_curve(
        epochs,
        {"train accuracy (full pass)": [h["train_accuracy"] for h in history]},
        ctx.figure_path("A.sec5.rank1-trained-memorization", "accuracy_per_epoch.png"),
        xlabel="epoch",
        ylabel="token accuracy on the training sentences",
        title="one layer, one rank-1 head, trained (Kajitsuka & Sato 2024, Section 5)",
        hlines={
            "ceiling (majority label per identical input)": base["ceiling"],
            "per-word majority baseline": base["per_word_majority"],
        },
    )
