"""Why a trained depth-1 rank-1 Transformer stops short of the CoNLL ceiling: a diagnosis on what fits.

Paper A (Kajitsuka & Sato, ICLR 2024, Theorem 2 and Corollary 1): with rank-1 attention (head size 1)
every token k of a sentence is summarised, beyond its own embedding x_k, by ONE scalar

    h_k = Σ_j softmax_j(q_k k_j) v_j,        q_k = W_Q x_k, k_j = W_K x_j, v_j = W_V x_j    (scalars)

and the feed-forward layer sees x_k + W_O h_k. Two tokens with the same word at the same position
(same x_k) but different gold labels can only be told apart through h_k; if their h differ by Δh, a
ReLU network needs slopes ~ 1/Δh to separate them, which gradient descent reaches slowly if at all.

`diagnose` trains the README recipe (d = 128, FF 512, AdamW 3e-3 cosine, batch 32, embeddings
N(0, 0.1²)) on a subset of sentences, then for every token that has a *twin* (same word and position,
different gold label) measures Δh_min = min |h_k − h_twin|, and compares errors with correct tokens.

Remedies for the near-collisions of h (each an option of `diagnose`):

- ``beta``: a fixed inverse temperature multiplying every score (the learnable W_Q still sets the
  effective scale). Paper A, Theorem 2 separates contexts by making the query scale large (the Boltzmann
  operator approaches the max and distinct contexts get distinct values); a larger β gives gradient
  descent that scale at the learning rate's step size instead of growing W_Q slowly.
- ``hinge``: λ · mean_k max(0, γ − (z_{k,y} − max_{c≠y} z_{k,c})) added to the cross-entropy: a margin
  loss that is zero on tokens already classified with margin γ and acts only on the hardest tokens
  (the twins), unlike cross-entropy whose gradient on them is diluted by 200,000 easy tokens.
- ``dtype="float64"``: training in float64 (rules out float32 rounding of Δh ≈ 10⁻²…10⁻³).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np


def _batches(ids: list[np.ndarray], labs: list[np.ndarray], order: np.ndarray, bs: int, pad: int):
    import torch

    for i in range(0, len(order), bs):
        idx = order[i : i + bs]
        n = max(len(ids[j]) for j in idx)
        X = torch.full((len(idx), n), pad, dtype=torch.long)
        Y = torch.full((len(idx), n), -100, dtype=torch.long)
        M = torch.zeros((len(idx), n), dtype=torch.bool)
        for r, j in enumerate(idx):
            X[r, : len(ids[j])] = torch.tensor(ids[j])
            Y[r, : len(ids[j])] = torch.tensor(labs[j])
            M[r, : len(ids[j])] = True
        yield idx, X, Y, M


def diagnose(
    path: str,
    sentences: int = 2000,
    epochs: int = 40,
    dim: int = 128,
    ff: int = 512,
    rank: int | None = 1,
    lr: float = 3e-3,
    seed: int = 0,
    max_minutes: float = 30.0,
    beta: float = 1.0,
    hinge: float = 0.0,
    margin: float = 1.0,
    dtype: str = "float32",
    progress: Any = None,
) -> dict[str, Any]:
    """Train on the first ``sentences`` sentences, then analyse the remaining errors and their twins.

    ``progress(record)`` is called after every epoch with the history record (epoch, errors, minutes,
    cpu_seconds). Training stops at 0 errors, after ``epochs`` or after ``max_minutes`` of wall time.
    """
    import resource

    import torch

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        return r.ru_utime + r.ru_stime

    from uatlab.data.conll import read_conll
    from uatlab.models.transformer import Transformer, TransformerConfig

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    data = read_conll(path)
    toks, labs = data.tokens[:sentences], data.labels[:sentences]
    vocab = {t: i for i, t in enumerate(sorted({t for s in toks for t in s}))}
    lvocab = {y: i for i, y in enumerate(sorted({y for s in labs for y in s}))}
    ids = [np.asarray([vocab[t] for t in s]) for s in toks]
    yid = [np.asarray([lvocab[y] for y in s]) for s in labs]
    max_len = max(len(s) for s in ids)
    pad = len(vocab)
    cfg = TransformerConfig(
        d_model=dim,
        n_layers=1,
        n_heads=1,
        head_dim=1 if rank == 1 else dim,
        rank=rank,
        ff_width=ff,
        vocab_size=len(vocab) + 1,
        num_labels=len(lvocab),
        max_len=max_len,
        positional="learned",
        beta=beta,
        dtype=dtype,
    )
    model = Transformer(cfg)
    with torch.no_grad():
        model.embed.weight.normal_(0, 0.1)  # the recipe's N(0, 0.1²) token embeddings
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    steps_per_epoch = math.ceil(len(ids) / 32)
    total = steps_per_epoch * epochs
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 200) * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))
    )
    rng = np.random.default_rng(seed)
    history = []
    t0, c0 = time.perf_counter(), cpu()
    for ep in range(1, epochs + 1):
        model.train()
        for _, X, Y, M in _batches(ids, yid, rng.permutation(len(ids)), 32, pad):
            z = model(X, M).reshape(-1, len(lvocab))  # (B·n, C)
            y = Y.reshape(-1)  # (B·n,)
            loss = torch.nn.functional.cross_entropy(z, y)
            if hinge > 0:
                keep = y >= 0
                zk, yk = z[keep], y[keep]
                gold = zk.gather(1, yk[:, None])[:, 0]
                other = zk.scatter(1, yk[:, None], float("-inf")).amax(1)
                loss = loss + hinge * torch.relu(margin - (gold - other)).mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
        errors = _errors(model, ids, yid, pad)
        history.append(
            {
                "epoch": ep,
                "errors": errors,
                "minutes": (time.perf_counter() - t0) / 60,
                "cpu_seconds": cpu() - c0,
            }
        )
        if progress is not None:
            progress(history[-1])
        if errors == 0 or time.perf_counter() - t0 > 60 * max_minutes:
            break
    return {
        "config": {
            "sentences": len(ids),
            "tokens": int(sum(len(s) for s in ids)),
            "dim": dim,
            "ff": ff,
            "rank": rank,
            "lr": lr,
            "epochs_planned": epochs,
            "beta": beta,
            "hinge": hinge,
            "margin": margin,
            "dtype": dtype,
        },
        "history": history,
        **_analyse(model, toks, ids, yid, pad),
    }


def _errors(model, ids, yid, pad) -> int:
    import torch

    model.eval()
    err = 0
    with torch.no_grad():
        for _idx, X, Y, M in _batches(ids, yid, np.arange(len(ids)), 256, pad):
            pred = model(X, M).argmax(-1)
            err += int(((pred != Y) & M).sum())
    return err


def _analyse(model, toks, ids, yid, pad) -> dict[str, Any]:
    """Per token: prediction, the attention scalar h, twins (same word and position, other gold label)."""
    import torch

    model.eval()
    attn = model.blocks[0].attn
    rows = []  # (sentence, pos, word, gold, pred, h)
    with torch.no_grad():
        for idx, X, _, M in _batches(ids, yid, np.arange(len(ids)), 256, pad):
            x = model.embed_inputs(X)
            w = attn.effective_weights()
            p = attn.attention_weights(x, M)  # (B, 1, n, n)
            v = torch.einsum("bnd,hsd->bhns", x, w["W_V"])  # (B, 1, n, s)
            h = (p @ v)[:, 0, :, 0] if v.shape[-1] == 1 else (p @ v)[:, 0].norm(dim=-1)  # (B, n)
            pred = model(X, M).argmax(-1)
            for r, j in enumerate(idx):
                for k in range(len(ids[j])):
                    rows.append((int(j), k, toks[j][k], int(yid[j][k]), int(pred[r, k]), float(h[r, k])))
    groups: dict[tuple[str, int], list[int]] = {}
    for i, (_, k, word, _, _, _) in enumerate(rows):
        groups.setdefault((word, k), []).append(i)
    dmin = np.full(len(rows), np.inf)
    for members in groups.values():
        if len(members) < 2:
            continue
        hs = np.asarray([rows[i][5] for i in members])
        gs = np.asarray([rows[i][3] for i in members])
        for a, i in enumerate(members):
            other = gs != gs[a]
            if other.any():
                dmin[i] = float(np.min(np.abs(hs[other] - hs[a])))
    sent_key = {}
    for j, s in enumerate(toks):
        sent_key.setdefault(tuple(s), []).append(j)
    conflict_tokens = 0
    for js in sent_key.values():
        if len(js) > 1:
            for k in range(len(toks[js[0]])):
                labs_k = [int(yid[j][k]) for j in js]
                conflict_tokens += len(labs_k) - max(labs_k.count(v) for v in set(labs_k))
    err = [i for i, r in enumerate(rows) if r[3] != r[4]]
    twin = np.isfinite(dmin)
    correct_twin = [i for i in np.flatnonzero(twin) if rows[i][3] == rows[i][4]]
    err_d = np.asarray([dmin[i] for i in err if twin[i]])
    cor_d = np.asarray([dmin[i] for i in correct_twin])
    listed = sorted(err, key=lambda i: dmin[i])[:40]
    return {
        "tokens": len(rows),
        "errors": len(err),
        "ceiling_conflict_tokens": conflict_tokens,
        "errors_with_twin": int(sum(twin[i] for i in err)),
        "tokens_with_twin": int(twin.sum()),
        "twin_dh_errors_median": float(np.median(err_d)) if len(err_d) else None,
        "twin_dh_correct_median": float(np.median(cor_d)) if len(cor_d) else None,
        "twin_dh_correct_quantiles": [float(q) for q in np.quantile(cor_d, [0.01, 0.1, 0.5])] if len(cor_d) else None,
        "correct_twins_below_error_median": int((cor_d <= np.median(err_d)).sum())
        if len(err_d) and len(cor_d)
        else None,
        "error_examples": [
            {
                "sentence": rows[i][0],
                "position": rows[i][1],
                "word": rows[i][2],
                "gold": rows[i][3],
                "pred": rows[i][4],
                "h": rows[i][5],
                "twin_dh": None if not twin[i] else float(dmin[i]),
            }
            for i in listed
        ],
    }


def analyse_trained(model_path: str, data_path: str, sentences: int | None = None) -> dict[str, Any]:
    """The error and twin analysis of `diagnose` for a model written by ``uatlab train``.

    Reads the model (with its token/label encoding) and the first ``sentences`` sentences of the CoNLL
    file it was trained on; returns the same fields as `diagnose` minus the training history.
    """
    from uatlab.data.conll import read_conll
    from uatlab.models.io import load

    model = load(model_path)
    if model.encoding is None:
        raise ValueError(f"{model_path}: the model file has no token/label encoding")
    enc = model.encoding
    data = read_conll(data_path)
    toks = data.tokens[:sentences] if sentences else data.tokens
    labs = data.labels[:sentences] if sentences else data.labels
    unk = enc.token_to_id.get(enc.unknown_token, 0) if enc.unknown_token is not None else 0
    ids = [np.asarray([enc.token_to_id.get(t, unk) for t in s]) for s in toks]
    yid = [np.asarray([enc.label_to_id[y] for y in s]) for s in labs]
    return _analyse(model, toks, ids, yid, 0)
