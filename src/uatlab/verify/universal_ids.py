"""Exact certificate that the Proposition-1 universal approximator (paper A) gives every grid cell its own id."""

from __future__ import annotations

import math

import numpy as np
from flint import arb


def certify_ids_exact(
    tok_a: np.ndarray, ms: np.ndarray, first: np.ndarray, c: float, wo: float, prec: int = 128
) -> tuple[bool, float]:
    """Exact certificate that the context ids are pairwise distinct, by ball arithmetic (python-flint arb).

    For every id (multiset ``ms[i]``, query position ``k``) the real number
    z = a_k + wo · Σ_j e^{c a_k a_j} a_j / Σ_j e^{c a_k a_j} is enclosed in a ball, using the float64 values
    of c, wo and a exactly (they are the model's weights). Sorting by centre, the ids are certified distinct
    when every consecutive difference is certainly positive. Returns (certified, lower bound of the
    smallest gap).
    """
    from flint import ctx

    old_prec = ctx.prec
    ctx.prec = prec
    try:
        ca, woa = arb(float(c)), arb(float(wo))
        a_arb = [arb(float(v)) for v in tok_a]
        vals = []
        for mi, ki in first:
            row = [a_arb[t] for t in ms[mi]]
            q = row[ki]
            num, den = arb(0), arb(0)
            for aj in row:
                e = (ca * q * aj).exp()
                num += e * aj
                den += e
            vals.append(q + woa * num / den)
        order = sorted(range(len(vals)), key=lambda i: float(vals[i].mid()))
        gap = math.inf
        for i0, i1 in zip(order[:-1], order[1:], strict=True):
            diff = vals[i1] - vals[i0]
            if not diff > 0:
                return False, float(diff.lower())
            gap = min(gap, float(diff.lower()))
        return True, gap
    finally:
        ctx.prec = old_prec
