"""Measured error of PyTorch's exp kernels, in ulps: the check of the certificate's one assumption on a function.

The certificate (`uatlab.verify.certificate`) assumes the evaluator's exp errs by at most k ulps for results
in the normal range (``--exp-ulp``, `uatlab.numerics.float_bounds.DEFAULT_EXP_ULPS`); IEEE 754 does not
specify exp, so this is the one assumption that no rounding rule implies. uatlab's own forward pass computes
attention weights with ``torch.softmax`` (no mask) or ``torch.exp`` (a padding mask,
`uatlab.models.attention.masked_softmax`), so those two kernels are the ones it rests on. This module
measures both, on sampled arguments, against a reference exp in a wider format (`exp_error_ulps`: the
measured errors are within 2^-10 ulp of the true ones).

Error of a computed value ŷ of y = e^t, in ulps: |ŷ − y| / ulp(y), with ulp(y) = 2^(e − p + 1) for
2^e ≤ y < 2^(e+1) and p the precision (53 for float64, 24 for float32). A maximum over samples is a lower
bound on the kernel's true maximum error: if it exceeds the assumed k, the assumption is false in this process
(a counterexample); if it does not, the samples found none.

**The exp inside torch.softmax.** softmax(s)_j = e^{s_j − m} / Σ_i e^{s_i − m} with m = max s. A row holding
one 0 and other entries t_j < ln(u/n) − 1 (n the row length, u the unit roundoff) has m = 0 (each s_j − m = t_j
exactly), and Σ_{j} e^{t_j} < (n − 1) u e^{-1} < u, so the sum 1 + Σ e^{t_j} rounds to 1 in round-to-nearest
(any order: every partial sum lies in [1, 1 + u)). The weights are then fl(E_j / 1) = E_j, the kernel's own
exp(t_j), whether it divides by the sum or subtracts its logarithm (ln 1 = 0). `_softmax_exp_values` checks
that the zero's weight is exactly 1 (else the isolation failed, and it raises). This measures the kernel on
arguments below ln(u/n) − 1 (−38.4 to −42.4 in float64, −17.6 to −21.6 in float32, down to ln(tiny) + 1) and
on row lengths 2 … 113 (the scalar tail and the vectorised body of the kernel); ``torch.exp`` is measured over
the whole range [ln(tiny) + 1, 0].
"""

from __future__ import annotations

import math

import numpy as np
import torch

#: precision of the reference exp (python-flint arb), bits
REFERENCE_BITS = 160
#: row lengths of the torch.softmax samples: scalar paths (2, 3), one vector (8) and a tail (9, 17), long rows
SOFTMAX_ROW_LENGTHS = (2, 3, 8, 9, 17, 64, 113)
_TORCH = {"float32": torch.float32, "float64": torch.float64}
_PRECISION = {"float32": 24, "float64": 53}


def exp_error_ulps(computed: np.ndarray, args: np.ndarray, dtype: str) -> np.ndarray:
    """Per element, |computed − e^args| in ulps of e^args in ``dtype`` (see the module docstring); args must give
    normal results. Both arrays hold ``dtype`` values (read exactly as floats).

    The reference e^t: for float32 values, numpy's float64 exp (its error, under 1 float64 ulp, is below 2^-28
    float32 ulps); for float64 values, exp in ``np.longdouble`` where that has a 64-bit or wider significand
    (x86-64 and aarch64 Linux: an error under 2^-10 float64 ulps), else python-flint's ``arb`` at
    `REFERENCE_BITS` bits. The differences ŷ − y are formed in that wider format, where they are exact or
    within the same relative error."""
    p = _PRECISION[dtype]
    computed, args = np.asarray(computed), np.asarray(args)
    if dtype == "float32" or np.finfo(np.longdouble).nmant >= 63:
        wide = np.float64 if dtype == "float32" else np.longdouble
        y = np.exp(args.astype(wide))
        _, e = np.frexp(y)  # y = f 2^e with f in [0.5, 1): ulp(y) = 2^(e − p)
        return np.asarray(np.abs(computed.astype(wide) - y) / np.ldexp(wide(1.0), e - p), dtype=np.float64)
    return _exp_error_ulps_arb(computed, args, p)


