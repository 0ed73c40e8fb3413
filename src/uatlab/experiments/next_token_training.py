"""Trained next-token memorization: the smallest one-layer Transformer that fits N random labels.

The compiled memorizer of Kajitsuka & Sato ("On the Optimal Memorization Capacity of Transformers",
ICLR 2025) stores N next-token labels in Õ(√N) parameters because a deep ReLU network reads labels out of
long weights by bit extraction. Gradient descent on a one-layer Transformer (one attention layer, one
two-layer feed-forward network) has no such mechanism. This module measures, for N random next-token
examples (sequences of n tokens over V symbols, labels uniform in [0, C)):

- `train_next_token`: train one model (fixed seed, one thread, Adam with cosine decay over a step
  budget, prediction at the last position) until 100 % training accuracy or the budget is spent;
- `smallest_width`: the smallest feed-forward width q that reaches 100 % within the budget,
  searched by doubling from ``start`` and then bisection between the last failure and the first success
  (to a relative resolution ``resolution``; success is assumed monotone in q, which the record of every
  trial lets one check);
- `blocks_experiment`: the ICLR 2025 paper's experiment (training loss and accuracy of Transformers
  with #blocks = 1, 10, 20, 30, 40 on N = 3,000 sequences), at a size this machine can run.

Parameters are "non-embedding" (attention + feed-forward + readout, `Transformer.num_parameters`),
the convention of the compiled memorizer's count. Everything is deterministic for a seed on CPU.
"""

from __future__ import annotations

import hashlib
import math
import os
import resource
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from uatlab.models.transformer import Transformer, TransformerConfig
from uatlab.training.checkpoint import CheckpointError, config_differences, load_checkpoint, save_checkpoint


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


@dataclass(frozen=True)
class Recipe:
    """How every trial is trained (one recipe for all widths and all N of a sweep)."""

    d: int = 16  # model dimension
    rank: int | None = None  # attention rank: None = full (head size d), 1 = paper A's rank-1 head
    steps: int = 3000  # optimizer step budget per trial
    lr: float = 5e-3  # peak Adam learning rate (cosine decay to 0 over the budget)
    batch: int = 256
    check_every: int = 100  # steps between full-data accuracy checks
    seed: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def build_model(V: int, C: int, n: int, width: int, recipe: Recipe, layers: int = 1) -> Transformer:
    """Paper A's Transformer: learned positions, causal, one head (rank-1 or full), FF width ``width``."""
    torch.manual_seed(recipe.seed)
    cfg = TransformerConfig(
        d_model=recipe.d,
        n_layers=layers,
        n_heads=1,
        head_dim=1 if recipe.rank == 1 else recipe.d,
        rank=recipe.rank,
        ff_width=width,
        vocab_size=V,
        num_labels=C,
        max_len=n,
        positional="learned",
        causal=True,
        dtype="float32",
    )
    return Transformer(cfg)


def last_logits(model: Transformer, tokens: torch.Tensor) -> torch.Tensor:
    """Logits at the last position (B, C), equal to ``model(tokens)[:, -1]``.

    For a one-block model only the last query is computed (its attention row over all n keys, then the
    feed-forward layer at that position): n times less work than the full forward pass. Deeper models run
    the full forward pass (every position feeds the next block).
    """
    if len(model.blocks) != 1 or model.input_ff is not None:
        return model(tokens)[:, -1]
    if model.embed is None or model.pos is None or tokens.shape[1] > model.config.max_len:
        return model(tokens)[:, -1]
    x = model.embed.weight[tokens] + model.pos[: tokens.shape[1]]  # (B, n, d), ids are in range by construction
    attn = model.blocks[0].attn
    w = attn.effective_weights()
    q = torch.einsum("bd,hsd->bhs", x[:, -1], w["W_Q"])  # (B, h, s) the last query
    k = torch.einsum("bnd,hsd->bhns", x, w["W_K"])  # (B, h, n, s)
    v = torch.einsum("bnd,hsd->bhns", x, w["W_V"])  # (B, h, n, s)
    p = torch.softmax(attn.score_scale * torch.einsum("bhs,bhns->bhn", q, k), dim=-1)  # (B, h, n): causal = all
    heads = torch.einsum("bhn,bhns->bhs", p, v)  # (B, h, s)
    y = x[:, -1] + torch.einsum("bhs,hds->bd", heads, w["W_O"])  # (B, d)
    return model.readout(model.blocks[0].ff(y))  # (B, C)


