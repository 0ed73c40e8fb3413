"""The y values the truncated-linear sweeps measure their sup error on (Hu et al. 2025, Theorem 3.2): they must
not line up with the equally spaced anchors, where the interpolation error vanishes by symmetry."""

from __future__ import annotations

import numpy as np
import pytest

from uatlab.experiments.approximation_sweeps import _probe_grid, sweep_truncated_linear


@pytest.mark.parametrize("points", [3, 5, 6, 61, 4001, 20001])
def test_the_probe_points_cover_the_range_with_small_gaps(points):
    ys = _probe_grid(-1.0, 1.0, points)
    assert len(ys) == points and ys[0] == -3.0 and ys[-1] == 3.0
    edges = {-1.0, 1.0, float(np.nextafter(-1.0, -2.0)), float(np.nextafter(1.0, 2.0))}
    assert points < 6 or edges <= set(ys.tolist())  # a, b and their outside neighbours: the outside error's sup
    gaps = np.diff(ys)
    assert (gaps > 0).all() and gaps.max() < 3 * 6.0 / points  # the range is 6 long: the three-gap theorem


@pytest.mark.parametrize("anchors", [11, 21])
def test_a_few_points_measure_the_error_a_dense_grid_measures(anchors):
    """61 equally spaced points over [−3, 3] fell on anchors or midpoints of 11 anchors on [−1, 1] and measured
    2.4e-5 against 0.058; the sampled sup must be near the dense one (and never above the proven bound)."""
    sparse = sweep_truncated_linear([anchors], points=61).rows[0]
    dense = sweep_truncated_linear([anchors], points=20001).rows[0]
    assert 0.6 * dense["sup_error"] <= sparse["sup_error"] <= dense["bound"]
    assert dense["sup_error"] <= dense["bound"]


def test_a_sweep_of_one_size_has_no_slope_in_either_sweep():
    """One head count (or one anchor count) fits no slope: the slope table is empty in both sweeps (the head
    sweep gave NaN, the anchor sweep nothing)."""
    from uatlab.experiments.approximation_sweeps import sweep_heads

    assert sweep_heads([3], points=61).slopes == {} == sweep_truncated_linear([11], points=61).slopes
    assert set(sweep_heads([1, 2], points=61).slopes) == {"sup_error_vs_heads"}


def test_the_outside_error_is_measured_where_it_is_largest():
    """Outside [a, b] the error grows as y approaches a or b: the probe points hold the floats next to a and b,
    so the sweep's sup_outside is at least the error there (and within the proven clamp bound)."""
    from uatlab.constructions.paper_b.thm3_truncated_linear import build_truncated_linear_attention
    from uatlab.experiments.approximation_sweeps import sweep_heads
    from uatlab.experiments.measure import measure_sup_error

    row = sweep_heads([16], points=401).rows[0]
    c = build_truncated_linear_attention([1.0], 0.0, -1.0, 1.0, anchors=11, heads=16, mode="token").detail
    near = measure_sup_error(c, np.array([np.nextafter(-1.0, -2.0), np.nextafter(1.0, 2.0)]))["sup_outside"]
    assert 0 < near <= row["sup_outside"] <= row["clamp_bound"]
