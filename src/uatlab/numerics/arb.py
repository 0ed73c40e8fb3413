"""Rigorous arbitrary-precision evaluation of attention with python-flint ``arb`` balls.

An ``arb`` is a ball [m ± r] that is guaranteed to contain the exact real number it stands for
(Johansson, "Arb: efficient arbitrary-precision midpoint-radius interval arithmetic", IEEE TC 2017).
Every operation widens the ball just enough to keep that guarantee, so a comparison such as
``lower_bound(x) > 0`` that holds for the ball holds for the exact value: a *certificate*.
Float64 inputs and weights are binary numbers, hence exact ``arb`` points; only exp, log, division
and square roots add radius.

The precision is python-flint's global ``flint.ctx.prec`` (bits); `working_precision`
sets and restores it. Decimal digits and bits are related by bits = ⌈digits · log2(10)⌉.

Row convention as in `uatlab.models`: a sequence is a list of n tokens, each a list of d
numbers; weights keep the paper's shapes, W_Q, W_K, W_V (h, s, d) and W_O (h, d, s):

    out_k = x_k + Σ_i W_O^i Σ_j softmax_j( (W_K^i x_j)·(W_Q^i x_k) ) W_V^i x_j

which is paper A's F^(SA) (column k of Z + Σ_i W_O^i W_V^i Z σ[(W_K^i Z)ᵀ(W_Q^i Z)]).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import flint
from flint import arb

from uatlab.errors import InputError, PrecisionError

__all__ = [
    "arb_attention",
    "arb_boltz",
    "arb_log10",
    "arb_norm",
    "arb_to_str",
    "bits_to_digits",
    "digits_to_bits",
    "to_arb",
    "working_precision",
]

LOG2_10 = math.log2(10.0)


def digits_to_bits(digits: int) -> int:
    """Bits of binary precision giving ``digits`` decimal digits."""
    return int(math.ceil(digits * LOG2_10))


def bits_to_digits(bits: int) -> int:
    """Decimal digits carried by ``bits`` binary digits (rounded down)."""
    return int(bits / LOG2_10)


@contextlib.contextmanager
def working_precision(digits: int | None = None, bits: int | None = None) -> Iterator[int]:
    """Set python-flint's working precision (decimal ``digits`` or ``bits``) and restore it afterwards.

    Yields the precision in bits.
    """
    if (digits is None) == (bits is None):
        raise InputError("give exactly one of digits= or bits=")
    prec = digits_to_bits(digits) if digits is not None else int(bits)
    if prec < 2:
        raise PrecisionError(f"precision of {prec} bits is too small (need at least 2)")
    old = flint.ctx.prec
    flint.ctx.prec = prec
    try:
        yield prec
    finally:
        flint.ctx.prec = old


def to_arb(x: Any) -> arb:
    """A number as an ``arb``: floats and ints exactly, strings as decimal (rounded to a ball)."""
    if isinstance(x, arb):
        return x
    if isinstance(x, float):
        if not math.isfinite(x):
            raise InputError(f"cannot represent the non-finite value {x} exactly")
        return arb(x)
    if isinstance(x, int):
        return arb(x)
    if hasattr(x, "item"):  # numpy / torch scalar
        return to_arb(x.item())
    return arb(str(x))


def arb_boltz(values: Sequence[Any], progress: Callable[[int], None] | None = None) -> arb:
    """boltz(a) = Σ a_i e^{a_i} / Σ e^{a_j} as a rigorous ball (shift by the largest midpoint).

    ``progress(1)`` is called after each component's exponential (the expensive part at high precision).
    """
    xs = [to_arb(v) for v in values]
    if not xs:
        raise InputError("boltz of an empty vector is undefined")
    top = max(xs, key=lambda t: float(t.mid()))
    w = []
    for x in xs:
        w.append((x - top).exp())
        if progress is not None:
            progress(1)
    return sum((x * wi for x, wi in zip(xs, w, strict=True)), arb(0)) / sum(w, arb(0))


def _matvec(W: Sequence[Sequence[arb]], x: Sequence[arb]) -> list[arb]:
    return [sum((wij * xj for wij, xj in zip(row, x, strict=True)), arb(0)) for row in W]


def arb_attention(
    tokens: Sequence[Sequence[Any]],
    W_Q: Sequence[Any],
    W_K: Sequence[Any],
    W_V: Sequence[Any],
    W_O: Sequence[Any],
) -> list[list[arb]]:
    """Multi-head softmax self-attention with skip connection on one sequence, in ``arb`` balls.

    Args:
        tokens: n tokens (row convention), each d numbers (float/int/arb).
        W_Q, W_K, W_V: (h, s, d) nested sequences; W_O: (h, d, s).

    Returns:
        n output tokens, each a list of d balls enclosing the exact F^(SA) output.
    """
    X = [[to_arb(v) for v in tok] for tok in tokens]  # (n, d)
    n = len(X)
    if n == 0:
        raise InputError("empty sequence")
    d = len(X[0])
    out = [list(x) for x in X]  # skip connection, (n, d)
    for WQ, WK, WV, WO in zip(W_Q, W_K, W_V, W_O, strict=True):
        WQ_ = [[to_arb(v) for v in row] for row in WQ]  # (s, d)
        WK_ = [[to_arb(v) for v in row] for row in WK]
        WV_ = [[to_arb(v) for v in row] for row in WV]
        WO_ = [[to_arb(v) for v in row] for row in WO]  # (d, s)
        if any(len(row) != d for row in WQ_ + WK_ + WV_) or len(WO_) != d:
            raise InputError(f"weight shapes do not match token dimension d = {d}")
        q = [_matvec(WQ_, x) for x in X]  # (n, s)
        k = [_matvec(WK_, x) for x in X]  # (n, s)
        v = [_matvec(WV_, x) for x in X]  # (n, s)
        s = len(v[0])
        for qi in range(n):
            logits = [sum((a * b for a, b in zip(k[j], q[qi], strict=True)), arb(0)) for j in range(n)]
            top = max(logits, key=lambda t: float(t.mid()))
            w = [(L - top).exp() for L in logits]
            z = sum(w, arb(0))
            head = [sum((w[j] * v[j][c] for j in range(n)), arb(0)) / z for c in range(s)]  # (s,)
            upd = _matvec(WO_, head)  # (d,)
            out[qi] = [o + u for o, u in zip(out[qi], upd, strict=True)]
    return out


def arb_norm(vec: Sequence[arb]) -> arb:
    """Euclidean norm of a vector of balls, as a ball (lower end clamped at 0)."""
    sq = sum((c * c for c in vec), arb(0))
    return sq.nonnegative_part().sqrt() if hasattr(sq, "nonnegative_part") else sq.sqrt()


def arb_norm_lower(vec: Sequence[arb]) -> arb:
    """A rigorous lower bound (an exact ``arb``-representable value, as a ball) on ‖vec‖.

    Uses the smallest |value| in each coordinate's ball, so it is valid even when balls contain 0.
    """
    sq = sum((c.abs_lower() ** 2 for c in vec), arb(0))
    return sq.sqrt().lower()


def arb_norm_upper(vec: Sequence[arb]) -> arb:
    """A rigorous upper bound on ‖vec‖ (largest |value| of each coordinate's ball)."""
    sq = sum((c.abs_upper() ** 2 for c in vec), arb(0))
    return sq.sqrt().upper()


def arb_log10(x: arb) -> float:
    """log10 of a positive ball's midpoint as a float (finite even for 1e-17733)."""
    m = x.mid()
    if not m > 0:
        return -math.inf
    if not m.is_finite():
        return math.inf
    return float(m.log() / arb(10).log())


def arb_to_str(x: arb, digits: int = 4) -> str:
    """A ball's midpoint in scientific notation, e.g. ``'1.234e-3373'`` (never underflows)."""
    if x.is_zero():
        return "0"
    if not x.is_finite():
        return "undetermined (infinite radius)"
    m = x.mid()
    if m < 0:
        return "-" + arb_to_str(-x, digits)
    log10 = arb_log10(m)
    e = math.floor(log10)
    mant = float((m / arb(10) ** e).mid()) if abs(e) > 300 else float(m) / 10.0**e
    if mant >= 10.0 - 0.5 * 10.0 ** (1 - digits):  # rounding carried into the next decade
        mant, e = mant / 10.0, e + 1
    return f"{mant:.{digits - 1}f}e{e}"
