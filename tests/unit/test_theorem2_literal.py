"""Theorem 2, literal construction: constants, weights, exact certificate, float64 collapse."""

import math

import mpmath
import numpy as np
import pytest
from flint import arb

from uatlab.constructions.paper_a.thm2_contextual_mapping import (
    all_sequences,
    build_theorem2_layer,
    random_vocabulary,
    theorem2_constants,
)
from uatlab.errors import InputError, PrecisionError
from uatlab.experiments.thm2_precision import float64_collapse, theorem2_literal
from uatlab.numerics.arb import working_precision
from uatlab.verify.theorem2 import certify_theorem2


@pytest.fixture(scope="module")
def default_run():
    """The issue's must-show case: d=2, |V|=4, n=3, ε=0.5, r_min=1, r_max=2, all ordered sequences."""
    return theorem2_literal(vocab_size=4, dim=2, n=3, seed=0)


def test_constants_match_the_spec_long_form():
    K, n, d, eps, rmin, rmax = 4, 3, 2, 0.5, 1.0, 2.0
    with working_precision(digits=50):
        c = theorem2_constants(K, n, d, eps, rmin, rmax)
        logn = arb(n).log()
        long_delta = (2 * logn**2 * arb(eps) ** 2 * rmin / (rmax**2 * (K + 1) ** 4 * (2 * logn + 3) * arb.pi() * d)) * (
            -((K + 1) ** 4) * (2 * logn + 3) * arb.pi() * d * rmax**2 / (4 * arb(eps) * rmin)
        ).exp()
        assert abs(float(((c["delta"] / long_delta) - 1).mid())) < 1e-40
        assert float(c["c"].mid()) == pytest.approx(
            (K + 1) ** 4 * (2 * math.log(n) + 3) * math.pi * d / (8 * eps * rmin)
        )
        assert float(c["r"].mid()) == rmax + eps / 4


def test_random_vocabulary_is_separated_and_seeded():
    V = random_vocabulary(6, 3, eps=0.5, r_min=1.0, r_max=2.0, seed=4)
    norms = np.linalg.norm(V, axis=1)
    assert ((norms > 1.0) & (norms <= 2.0)).all()
    dists = [np.linalg.norm(V[i] - V[j]) for i in range(6) for j in range(i + 1, 6)]
    assert min(dists) > 0.5
    assert np.array_equal(V, random_vocabulary(6, 3, eps=0.5, r_min=1.0, r_max=2.0, seed=4))
    with pytest.raises(InputError, match="cannot exist.*at most 6"):
        random_vocabulary(50, 1, eps=0.5, r_min=1.0, r_max=2.0)
    with pytest.raises(InputError, match="placed only"):
        random_vocabulary(6, 1, eps=0.5, r_min=1.0, r_max=2.0, max_tries=20)


def test_weights_follow_the_construction():
    V = random_vocabulary(4, 2, 0.5, 1.0, 2.0, seed=0)
    con = build_theorem2_layer(V, 3, 0.5, 1.0, 2.0, seed=0).detail
    W = con.weights
    w = con.w
    # exact factorisation: W_Kᵀ W_Q = c_used w wᵀ, W_V = wᵀ, W_O = o w with o ≤ ε/(4 r_max)
    assert np.array_equal(W["W_K"].T @ W["W_Q"], con.c_used * np.outer(w, w))
    assert np.array_equal(W["W_V"], w[None, :]) and np.array_equal(W["W_O"], con.out_scale * w[:, None])
    assert con.c_used >= con.c and con.c_used / con.c - 1 < 1e-7
    assert con.out_scale <= 0.5 / 8 and np.linalg.norm(w) <= 1.0
    assert all(np.linalg.matrix_rank(m) == 1 for m in W.values())
    assert con.layer.check_ranks() == {"W_Q": [1], "W_K": [1], "W_V": [1], "W_O": [1]}
    # projection lemma on V ∪ {0}
    P = np.vstack([V, np.zeros(2)])
    ratios = [abs(w @ (P[i] - P[j])) / np.linalg.norm(P[i] - P[j]) for i in range(5) for j in range(i + 1, 5)]
    assert min(ratios) >= math.sqrt(8 / (math.pi * 2)) / 25
    # Lemma 1's gap: every logit gap c |a_k| |a_j − a_j'| ≥ 2 log n + 3 on this vocabulary
    a = V @ w
    gaps = [con.c_used * abs(ak) * abs(a[i] - a[j]) for ak in a for i in range(4) for j in range(i + 1, 4)]
    assert min(gaps) >= 2 * math.log(3) + 3


def test_default_case_passes_exactly(default_run):
    r = default_run
    assert r["passes"] and r["failures"] == []
    assert r["n_sequences"] == 24  # 4·3·2 ordered sequences of 3 distinct tokens
    assert r["log10_delta_achieved"] >= r["log10_delta_theorem"]
    assert r["log10_delta_theorem"] == pytest.approx(-17732.56, abs=0.01)  # spec §10.1 table: −1.77e4
    assert r["max_norm"] <= r["r"] == 2.125
    assert r["different_token_lower"] > 0.25  # > ε/2
    assert 100 < r["digits"] < 100_000
    searched = {p["digits"]: p["passes"] for p in r["precision_search"]}
    assert searched[r["digits"]] and not searched.get(r["digits"] - 1, True)
    assert r["seconds"] < 60


