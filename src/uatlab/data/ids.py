"""Integer id arrays as the constructions and certificates read them: checked, never silently truncated.

`integer_ids` turns an array of ids into int64 and refuses fractional, non-finite and non-numeric entries
(``astype(int64)`` would turn 1.9 into 1, and a certificate would then speak of another sequence);
`check_left_padding` and `check_next_token_ids` are the checks every reader of next-token data makes (the
memorizer's compiler, the data set, the certificate), in one place so that one input gets one message.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from uatlab.errors import InputError


def integer_ids(values: Any, kind: str, position: str | None = None) -> np.ndarray:
    """``values`` as int64 ids; InputError (naming the first offending entry) for fractional, non-finite or
    non-numeric entries, instead of the silent truncation of ``astype(int64)``. ``position``: what a 1-D entry's
    index is called in the message (e.g. "position"; default: "entry (i,)")."""
    try:
        arr = np.asarray(values)
    except ValueError as exc:  # rows of different lengths ("inhomogeneous shape")
        raise InputError(f"{kind} ids must form a rectangular array (rows of one length): {exc}") from None
    if arr.dtype.kind in "iu":
        if arr.dtype.kind == "u" and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
            at = tuple(int(i) for i in np.argwhere(arr > np.iinfo(np.int64).max)[0])
            raise InputError(f"{kind} ids must fit in int64: {_where(at, position)} holds {arr[at].item()}")
        return arr.astype(np.int64)
    if arr.dtype.kind != "f":
        raise InputError(f"{kind} ids must be integers, got an array of {arr.dtype}")
    bad = ~np.isfinite(arr)
    bad[~bad] = arr[~bad] != np.floor(arr[~bad])
    if bad.any():
        at = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InputError(f"{kind} ids must be integers: {_where(at, position)} holds {arr[at].item()!r}")
    big = np.abs(arr) >= 2.0**63  # integral, but beyond int64 (the cast would wrap it around)
    if big.any():
        at = tuple(int(i) for i in np.argwhere(big)[0])
        raise InputError(f"{kind} ids must fit in int64: {_where(at, position)} holds {arr[at].item()!r}")
    return arr.astype(np.int64)


def _where(at: tuple[int, ...], position: str | None) -> str:
    if len(at) == 2:
        return f"row {at[0]}, position {at[1]}"
    if position is not None and len(at) == 1:
        return f"{position} {at[0]}"
    return f"entry {at}"


def check_left_padding(tokens: np.ndarray, V: int) -> None:
    """The pad id V may only precede a sequence's first real token (left padding), and no row is all padding."""
    real = tokens != V  # (N, n)
    after_real = np.zeros_like(real)
    after_real[:, 1:] = np.logical_or.accumulate(real, axis=1)[:, :-1]
    bad = ~real & after_real
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise InputError(
            f"row {i}, position {j}: id {V} is the pad id (V = {V}), but it follows a real token; sequences are "
            f"left-padded, so token ids lie in [0, {V}) and pads only come first"
        )
    empty = ~real.any(axis=1)
    if empty.any():
        raise InputError(f"row {int(np.flatnonzero(empty)[0])} is all padding (id {V}): an empty sequence")


def check_next_token_ids(
    tokens: Any, labels: Any, V: int, C: int, left_padded: bool = True, classes: str | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Next-token data as (tokens (N, n), labels (N,)) int64, N ≥ 1: integer ids (`integer_ids`), token ids in
    [0, V] (V is the pad id), labels in [0, C), and, if ``left_padded``, pads only before a row's first real
    token (`check_left_padding`). InputError naming the row (and position) otherwise. ``classes``: what the
    label range is, in the message (default "C labels")."""
    tokens = integer_ids(tokens, "token")
    labels = integer_ids(labels, "label", position="row")
    if tokens.ndim != 2 or labels.ndim != 1 or len(tokens) != len(labels):
        raise InputError(
            f"tokens must be (N, n) and labels (N,), one label per example; got {tokens.shape} and {labels.shape}"
        )
    if len(tokens) == 0 or tokens.shape[1] == 0:
        raise InputError(f"no rows: tokens of shape {tokens.shape} and labels of shape {labels.shape}")
    bad = np.argwhere((tokens < 0) | (tokens > V))
    if len(bad):
        i, k = (int(v) for v in bad[0])
        raise InputError(
            f"row {i}, position {k}: token id {int(tokens[i, k])} is outside [0, {V}] ({V} words, then the pad id {V})"
        )
    bad_y = np.flatnonzero((labels < 0) | (labels >= C))
    if len(bad_y):
        i = int(bad_y[0])
        raise InputError(f"row {i}: label {int(labels[i])} is outside [0, {C}) ({classes or f'{C} labels'})")
    if left_padded:
        check_left_padding(tokens, V)
    return tokens, labels
