"""Theorem 1: the ray counterexample defeats every hardmax layer; softmax separates it."""

import numpy as np
import pytest
import torch

from uatlab.constructions.paper_a.thm1_hardmax_counterexample import (
    batched_self_attention,
    check_hardmax_collision,
    counterexample_scalars,
    hardmax_collision_trials,
    hardmax_counterexample_inputs,
)
from uatlab.errors import InputError
from uatlab.models import MultiHeadSelfAttention
from uatlab.theory import contextual_margin, tokenwise_separatedness


@pytest.mark.parametrize("n", [4, 5, 7])
def test_inputs_share_min_max_mean_but_not_the_set(n):
    T = counterexample_scalars(n)
    assert T[0].min() == T[1].min() and T[0].max() == T[1].max() and T[0].sum() == T[1].sum()
    assert set(T[0]) != set(T[1])
    X = hardmax_counterexample_inputs(d=3, n=n)
    assert X.shape == (2, n, 3) and X.dtype == torch.float64
    sep = tokenwise_separatedness(X, r_min=0.99, r_max=(n + 2) * (1 + 1e-12), eps=0.99, allow_duplicates=False)
    assert sep.vocab_sets[0] != sep.vocab_sets[1]


def test_short_sequences_refused():
    with pytest.raises(InputError, match="n ≥ 4"):
        counterexample_scalars(3)


@pytest.mark.parametrize(("d", "heads", "head_dim", "rank"), [(1, 1, 1, 1), (2, 3, 2, None), (5, 8, 3, 2)])
def test_collision_for_given_layers(d, heads, head_dim, rank):
    for seed in range(5):
        torch.manual_seed(seed)
        layer = MultiHeadSelfAttention(d, heads, head_dim, rank, attention="hardmax", dtype=torch.float64)
        res = check_hardmax_collision(layer, n=5)
        # exactly 0 in real arithmetic; float64 may differ by a few ulps between batch rows
        assert res.collides and res.distance <= 1e-13 * res.hardmax.r
        assert res.positions == (0, 3, 4)
        assert res.hardmax.delta <= res.distance and res.hardmax.worst_pair[0][1] == res.hardmax.worst_pair[1][1]
        assert res.softmax.delta > 0
        assert layer.attention == "hardmax"  # the checker worked on copies


def test_negative_control_generic_inputs_do_not_collide():
    """The collision is a property of the ray construction, not of the checker."""
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    layer = MultiHeadSelfAttention(3, 2, 3, None, attention="hardmax", dtype=torch.float64)
    V = rng.standard_normal((6, 3))
    X = np.stack([V[[0, 1, 2, 3]], V[[0, 4, 5, 3]]])
    assert contextual_margin(layer, X).delta > 1e-6


def test_batched_formula_equals_the_module():
    gen = torch.Generator().manual_seed(1)
    T, h, s, d = 3, 2, 2, 3
    W = {k: torch.randn(T, h, s, d, generator=gen, dtype=torch.float64) for k in ("W_Q", "W_K", "W_V")}
    W["W_O"] = torch.randn(T, h, d, s, generator=gen, dtype=torch.float64)
    X = hardmax_counterexample_inputs(d)
    for kind in ("hardmax", "softmax"):
        batched = batched_self_attention(X, W["W_Q"], W["W_K"], W["W_V"], W["W_O"], kind)
        for t in range(T):
            layer = MultiHeadSelfAttention(d, h, s, None, attention=kind, dtype=torch.float64)
            for name in W:
                getattr(layer, name).set_weight(W[name][t])
            with torch.no_grad():
                torch.testing.assert_close(batched[t], layer(X), rtol=1e-12, atol=1e-12)


def test_thousand_draws_per_head_count_all_collide():
    res = hardmax_collision_trials((1, 2, 4, 8), trials=1000, seed=0)
    assert res["collisions"] == {"1": 1000, "2": 1000, "4": 1000, "8": 1000}
    assert res["all_collide"] and res["softmax_separates"]
    assert all(v > 0 for v in res["softmax_delta"].values())
    assert all(v == 0 for v in res["hardmax_delta_max"].values())


def test_trial_arguments_validated():
    with pytest.raises(InputError, match="trials"):
        hardmax_collision_trials((1,), trials=0)
    with pytest.raises(InputError, match="head counts"):
        hardmax_collision_trials((0,), trials=1)
