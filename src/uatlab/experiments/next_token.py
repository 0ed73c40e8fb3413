"""Next-token memorization measured: parameters against N, compiled (exact / float64) and trained.

- `compiled_point`: compile N random next-token examples (n, C as given) with the memorizer of
  Kajitsuka & Sato (ICLR 2025) in a regime, certify, and report parameters, bits and seconds.
- `per_token_point`: paper A's per-token memorizer (Kajitsuka & Sato, ICLR 2024, Corollary 1) on the
  same data (causal; the non-final positions carry a filler label), the linear-in-N baseline.
- `bend_point`: the smallest N whose parameter-optimal exact layout needs words longer than float64
  holds: from there on the float64 count can no longer follow √N and grows like N·log2 C / 50.

The trained counterpart (smallest trained model reaching 100 %, and the paper's blocks experiment) is
`uatlab.experiments.next_token_training`.

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
            "certified_rows": cert.certified_rows,
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


def threads_note() -> str:
    return f"{os.cpu_count()} cores shared with other jobs; CPU seconds are this process's user+system time"
