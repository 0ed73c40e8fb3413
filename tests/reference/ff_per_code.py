"""Reference for the batched first feed-forward bound: the layer evaluated code by code."""

from __future__ import annotations

import numpy as np


def per_code(bm, x, r, ids, hid, out):
    """One `_BoundedModel._ff_units` call per code with that code's own units (every coordinate of the layer)."""
    g = bm.gate
    cid = g["word_cid"][ids]
    y, ry = np.full_like(x, np.nan), np.full_like(r, np.nan)
    for c in np.unique(cid):
        toks = np.flatnonzero(cid == c)
        lo, hi = np.searchsorted(g["sorted_cid"], c, "left"), np.searchsorted(g["sorted_cid"], c, "right")
        y[toks], ry[toks] = bm._ff_units(x[toks], r[toks], g["order"][lo:hi], hid, out)
    return y, ry
