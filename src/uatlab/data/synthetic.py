"""Synthetic labelled sequences: N sequences of length n over V tokens with C classes, seeded.

Labels are drawn uniformly at random per token, independently of everything (so the data set carries
N·n·log2 C bits that no rule can compress). Tokens are drawn uniformly; with ``repeats=False`` each
sequence has n distinct tokens (paper A's no-duplicate hypothesis; needs n ≤ V).

Token strings are ``t0 … t{V−1}``, labels ``c0 … c{C−1}``. `write_synthetic` streams the JSONL format
of `uatlab.data.jsonl` (``{"tokens": [...], "labels": [...]}`` per line) without holding the data.
It replaces an existing file only if that file is one it wrote (or empty): `check_synthetic_target`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from uatlab.data.dataset import SequenceDataset
from uatlab.errors import InputError


def _check(N: int, n: int, V: int, C: int, repeats: bool) -> None:
    if min(N, n, V, C) < 1:
        raise InputError(f"N, n, V and C must be positive, got N={N}, n={n}, V={V}, C={C}")
    if not repeats and n > V:
        raise InputError(f"sequences of n={n} distinct tokens need a vocabulary V ≥ n, got V={V}")


_RECORD = re.compile(rb'\{"tokens": \[("t\d+"(?:, "t\d+")*)\], "labels": \[("c\d+"(?:, "c\d+")*)\]\}\n')


def first_non_synthetic_line(path: str | os.PathLike) -> int | None:
    """The number (from 1) of the first line of ``path`` that is not a record as `write_synthetic` writes it,
    or None if every line is one: exactly ``{"tokens": ["t<int>", …], "labels": ["c<int>", …]}`` in
    `json.dumps`'s spacing, equally many tokens and labels, as many as on the first line, and a final newline.
    Every line is read (a file that merely starts like synthetic data is not synthetic data)."""
    n = None
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, start=1):
            m = _RECORD.fullmatch(line)
            if m is None:
                return number
            toks, labs = m.group(1).count(b","), m.group(2).count(b",")
            if toks != labs or (n is not None and toks != n):
                return number
            n = toks
    return None


def check_synthetic_target(path: str | os.PathLike) -> None:
    """Refuse to write over an existing non-empty file that is not synthetic data written by `write_synthetic`
    (a model, a CoNLL file, the user's own JSONL, synthetic data the user extended or edited by hand):
    synthetic data is regenerated from its options and seed, anything else would be lost."""
    p = Path(path)
    if not (p.is_file() and p.stat().st_size > 0):
        return
    try:
        line = first_non_synthetic_line(p)
    except OSError as e:
        raise InputError(f"{p} exists and cannot be read to check that synth wrote it: {e}") from e
    if line is not None:
        raise InputError(
            f"{p} exists and is not synthetic data written by uatlab synth (line {line} is not a "
            '{"tokens": ["t…"], "labels": ["c…"]} record of the same length as line 1); move it away or '
            "choose another path"
        )


def iter_synthetic(
    N: int, n: int, V: int, C: int, repeats: bool = True, seed: int = 0, block: int = 4096
) -> Iterator[tuple[list[str], list[str]]]:
    """Yield (tokens, labels) for N random sequences, generated in blocks (constant memory)."""
    _check(N, n, V, C, repeats)
    block = max(1, min(block, (1 << 22) // n))  # ≤ 4M tokens per block (the default block up to n = 1024)
    rng = np.random.default_rng(seed)
    done = 0
    while done < N:
        m = min(block, N - done)
        if repeats:
            toks = rng.integers(0, V, size=(m, n))
        else:
            toks = np.argsort(rng.random((m, V)), axis=1)[:, :n] if V <= 4 * n else _distinct(rng, m, n, V)
        labs = rng.integers(0, C, size=(m, n))
        for i in range(m):
            yield [f"t{t}" for t in toks[i]], [f"c{y}" for y in labs[i]]
        done += m


def _distinct(rng: np.random.Generator, m: int, n: int, V: int) -> np.ndarray:
    out = np.empty((m, n), dtype=np.int64)
    for i in range(m):
        out[i] = rng.choice(V, size=n, replace=False)
    return out


def synthetic_dataset(N: int, n: int, V: int, C: int, repeats: bool = True, seed: int = 0) -> SequenceDataset:
    """The same sequences as `iter_synthetic`, in memory."""
    toks, labs = [], []
    for t, y in iter_synthetic(N, n, V, C, repeats, seed):
        toks.append(t)
        labs.append(y)
    return SequenceDataset(toks, labs, source=f"<synthetic N={N} n={n} V={V} C={C} repeats={repeats} seed={seed}>")


def write_synthetic(
    path: str | os.PathLike, N: int, n: int, V: int, C: int, repeats: bool = True, seed: int = 0
) -> Path:
    """Write the sequences of `iter_synthetic` as JSONL (atomically: all or nothing); returns the path."""
    from uatlab.io_safety import atomic_write

    path = Path(path)
    _check(N, n, V, C, repeats)  # before the file is touched
    if seed < 0:
        raise InputError(f"seed must be ≥ 0, got {seed}")
    check_synthetic_target(path)
    with atomic_write(path) as fh:  # an existing file is replaced only once the new one is complete
        for t, y in iter_synthetic(N, n, V, C, repeats, seed):
            fh.write(json.dumps({"tokens": t, "labels": y}) + "\n")
    return path
