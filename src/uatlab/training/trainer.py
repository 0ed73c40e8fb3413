"""Training uatlab Transformers on labelled token sequences (token classification).

The model is `uatlab.models.Transformer` with a token embedding, a learned positional
encoding, L blocks F^(FF)∘F^(SA) of rank-r attention (paper A: r = 1, one head) and a linear
readout. The loss is the mean cross-entropy over real tokens (padding excluded).

Determinism and resumption: the model is initialised from ``seed``; batch order is a function of
(seed, epoch) (`uatlab.training.batching.epoch_batches`); the learning rate is a function of
the global step (`learning_rate`); the checkpoint stores weights, optimizer state, the
position (epoch, batch) and the history. Nothing else is random (no dropout), so a run resumed
from any checkpoint reaches the same weights and metrics as an uninterrupted run (on the same
machine and thread count; CPU kernels are deterministic for a fixed thread count).

Files in ``out_dir``: ``checkpoint.pt`` (after every epoch and on SIGINT/SIGTERM/time budget),
``metrics.csv`` and ``metrics.jsonl`` (one row per epoch, rewritten atomically),
``model.safetensors`` (final weights + vocabulary), ``summary.json``. The folder may hold the user's
own files: a file of those four names is replaced only if an earlier ``train`` run wrote it there
(`uatlab.io_safety.OutputFolder`), and ``checkpoint.pt`` only by ``resume``.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import itertools
import json
import math
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from uatlab.data import SequenceDataset, ceiling_report
from uatlab.data.dataset import UNK, Encoding
from uatlab.errors import InputError, UatlabError
from uatlab.io_safety import OutputFolder, not_a_regular_file, write_text_atomic
from uatlab.memory_guard import check_memory
from uatlab.models import Transformer, TransformerConfig
from uatlab.models.io import load, save
from uatlab.training.batching import IGNORE, collate, encode, epoch_batches, fit_encoding, with_replay
from uatlab.training.checkpoint import (
    CheckpointError,
    config_differences,
    load_checkpoint,
    save_checkpoint,
)
from uatlab.training.limits import check_train_fields, check_value
from uatlab.training.metrics import evaluate

PAPER_ACCURACY = 0.9872  # paper A, Section 5: training accuracy after 800 epochs
DEFAULT_TARGETS = (PAPER_ACCURACY, 0.999, 0.9995)
# the files a run writes into its folder besides checkpoint.pt (which only --resume continues)
TRAIN_OUTPUTS = ("model.safetensors", "summary.json", "metrics.csv", "metrics.jsonl")


def check_train_memory(data: SequenceDataset, layers: int, heads: int, batch_size: int) -> None:
    """Refuse (InputError, `uatlab.memory_guard`) training whose attention matrices would exceed the memory
    limit: a rough peak for the longest sentence's batch (padded to its length), float32, 12 n × n copies per
    layer and head (scores, mask, probabilities and their gradients; 40 bytes per pair measured for one head at
    n = 5000, 48 assumed)."""
    n = max(len(t) for t in data.tokens)
    per_batch = min(batch_size, len(data))
    check_memory(
        4.0 * 12 * layers * heads * per_batch * n * n,
        "training",
        f"attention over the longest sentence, {n} tokens, {per_batch} per batch",
    )


def train_output_folder(out_dir: str | os.PathLike, inputs: tuple[str | os.PathLike | None, ...] = ()) -> OutputFolder:
    """The guard of a training run's folder: its files are replaced only if an earlier run wrote them."""
    return OutputFolder(out_dir, "train", TRAIN_OUTPUTS, inputs=inputs)


class TrainingError(UatlabError):
    """Training cannot go on (non-finite loss...); the last good checkpoint is kept."""


# the advice of the trainer's errors, in the library's words (arguments); `uatlab train` words them as its options
ADVICE_RESUME = "resume it (resume=True), or train into another out_dir"
ADVICE_NEW_RUN = "train into another out_dir, or without resume"
ADVICE_MOVE = "move it away, or train into another out_dir"
ADVICE_NON_FINITE = "Lower the learning rate (lr) or clip the gradient norm (clip > 0)."


