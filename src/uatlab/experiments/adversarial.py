"""Adversarial inputs for the compiled ReLU networks (paper B, Lemma 3.11 / Sec. 3.3): a lower bound on the sup error.

A random sample finds the typical error of a compiled network, not its supremum. The error of the compiled
model at output coordinate (i, c) is, up to the tiny dead-key / mask leakage,

    g(X)_{i,c} − f(X)_{i,c} ≈ Σ_j W2[(i,c), j] · e_j(u_j),    u_j = W1_j · vec X + b1_j,

with e_j(u) = s·E(u/s) the interpolation error of Range_[0,1] (Thm 3.4 / 3.9: E(y) = Σ_h softmax-weighted
anchors − Range_[0,1](y), from the compiled ``plan``) at the unit's scale s: s = U_j (two-layer and standard
forms, y' = u_j/U_j) or s = K/κ_i = max_k(σW2[(k,c),j])·U_j/|W2[(i,c),j]| (one-layer form, y' = κ_i u_j/K).
E oscillates with the anchor spacing, so the error is largest when every unit sits at a worst phase with the
sign of its W2 entry. The search:

1. For the coordinates with the largest Σ_j |W2[(i,c),j]| U_j, and both signs σ of the error, pick for every
   unit the u_j in the middle half of its reachable range [L_j, U_j] (interval arithmetic on the box) that
   maximises σ W2[(i,c),j] e_j(u_j) (a grid of ``grid`` points).
2. Solve the linear program W1_J vec X + b1_J = u_J, X ∈ [lo, hi]^{n×d} (``scipy.optimize.linprog``),
   pinning units greedily in decreasing |W2| U_j and keeping those the box allows.
3. Evaluate the real compiled model (float64) and the network at each solution.

The result is the error of the real model at a real input of the box, so it is a rigorous **lower** bound
on the true sup error (not an upper bound: the search is heuristic).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import linprog

from uatlab.constructions.paper_b.lem3_11_relu_network import (
    CompiledReluNetwork,
    CompiledReluNetworkTwoLayer,
    hidden_unit_ranges,
)
from uatlab.constructions.paper_b.lem3_11_standard_attention import CompiledStandardRelu
from uatlab.constructions.paper_b.thm3_truncated_linear import InterpolationPlan
from uatlab.errors import InputError


def interpolation_error(plan: InterpolationPlan, y: np.ndarray) -> np.ndarray:
    """E(y) = (telescoped softmax interpolation of ``plan``)(y) − Range_[a,b](y), exact formula in float64."""
    y = np.asarray(y, np.float64)  # (G,)
    k = np.arange(plan.anchors)  # (m,)
    out = np.full_like(y, plan.a)
    for h in range(plan.heads):
        a_h = plan.a + h * (plan.anchors - 1) * plan.delta
        L = a_h + k * plan.delta  # (m,) anchors of head h
        s = -plan.beta * ((y[:, None] - L) ** 2 - (y[:, None] - L[0]) ** 2)  # (G, m)
        s -= s.max(axis=1, keepdims=True)
        p = np.exp(s)
        out += (p / p.sum(axis=1, keepdims=True)) @ (L - a_h)
    return out - np.clip(y, plan.a, plan.b)


def _unit_scale(compiled: object, i: int, c: int, j: int, U: np.ndarray) -> float:
    """The scale s of e_j(u) = s·E(u/s) at output coordinate (i, c) (module docstring)."""
    if isinstance(compiled, (CompiledStandardRelu, CompiledReluNetworkTwoLayer)):
        return float(U[j])
    net = compiled.net  # one-layer form: head (j, c, σ) normalises by K/κ_i
    W2 = net.W2.reshape(net.n, net.d, -1)
    sg = np.sign(W2[i, c, j])
    return float(np.maximum(sg * W2[:, c, j], 0).max() * U[j] / abs(W2[i, c, j]))


def adversarial_error(compiled: object, coordinates: int = 3, grid: int = 2001) -> dict[str, object]:
    """The largest error of ``compiled`` found by the search of the module docstring.

    Returns ``adversarial_error`` (max |g − f| over the candidates, a lower bound on the sup error),
    ``coordinate`` (i, c) where it was found, ``input`` (1, n, d) and ``candidates`` (number of inputs evaluated).
    """
    if not isinstance(compiled, (CompiledReluNetwork, CompiledStandardRelu)):
        raise InputError(f"no adversarial search for {type(compiled).__name__} (needs an interpolation plan)")
    net, plan = compiled.net, compiled.plan
    lo, hi = compiled.domain
    n, d, J = net.n, net.d, net.hidden
    nd = n * d
    W2 = net.W2.reshape(n, d, J)
    Lw, U = hidden_unit_ranges(net, lo, hi)  # (J,), (J,)
    live = U > 0
    center = net.W1 @ np.full(nd, (lo + hi) / 2) + net.b1  # (J,)
    weight = (np.abs(W2) * np.where(live, U, 0.0)).sum(-1)  # (n, d)
    order = np.argsort(-weight, axis=None)[:coordinates]
    candidates: list[np.ndarray] = []
    for flat in order:
        i, c = (int(v) for v in np.unravel_index(flat, (n, d)))
        units = [j for j in np.argsort(-np.abs(W2[i, c]) * np.where(live, U, 0.0)) if live[j] and W2[i, c, j] != 0]
        for sigma in (1.0, -1.0):
            target = center.copy()
            for j in units:
                half = 0.25 * (U[j] - Lw[j])
                u_lo, u_hi = max(0.0, center[j] - half), min(U[j], center[j] + half)
                if u_hi <= u_lo:
                    u_lo, u_hi = max(0.0, Lw[j]), U[j]
                us = np.linspace(u_lo, u_hi, grid)  # (G,)
                s = _unit_scale(compiled, i, c, j, U)
                gain = sigma * W2[i, c, j] * s * interpolation_error(plan, us / s)
                target[j] = us[int(np.argmax(gain))]
            pinned: list[int] = []
            sol = None
            for j in units:
                trial = [*pinned, j]
                res = linprog(
                    np.zeros(nd),
                    A_eq=net.W1[trial],
                    b_eq=(target - net.b1)[trial],
                    bounds=[(lo, hi)] * nd,
                    method="highs",
                )
                if res.status == 0:
                    pinned, sol = trial, np.clip(res.x, lo, hi)
            if sol is not None:
                candidates.append(sol.reshape(n, d))
    if not candidates:
        return {"adversarial_error": 0.0, "coordinate": None, "input": None, "candidates": 0}
    X = np.stack(candidates)  # (C, n, d)
    err = np.abs(compiled(X) - net(X))  # (C, n, d)
    k, i, c = np.unravel_index(int(np.argmax(err)), err.shape)
    return {
        "adversarial_error": float(err[k, i, c]),
        "coordinate": (int(i), int(c)),
        "input": X[k : k + 1],
        "candidates": len(candidates),
    }
