"""The Boltzmann operator and paper A's Lemma 1 (Boltzmann separation).

Definition (paper A, Section 3; Asadi & Littman 2017):

    boltz(a) = aᵀ σ_S[a] = Σ_i a_i e^{a_i} / Σ_j e^{a_j},      a ∈ R^n

the softmax-weighted mean of ``a``. Facts used across uatlab:

* min(a) ≤ boltz(a) ≤ max(a);
* ∂boltz/∂a_i = σ_S[a]_i (1 + a_i − boltz(a))  (so boltz is *not* monotone);
* link to rank-1 attention: Σ_j a_j softmax_j(c a_k a_j) = boltz(c a_k a) / (c a_k) for a_k ≠ 0.

**Lemma 1** (paper A; hypothesis "gap > 2 log n + 3", bound re-derived here).
Let a^(1..m) ∈ R^n have no duplicate components, |a^(i)_k| ≤ r, and any two *distinct* components
anywhere in the family differ by more than 2 log n + 3. Then for any i, j whose component *sets* differ:

    |boltz(a^(i)) − boltz(a^(j))| > (log n)^2 e^{−2r}            (natural log)

Notation map (paper → uatlab): a^(i) → row ``i`` of an (m, n) array; r → ``r``; the family's
δ-separation → `Lemma1Hypotheses.min_gap`.

Three evaluations are provided: `boltz` (float, numpy or torch, batched over the last axis,
differentiable under torch), `boltz_exact` (python-flint ``arb`` balls: rigorous enclosures, or
mpmath) and `boltz_grad` (the closed-form gradient).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from uatlab.errors import InputError

__all__ = [
    "Lemma1Hypotheses",
    "boltz",
    "boltz_exact",
    "boltz_grad",
    "lemma1_bound",
    "lemma1_hypotheses",
    "lemma1_log10_bound",
    "lemma1_required_gap",
    "lemma1_exact_check",
    "require_lemma1_hypotheses",
    "sample_lemma1_pair",
]


def boltz(a: Any) -> Any:
    """Boltzmann operator over the last axis, stable for any finite input (|a| up to ~1e307).

    Computed as m + Σ_i (a_i − m) w_i / Σ_i w_i with m = max(a) and w_i = e^{a_i − m} ≤ 1, so no
    exponential overflows; entries whose weight underflows to 0 contribute exactly 0 (never 0·∞).
    The result is clamped into [min a, max a], where the exact value provably lies (the clamp only
    removes rounding error of a few ulps).

    Args:
        a: (..., n) numpy array / list (float64 result) or torch tensor (same dtype; differentiable).

    Returns:
        (...) boltz values.

    Raises:
        InputError: on an empty last axis or non-finite entries.
    """
    if isinstance(a, torch.Tensor):
        if a.shape[-1] == 0:
            raise InputError("boltz of an empty vector is undefined (last axis has length 0)")
        if not bool(torch.isfinite(a).all()):
            raise InputError("boltz needs finite entries (found NaN or inf)")
        m = a.amax(dim=-1, keepdim=True).detach()  # (..., 1); detached: the result does not depend on m
        shifted = a - m  # (..., n), ≤ 0
        w = torch.exp(shifted)  # (..., n) in [0, 1], the max entry has weight 1
        safe = torch.where(w > 0, shifted, torch.zeros_like(shifted))  # avoid (−inf)·0 after overflow
        value = m.squeeze(-1) + (safe * w).sum(-1) / w.sum(-1)
        lo = a.amin(dim=-1).detach()
        hi = m.squeeze(-1)
        # torch.where, not minimum/maximum: at a tie the gradient must stay the value's own gradient.
        value = torch.where(value > hi, hi, value)
        return torch.where(value < lo, lo, value)
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim == 0 or arr.shape[-1] == 0:
        raise InputError("boltz of an empty vector is undefined (last axis has length 0)")
    if not np.isfinite(arr).all():
        raise InputError("boltz needs finite entries (found NaN or inf)")
    m = arr.max(axis=-1, keepdims=True)  # (..., 1)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        shifted = arr - m  # (..., n); may be −inf if the spread overflows, then w = 0
        w = np.exp(shifted)
        safe = np.where(w > 0, shifted, 0.0)
        value = m[..., 0] + (safe * w).sum(-1) / w.sum(-1)
    return np.clip(value, arr.min(axis=-1), m[..., 0])


def boltz_grad(a: Any) -> Any:
    """Closed-form gradient ∂boltz/∂a_i = σ_S[a]_i (1 + a_i − boltz(a)), batched over the last axis.

    Derivation: boltz = Σ a_i σ_i and ∂σ_j/∂a_i = σ_j(δ_ij − σ_i), so
    ∂boltz/∂a_i = σ_i + Σ_j a_j σ_j(δ_ij − σ_i) = σ_i (1 + a_i − boltz).
    """
    if isinstance(a, torch.Tensor):
        return torch.softmax(a, dim=-1) * (1 + a - boltz(a)[..., None])
    arr = np.asarray(a, dtype=np.float64)
    e = np.exp(arr - arr.max(axis=-1, keepdims=True))
    sigma = e / e.sum(axis=-1, keepdims=True)
    return sigma * (1 + arr - boltz(arr)[..., None])


def boltz_exact(a: Any, digits: int = 50, backend: str = "arb") -> Any:
    """boltz of one vector in arbitrary precision.

    Args:
        a: a sequence of numbers (floats are taken exactly, as binary64 values), ``arb`` or ``mpf``.
        digits: working precision in decimal digits.
        backend: ``"arb"`` (python-flint ball: a rigorous enclosure of the exact value) or ``"mpmath"``
            (an ``mpf`` accurate to about ``digits`` digits, no certificate).

    Returns:
        an ``arb`` ball or an ``mpmath.mpf``.
    """
    values = list(a)
    if not values:
        raise InputError("boltz of an empty vector is undefined")
    if backend == "arb":
        from uatlab.numerics.arb import arb_boltz, working_precision

        with working_precision(digits=digits):
            return arb_boltz(values)
    if backend == "mpmath":
        import mpmath

        with mpmath.workdps(digits):
            xs = [mpmath.mpf(v) for v in values]
            m = max(xs)
            w = [mpmath.exp(x - m) for x in xs]
            return mpmath.fsum(x * wi for x, wi in zip(xs, w, strict=True)) / mpmath.fsum(w)
    raise InputError(f"unknown backend {backend!r}: use 'arb' or 'mpmath'")


def lemma1_required_gap(n: int) -> float:
    """The gap hypothesis of Lemma 1: distinct components must differ by more than 2 log n + 3."""
    return 2.0 * math.log(n) + 3.0


def lemma1_bound(n: int, r: float) -> float:
    """Lemma 1's lower bound (log n)^2 e^{−2r} on |boltz(a) − boltz(a')| (0.0 when it underflows)."""
    if n < 1:
        raise InputError(f"n must be ≥ 1, got {n}")
    return math.log(n) ** 2 * math.exp(-2.0 * r)


def lemma1_log10_bound(n: int, r: float) -> float:
    """log10 of Lemma 1's bound, finite even when the bound underflows float64 (−inf for n = 1)."""
    if n == 1:
        return -math.inf
    return 2 * math.log10(math.log(n)) - 2.0 * (r / math.log(10))  # r / ln 10 first: 2r overflows near 1e308