@dataclass(frozen=True)
class TrainConfig:
    """Hyperparameters of one training run (all are CLI flags of ``uatlab train``).

    Model: ``layers`` blocks, ``heads`` heads of size ``head_dim``, attention ``rank`` (None = full),
    token dimension ``dim``, feed-forward width ``ff_width`` (default ``ff_mult * dim``), learned
    positional encoding, token embeddings drawn from N(0, ``embed_std``²) (None = PyTorch's N(0, 1)). Optimisation: ``optimizer`` 'adamw' or 'sgd' (with ``momentum``), peak
    ``lr``, ``schedule`` 'cosine' (linear warmup then cosine decay to ``min_lr_ratio * lr``) or
    'constant' (linear warmup then flat), gradient-norm clipping ``clip`` (0 = off).
    Loss: mean cross-entropy, plus ``focus`` × the mean margin shortfall over the batch's *hard* tokens
    (see `focus_loss`; 0 = off). ``replay``: append this many of the sequences the last full pass got
    wrong to every batch (`uatlab.training.batching.with_replay`; sequences holding an inherent
    conflict are never replayed; 0 = off).

    With ``init`` (a saved model to start from) the model fields are the init model's: `train` replaces
    them with its values (`config_of_init_model`), so the recorded config is the model that was trained.

    Every field is checked at construction against `uatlab.training.limits.RANGES` and ``CHOICES`` (the ranges
    of ``uatlab train``'s options): a value of the wrong type, one outside its range (NaN and infinity
    included) or a misspelt choice is an InputError, naming the field, its value and the allowed range.
    ``embed_std=0`` means None; ``rank`` is at most min(``dim``, ``head_dim``); with ``init`` the model fields
    are not range-checked (the init model's replace them).
    """

    layers: int = 1
    rank: int | None = 1
    dim: int = 128
    heads: int = 1
    head_dim: int = 1
    ff_width: int | list[int] | None = None
    ff_mult: int | None = 4
    positional: str = "learned"
    beta: float = 1.0
    embed_std: float | None = None
    epochs: int = 20
    batch_size: int = 32
    optimizer: str = "adamw"
    lr: float = 3e-3
    weight_decay: float = 0.0
    momentum: float = 0.9
    schedule: str = "cosine"
    warmup_steps: int = 200
    min_lr_ratio: float = 0.02
    clip: float = 1.0
    seed: int = 0
    dtype: str = "float32"
    init: str | None = None
    focus: float = 0.0
    focus_margin: float = 1.0
    replay: int = 0

    def __post_init__(self) -> None:
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for name, value in check_train_fields(fields).items():  # plain ints and floats, init as a str...
            if value is not fields[name]:
                object.__setattr__(self, name, value)

    @property
    def feedforward_width(self) -> int:
        return self.ff_width if self.ff_width is not None else self.ff_mult * self.dim

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _resume_counters(
    path: Path, state: dict[str, Any], epochs: int, sequences: int, eval_every: int = 1
) -> tuple[int, int, int, float, list[dict[str, Any]], list[int]]:
    """The position a checkpoint resumes from (epoch, batch in it, step, seconds of the epoch so far, the metrics
    history, the sequences to replay), each checked for its type and range: a CheckpointError naming the field if
    one is missing or out of range (a checkpoint edited by hand), never a run that continues from nonsense.
    The random state must be a byte tensor, as `torch.get_rng_state` returns it. The history's rows have
    increasing epochs; evaluated every epoch (``eval_every`` 1), one row for each completed epoch."""

    def bad(field: str, value: Any, want: str) -> CheckpointError:
        return CheckpointError(f"{path}: {field} is {value!r}, not {want} (edited?); {ADVICE_NEW_RUN}")

    def count(field: str, hi: int | None = None) -> int:
        value = state.get(field)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0 or (hi is not None and value > hi):
            raise bad(field, value, f"an integer in [0, {hi}]" if hi is not None else "an integer ≥ 0")
        return value

    epoch, batch_in_epoch, step = count("epoch", epochs), count("batch_in_epoch"), count("step")
    seconds = state.get("epoch_seconds", 0.0)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 <= seconds < math.inf:
        raise bad("epoch_seconds", seconds, "a finite number of seconds ≥ 0")
    rng = state.get("rng")
    if not (isinstance(rng, torch.Tensor) and rng.dtype == torch.uint8 and rng.dim() == 1):
        raise bad("rng", type(rng).__name__ if not isinstance(rng, torch.Tensor) else rng, "torch's byte RNG state")
    saved_every = state.get("eval_every")  # absent in checkpoints of earlier versions
    if saved_every is not None and saved_every != eval_every:
        raise CheckpointError(
            f"{path} was written by a run that evaluated every {saved_every!r} epochs; this run evaluates every "
            f"{eval_every} (train's eval_every): its history would mix both; {ADVICE_NEW_RUN}"
        )
    # the epochs with a history row: every eval_every-th and the run's last (checkpoints of earlier versions written
    # with eval_every 1 (the CLI) have the same rows; others are only checked for increasing epochs)
    evaluated = (
        [e for e in range(1, epoch + 1) if e % eval_every == 0 or e == epochs]
        if saved_every is not None or eval_every == 1
        else None
    )
    history = state.get("history")
    if (
        not isinstance(history, list)
        or not all(
            isinstance(r, dict) and isinstance(r.get("epoch"), int) and 1 <= r["epoch"] <= epoch for r in history
        )
        or any(a["epoch"] >= b["epoch"] for a, b in itertools.pairwise(history))
        or (evaluated is not None and [r["epoch"] for r in history] != evaluated)
    ):
        if saved_every is None and isinstance(history, list):  # an earlier version's checkpoint: its interval?
            k = _interval_of(history, epoch, epochs)
            if k is not None and k != eval_every:
                raise CheckpointError(
                    f"{path} was written by an earlier version that did not record its evaluation interval; its "
                    f"history has rows for epochs {_span([r['epoch'] for r in history])}, the epochs a run that "
                    f"evaluates every {k} epochs keeps; this run evaluates every {eval_every} (train's eval_every): "
                    f"resume with eval_every={k}, or {ADVICE_NEW_RUN}"
                )
        want = f"rows for epochs {_span(evaluated)}" if evaluated is not None else f"increasing epochs in 1..{epoch}"
        raise bad("history", "of another form", f"a list of per-epoch metrics with {want}")
    hard = state.get("hard_sequences", [])
    if not isinstance(hard, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and 0 <= i < sequences for i in hard
    ):
        raise bad("hard_sequences", "of another form", f"a list of sequence indices in [0, {sequences})")
    return epoch, batch_in_epoch, step, float(seconds), list(history), list(hard)


def _interval_of(history: list, epoch: int, epochs: int) -> int | None:
    """The one evaluation interval k > 1 whose evaluated epochs (every k-th, and the run's last, up to ``epoch``)
    are exactly the epochs of ``history``'s rows, or None (no such k, or rows that are not per-epoch metrics)."""
    if not all(isinstance(r, dict) and isinstance(r.get("epoch"), int) for r in history):
        return None
    rows = [r["epoch"] for r in history]
    fits = [k for k in range(2, epoch + 2) if rows == [e for e in range(1, epoch + 1) if e % k == 0 or e == epochs]]
    return fits[0] if len(fits) == 1 else None


