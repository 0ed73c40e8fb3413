"""Synthetic labelled sequences: N sequences of length n over V tokens with C classes, seeded.

Labels are drawn uniformly at random per token, independently of everything (so the data set carries
N·n·log2 C bits that no rule can compress). Tokens are drawn uniformly; with ``repeats=False`` each
sequence has n distinct tokens (paper A's no-duplicate hypothesis; needs n ≤ V).

Token strings are ``t0 … t{V−1}``, labels ``c0 … c{C−1}``. `write_synthetic` streams the JSONL format
of `uatlab.data.jsonl` (``{"tokens": [...], "labels": [...]}`` per line) without holding the data.
Line 1 also records the options it was written with (``"synth": {"version": 1, "N": …, "seed": …}``, a key every
reader ignores), so that it replaces an existing file only if that file is byte for byte what it wrote with the
options recorded there (or empty): `check_synthetic_target`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from uatlab.data.dataset import SequenceDataset
from uatlab.errors import InputError
from uatlab.memory_guard import human


def _check(N: int, n: int, V: int, C: int, repeats: bool) -> None:
    if min(N, n, V, C) < 1:
        raise InputError(f"N, n, V and C must be positive, got N={N}, n={n}, V={V}, C={C}")
    if not repeats and n > V:
        raise InputError(f"sequences of n={n} distinct tokens need a vocabulary V ≥ n, got V={V}")


SYNTH_KEY = "synth"  # the key of line 1's object that records the options `write_synthetic` wrote the file with
SYNTH_VERSION = 1  # of the file format: the record's keys and the generator; a file of another version is refused
_HEAD = 4096  # bytes of line 1 read to find the record (it is the first key, a few dozen bytes long)
_RECORD = re.compile(rb'\{"' + SYNTH_KEY.encode() + rb'": (\{[^{}]*\}), "tokens": ')


def synthetic_options(N: int, n: int, V: int, C: int, repeats: bool = True, seed: int = 0) -> dict:
    """The record of the options that line 1 of a `write_synthetic` file holds under ``"synth"``."""
    return {"version": SYNTH_VERSION, "N": N, "n": n, "V": V, "C": C, "repeats": repeats, "seed": seed}


def synthetic_lines(N: int, n: int, V: int, C: int, repeats: bool = True, seed: int = 0) -> Iterator[str]:
    """The lines `write_synthetic` writes, newline included, streaming: ``{"tokens": [...], "labels": [...]}`` per
    sequence of `iter_synthetic`, the first with the ``"synth"`` record of the options (`synthetic_options`) as
    its first key. Every JSONL reader of uatlab reads the tokens and labels and ignores other keys."""
    head: dict = {SYNTH_KEY: synthetic_options(N, n, V, C, repeats, seed)}
    for t, y in iter_synthetic(N, n, V, C, repeats, seed):
        yield json.dumps({**head, "tokens": t, "labels": y}) + "\n"
        head = {}


def recorded_options(path: str | os.PathLike) -> tuple[dict | None, str]:
    """The options recorded on line 1 of ``path`` by `write_synthetic` (as `synthetic_options`, checked to be
    options it takes), or (None, why not)."""
    with open(path, "rb") as fh:
        head = fh.read(_HEAD)
    m = _RECORD.match(head)
    if m is None:
        return None, (
            f'line 1 does not start with the "{SYNTH_KEY}" record of the options synth wrote it with (synth of an '
            "older uatlab wrote none, so its output cannot be told from an edited copy)"
        )
    try:
        opts = json.loads(m.group(1))
    except ValueError:
        opts = None
    keys = set(synthetic_options(1, 1, 1, 1))
    if not isinstance(opts, dict) or set(opts) != keys or opts["version"] != SYNTH_VERSION:
        return None, f'line 1 has a "{SYNTH_KEY}" record that is not one of synth\'s (version {SYNTH_VERSION})'
    bad = f'line 1 has a "{SYNTH_KEY}" record of options synth does not take: {m.group(1).decode()}'
    types = all(type(opts[k]) is int for k in ("N", "n", "V", "C", "seed")) and type(opts["repeats"]) is bool
    if not types or opts["seed"] < 0:
        return None, bad
    try:  # the ranges synth itself checks
        _check(opts["N"], opts["n"], opts["V"], opts["C"], opts["repeats"])
    except InputError:
        return None, bad
    return opts, ""


def first_changed_line(path: str | os.PathLike) -> tuple[int, str] | None:
    """None if ``path`` is byte for byte what `write_synthetic` writes with the options recorded on its line 1
    (`recorded_options`), else (the number from 1 of the first line that differs, why). The expected lines are
    regenerated and compared as they come (memory: one block of `iter_synthetic`), stopping at the first
    difference."""
    opts, why = recorded_options(path)
    if opts is None:
        return 1, why
    args = {k: v for k, v in opts.items() if k != "version"}
    given = " ".join(f"-{k} {v}" for k, v in args.items() if k in ("N", "n", "V", "C")) + f" --seed {args['seed']}"
    given = f"the options recorded on line 1 ({given}{'' if args['repeats'] else ' --no-repeats'})"
    if 12 * args["n"] > os.path.getsize(path):  # a line of n tokens and labels has ≥ 12n bytes: line 1 cannot be whole
        return 1, f"line 1 differs from what synth writes with {given}"
    with open(path, "rb") as fh:
        number = 0
        lines = synthetic_lines(**args)
        while True:
            try:
                line = next(lines, None)
            except (ValueError, OverflowError) as e:  # options numpy cannot draw from (e.g. V ≥ 2^64)
                return 1, f"synth cannot write with {given}: {e}"
            if line is None:
                break
            number += 1
            want = line.encode("ascii")
            got = fh.read(len(want))
            if got != want:
                if not got:
                    return number, f"the file ends before line {number}, which synth writes with {given}"
                return number, f"line {number} differs from what synth writes with {given}"
        if fh.read(1):
            return number + 1, f"line {number + 1} follows the {number} lines synth writes with {given}"
    return None


def check_synthetic_target(path: str | os.PathLike) -> None:
    """Refuse to write over an existing non-empty file unless it is byte for byte what `write_synthetic` wrote
    with the options recorded in it (`first_changed_line`): anything else (a model, a CoNLL file, the user's own
    JSONL, synthetic data the user extended or edited by hand, synthetic data of an older uatlab without the
    record) would be lost, while unedited synthetic data is regenerated from its options and seed. (A symbolic
    link there is refused by the atomic writer, `uatlab.io_safety.atomic_path`, whatever it names.)"""
    p = Path(path)
    if not (p.is_file() and p.stat().st_size > 0):
        return
    try:
        changed = first_changed_line(p)
    except OSError as e:
        raise InputError(f"{p} exists and cannot be read to check that synth wrote it: {e}") from e
    if changed is not None:
        raise InputError(
            f"{p} exists and is not synthetic data as uatlab synth wrote it: {changed[1]}; left unchanged, move it "
            "away or choose another path"
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


# the fewest bytes of a JSONL line of n tokens: 25 + 12 n ('{"tokens": [' … '], "labels": [' … ']}\n' and, per
# token, a one-digit token '"t0"' and label '"c0"' with a ', ' between neighbours: 29 + 12 n − 4)
_LINE_BYTES, _TOKEN_BYTES = 25, 12


def _check_room(path: Path, N: int, n: int) -> None:
    """InputError unless the folder of ``path`` has room for the file: N sequences of n tokens take at least
    N·(25 + 12 n) bytes (every id one digit), written beside ``path`` before it replaces anything."""
    folder = path.parent if str(path.parent) else Path(".")
    while not folder.exists() and folder.parent != folder:
        folder = folder.parent
    need = N * (_LINE_BYTES + _TOKEN_BYTES * n)
    free = shutil.disk_usage(folder).free
    if need > free:
        raise InputError(
            f"{path}: {N} sequences of {n} tokens take at least {human(need)}, and {folder} has {human(free)} free; "
            "ask for fewer sequences or shorter ones, or write elsewhere"
        )


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
    _check_room(path, N, n)
    with atomic_write(path) as fh:  # an existing file is replaced only once the new one is complete
        for line in synthetic_lines(N, n, V, C, repeats, seed):
            fh.write(line)
    return path
