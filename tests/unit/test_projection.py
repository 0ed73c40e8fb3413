"""The projection-direction lemma: bound, determinism, retry-limit error."""

import itertools
import math

import numpy as np
import pytest

from uatlab.errors import InputError
from uatlab.theory import ProjectionSearchError, find_projection_direction, projection_constant


def points(seed, M=12, d=3):
    P = np.random.default_rng(seed).standard_normal((M - 1, d))
    return np.vstack([P, np.zeros(d)])  # P = V ∪ {0}


@pytest.mark.parametrize(("seed", "d"), [(0, 1), (1, 2), (2, 5), (3, 16)])
def test_bound_holds_on_every_pair(seed, d):
    P = points(seed, d=d)
    res = find_projection_direction(P, seed=seed)
    assert np.linalg.norm(res.w) == pytest.approx(1.0)
    const = math.sqrt(8 / (math.pi * d)) / len(P) ** 2
    assert res.constant == pytest.approx(const) == pytest.approx(projection_constant(d, len(P)))
    ratios = [
        abs(res.w @ (P[a] - P[b])) / np.linalg.norm(P[a] - P[b]) for a, b in itertools.combinations(range(len(P)), 2)
    ]
    assert min(ratios) >= const
    assert max(ratios) <= 1 + 1e-12
    assert min(ratios) == pytest.approx(res.worst_ratio)
    a, b = res.worst_pair
    assert abs(res.w @ (P[a] - P[b])) / np.linalg.norm(P[a] - P[b]) == pytest.approx(res.worst_ratio)


def test_seeded_and_deterministic():
    P = points(7)
    w1 = find_projection_direction(P, seed=3).w
    assert np.array_equal(w1, find_projection_direction(P, seed=3).w)
    assert not np.array_equal(w1, find_projection_direction(P, seed=4).w)
    g = np.random.default_rng(3)
    assert np.array_equal(find_projection_direction(P, seed=g).w, w1)


def test_retry_limit_error_names_worst_pair():
    P = points(0, M=30, d=8)
    with pytest.raises(ProjectionSearchError, match=r"among 40 samples .* worst pair is points \d+ and \d+"):
        find_projection_direction(P, constant=0.9, max_tries=40)


def test_bad_points():
    with pytest.raises(InputError, match="points 0 and 2 coincide"):
        find_projection_direction([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    with pytest.raises(InputError, match="at least 2 points"):
        find_projection_direction([[1.0, 0.0]])
    with pytest.raises(InputError, match="non-finite"):
        find_projection_direction([[1.0, 0.0], [np.nan, 1.0]])
    with pytest.raises(InputError, match="ratio"):
        find_projection_direction([[1.0, 0.0], [0.0, 1.0]], constant=2.0)