def _span(epochs: list[int]) -> str:
    """'1..5', '3, 6, 9' or 'none' for a list of epochs."""
    if not epochs:
        return "none"
    if epochs == list(range(epochs[0], epochs[-1] + 1)) and len(epochs) > 2:
        return f"{epochs[0]}..{epochs[-1]}"
    return ", ".join(map(str, epochs))


def learning_rate(step: int, total_steps: int, cfg: TrainConfig) -> float:
    """Learning rate at global ``step`` (0-based): linear warmup, then cosine decay or constant."""
    if cfg.warmup_steps > 0 and step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    if cfg.schedule == "constant":
        return cfg.lr
    span = max(total_steps - cfg.warmup_steps, 1)
    progress = min(max(step - cfg.warmup_steps, 0) / span, 1.0)
    floor = cfg.min_lr_ratio * cfg.lr
    return floor + 0.5 * (cfg.lr - floor) * (1.0 + math.cos(math.pi * progress))


def focus_loss(logits: torch.Tensor, targets: torch.Tensor, margin: float) -> torch.Tensor:
    """Mean margin shortfall over the *hard* tokens: those not yet classified with margin ``margin``.

    For token k with logits z_k (C,) and gold label y_k, the margin is m_k = z_{k,y} − max_{c≠y} z_{k,c};
    hard tokens are H = {k : m_k < margin} and the loss is (1/|H|) Σ_{k∈H} (margin − m_k) (0 if H is empty).
    Unlike the mean cross-entropy, whose gradient on one wrong token among the batch's ~500 is ~1/500, every
    hard token here carries weight 1/|H|: late in training, when a batch holds one or two wrong tokens,
    the whole term pushes on them (and, through the attention, on their context value h, which is the
    only thing that separates a token from a twin with the same word, position and another label in a
    rank-1 model, paper A, Theorem 2).

    logits: (T, C); targets: (T,) with `IGNORE` for padding.
    """
    keep = targets != IGNORE
    z, y = logits[keep], targets[keep]  # (T', C), (T',)
    if z.numel() == 0:
        return logits.sum() * 0.0
    gold = z.gather(1, y[:, None])[:, 0]  # (T',)
    other = z.scatter(1, y[:, None], float("-inf")).amax(1)  # (T',)
    short = margin - (gold - other)  # (T',)
    hard = short > 0
    if not bool(hard.any()):
        return logits.sum() * 0.0
    return short[hard].mean()


@dataclass
class TrainResult:
    """What ``uatlab train --json`` prints (see `summary`)."""

    status: str  # 'completed', 'ceiling', 'time budget', 'interrupted'
    epochs: int  # epochs completed
    history: list[dict[str, Any]]
    epochs_to: dict[str, int | None]
    seconds_per_epoch: float | None
    out_dir: str
    config: dict[str, Any]
    model_config: dict[str, Any]
    parameters: dict[str, int]
    data: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)

    @property
    def train_accuracy(self) -> float | None:
        return self.history[-1]["train_accuracy"] if self.history else None

    def unless_interrupted(self) -> TrainResult:
        """This result, or KeyboardInterrupt if SIGINT or SIGTERM stopped the run (its checkpoint is saved): for a
        caller that draws figures from finished runs, a partial one must end the caller too, not be read as a
        result."""
        if self.status == "interrupted":
            raise KeyboardInterrupt
        return self

    def summary(self) -> dict[str, Any]:
        last = self.history[-1] if self.history else {}
        return {
            "status": self.status,
            "epochs": self.epochs,
            "train_accuracy": self.train_accuracy,
            "train_errors": last.get("train_errors"),
            "train_entity_f1": last.get("train_entity_f1"),
            "valid_accuracy": last.get("valid_accuracy"),
            "valid_entity_f1": last.get("valid_entity_f1"),
            "epochs_to": self.epochs_to,
            "seconds_per_epoch": self.seconds_per_epoch,
            "parameters": self.parameters,
            "data": self.data,
            "config": self.config,
            "model_config": self.model_config,
            "out_dir": self.out_dir,
            "files": self.files,
            "history": [
                {k: row[k] for k in ("epoch", "train_loss", "train_accuracy", "train_errors", "lr", "seconds_train")}
                | ({"valid_accuracy": row["valid_accuracy"]} if "valid_accuracy" in row else {})
                for row in self.history
            ],
        }


def _threshold_key(t: float) -> str:
    return f"{t:g}"


def epochs_to_targets(
    history: list[dict[str, Any]], targets: tuple[float, ...], ceiling_errors: int | None = None
) -> dict[str, int | None]:
    """First epoch whose full-pass train accuracy reaches each target (None = not reached).

    The key ``"ceiling"`` (if ``ceiling_errors`` is given) is the first epoch with at most that many
    errors, i.e. the data set's ceiling (inherent conflicts cannot be learned).
    """
    out: dict[str, int | None] = {}
    for t in targets:
        out[_threshold_key(t)] = next((r["epoch"] for r in history if r["train_accuracy"] >= t), None)
    if ceiling_errors is not None:
        out["ceiling"] = next((r["epoch"] for r in history if r["train_errors"] <= ceiling_errors), None)
    return out


def _write_metrics(out_dir: Path, history: list[dict[str, Any]]) -> None:
    """Rewrite metrics.csv and metrics.jsonl from the whole history (atomic; safe under resume)."""
    if not history:
        return
    keys = list(dict.fromkeys(k for row in history for k in row))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys)
    w.writeheader()
    for row in history:
        w.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in keys})
    for name, text in (
        ("metrics.csv", buf.getvalue()),
        ("metrics.jsonl", "".join(json.dumps(r) + "\n" for r in history)),
    ):
        write_text_atomic(out_dir / name, text)


