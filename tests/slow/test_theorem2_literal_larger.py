"""Slow: the literal Theorem-2 certificate on larger vocabularies (minutes; run with -m slow)."""

import pytest

from uatlab.experiments.thm2_precision import theorem2_literal


@pytest.mark.slow
@pytest.mark.parametrize(("vocab_size", "n", "seed"), [(5, 3, 0), (4, 3, 1), (4, 3, 2)])
def test_larger_cases_pass_exactly(vocab_size, n, seed):
    r = theorem2_literal(vocab_size=vocab_size, dim=2, n=n, seed=seed)
    assert r["passes"] and r["log10_delta_achieved"] >= r["log10_delta_theorem"]
    assert r["max_norm"] <= r["r"]
    assert r["float64_collapsed_ids"] > 0
