"""The projection-direction lemma: a unit w that keeps every pair of points apart on a line.

Statement (Park, Lee, Yun & Shin 2021, Lemma 8-type; used in paper A's proof of Theorem 2
step 1). For M distinct points P ⊂ R^d there is a unit w ∈ R^d with, for all p ≠ p' in P:

    sqrt(8/(π d)) / M^2 · ‖p − p'‖  ≤  |wᵀ(p − p')|  ≤  ‖p − p'‖

The upper bound is Cauchy–Schwarz. For the lower bound, a uniformly random unit w satisfies a single
pair's inequality with probability ≥ 1 − 2/M^2 (anti-concentration of wᵀu for a fixed unit u), so by
a union bound over the M(M−1)/2 pairs a random draw succeeds with probability ≥ 1/2; we sample,
check all pairs at once (vectorised) and resample on failure.

Notation map (paper → uatlab): P → ``points`` (M, d) (paper A uses P = V ∪ {0}); the constant
sqrt(8/(πd))/M^2 → `ProjectionDirection.constant`; w → `ProjectionDirection.w`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from uatlab.errors import InputError, UatlabError

__all__ = ["ProjectionDirection", "ProjectionSearchError", "find_projection_direction", "projection_constant"]


class ProjectionSearchError(UatlabError):
    """No sampled direction met the lemma's bound within the retry limit."""


@dataclass(frozen=True)
class ProjectionDirection:
    """A direction found by `find_projection_direction`.

    Attributes:
        w: (d,) unit vector.
        constant: the required ratio sqrt(8/(πd))/M^2 (or the caller's override).
        worst_ratio: min over pairs of |wᵀ(p − p')| / ‖p − p'‖ (≥ constant).
        worst_pair: indices (a, b) of the pair attaining ``worst_ratio``.
        tries: number of directions sampled until success.
    """

    w: np.ndarray
    constant: float
    worst_ratio: float
    worst_pair: tuple[int, int]
    tries: int


def projection_constant(d: int, M: int) -> float:
    """sqrt(8/(π d)) / M^2, the lemma's guaranteed ratio for M points in R^d."""
    return math.sqrt(8.0 / (math.pi * d)) / M**2


def find_projection_direction(
    points: Any,
    *,
    seed: int | np.random.Generator | None = 0,
    max_tries: int = 100,
    constant: float | None = None,
    batch: int = 16,
) -> ProjectionDirection:
    """Sample unit directions w ~ N(0, I)/‖·‖ until every pair satisfies the lemma's lower bound.

    Args:
        points: (M, d) distinct points (include the origin yourself if you need P = V ∪ {0}).
        seed: an int seed or a numpy Generator (deterministic on every platform).
        max_tries: retry limit (directions sampled in all).
        constant: required ratio; default `projection_constant` (d, M).
        batch: directions checked at once (vectorised; the first success in draw order is returned).

    Raises:
        InputError: fewer than 2 points, non-finite or duplicate points (naming them), bad arguments.
        ProjectionSearchError: no direction within ``max_tries``; names the best direction's worst pair.
    """
    P = np.asarray(points, dtype=np.float64)
    if P.ndim != 2 or P.shape[0] < 2:
        raise InputError(f"need an (M, d) array of at least 2 points, got shape {P.shape}")
    if not np.isfinite(P).all():
        a = int(np.argwhere(~np.isfinite(P))[0, 0])
        raise InputError(f"point {a} has a non-finite coordinate")
    if max_tries < 1:
        raise InputError(f"max_tries must be ≥ 1, got {max_tries}")
    M, d = P.shape
    const = projection_constant(d, M) if constant is None else float(constant)
    if not 0 < const <= 1:
        raise InputError(f"the required ratio must lie in (0, 1], got {const}")
    ia, ib = np.triu_indices(M, k=1)  # all pairs a < b
    D = P[ia] - P[ib]  # (pairs, d)
    norms = np.linalg.norm(D, axis=1)  # (pairs,)
    if (norms == 0).any():
        j = int(np.flatnonzero(norms == 0)[0])
        raise InputError(f"points {ia[j]} and {ib[j]} coincide; the lemma needs distinct points")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    best_ratio, best_pair, tried = -1.0, (0, 1), 0
    while tried < max_tries:
        k = min(batch, max_tries - tried)
        W = rng.standard_normal((k, d))  # (k, d)
        W /= np.linalg.norm(W, axis=1, keepdims=True)
        ratios = np.abs(D @ W.T) / norms[:, None]  # (pairs, k)
        worst = ratios.min(axis=0)  # (k,)
        ok = np.flatnonzero(worst >= const)
        if len(ok):
            t = int(ok[0])
            j = int(ratios[:, t].argmin())
            return ProjectionDirection(W[t], const, float(worst[t]), (int(ia[j]), int(ib[j])), tried + t + 1)
        t = int(worst.argmax())
        if worst[t] > best_ratio:
            j = int(ratios[:, t].argmin())
            best_ratio, best_pair = float(worst[t]), (int(ia[j]), int(ib[j]))
        tried += k
    a, b = best_pair
    raise ProjectionSearchError(
        f"no unit direction among {max_tries} samples keeps every pair apart by the ratio {const:.4g}; "
        f"the best direction's worst pair is points {a} and {b} (distance {np.linalg.norm(P[a] - P[b]):.4g}, "
        f"projected ratio {best_ratio:.4g}). Raise max_tries or lower the required ratio."
    )