def _load_init(path: str) -> tuple[Transformer, Encoding]:
    """A model saved by ``uatlab compile`` or ``uatlab train`` plus its token/label encoding.

    The encoding is read from the model file (`uatlab.models.io.load`) or from a sidecar
    ``<model>.encoding.json`` with ``tokens`` and ``labels`` lists in id order.
    """
    model = load(path)
    if not isinstance(model, Transformer):  # a memorizer of Kajitsuka & Sato 2025 (integer ReLU circuit)
        raise InputError(f"{path} is a {type(model).__name__}, not a uatlab Transformer; it cannot be trained")
    enc = model.encoding.to_json() if model.encoding is not None else None
    if enc is None:
        for side in (Path(str(path) + ".encoding.json"), Path(path).with_suffix(".encoding.json")):
            if side.is_file():
                enc = json.loads(side.read_text())
                break
    if enc is None or "tokens" not in enc or "labels" not in enc:
        raise InputError(
            f"{path}: no token/label encoding found (expected 'tokens' and 'labels' in the model metadata or a "
            f"sidecar {path}.encoding.json)"
        )
    if model.config.vocab_size is None or model.config.num_labels is None:
        raise InputError(f"{path}: the model has no token embedding or no readout; it cannot be trained on tokens")
    tokens = [str(t) for t in enc["tokens"]]
    vocab = Encoding.from_lists(tokens, enc["labels"], enc.get("unknown_token", UNK if tokens[:1] == [UNK] else None))
    if len(vocab.token_to_id) != model.config.vocab_size or len(vocab.label_to_id) != model.config.num_labels:
        raise InputError(
            f"{path}: encoding lists {len(vocab.token_to_id)} tokens / {len(vocab.label_to_id)} labels but the model has "
            f"vocab_size {model.config.vocab_size} / num_labels {model.config.num_labels}"
        )
    return model, vocab


def config_of_init_model(cfg: TrainConfig, mc: TransformerConfig) -> TrainConfig:
    """``cfg`` with its model fields (sizes, rank, positional encoding, β, dtype) replaced by those of the init
    model ``mc``: the model trained is the init model, so these are what the run's config records.
    ``ff_mult`` and ``embed_std`` do not apply (the width and the embeddings come from the model): None."""
    ff_width = list(mc.ff_width) if isinstance(mc.ff_width, tuple) else mc.ff_width
    return dataclasses.replace(
        cfg,
        layers=mc.n_layers,
        rank=mc.rank,
        dim=mc.d_model,
        heads=mc.n_heads,
        head_dim=mc.head_dim,
        ff_width=ff_width,
        ff_mult=None,
        positional=mc.positional,
        beta=mc.beta,
        embed_std=None,
        dtype=mc.dtype,
    )


def init_model(cfg: TrainConfig, vocab: Encoding, max_len: int) -> Transformer:
    """A fresh model for ``cfg`` (seeded), sized for ``vocab`` and sequences up to ``max_len``."""
    mc = TransformerConfig(
        d_model=cfg.dim,
        n_layers=cfg.layers,
        n_heads=cfg.heads,
        head_dim=cfg.head_dim,
        rank=cfg.rank,
        ff_width=cfg.feedforward_width,
        vocab_size=len(vocab.token_to_id),
        num_labels=len(vocab.label_to_id),
        max_len=max_len,
        positional=cfg.positional,
        beta=cfg.beta,
        dtype=cfg.dtype,
        meta={"trained_by": "uatlab.training"},
    )
    torch.manual_seed(cfg.seed)
    model = Transformer(mc)
    if cfg.embed_std is not None and model.embed is not None:
        with torch.no_grad():  # smaller token embeddings let Adam's ~lr-sized steps move rare words
            model.embed.weight.normal_(0.0, cfg.embed_std)
    return model


_HASH_KEYS = ("data_hash", "train_sha256", "valid_sha256")
_CHECKED_APART = (*_HASH_KEYS, "label_scheme")  # absent from older checkpoints: compared only when both have them


def _vocabulary_differences(saved_tokens: Any, saved_labels: Any, vocab: Encoding) -> list[str]:
    """``what: checkpoint has …, this run has …`` for the token and label vocabularies (id order) that differ from
    the checkpoint's: the same counts in another order would resume silently with every id meaning another item."""
    out = []
    for what, saved, now in (
        ("labels", saved_labels, vocab.id_to_label),
        ("tokens", saved_tokens, vocab.id_to_token),
    ):
        if saved is None or list(saved) == list(now):
            continue
        saved, now = list(saved), list(now)
        i = next((k for k, (a, b) in enumerate(zip(saved, now, strict=False)) if a != b), min(len(saved), len(now)))
        had, has = (repr(v[i]) if i < len(v) else "nothing" for v in (saved, now))
        out.append(f"{what} vocabulary: checkpoint has {len(saved)} ({had} at id {i}), this run has {len(now)} ({has})")
    return out


