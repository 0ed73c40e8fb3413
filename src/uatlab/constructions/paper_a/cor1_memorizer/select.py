"""Choosing the query scales (β, per position) and checking a compile request.

The inverse temperature β is chosen among a few powers of two to maximise the smallest gap between
differently-labelled neighbours of the same group relative to the rounding error of h (paper A's Lemma 1
gap holds only in a regime floats cannot hold, so gaps are measured instead; the certificate decides).
With (word, position) groups the query scale is chosen per position: b_k = β(1 + j/2^m), j = (k + s·2^m/3)
mod 2^m, s ∈ {0, 1, 2}; the h of a token at position k depends on b_k only and every unit serves one
position, so the choices do not interact.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from uatlab.constructions.paper_a.cor1_memorizer.contexts import (
    Occurrences,
    context_groups,
    group_value_order,
    label_boundaries,
)
from uatlab.constructions.paper_a.cor1_memorizer.layout import QUERY_SHIFTS, code_ones, code_width, resolve_auto
from uatlab.data.token_store import TokenTable
from uatlab.errors import InputError
from uatlab.numerics.float_bounds import unit_roundoff

BETA_CANDIDATES = (0.5, 1.0, 2.0, 4.0, 8.0)
RISKY_RELATIVE_GAP = 6.0  # a boundary gap below 6 r_h (rough h error) is likely too small to certify


# the powers of two β may be in each dtype: the query scale of a position is below 2β, so it stays finite
# (2β ≤ the largest power of two) and non-zero (β at least the smallest subnormal)
BETA_EXPONENTS = {"float32": (-149, 126), "float64": (-1074, 1022)}


def check_request(
    dtype: str, beta: float | str, group: str, ff: str = "knots", labels: str = "auto"
) -> tuple[str, list[tuple[float, int]]]:
    """Validate dtype, β, grouping, FF rule and label code; return the grouping and the (β, shift) candidates."""
    if dtype not in ("float32", "float64"):
        raise InputError(f"dtype must be float32 or float64, got {dtype!r}")
    if ff not in ("knots", "ramps"):
        raise InputError(
            f"ff must be 'knots' (one unit per slope change) or 'ramps' (two per label change), got {ff!r}"
        )
    if labels not in ("auto", "ordinal", "one-hot") or (ff == "ramps" and labels == "ordinal"):
        raise InputError(f"labels must be 'ordinal', 'one-hot' or 'auto' ('ramps' needs one-hot), got {labels!r}")
    group = resolve_auto(dtype, group=group)[2]
    if group not in ("word", "word-pos"):
        raise InputError(f"group must be 'word', 'word-pos' or 'auto', got {group!r}")
    if beta == "auto":
        shifts = QUERY_SHIFTS if group == "word-pos" else 1
        return group, [(b, s) for s in range(shifts) for b in BETA_CANDIDATES]
    if isinstance(beta, bool) or not isinstance(beta, (numbers.Real, str)):
        raise InputError(f"beta must be 'auto' or a positive power of two, got {beta!r} ({type(beta).__name__})")
    try:
        beta = float(beta)
    except (ValueError, OverflowError):  # OverflowError: an integer beyond float's range
        raise InputError(f"beta must be 'auto' or a positive power of two, got {beta!r}") from None
    if not (beta > 0 and math.frexp(beta)[0] == 0.5):
        raise InputError(f"beta must be a positive power of two (exact codes), got {beta}")
    low, high = BETA_EXPONENTS[dtype]
    if not (2.0**low <= beta <= 2.0**high):
        raise InputError(
            f"beta {beta:g}: out of range for {dtype} (2^{math.frexp(beta)[1] - 1}; use a power of two from "
            f"2^{low} to 2^{high}, so that the query scale 2β is finite and non-zero)"
        )
    return group, [(beta, 0)]


def h_error_scale(beta: float, dtype: str) -> float:
    """Rough size of the rounding error of h relative to u (scores ≤ 2β, keys ≤ 1), for choosing β."""
    return 4.0 * (2.0 * beta) + 8.0


def h_error_estimate(beta: float | np.ndarray, dtype: str, n: np.ndarray) -> np.ndarray:
    """Rough bound on the error of h for query scale ~β and n keys: u (8β + 12 + 2n) (softmax + sum)."""
    return unit_roundoff(dtype) * (8.0 * np.asarray(beta) + 12.0 + 2.0 * np.asarray(n, dtype=np.float64))


def resolution_estimate(beta: float, dtype: str, gate_terms: int, gate_magnitude: float) -> float:
    """Rough smallest label-boundary gap a model in ``dtype`` resolves (ramps sit gap/4 from points).

    The feed-forward pre-activation sums ``gate_terms`` code terms of total size G·m (and a bias of the same
    size), so its rounding is about γ_{terms+2}·(2 G m + 2); the softmax adds ~u·(score range + 8) to h.
    Used only to *choose* β; the certificate decides.
    """
    u = unit_roundoff(dtype)
    return 4.0 * u * ((gate_terms + 2) * (2.0 * gate_magnitude + 2.0) + h_error_scale(beta, dtype))


def gate_size(V: int, code: str, dtype: str) -> tuple[int, float]:
    """(code terms that are non-zero for an own token, their total size) of a unit's gate for ``code``:
    (k, G·k) for the binary gate, (0, 0) for the complement gate of m-hot codes (keys span < 2)."""
    code = resolve_auto(dtype, code)[0]
    k = code_width(V, code)
    # m-hot codes use the complement gate: an own token's pre-activation sums only h and the bias
    return (k, 1.125 * k) if code_ones(code) == 0 else (0, 0.0)


def choose_beta(occs: list[Occurrences], candidates: list[float], V: int, code: str, dtype: str) -> tuple[int, dict]:
    """One β for all positions, among ``candidates`` (their occurrences ``occs``): fewest label-boundary gaps
    below the dtype's resolution, then the largest smallest gap relative to the rounding-error scale of h.
    Returns its index."""
    scores = {}
    best = None
    terms, magnitude = gate_size(V, code, dtype)
    for i, (beta, occ) in enumerate(zip(candidates, occs, strict=True)):
        _, gaps = label_boundaries(occ)
        g = float(gaps.min()) if len(gaps) else math.inf
        too_small = int((gaps < resolution_estimate(beta, dtype, terms, magnitude)).sum())
        score = (-too_small, g / h_error_scale(beta, dtype))
        scores[beta] = {"min_gap": g, "gaps_below_resolution": too_small}
        if best is None or score > best[0]:
            best = (score, i)
    assert best is not None
    return best[1], scores


def position_scores(
    table: TokenTable, pool: list[tuple[float, int]], max_len: int, dtype: str
) -> tuple[np.ndarray, np.ndarray]:
    """Per (candidate, position) of one table with (word, position) groups: the number of tokens next to a
    label boundary whose gap is below ``RISKY_RELATIVE_GAP·r_h``, and the smallest gap relative to r_h
    (r_h = `h_error_estimate`). Both add up over tables (buckets) holding disjoint groups."""
    K = len(pool)
    risky, ratio = np.zeros((K, max_len)), np.full((K, max_len), np.inf)
    grp = context_groups(table.word, table.pos, max_len)
    for c, (beta, _) in enumerate(pool):
        hh = table.h[:, c]
        o = group_value_order(grp, hh)  # = np.lexsort((hh, grp))
        g_s, h_s, l_s, n_s = grp[o], hh[o], table.label[o], table.length[o]
        change = (g_s[1:] == g_s[:-1]) & (l_s[1:] != l_s[:-1]) & (h_s[1:] != h_s[:-1])
        # per boundary between sorted neighbours: gap relative to the error scale of the two tokens' h
        rh = h_error_estimate(beta, dtype, np.maximum(n_s[1:], n_s[:-1]))
        rel = np.where(change, (h_s[1:] - h_s[:-1]) / rh, np.inf)
        bpos = g_s[:-1] % max_len  # position of each boundary
        # the two tokens next to a boundary are the ones a knot can come too close to (gap/4 < 2 r_h)
        risky[c] = np.bincount(bpos, weights=2.0 * (rel < RISKY_RELATIVE_GAP), minlength=max_len)
        np.minimum.at(ratio[c], bpos, rel)
    return risky, ratio