def _exp_error_ulps_arb(computed: np.ndarray, args: np.ndarray, p: int) -> np.ndarray:
    """`exp_error_ulps` with the reference in python-flint ball arithmetic (platforms without a wide long double)."""
    import flint

    out = np.empty(len(args))
    old = flint.ctx.prec
    flint.ctx.prec = REFERENCE_BITS
    try:
        for i, (y_hat, t) in enumerate(zip(computed.tolist(), args.tolist(), strict=True)):
            y = flint.arb(t).exp()
            e = math.frexp(float(y.mid()))[1]
            out[i] = abs(float((flint.arb(y_hat) - y).mid())) / 2.0 ** (e - p)
    finally:
        flint.ctx.prec = old
    return out


def _arguments(dtype: str, count: int, upper: float, rng: np.random.Generator) -> np.ndarray:
    """``count`` arguments uniform in [ln(tiny) + 1, upper], as ``dtype`` values (normal results)."""
    tiny = float(np.finfo(np.dtype(dtype)).tiny)
    return rng.uniform(math.log(tiny) + 1.0, upper, count).astype(dtype)


def _softmax_exp_values(dtype: str, samples: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray] | None:
    """(weights, arguments): torch.softmax's exp on rows that isolate it (module docstring), ≈ ``samples`` values;
    None when a row's maximum does not get weight exactly 1 (the sum did not round to 1: the process does not
    round to nearest, and the exp cannot be isolated)."""
    u = float(np.finfo(np.dtype(dtype)).eps) / 2
    got, args = [], []
    per = max(1, samples // len(SOFTMAX_ROW_LENGTHS))
    for n in SOFTMAX_ROW_LENGTHS:
        rows = max(1, per // (n - 1))
        t = _arguments(dtype, rows * (n - 1), math.log(u / n) - 1.0, rng).reshape(rows, n - 1)
        zero = rng.integers(0, n, rows)  # where the row's 0 (its maximum) sits
        s = np.empty((rows, n), dtype=dtype)  # each row: its t values in order, and the 0 at `zero`
        mask = np.arange(n)[None, :] == zero[:, None]
        s[mask] = 0.0
        s[~mask] = t.reshape(-1)
        w = torch.softmax(torch.from_numpy(s), dim=-1).numpy()
        if not (w[mask] == 1.0).all():
            return None
        got.append(w[~mask])
        args.append(s[~mask])
    return np.concatenate(got), np.concatenate(args)


def measured_exp_ulps(dtype: str, samples: int = 2048, seed: int = 0) -> dict[str, float | None]:
    """Largest error, in ulps, of ``torch.exp`` and of the exp inside ``torch.softmax`` in ``dtype`` on the CPU,
    over about ``samples`` sampled arguments each (seeded: the same figures in every run on one machine, PyTorch
    build and floating-point environment). ``torch.softmax`` is None when its exp cannot be isolated
    (`_softmax_exp_values`: the process does not round to nearest). Measured anew at each call (a few ms): the
    floating-point environment (rounding mode, flush-to-zero) can change within a process."""
    if dtype not in _TORCH:
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    rng = np.random.default_rng(seed)
    t = _arguments(dtype, int(samples), 0.0, rng)
    with torch.no_grad():
        e = torch.exp(torch.from_numpy(t)).numpy()
        soft = _softmax_exp_values(dtype, int(samples), rng)
    return {
        "torch.exp": float(exp_error_ulps(e, t, dtype).max()),
        "torch.softmax": None if soft is None else float(exp_error_ulps(soft[0], soft[1], dtype).max()),
    }