def test_default_case_float64_collapses(default_run):
    r = default_run
    assert r["exact_distinct_ids"] == 12  # 4 sets × 3 tokens
    assert r["float64_collapsed_ids"] == r["exact_distinct_ids"] - r["float64_distinct_ids"] > 0
    assert r["float64_delta"] == 0.0


def test_achieved_delta_agrees_with_independent_mpmath(default_run):
    """Recompute the worst pair by the closed form x_k + o w boltz(c a_k a)/(c a_k) in mpmath."""
    r = default_run
    V = np.array(r["vocabulary"])
    con = build_theorem2_layer(V, 3, 0.5, 1.0, 2.0, seed=0).detail
    wp = r["worst_pair"]
    with mpmath.workdps(r["digits"] + 30):

        def output_scalar(seq, k):
            a = [mpmath.mpf(float(x)) for x in V[seq] @ con.w]
            z = [mpmath.mpf(con.c_used) * a[k] * aj for aj in a]
            m = max(z)
            e = [mpmath.exp(zj - m) for zj in z]
            return mpmath.fsum(aj * ej for aj, ej in zip(a, e, strict=True)) / mpmath.fsum(e)

        diff = abs(
            output_scalar(wp["sequence_a"], wp["position_a"]) - output_scalar(wp["sequence_b"], wp["position_b"])
        )
        dist = diff * mpmath.mpf(con.out_scale) * mpmath.sqrt(mpmath.fsum(mpmath.mpf(float(x)) ** 2 for x in con.w))
        assert float(mpmath.log10(dist)) == pytest.approx(r["log10_delta_achieved"], abs=1e-6)


def test_certificate_fails_at_low_precision_and_for_a_broken_layer():
    V = random_vocabulary(3, 2, 0.5, 1.0, 2.0, seed=1)
    con = build_theorem2_layer(V, 2, 0.5, 1.0, 2.0, seed=1).detail
    seqs = all_sequences(3, 2)
    assert not certify_theorem2(con, bits=53, sequences=seqs).passes
    # W_O = 0 turns the layer into the identity: same token in different sets collides
    con.weights["W_O"] = np.zeros_like(con.weights["W_O"])
    cert = certify_theorem2(con, bits=4000, sequences=seqs)
    assert not cert.passes and any("not certified" in f for f in cert.failures)
    assert cert.definite  # certainly violated: more precision would not help


def test_single_vocabulary_set_needs_only_different_token_separation():
    r = theorem2_literal(vocab_size=3, dim=2, n=3, seed=0)
    assert r["passes"] and r["delta_kind"].startswith("different tokens")
    assert r["exact_distinct_ids"] == 3 and r["log10_delta_achieved"] > math.log10(0.25)


def test_impossible_requests_are_refused():
    with pytest.raises(PrecisionError, match="did not pass at the cap of 64"):
        theorem2_literal(vocab_size=3, n=2, max_digits=64)
    with pytest.raises(PrecisionError, match="minimum of 16"):
        theorem2_literal(max_digits=8)
    with pytest.raises(InputError, match="exceeds"):
        theorem2_literal(vocab_size=3, n=4)
    with pytest.raises(InputError, match="n must be an integer ≥ 2"):
        theorem2_literal(n=1)
    with pytest.raises(InputError, match="r_min < r_max"):
        theorem2_literal(r_min=2.0, r_max=1.0)
    with pytest.raises(InputError, match="exceed the limit"):
        theorem2_literal(vocab_size=12, dim=3, n=6, max_sequences=1000)
    V = [[1.5, 0.0], [1.6, 0.0], [0.0, 1.5]]
    with pytest.raises(InputError, match=r"position 0 and sequence 0 position 1 .* only 0.1 apart"):
        build_theorem2_layer(V, 2, 0.5, 1.0, 2.0)


def test_small_case_float64_and_sets_mode():
    r = theorem2_literal(vocab_size=3, dim=2, n=2, seed=2, sequences="sets")
    assert r["passes"] and r["n_sequences"] == 3
    V = np.array(r["vocabulary"])
    con = build_theorem2_layer(V, 2, 0.5, 1.0, 2.0, seed=2).detail
    f = float64_collapse(con, all_sequences(3, 2))
    assert f["exact_distinct_ids"] == 6 and f["float64_collapsed_ids"] == r["float64_collapsed_ids"]


@pytest.mark.parametrize(("eps", "feasible"), [(0.5, True), (1e-300, False)])
def test_the_digit_cap_error_advises_raising_it_only_when_the_estimate_is_feasible(eps, feasible):
    """At the cap, the error suggests --max-digits only when the logit range's digit estimate could be reached;
    an estimate of ~1e303 digits (eps = 1e-300) says no exact check can reach it and to enlarge eps."""
    from uatlab.errors import PrecisionError
    from uatlab.experiments.thm2_precision import FEASIBLE_DIGITS, theorem2_literal

    with pytest.raises(PrecisionError) as info:
        theorem2_literal(eps=eps, max_digits=16)
    text = str(info.value)
    estimate = float(text.split("suggests up to about ")[1].split(" digits")[0])
    assert (estimate <= FEASIBLE_DIGITS) == feasible
    assert ("Raise --max-digits" in text) == feasible and ("Use a larger eps" in text) == (not feasible)
