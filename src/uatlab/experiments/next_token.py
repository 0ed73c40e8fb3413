"""Next-token memorization measured: parameters against N, compiled (exact / float64) and trained.

- `compiled_point`: compile N random next-token examples (n, C as given) with the memorizer of
  Kajitsuka & Sato (ICLR 2025) in a regime, certify, and report parameters, bits and seconds.
- `per_token_point`: paper A's per-token memorizer (Kajitsuka & Sato, ICLR 2024, Corollary 1) on the
  same data (causal; the non-final positions carry a filler label), the linear-in-N baseline.
- `bend_point`: the smallest N whose parameter-optimal exact layout needs words longer than float64
  holds: from there on the float64 count can no longer follow √N and grows like N·log2 C / 50.
- `trained_point`: the smallest trained one-layer Transformer (feed-forward width searched by
  doubling) that reaches 100 % training accuracy on the same data.
- `blocks_variant`: the ICLR 2025 paper's experiment (blocks 1…40 at N = 3,000), quick variant.

Parameters are "non-embedding" unless said otherwise: attention + feed-forward + readout (the token and
position tables are reported separately). The float64 floor is N·log2 C / 53: a float64 number holds at
most 53 significant bits, so fewer parameters cannot store N·log2 C bits of random labels.
"""

from __future__ import annotations

import math
import os
import resource
import time
from typing import Any

import numpy as np