def _check_data_hashes(
    ckpt_path: Path,
    saved: dict[str, Any],
    hashes: dict[str, Any],
    sources: dict[str, str | None],
    say: Callable[[str], None],
) -> bool:
    """Refuse to resume ``ckpt_path`` when a data file's SHA-256 differs from the one the checkpoint recorded (the
    same path and sequence count do not make the same data); warn when the checkpoint recorded none. True when
    the train file's content is proved the same (then its path may differ: the file was moved or renamed)."""
    if not hashes:  # the caller read no files (in-memory data): nothing to compare
        return False
    if saved.get("data_hash") != "sha256":
        say(
            f"warning: {ckpt_path} records no data hashes (written by an older uatlab): whether the train and valid "
            "files are the ones it was trained on is unknown; resuming anyway"
        )
        return False
    for role in ("train", "valid"):
        key = f"{role}_sha256"
        had, have = saved.get(key), hashes.get(key)
        if had is not None and have is not None and had != have:
            raise CheckpointError(
                f"{role} data file {sources.get(role)}: its content changed since {ckpt_path} was written (SHA-256 "
                f"{have[:12]}…; the checkpoint was written for other data, {had[:12]}…); restore that file, or train "
                "into another out_dir, or without resume to start again"
            )
    return saved.get("train_sha256") is not None and saved.get("train_sha256") == hashes.get("train_sha256")


class _StopFlag:
    """Set by SIGINT/SIGTERM; the loop checks it between batches and checkpoints."""

    def __init__(self) -> None:
        self.signal: str | None = None
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _StopFlag:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.signal = signal.Signals(signum).name

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


def train(
    train_data: SequenceDataset,
    cfg: TrainConfig,
    out_dir: str | os.PathLike,
    valid_data: SequenceDataset | None = None,
    resume: bool = False,
    max_minutes: float | None = None,
    targets: tuple[float, ...] = DEFAULT_TARGETS,
    progress: bool = True,
    with_f1: bool = True,
    log: Callable[[str], None] | None = None,
    stop_after_steps: int | None = None,
    stop_at_ceiling: bool = False,
    checkpoint_every: int = 1,
    eval_every: int = 1,
    data_sha256: dict[str, str | None] | None = None,
    label_scheme: str | None = None,
) -> TrainResult:
    """Train (or resume) a model on ``train_data``; see the module docstring for the files written.

    Args:
        train_data: the sequences to memorize.
        cfg: hyperparameters; with ``resume`` they must equal the checkpoint's.
        out_dir: folder for checkpoint, metrics, final model and summary.
        valid_data: optional held-out data evaluated after every epoch (labels must be known).
        resume: continue from ``out_dir/checkpoint.pt``.
        max_minutes: wall-clock budget, start-up included; on expiry the run checkpoints and stops (resumable),
            after at least one optimizer step of this run (so that every --resume makes progress).
        targets: accuracies for ``epochs_to`` (the ceiling is always added).
        progress: show a progress bar (stderr) with live loss and running accuracy.
        with_f1: compute seqeval entity F1 each epoch (IOB labels only).
        log: where to send one-line messages (default: nowhere).
        stop_after_steps: testing hook: behave as if SIGINT arrived after this many steps.
        stop_at_ceiling: end the run (status 'ceiling') after the first epoch whose full pass has no
            errors beyond the inherent conflicts (used by the capacity sweep).
        checkpoint_every: write the checkpoint and metrics files every this many epochs (and at the
            end, at interruption and at the ceiling); 1 = every epoch.
        eval_every: run the full evaluation pass (and record a history row) every this many epochs
            and after the last; the capacity sweep uses it when an epoch is a single step.
        data_sha256: SHA-256 of the files the data was read from: ``{"train": hex, "valid": hex or None}``.
            Recorded in the checkpoint and the summary's ``data`` (``data_hash``, ``train_sha256``,
            ``valid_sha256``); with ``resume``, a checkpoint recording other hashes is refused, and one recording
            none (written before hashes were kept) is resumed with a warning that the data is unchecked.
        label_scheme: how the labels were read (``uatlab train --scheme``: 'keep' or 'iob2'), recorded in the
            checkpoint and the summary's ``data``; ``resume`` refuses a checkpoint recording another one. ``resume``
            also refuses a checkpoint whose token or label vocabulary (in id order) is not this run's.

    Raises:
        CheckpointError: unreadable checkpoint, or one for another model/config/data (file contents included).
        TrainingError: non-finite loss (names epoch, batch and its first sentence).
        InputError: labels of ``valid_data`` unseen in training, bad init model, a file in ``out_dir`` that
            the run would replace and that an earlier run did not write (or the init model itself); an empty
            ``train_data`` or ``valid_data`` or ``out_dir``; attention over the longest sentence's batch that
            would need more memory than the limit (`check_train_memory`), before any file is written.
        TypeError: ``train_data`` or ``valid_data`` not a `SequenceDataset`, or ``cfg`` not a `TrainConfig`
            (before any file).
        InputError: also ``max_minutes`` not a number or outside (0, 10^7] (before any file).
    """
    for name, part in (("train_data", train_data), ("valid_data", valid_data)):
        if part is not None and not isinstance(part, SequenceDataset):
            raise TypeError(f"train(): {name} must be a uatlab.SequenceDataset, not a {type(part).__name__}")
    if not isinstance(cfg, TrainConfig):
        hint = " (TrainConfig(**d) builds one from a dict)" if isinstance(cfg, dict) else ""
        raise TypeError(f"cfg must be a TrainConfig, got {type(cfg).__name__}{hint}")
    max_minutes = check_value("max_minutes", max_minutes, "train()")
    if not isinstance(out_dir, (str, os.PathLike)):
        raise TypeError(f"train(): out_dir must be a path, not a {type(out_dir).__name__}")
    if os.fspath(out_dir) == "":
        raise InputError("train(): out_dir is empty; give a folder's name ('.' for the current folder)")
    if len(train_data) == 0:
        raise InputError(f"{train_data.source}: no sequences to train on")
    if valid_data is not None and len(valid_data) == 0:  # its accuracy would read 0 of 0 as 0.0
        raise InputError(f"{valid_data.source}: no sequences to validate on (valid_data; None for no validation)")
    with train_output_folder(out_dir, (cfg.init,)):
        return _train_in(
            train_data,
            cfg,
            out_dir,
            valid_data,
            resume,
            max_minutes,
            targets,
            progress,
            with_f1,
            log,
            stop_after_steps,
            stop_at_ceiling,
            checkpoint_every,
            eval_every,
            data_sha256,
            label_scheme,
        )


