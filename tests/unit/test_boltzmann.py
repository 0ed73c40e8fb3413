"""The Boltzmann operator: definition, stability, gradient identity, exact versions, Lemma 1."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from uatlab.errors import InputError
from uatlab.numerics.arb import arb_boltz, working_precision
from uatlab.theory import (
    boltz,
    boltz_exact,
    boltz_grad,
    lemma1_bound,
    lemma1_hypotheses,
    lemma1_log10_bound,
    lemma1_required_gap,
    require_lemma1_hypotheses,
)
from uatlab.theory.boltzmann import lemma1_exact_check, sample_lemma1_pair


def naive_boltz(a):
    a = np.asarray(a, dtype=np.float64)
    e = np.exp(a)
    return (a * e).sum(-1) / e.sum(-1)


def test_matches_definition_batched_numpy_and_torch():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 5, 7)) * 3
    expected = naive_boltz(a)
    np.testing.assert_allclose(boltz(a), expected, rtol=1e-13)
    t = torch.from_numpy(a)
    out = boltz(t)
    assert out.shape == (3, 5) and out.dtype == torch.float64
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-13)
    assert boltz([2.0]) == 2.0


def test_stable_for_huge_entries_against_exact_arithmetic():
    rng = np.random.default_rng(1)
    for scale in (1e3, 1e30, 1e150, 1e300):
        a = rng.uniform(-1, 1, size=6) * scale
        val = float(boltz(a))
        assert math.isfinite(val)
        with working_precision(digits=60):
            exact = arb_boltz(a.tolist())
            assert abs(val - float(exact.mid())) <= 1e-12 * scale
    # naive formula overflows here, the stable one does not
    assert boltz([1e300, -1e300, 0.0]) == 1e300
    assert boltz([710.0, 709.0]) == pytest.approx(709.0 + 1 / (1 + math.exp(-1)), rel=1e-15)


def test_gradient_identity_matches_autograd():
    rng = np.random.default_rng(2)
    a = torch.tensor(rng.normal(size=(4, 6)) * 2, dtype=torch.float64, requires_grad=True)
    boltz(a).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), boltz_grad(a.detach()).numpy(), atol=1e-13)
    np.testing.assert_allclose(boltz_grad(a.detach().numpy()), a.grad.numpy(), atol=1e-13)
    # non-monotone: raising an entry below boltz − 1 lowers boltz
    g = boltz_grad(np.array([5.0, 0.0]))
    assert g[1] < 0 < g[0]


def test_gradient_at_saturation_keeps_the_true_value():
    a = torch.tensor([0.0, -1000.0], dtype=torch.float64, requires_grad=True)
    boltz(a).backward()
    assert a.grad.tolist() == [1.0, 0.0]


def test_attention_identity_rank_one():
    # Σ_j a_j softmax_j(c a_k a_j) = boltz(c a_k a) / (c a_k)
    a = np.array([0.7, -1.3, 0.2, 1.9])
    c = 3.0
    for ak in a:
        logits = c * ak * a
        w = np.exp(logits - logits.max())
        lhs = (a * w).sum() / w.sum()
        assert lhs == pytest.approx(boltz(c * ak * a) / (c * ak), rel=1e-14)


def test_exact_backends_agree_and_enclose_float():
    a = [1.5, -2.25, 3.0, 0.125]
    ball = boltz_exact(a, digits=40)
    mp = boltz_exact(a, digits=40, backend="mpmath")
    assert abs(float(ball.mid()) - float(mp)) < 1e-30
    assert abs(float(ball.mid()) - boltz(a)) < 1e-15
    with pytest.raises(InputError, match="backend"):
        boltz_exact(a, backend="decimal")


def test_bad_input():
    with pytest.raises(InputError, match="empty"):
        boltz(np.zeros((2, 0)))
    with pytest.raises(InputError, match="finite"):
        boltz([1.0, float("nan")])
    with pytest.raises(InputError, match="finite"):
        boltz(torch.tensor([float("inf"), 0.0]))


finite = st.floats(min_value=-1e300, max_value=1e300, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(finite, min_size=1, max_size=12))
def test_property_between_min_and_max(a):
    v = boltz(a)
    assert min(a) <= v <= max(a)
    tv = boltz(torch.tensor(a, dtype=torch.float64))
    assert min(a) <= float(tv) <= max(a)


def test_lemma1_constants():
    assert lemma1_required_gap(3) == pytest.approx(2 * math.log(3) + 3)
    assert lemma1_bound(4, 1.0) == pytest.approx(math.log(4) ** 2 * math.exp(-2))
    assert lemma1_bound(4, 1000.0) == 0.0  # underflows; the log10 form does not
    assert lemma1_log10_bound(4, 1000.0) == pytest.approx(2 * math.log10(math.log(4)) - 2000 / math.log(10))


def test_lemma1_hypothesis_checker_names_violations():
    ok = lemma1_hypotheses([[0.0, 6.0, -6.0], [0.0, 12.0, -6.0]])
    assert ok.holds and ok.r == 12.0 and ok.min_gap == 6.0
    dup = lemma1_hypotheses([[0.0, 6.0, 0.0]])
    assert dup.duplicates == [(0, 0, 2)] and "positions 0 and 2" in dup.violations[0]
    close = lemma1_hypotheses([[0.0, 6.0], [0.0, 7.0]])
    assert not close.holds and "differ by 1" in close.violations[0]
    big = lemma1_hypotheses([[0.0, 60.0]], r=10)
    assert any("> r = 10" in v for v in big.violations)
    with pytest.raises(InputError, match="Lemma 1's hypotheses"):
        require_lemma1_hypotheses([[0.0, 1.0]])
    with pytest.raises(InputError, match="vector 0, component 1"):
        lemma1_hypotheses([[0.0, float("nan")]])
    with pytest.raises(InputError, match="equal-length"):
        lemma1_hypotheses([[0.0, 1.0], [2.0]])


@st.composite
def lemma1_families(draw):
    """Two vectors meeting Lemma 1's hypotheses, with different component sets."""
    n = draw(st.integers(2, 6))
    extra = draw(st.integers(1, 3))
    req = lemma1_required_gap(n)
    slack = draw(st.lists(st.floats(1e-9, 3.0), min_size=n + extra - 1, max_size=n + extra - 1))
    pool = np.concatenate([[0.0], np.cumsum(np.asarray(slack) + req)])
    pool = pool - draw(st.floats(0.0, 1.0)) * pool[-1]
    idx = list(range(n + extra))
    ia = sorted(draw(st.permutations(idx))[:n])
    ib = sorted(draw(st.permutations(idx))[:n])
    if ia == ib:  # force different sets: swap one member for a non-member
        outside = next(i for i in idx if i not in ib)
        ib = sorted(ib[1:] + [outside])
    return pool[ia], pool[ib][::-1]