@dataclass(frozen=True)
class Lemma1Hypotheses:
    """Lemma 1's hypotheses measured on a family of vectors (rows of an (m, n) array).

    Attributes:
        n: vector length.
        r: max |component| (the smallest r the family satisfies) or the claimed r.
        min_gap: smallest difference between two components: 0 when a vector repeats a component, else
            between two distinct values anywhere in the family (inf when it has a single distinct value).
        required_gap: 2 log n + 3.
        duplicates: (vector, position, position) triples of repeated components within a vector.
        violations: human-readable reasons the hypotheses fail (empty when they hold).
    """

    n: int
    r: float
    min_gap: float
    required_gap: float
    duplicates: list[tuple[int, int, int]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        return not self.violations

    @property
    def bound(self) -> float:
        """(log n)^2 e^{−2r} for this family."""
        return lemma1_bound(self.n, self.r)


def lemma1_hypotheses(vectors: Any, r: float | None = None) -> Lemma1Hypotheses:
    """Measure Lemma 1's hypotheses on a family of vectors (no exception when they fail).

    Args:
        vectors: (m, n) array-like, one vector per row (a single (n,) vector is accepted).
        r: claimed bound on |components|; default: the family's own max |component|.

    Raises:
        InputError: for empty, ragged or non-finite input (these are malformed, not hypothesis failures).
    """
    try:
        arr = np.asarray(vectors, dtype=np.float64)
    except ValueError as exc:
        raise InputError(f"vectors must form an (m, n) array of equal-length rows: {exc}") from None
    if arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2 or arr.size == 0:
        raise InputError(f"expected a non-empty (m, n) array of vectors, got shape {arr.shape}")
    bad = np.argwhere(~np.isfinite(arr))
    if len(bad):
        i, k = bad[0]
        raise InputError(f"vector {i}, component {k} is {arr[i, k]}: Lemma 1 needs finite components")
    m, n = arr.shape
    violations: list[str] = []
    duplicates: list[tuple[int, int, int]] = []
    for i in range(m):
        order = np.argsort(arr[i], kind="stable")
        with np.errstate(over="ignore"):  # a difference beyond the float64 range is ±inf, not 0
            same = np.flatnonzero(np.diff(arr[i][order]) == 0)
        duplicates += [(i, int(min(order[s], order[s + 1])), int(max(order[s], order[s + 1]))) for s in same]
    if duplicates:
        i, k, l = duplicates[0]
        violations.append(
            f"vector {i} repeats the component {arr[i, k]} at positions {k} and {l} "
            f"({len(duplicates)} repeated component(s) in all); Lemma 1 needs distinct components"
        )
    measured_r = float(np.abs(arr).max())
    r_value = measured_r if r is None else float(r)
    if measured_r > r_value:
        i, k = np.unravel_index(int(np.abs(arr).argmax()), arr.shape)
        violations.append(f"vector {i}, component {k} has |{arr[i, k]}| > r = {r_value}")
    distinct = np.unique(arr)
    # the smallest gap between two components: 0 where a vector repeats one (reported above), else between the
    # family's distinct values (two vectors may share a value: a repeat is only within a vector)
    with np.errstate(over="ignore"):  # a gap beyond the float64 range (1e308 − (−1e308)) is +inf: still a gap
        distinct_gap = float(np.diff(distinct).min()) if len(distinct) > 1 else math.inf
    min_gap = 0.0 if duplicates else distinct_gap
    required = lemma1_required_gap(n)
    if not distinct_gap > required:  # two different values too close (a repeat is reported above)
        j = int(np.diff(distinct).argmin())
        violations.append(
            f"components {distinct[j]} and {distinct[j + 1]} differ by {distinct_gap:.6g}, "
            f"not more than 2 log n + 3 = {required:.6g} (n = {n})"
        )
    return Lemma1Hypotheses(n, r_value, min_gap, required, duplicates, violations)


def require_lemma1_hypotheses(vectors: Any, r: float | None = None) -> Lemma1Hypotheses:
    """Like `lemma1_hypotheses` but raise `InputError` listing every violated hypothesis."""
    h = lemma1_hypotheses(vectors, r)
    if not h.holds:
        raise InputError("Lemma 1's hypotheses do not hold: " + "; ".join(h.violations))
    return h


def sample_lemma1_pair(
    rng: np.random.Generator, n: int, extra: int = 2, slack: float = 2.0, at_gap: float = 0.3
) -> tuple[np.ndarray, np.ndarray]:
    """Two length-n vectors satisfying Lemma 1's hypotheses with *different* component sets.

    A pool of n + extra values is laid out with consecutive gaps 2 log n + 3 + s, where s is a tiny
    1e-9 (probability ``at_gap``: the hypothesis' edge) or uniform in (0, slack); the pool is shifted
    by a random offset so that entries of both signs occur. Two distinct n-subsets are drawn and
    shuffled. The family {a, b} is then tokenwise separated with gap > 2 log n + 3.
    """
    if n < 2 or extra < 1:
        raise InputError(f"need n ≥ 2 and extra ≥ 1, got n = {n}, extra = {extra}")
    req = lemma1_required_gap(n)
    m = n + extra
    gaps = np.where(rng.random(m - 1) < at_gap, 1e-9, rng.uniform(1e-9, slack, m - 1)) + req
    pool = np.concatenate([[0.0], np.cumsum(gaps)])
    pool = pool - rng.uniform(0, pool[-1])  # random offset: mixed signs
    while True:
        ia = np.sort(rng.choice(m, n, replace=False))
        ib = np.sort(rng.choice(m, n, replace=False))
        if not np.array_equal(ia, ib):
            break
    return rng.permutation(pool[ia]), rng.permutation(pool[ib])


def lemma1_exact_check(a: Any, b: Any, extra_digits: int = 30) -> dict[str, Any]:
    """Certify Lemma 1 on one pair in ``arb`` arithmetic: |boltz(a) − boltz(b)| > (log n)^2 e^{−2r}.

    Float inputs are taken exactly. The precision is chosen so that the bound (≈ e^{−2r}) is resolved
    with ``extra_digits`` to spare. r is the pair's own max |component|.

    Returns:
        dict with ``certified`` (the inequality holds for the exact values), ``log10_diff``,
        ``log10_bound`` and ``log10_ratio`` (floats, finite even far below float64's range).
    """
    from flint import arb

    from uatlab.numerics.arb import arb_boltz, arb_log10, working_precision

    h = require_lemma1_hypotheses(np.stack([np.asarray(a, float), np.asarray(b, float)]))
    if sorted(np.asarray(a, float).tolist()) == sorted(np.asarray(b, float).tolist()):
        raise InputError("the two vectors have the same component set; Lemma 1 compares different sets")
    digits = int(2 * h.r / math.log(10)) + extra_digits
    with working_precision(digits=digits):
        diff = abs(arb_boltz([float(v) for v in a]) - arb_boltz([float(v) for v in b]))
        bound = arb(h.n).log() ** 2 * (-2 * arb(h.r)).exp()
        certified = bool(diff > bound)
        return {
            "certified": certified,
            "n": h.n,
            "r": h.r,
            "log10_diff": arb_log10(diff),
            "log10_bound": arb_log10(bound),
            "log10_ratio": arb_log10(diff) - arb_log10(bound),
        }