def _train_in(
    train_data: SequenceDataset,
    cfg: TrainConfig,
    out_dir: str | os.PathLike,
    valid_data: SequenceDataset | None,
    resume: bool,
    max_minutes: float | None,
    targets: tuple[float, ...],
    progress: bool,
    with_f1: bool,
    log: Callable[[str], None] | None,
    stop_after_steps: int | None,
    stop_at_ceiling: bool,
    checkpoint_every: int,
    eval_every: int,
    data_sha256: dict[str, str | None] | None = None,
    label_scheme: str | None = None,
) -> TrainResult:
    """`train` once its folder is checked and open (every write into it is checked and recorded)."""
    say = log or (lambda _msg: None)
    out = Path(out_dir)  # created only once the init model and the data have been checked
    existing = next((p for p in (out, *out.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise InputError(
            f"out_dir {out}: {existing} is a file, not a folder (a run writes its checkpoint, metrics and model "
            "into a folder)"
        )
    ckpt_path = out / "checkpoint.pt"
    t_start = time.monotonic()

    # ---- model and vocabulary ------------------------------------------------------------------
    if cfg.init:
        model, vocab = _load_init(cfg.init)
        cfg = config_of_init_model(cfg, model.config)  # what is trained, recorded as such (summary, checkpoint)
        model.train()
        known = vocab.token_to_id
        for part in (train_data, valid_data):
            too_long = [
                i for i, seq in enumerate(part.tokens if part is not None else []) if len(seq) > model.config.max_len
            ]
            if too_long:
                i = too_long[0]
                raise InputError(
                    f"{part.where(i)}: a sequence of {len(part.tokens[i])} tokens is longer than the init model's "
                    f"max_len {model.config.max_len} ({len(too_long)} such sequences)"
                )
        unknown = [(i, k, t) for i, seq in enumerate(train_data.tokens) for k, t in enumerate(seq) if t not in known]
        if unknown:
            i, k, t = unknown[0]
            raise InputError(
                f"{train_data.where(i, k)}: token {t!r} is not in the vocabulary of the init model {cfg.init} "
                f"({len(unknown)} such tokens)"
            )
    else:
        vocab = fit_encoding(train_data)
        max_len = max(train_data.max_len, valid_data.max_len if valid_data is not None else 0)
        model = init_model(cfg, vocab, max_len)
    check_train_memory(train_data, model.config.n_layers, model.config.n_heads, cfg.batch_size)
    enc_train = encode(train_data, vocab, role="training")
    enc_valid = encode(valid_data, vocab, role="validation") if valid_data is not None else None
    label_names = tuple(vocab.id_to_label)
    rep = ceiling_report(train_data)
    data_info = {
        "source": train_data.source,
        "sequences": len(train_data),
        "tokens": train_data.num_tokens,
        "ceiling_accuracy": rep.ceiling_accuracy,
        "conflict_tokens": rep.conflict_tokens,
        "vocab_size": len(vocab.token_to_id),
        "labels": vocab.id_to_label,
    }
    if valid_data is not None:
        data_info["valid_sequences"] = len(valid_data)
        data_info["valid_unknown_tokens"] = enc_valid.unknown_tokens
        if enc_valid.unknown_tokens and vocab.unknown_token is None:  # e.g. a compiled init model: no <unk> row
            say(
                f"warning: the init model has no {UNK} token; {enc_valid.unknown_tokens} validation tokens unknown "
                f"to it are read as {vocab.id_to_token[0]!r} (token id 0)"
            )

    if cfg.optimizer == "adamw":
        # fused=True: one kernel for the whole update (3x faster on CPU when the embedding dominates)
        opt: torch.optim.Optimizer = torch.optim.AdamW(
            model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=(0.9, 0.98), fused=True
        )
    else:
        opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)

    steps_per_epoch = math.ceil(len(enc_train) / cfg.batch_size)
    total_steps = steps_per_epoch * cfg.epochs
    out.mkdir(parents=True, exist_ok=True)
    fingerprint = {
        "train_source": train_data.source,
        "train_sequences": len(train_data),
        "train_tokens": train_data.num_tokens,
        "valid_sequences": len(valid_data) if valid_data is not None else None,
    }
    hashes = (
        {
            "data_hash": "sha256",
            "train_sha256": data_sha256.get("train"),
            "valid_sha256": data_sha256.get("valid") if valid_data is not None else None,
        }
        if data_sha256 is not None
        else {}
    )
    reading = {"label_scheme": label_scheme} if label_scheme is not None else {}
    stored_data = fingerprint | hashes | reading  # the checkpoint's "data": what a resume is compared against
    data_info |= hashes | reading
    history: list[dict[str, Any]] = []
    # sequences with an inherent conflict (an identical sequence with another label) are never replayed
    conflicted = {i for c in rep.conflicts for i in c.sequences}
    hard: list[int] = []  # sequences the last full pass got wrong (replayed with cfg.replay)
    epoch, batch_in_epoch, step, epoch_seconds = 0, 0, 0, 0.0
    if resume:
        state = load_checkpoint(ckpt_path)
        saved_cfg = {"focus": 0.0, "focus_margin": 1.0, "replay": 0} | state.get("train_config", {})
        diffs = config_differences(saved_cfg, cfg.as_dict())
        saved_data = state.get("data", {})
        sources = {"train": train_data.source, "valid": valid_data.source if valid_data is not None else None}
        same_train_content = _check_data_hashes(ckpt_path, saved_data, hashes, sources, say)
        apart = (*_CHECKED_APART, "train_source") if same_train_content else _CHECKED_APART
        diffs += config_differences(
            {k: v for k, v in saved_data.items() if k not in apart},
            {k: v for k, v in fingerprint.items() if k not in apart},
        )
        both = [k for k in reading if k in saved_data]  # how the labels were read, where both runs say it
        diffs += config_differences({k: saved_data[k] for k in both}, {k: reading[k] for k in both})
        diffs += _vocabulary_differences(state.get("vocab_tokens"), state.get("vocab_labels"), vocab)
        saved_model_cfg = state.get("model_config")
        if saved_model_cfg != model.config.to_json():
            wanted = model.config.to_json()
            with contextlib.suppress(ValueError, TypeError):
                saved_model_cfg, wanted = (
                    json.loads(c) if isinstance(c, str) else c for c in (saved_model_cfg, wanted)
                )
            if isinstance(saved_model_cfg, dict) and isinstance(wanted, dict):
                diffs += [f"model {d}" for d in config_differences(saved_model_cfg, wanted)]
            else:
                diffs.append("model shape differs")
        if diffs:
            raise CheckpointError(
                f"{ckpt_path} was written for a different run ({'; '.join(diffs[:4])}"
                f"{f'; {len(diffs) - 4} more' if len(diffs) > 4 else ''}); {ADVICE_NEW_RUN}"
            )
        try:
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
        except (RuntimeError, KeyError, ValueError) as exc:
            raise CheckpointError(f"{ckpt_path}: weights do not fit the model: {exc}") from None
        epoch, batch_in_epoch, step, epoch_seconds, history, hard = _resume_counters(
            ckpt_path, state, cfg.epochs, len(train_data), eval_every
        )
        torch.set_rng_state(state["rng"])
        say(f"resumed from {ckpt_path}: epoch {epoch + 1}, batch {batch_in_epoch}, step {step}")
        saved_threads = state.get("threads")
        if saved_threads is not None and saved_threads != torch.get_num_threads():
            # CPU reductions split work by thread: a different count can change float sums in the last bits
            say(
                f"warning: the checkpoint was written with {saved_threads} torch threads, this run uses "
                f"{torch.get_num_threads()}; call torch.set_num_threads({saved_threads}) for a bit-identical "
                "continuation"
            )
    elif ckpt_path.exists() or ckpt_path.is_symlink():
        why = not_a_regular_file(ckpt_path)
        if why is not None:  # no checkpoint to resume, and nothing training may replace
            raise CheckpointError(f"{ckpt_path} {why}, where training writes its checkpoint: {ADVICE_MOVE}")
        raise CheckpointError(f"{ckpt_path} already exists: {ADVICE_RESUME}")

    def checkpoint(ep: int, bi: int, st: int, secs: float) -> None:
        """The checkpoint and, beside it, the metrics files of its history (so they agree wherever a run stops)."""
        save_checkpoint(
            {
                "train_config": cfg.as_dict(),
                "data": stored_data,
                "model_config": model.config.to_json(),
                "model": model.state_dict(),
                "optimizer": opt.state_dict(),
                "rng": torch.get_rng_state(),
                "epoch": ep,
                "batch_in_epoch": bi,
                "step": st,
                "epoch_seconds": secs,
                "history": history,
                "hard_sequences": hard,
                "vocab_tokens": vocab.id_to_token,
                "vocab_labels": vocab.id_to_label,
                "threads": torch.get_num_threads(),  # results depend on it (see the resume warning)
                "eval_every": eval_every,  # which epochs the history has a row for
            },
            ckpt_path,
        )
        _write_metrics(out, history)

    if cfg.warmup_steps > total_steps:  # after any refusal to resume; either schedule starts with the warm-up
        say(
            f"warning: the warm-up ({cfg.warmup_steps} steps) is longer than the whole run ({total_steps} steps: "
            f"{cfg.epochs} epochs of {steps_per_epoch} batches); the learning rate never reaches its peak {cfg.lr:g}"
        )
    status = "completed"
    last = history[-1] if history else {}
    was_at_ceiling = isinstance(last.get("train_errors"), int) and last["train_errors"] <= rep.conflict_tokens
    if stop_at_ceiling and batch_in_epoch == 0 and last.get("epoch") == epoch and was_at_ceiling:
        # resumed at the end of an epoch whose evaluation was at the ceiling: if the model still is on these
        # sequences (evaluated again: the checkpoint's count was taken on the data it was written for), nothing is
        # left to train. (A checkpoint below the ceiling trains on without this extra pass.)
        errors = evaluate(model, enc_train, label_names, with_f1=False).as_dict("train")["train_errors"]
        if errors <= rep.conflict_tokens:
            status = "ceiling"
            say(f"the model is at the ceiling after epoch {epoch} ({errors} tokens wrong); nothing to train")
    first_step = step  # where this run starts (0, or the checkpoint's step on --resume)
    model.train()
    with _StopFlag() as stop:
        while epoch < cfg.epochs and status == "completed":
            batches = epoch_batches(enc_train.lengths, cfg.batch_size, cfg.seed, epoch)
            if cfg.replay > 0:
                batches = with_replay(batches, hard, cfg.replay, cfg.seed, epoch)
            if batch_in_epoch > len(batches):  # only an edited checkpoint resumes past its epoch's last batch
                raise CheckpointError(
                    f"{ckpt_path}: batch_in_epoch {batch_in_epoch} is past the {len(batches)} batches of epoch "
                    f"{epoch + 1} (edited?); {ADVICE_NEW_RUN}"
                )
            bar = tqdm(
                total=len(batches),
                initial=batch_in_epoch,
                desc=f"epoch {epoch + 1}/{cfg.epochs}",
                disable=not progress,
                leave=False,
                mininterval=0.5 if os.isatty(2) else 10.0,
                dynamic_ncols=True,
            )
            run_loss, run_right, run_tokens = 0.0, 0, 0
            t0 = time.perf_counter()
            while batch_in_epoch < len(batches):
                # at least one step per run: a budget spent on start-up (reading, encoding, restoring a checkpoint)
                # would otherwise stop every --resume at the same step, forever
                over_time = (
                    max_minutes is not None and step > first_step and (time.monotonic() - t_start) > 60.0 * max_minutes
                )
                hook = stop_after_steps is not None and step >= stop_after_steps
                if stop.signal or over_time or hook:
                    status = "time budget" if over_time else "interrupted"
                    checkpoint(epoch, batch_in_epoch, step, epoch_seconds + time.perf_counter() - t0)
                    say(f"{status}: checkpoint at epoch {epoch + 1}, batch {batch_in_epoch} → {ckpt_path}")
                    break
                b = collate(enc_train, batches[batch_in_epoch])
                lr = learning_rate(step, total_steps, cfg)
                for group in opt.param_groups:
                    group["lr"] = lr
                logits = model(b.inputs, attend_mask=b.mask)  # (B, n, labels)
                flat_logits, flat_targets = logits.reshape(-1, logits.shape[-1]), b.targets.reshape(-1)
                loss = F.cross_entropy(flat_logits, flat_targets, ignore_index=IGNORE)
                if cfg.focus > 0:
                    loss = loss + cfg.focus * focus_loss(flat_logits, flat_targets, cfg.focus_margin)
                if not torch.isfinite(loss):
                    first = int(b.indices[0])
                    raise TrainingError(
                        f"loss became {float(loss.detach())} at epoch {epoch + 1}, batch {batch_in_epoch + 1}/{len(batches)} "
                        f"(step {step + 1}, first sentence {train_data.where(first)}); the last good checkpoint "
                        f"{ckpt_path if ckpt_path.exists() else '(none yet)'} was kept. {ADVICE_NON_FINITE}"
                    )
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if cfg.clip > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
                opt.step()
                step += 1
                batch_in_epoch += 1
                with torch.no_grad():
                    ntok = int(b.mask.sum())
                    run_loss += float(loss.detach()) * ntok
                    run_right += int(((logits.argmax(-1) == b.targets) & b.mask).sum())
                    run_tokens += ntok
                if progress and (batch_in_epoch % 10 == 0 or batch_in_epoch == len(batches)):
                    bar.set_postfix(
                        loss=f"{run_loss / run_tokens:.4f}", acc=f"{run_right / run_tokens:.4f}", refresh=False
                    )
                bar.update(1)
            bar.close()
            if status != "completed":
                break
            seconds_train = epoch_seconds + time.perf_counter() - t0
            if (epoch + 1) % eval_every != 0 and epoch + 1 < cfg.epochs:
                epoch, batch_in_epoch, epoch_seconds = epoch + 1, 0, 0.0
                continue
            t1 = time.perf_counter()
            ev = evaluate(model, enc_train, label_names, with_f1=with_f1)
            row: dict[str, Any] = {"epoch": epoch + 1, "step": step, "lr": lr}
            row |= ev.as_dict("train")
            hard = [i for i in ev.wrong_sequences if i not in conflicted]
            if enc_valid is not None:
                row |= evaluate(model, enc_valid, label_names, with_f1=with_f1).as_dict("valid")
            row["seconds_train"] = seconds_train
            row["seconds_eval"] = time.perf_counter() - t1
            history.append(row)
            epoch, batch_in_epoch, epoch_seconds = epoch + 1, 0, 0.0
            if stop_at_ceiling and row["train_errors"] <= rep.conflict_tokens:
                status = "ceiling"
            if epoch % checkpoint_every == 0 or epoch == cfg.epochs or status != "completed":
                checkpoint(epoch, 0, step, 0.0)
            say(
                f"epoch {epoch}: train loss {row['train_loss']:.5f} acc {row['train_accuracy']:.5f} "
                f"errors {row['train_errors']} ({seconds_train:.1f}s train)"
            )

    ceiling_errors = rep.conflict_tokens
    result = TrainResult(
        status=status,
        epochs=epoch,  # epochs completed (the history has a row per evaluated epoch only, with eval_every > 1)
        history=history,
        epochs_to=epochs_to_targets(history, targets, ceiling_errors),
        seconds_per_epoch=float(np.median([r["seconds_train"] for r in history])) if history else None,
        out_dir=str(out),
        config=cfg.as_dict(),
        model_config=json.loads(model.config.to_json()),
        parameters={
            "total": model.num_parameters(),
            "non_embedding": model.num_parameters(non_embedding=True),
        },
        data=data_info,
        files={
            "checkpoint": str(ckpt_path),
            # written only once an epoch has been evaluated
            **(
                {"metrics_csv": str(out / "metrics.csv"), "metrics_jsonl": str(out / "metrics.jsonl")}
                if history
                else {}
            ),
        },
    )
    model_file = out / "model.safetensors"
    if status in ("completed", "ceiling"):
        if step > first_step or not model_file.is_file():  # a resume that trained nothing keeps the saved model
            save(model, model_file, encoding=vocab, facts={"train_config": cfg.as_dict()})
        result.files["model"] = str(model_file)
    summary = result.summary()
    write_text_atomic(out / "summary.json", json.dumps(summary, indent=1, default=str))
    result.files["summary"] = str(out / "summary.json")
    return result