EVAL_FLOATS = 1 << 22  # feed-forward activations (floats) per evaluation chunk: 16 MB in float32


def accuracy(model: Transformer, X: torch.Tensor, Y: torch.Tensor) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) on all of (X, Y), in chunks.

    A chunk holds at most `EVAL_FLOATS` feed-forward activations (rows × width), so the memory of a check
    does not grow with the width (at width 32,768 a fixed 8,192-row chunk was 1 GiB).
    """
    w = model.config.ff_width
    rows = max(1, min(8192, EVAL_FLOATS // max(1, *(w if isinstance(w, tuple) else (w,)))))
    model.eval()
    right, loss = 0, 0.0
    with torch.no_grad():
        for i in range(0, len(X), rows):
            z = last_logits(model, X[i : i + rows])
            right += int((z.argmax(-1) == Y[i : i + rows]).sum())
            loss += float(torch.nn.functional.cross_entropy(z, Y[i : i + rows], reduction="sum"))
    model.train()
    return right / len(X), loss / len(X)


def _data_digest(tokens: np.ndarray, labels: np.ndarray) -> str:
    """SHA-256 of the training data (a checkpoint only resumes the run it was written for)."""
    h = hashlib.sha256()
    for a in (np.ascontiguousarray(tokens, dtype=np.int64), np.ascontiguousarray(labels, dtype=np.int64)):
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def train_next_token(
    tokens: np.ndarray,
    labels: np.ndarray,
    V: int,
    C: int,
    width: int,
    recipe: Recipe,
    layers: int = 1,
    checkpoint: str | os.PathLike | None = None,
    checkpoint_every: int = 1000,
    on_check: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[Transformer, dict[str, Any]]:
    """Train until 100 % training accuracy (checked every ``check_every`` steps) or the step budget.

    Returns the model and: accuracy, loss, steps, epochs, seconds, cpu_seconds, params (non-embedding),
    params_total, width, layers, and ``history`` (step, accuracy, loss, wrong, learning rate at every
    check: the loss curve).

    ``checkpoint``: a file written atomically every ``checkpoint_every`` steps (a multiple of
    ``check_every``) with the model, the optimizer, the schedule, the batch order and the random state;
    if it exists, training resumes from it and reaches the same numbers as an uninterrupted run (one
    thread, CPU). A checkpoint written for other data, another width or another recipe is refused
    (`CheckpointError`, naming the fields that differ). ``on_check`` is called with each history entry (progress output).
    """
    if checkpoint is not None and (checkpoint_every < 1 or checkpoint_every % recipe.check_every):
        raise ValueError(f"checkpoint_every {checkpoint_every}: must be a multiple of check_every {recipe.check_every}")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        N, n = tokens.shape
        model = build_model(V, C, n, width, recipe, layers)
        X, Y = torch.as_tensor(tokens, dtype=torch.long), torch.as_tensor(labels, dtype=torch.long)
        opt = torch.optim.Adam(model.parameters(), lr=recipe.lr)
        total = recipe.steps
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))
        g = torch.Generator().manual_seed(recipe.seed)
        bs = min(recipe.batch, N)
        identity = {
            "data": _data_digest(tokens, labels),
            "V": V,
            "C": C,
            "width": width,
            "layers": layers,
            "recipe": recipe.to_json(),
        }
        t0, c0, step = time.perf_counter(), _cpu(), 0
        spent_seconds, spent_cpu, resumed_from = 0.0, 0.0, None
        perm: torch.Tensor | None = None  # (N,) the current epoch's order; batches perm[i : i + bs]
        i = 0
        history: list[dict[str, Any]] = []
        if checkpoint is not None and Path(checkpoint).is_file():
            state = load_checkpoint(checkpoint)
            if state.get("identity") != identity:
                raise CheckpointError(
                    f"checkpoint {checkpoint} was written for another run "
                    f"({'; '.join(config_differences(state.get('identity') or {}, identity))}); move it away to start afresh"
                )
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["opt"])
            sched.load_state_dict(state["sched"])
            g.set_state(state["generator"])
            perm, i, step = state["perm"], int(state["i"]), int(state["step"])
            acc, loss = float(state["accuracy"]), float(state["loss"])
            history = list(state["history"])
            spent_seconds, spent_cpu, resumed_from = float(state["seconds"]), float(state["cpu_seconds"]), step
        else:
            acc, loss = accuracy(model, X, Y)
        while step < total and acc < 1.0:
            if perm is None or i > N - bs:  # full batches only: every step sees bs examples
                perm, i = torch.randperm(N, generator=g), 0
            idx = perm[i : i + bs]
            i += bs
            out = torch.nn.functional.cross_entropy(last_logits(model, X[idx]), Y[idx])
            opt.zero_grad()
            out.backward()
            opt.step()
            sched.step()
            step += 1
            if step % recipe.check_every == 0 or step == total:
                acc, loss = accuracy(model, X, Y)
                entry = {
                    "step": step,
                    "accuracy": acc,
                    "loss": loss,
                    "wrong": round((1.0 - acc) * N),
                    "lr": sched.get_last_lr()[0],
                    "cpu_seconds": spent_cpu + _cpu() - c0,
                }
                history.append(entry)
                if on_check is not None:
                    on_check(entry)
                if checkpoint is not None and step % checkpoint_every == 0 and acc < 1.0 and step < total:
                    save_checkpoint(
                        {
                            "identity": identity,
                            "model": model.state_dict(),
                            "opt": opt.state_dict(),
                            "sched": sched.state_dict(),
                            "generator": g.get_state(),
                            "perm": perm,
                            "i": i,
                            "step": step,
                            "accuracy": acc,
                            "loss": loss,
                            "history": history,
                            "seconds": spent_seconds + time.perf_counter() - t0,
                            "cpu_seconds": spent_cpu + _cpu() - c0,
                        },
                        checkpoint,
                    )
        return model, {
            "width": width,
            "layers": layers,
            "accuracy": acc,
            "loss": loss,
            "steps": step,
            "epochs": round(step * bs / N, 2),
            "seconds": spent_seconds + time.perf_counter() - t0,
            "cpu_seconds": spent_cpu + _cpu() - c0,
            "params": model.num_parameters(non_embedding=True),
            "params_total": model.num_parameters(),
            "resumed_from": resumed_from,
            "history": history,
        }
    finally:
        torch.set_num_threads(threads)


def smallest_width(
    tokens: np.ndarray,
    labels: np.ndarray,
    V: int,
    C: int,
    recipe: Recipe,
    start: int = 4,
    max_width: int = 4096,
    resolution: float = 0.125,
    done: dict[int, dict[str, Any]] | None = None,
    on_trial: Callable[[dict[str, Any]], None] | None = None,
    checkpoint_for: Callable[[int], str | os.PathLike] | None = None,
    on_check: Callable[[int, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Smallest FF width reaching 100 % (doubling from ``start``, then bisection to ``resolution``).

    ``done`` maps widths already trained (a resumed run) to their records; ``on_trial`` is called with each
    new record (progress output and checkpointing); ``checkpoint_for(width)`` names the file a trial
    checkpoints to and resumes from (`train_next_token`), ``on_check(width, entry)`` sees every accuracy
    check of a trial. Returns {"width", "params", "trials"} (width None if
    even ``max_width`` fails).
    """
    trials: dict[int, dict[str, Any]] = dict(done or {})

    def ok(w: int) -> bool:
        if w not in trials:
            _, rec = train_next_token(
                tokens,
                labels,
                V,
                C,
                w,
                recipe,
                checkpoint=checkpoint_for(w) if checkpoint_for is not None else None,
                on_check=(lambda e, w=w: on_check(w, e)) if on_check is not None else None,
            )
            trials[w] = rec
            if on_trial is not None:
                on_trial(rec)
        return trials[w]["accuracy"] == 1.0

    lo, hi, w = 0, None, start
    while w <= max_width:
        if ok(w):
            hi = w
            break
        lo, w = w, 2 * w
    if hi is not None:
        while hi - lo > max(1, int(resolution * hi)):
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return {
        "width": hi,
        "params": trials[hi]["params"] if hi is not None else None,
        "trials": [trials[k] for k in sorted(trials)],
    }


def blocks_experiment(
    tokens: np.ndarray,
    labels: np.ndarray,
    V: int,
    C: int,
    blocks: tuple[int, ...],
    width: int,
    recipe: Recipe,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Training loss and accuracy after the same step budget for each number of blocks (Kajitsuka & Sato,
    ICLR 2025, experiment with #blocks = 1, 10, 20, 30, 40 at N = 3,000)."""
    rows = []
    for L in blocks:
        _, rec = train_next_token(tokens, labels, V, C, width, recipe, layers=L)
        rows.append({"blocks": L, **rec})
        if on_row is not None:
            on_row(rows[-1])
    return rows