@settings(max_examples=150, deadline=None)
@given(lemma1_families())
def test_property_lemma1_under_its_hypotheses(pair):
    a, b = pair
    h = require_lemma1_hypotheses(np.stack([a, b]))
    assert h.min_gap > h.required_gap
    res = lemma1_exact_check(a, b)
    assert res["certified"], res
    assert res["log10_diff"] > res["log10_bound"]


def test_lemma1_sampler_meets_hypotheses_and_check_can_fail():
    rng = np.random.default_rng(5)
    for _ in range(50):
        n = int(rng.integers(2, 8))
        a, b = sample_lemma1_pair(rng, n)
        assert lemma1_hypotheses(np.stack([a, b])).holds
        assert sorted(a) != sorted(b)
    with pytest.raises(InputError, match="same component set"):
        lemma1_exact_check([0.0, 6.0], [6.0, 0.0])
    # outside the hypotheses the exact check refuses instead of certifying
    with pytest.raises(InputError, match="hypotheses"):
        lemma1_exact_check([0.0, 1.0], [0.0, 2.0])


@pytest.mark.parametrize(
    ("vector", "repeats"),
    [([0.0, 0.0, 0.0], 2), ([0.0, 0.0, 0.0, 0.0], 3), ([0.0, 0.0, 10.0], 1), ([3.0, 1.0, 3.0], 1)],
)
def test_a_repeated_component_is_a_gap_of_zero_and_counted_once_per_repeat(vector, repeats):
    """A vector that repeats a component has a smallest gap of 0 (it read inf, or the gap to another value),
    and the count is of components equal to an earlier one (k equal values: k − 1)."""
    from uatlab.theory.boltzmann import lemma1_hypotheses

    h = lemma1_hypotheses(vector)
    expected = len(vector) - len(set(vector))
    assert h.min_gap == 0.0 and len(h.duplicates) == expected == repeats and not h.holds
    values = sorted(set(vector))  # two different values closer than 2 log n + 3: a second violation
    close = len(values) > 1 and min(np.diff(values)) <= 2 * np.log(len(vector)) + 3
    assert f"({expected} repeated component(s) in all)" in h.violations[0] and len(h.violations) == 1 + close
    two = lemma1_hypotheses([[0.0, 20.0], [20.0, 40.0]])  # a value shared by two vectors is no repeat
    assert two.duplicates == [] and two.min_gap == 20.0
    both = lemma1_hypotheses([0.0, 0.0, 0.1])  # a repeat and two values too close: both reported
    assert both.min_gap == 0.0 and len(both.violations) == 2 and "differ by 0.1" in both.violations[1]