from uatlab.constructions.paper_c.layout import choose_layout, max_digits
from uatlab.constructions.paper_c.next_token_memorizer import compile_memorizer
from uatlab.experiments.measure import fit_loglog_slope  # noqa: F401 (re-exported)
from uatlab.verify.next_token import certify_next_token


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def random_next_token(N: int, n: int, V: int, C: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """N distinct uniformly random sequences over V tokens and uniformly random labels in [0, C)."""
    rng = np.random.default_rng(seed)
    toks = rng.integers(0, V, size=(N, n), dtype=np.int64)
    while True:
        uniq, first = np.unique(toks, axis=0, return_index=True)
        if len(uniq) == N:
            break
        dup = np.setdiff1d(np.arange(N), first)
        toks[dup] = rng.integers(0, V, size=(len(dup), n))
    return toks, rng.integers(0, C, size=N, dtype=np.int64)


def compiled_point(
    N: int, regime: str, n: int = 32, C: int = 10, V: int = 4, seed: int = 0, certify: bool = True
) -> dict[str, Any]:
    tokens, labels = random_next_token(N, n, V, C, seed)
    w0, c0 = time.perf_counter(), cpu_seconds()
    memo, _ = compile_memorizer(tokens, labels, V=V, C=C, regime=regime, seed=seed)
    w1, c1 = time.perf_counter(), cpu_seconds()
    row: dict[str, Any] = {
        "N": N,
        "regime": regime,
        "n": n,
        "C": C,
        "V": V,
        "params": memo.parameters["non_embedding"],
        "params_total": memo.parameters["total"],
        "embedding": memo.parameters["embedding"],
        "D": memo.layout.D,
        "m": memo.layout.m,
        "banks": list(memo.layout.banks),
        "depth": memo.circuit.depth,
        "max_weight_bits": memo.facts["max_weight_bits"],
        "label_bits": N * math.log2(C),
        "float64_floor": N * math.log2(C) / 53,
        "ratio_to_floor": memo.parameters["non_embedding"] / (N * math.log2(C) / 53),
        "compile_seconds": w1 - w0,
        "compile_cpu_seconds": c1 - c0,
    }
    if certify:
        cert = certify_next_token(memo, tokens, labels)
        row |= {
            "certified": cert.certified,
            "correct": cert.correct_rows,
            "ceiling": cert.ceiling_rows,
            "float_bound_bits": cert.float_bound_bits,
            "certify_seconds": cert.seconds,
            "certify_cpu_seconds": cpu_seconds() - c1,
        }
    return row


def per_token_point(N: int, n: int = 32, C: int = 10, V: int = 4, seed: int = 0) -> dict[str, Any]:
    """Paper A's memorizer (one feed-forward unit per context) on the same next-token data."""
    from uatlab.constructions.paper_a.cor1_memorizer.api import compile_dataset
    from uatlab.data.dataset import SequenceDataset

    tokens, labels = random_next_token(N, n, V, C, seed)
    T = [[str(t) for t in row] for row in tokens.tolist()]
    L = [["_"] * (n - 1) + [f"y{y}"] for y in labels.tolist()]
    w0, c0 = time.perf_counter(), cpu_seconds()
    res = compile_dataset(SequenceDataset(T, L), dtype="float64", causal=True, run_certificate=False)
    return {
        "N": N,
        "regime": "per-token (paper A)",
        "params": res.report["params_non_embedding"],
        "ff_width": res.report["ff_width"],
        "compile_seconds": time.perf_counter() - w0,
        "compile_cpu_seconds": cpu_seconds() - c0,
    }


def bend_point(C: int = 10, n: int = 32, lo: int = 100, hi: int = 10**7) -> int:
    """Smallest N (bisection) whose exact parameter-optimal layout uses more digits per word than float64 holds."""
    cap = max_digits(C, "float64")

    def over(N: int) -> bool:
        return choose_layout(N, C, n, "exact").D > cap

    if not over(hi):
        return -1
    while hi - lo > max(1, lo // 100):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if over(mid) else (mid, hi)
    return hi


def slopes(rows: list[dict[str, Any]]) -> dict[str, float]:
    out = {}
    for regime in sorted({r["regime"] for r in rows}):
        pts = sorted((r["N"], r["params"]) for r in rows if r["regime"] == regime)
        if len(pts) >= 2:
            out[regime] = fit_loglog_slope([p[0] for p in pts], [p[1] for p in pts])
    return out


# ---------------------------------------------------------------------------------------------- training


def _train_to_full(
    tokens: np.ndarray,
    labels: np.ndarray,
    V: int,
    C: int,
    d: int,
    width: int,
    rank: int | None,
    layers: int,
    epochs: int,
    lr: float,
    seed: int,
    batch: int = 256,
    max_seconds: float | None = None,
) -> dict[str, Any]:
    """Train a Transformer (learned positions, causal, prediction at the last position) until 100 %."""
    import torch

    from uatlab.models.transformer import Transformer, TransformerConfig

    torch.manual_seed(seed)
    N, n = tokens.shape
    cfg = TransformerConfig(
        d_model=d,
        n_layers=layers,
        n_heads=1,
        head_dim=1 if rank == 1 else d,
        rank=rank,
        ff_width=width,
        vocab_size=V,
        num_labels=C,
        max_len=n,
        positional="learned",
        causal=True,
        dtype="float32",
    )
    model = Transformer(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    X = torch.tensor(tokens)
    Y = torch.tensor(labels)
    g = torch.Generator().manual_seed(seed)
    t0 = time.perf_counter()
    acc, epoch = 0.0, 0
    for epoch in range(1, epochs + 1):
        model.train()
        perm = torch.randperm(N, generator=g)
        for i in range(0, N, batch):
            idx = perm[i : i + batch]
            loss = torch.nn.functional.cross_entropy(model(X[idx])[:, -1, :], Y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        if epoch % 5 == 0 or epoch == epochs:
            model.eval()
            with torch.no_grad():
                acc = float((model(X)[:, -1, :].argmax(-1) == Y).float().mean())
            if acc == 1.0 or (max_seconds and time.perf_counter() - t0 > max_seconds):
                break
    return {
        "accuracy": acc,
        "epochs": epoch,
        "seconds": time.perf_counter() - t0,
        "params": model.num_parameters(non_embedding=True),
        "params_total": model.num_parameters(),
    }


def trained_point(
    N: int,
    n: int = 32,
    C: int = 10,
    V: int = 4,
    seed: int = 0,
    d: int = 16,
    rank: int | None = 1,
    epochs: int = 300,
    lr: float = 3e-3,
    widths: tuple[int, ...] = (4, 8, 16, 32, 64, 128, 256, 512),
    max_seconds: float | None = None,
) -> dict[str, Any]:
    """The smallest feed-forward width (doubling) at which a one-layer model reaches 100 % on N examples."""
    tokens, labels = random_next_token(N, n, V, C, seed)
    tried = []
    for w in widths:
        r = _train_to_full(tokens, labels, V, C, d, w, rank, 1, epochs, lr, seed, max_seconds=max_seconds)
        tried.append({"width": w, **r})
        if r["accuracy"] == 1.0:
            return {
                "N": N,
                "regime": f"trained 1-layer ({'rank-1' if rank == 1 else 'full'})",
                "width": w,
                "d": d,
                **r,
                "tried": tried,
            }
    return {
        "N": N,
        "regime": f"trained 1-layer ({'rank-1' if rank == 1 else 'full'})",
        "width": None,
        "d": d,
        "accuracy": tried[-1]["accuracy"],
        "params": None,
        "tried": tried,
    }


def blocks_variant(
    N: int = 3000,
    blocks: tuple[int, ...] = (1, 10, 20, 40),
    n: int = 32,
    C: int = 10,
    V: int = 4,
    d: int = 16,
    width: int = 32,
    epochs: int = 60,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Kajitsuka & Sato 2025's experiment: accuracy after a fixed budget for #blocks = 1 … 40 at N = 3,000."""
    tokens, labels = random_next_token(N, n, V, C, seed)
    rows = []
    for L in blocks:
        r = _train_to_full(tokens, labels, V, C, d, width, None, L, epochs, 1e-3, seed)
        rows.append({"blocks": L, **r})
    return rows


def threads_note() -> str:
    return f"{os.cpu_count()} cores shared with other jobs; CPU seconds are this process's user+system time"
