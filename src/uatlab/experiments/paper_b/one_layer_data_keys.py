"""One STANDARD attention layer whose keys read the data: what it cannot do for n ≥ 3 tokens, d ≥ 2 (paper B).

Paper B (Hu et al. 2025, Sec. 3.3, Lemma 3.11 / Thm 3.9) compiles a one-hidden-layer ReLU network into one
NON-standard attention layer. This module proves and measures why no STANDARD layer can do it in general,
whatever its size, even when the keys read the data.

**Setting.** One layer: z_k = x_k W_E + p_k (k = 1..n, plus any fixed extra positions), scores
s^h_{ik} = (z_i W_Q^h + b_Q^h) · (z_k W_K^h + b_K^h), π^h_{ik} = softmax_k(s^h_{ik}), and

    out_i = (z_i + Σ_h Σ_k π^h_{ik} (z_k W_V^h + b_V^h) W_O^h) W_R + b_R.                         (*)

**Lemma (symmetric cross-Hessian).** Fix a position i and its token x_i. For every layer (*) — any number
of heads, width, head dimension, positional encoding — every output channel g = out_{i,c}, viewed as a
function of the other tokens, satisfies for all k ≠ m (both ≠ i) and channels a, b:

    ∂²g / ∂x_{k,a} ∂x_{m,b}  =  ∂²g / ∂x_{k,b} ∂x_{m,a},                                          (L)

i.e. the d×d cross block H_{km} = ∂²g/∂x_k∂x_mᵀ is SYMMETRIC (an ultrahyperbolic system of the type of
F. John's equation).

*Proof.* With x_i fixed, the query is fixed, so for head h the score is s_k = c_k + γ·x_k with constants
c_k (the query's data times the key's position, position-position terms, biases) and ONE direction γ
shared by all keys (z_k is affine in x_k with the same W_E for every k). Let t_k = γ·x_k and
Φ(t) = log Σ_k exp(c_k + t_k); then π_k = ∂Φ/∂t_k. A value channel contributes
Σ_k π_k (w·x_k + u_k) with w shared and u_k positional: writing it as d/dε Φ_ε(X) at ε = 0 with
Φ_ε = log Σ_k exp(c_k + ε u_k + (γ + ε w)·x_k), it is the ε-derivative of a family of functions of
the projections X γ_ε only. A function G(Xγ) of such projections has ∂²G/∂x_{k,a}∂x_{m,b} =
∂_k∂_m G · γ_a γ_b, symmetric in (a, b); the operator D = ∂_{k,a}∂_{m,b} − ∂_{k,b}∂_{m,a} has constant
coefficients, so it commutes with d/dε and kills the value term too. The residual and readout add an
affine function of x_i (a constant here), and heads add. □

The positional-key lemma (one_layer_standard) is the special case γ = 0. (L) fails for the benchmark
targets: a unit ReLU(Σ_k W_k·x_k + b) has cross block δ(u) W_k W_mᵀ, not symmetric unless W_k ∥ W_m.
Nothing is claimed for n = 2 (there is no pair k ≠ m besides i: one layer IS universal there, see
`uatlab.constructions.paper_b.lem3_11_standard_two_tokens`) or for d = 1 (a = b only).

**Corollary (a size-independent lower bound).** Take the 4-dimensional slice

    X(p, q) = X0 + α ⊗ (p_1 e_a + p_2 e_b) + α' ⊗ (q_1 e_a + q_2 e_b),   (p, q) ∈ [0, 1]^4,

with α, α' ∈ [−1, 1]^n zero at i, |α_k| + |α'_k| ≤ 1 and X0 chosen so the slice stays in [0, 1]^{n×d}.
On it, D = ∂_{p1}∂_{q2} − ∂_{p2}∂_{q1} equals Σ_{k,m} α_k α'_m (∂_{k,a}∂_{m,b} − ∂_{k,b}∂_{m,a}), so
Dg = 0 for every layer (*). Integrating D over the box (Fubini, the fundamental theorem twice):

    T(g) := ∫_box Dg = ∫∫ Δ_{p1}Δ_{q2} g dp_2 dq_1 − ∫∫ Δ_{p2}Δ_{q1} g dp_1 dq_2,

a signed combination of point values with total mass 8 (each double difference has 4 terms of weight
1 on a unit square). So T(g) = 0 and, for the target f, |T(f)| = |T(f − g)| ≤ 8 sup_box |f − g|:

    sup_{[0,1]^{n×d}} |g − f|  ≥  |T(f)| / 8      for EVERY one-layer standard form g.

For the ReLU net, unit j restricted to the slice is ℓ_j = e_j + A1 p_1 + A2 p_2 + B1 q_1 + B2 q_2 and
∂_{p1}∂_{q2} ReLU(ℓ) = A1 B2 δ(ℓ), so

    T(f_{i,c}) = Σ_j W2[(i,c), j] (A1 B2 − A2 B1)_j ρ_j(−e_j),

ρ_j the density of A1 U1 + A2 U2 + B1 U3 + B2 U4 (U iid uniform on [0, 1]), a cubic B-spline:
ρ(y) = Σ_{S ⊆ [4]} (−1)^{|S|} (y' − a_S)_+³ / (3! Π a_r) with a_r = |coefficients| and y' shifted by
the negative ones. `slice_functional_exact` evaluates it in exact rational arithmetic (the float64
weights are rationals), so the bound is rigorous; `data_key_error_lower_bound` searches the slice
(position i, channel c, channels a ≠ b, signs α, α', free coordinates of X0) and verifies the best one
exactly. Notation map (paper B → here): w_j, t_j → ``net.W1[j]``, ``net.b1[j]``; c_j → ``net.W2[(i,c), j]``.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import torch

from uatlab.constructions.paper_b.lem3_11_relu_network import ReluNetwork

SUBSETS = np.array(list(itertools.product([0, 1], repeat=4)), dtype=np.float64)  # (16, 4)
MASS = 8.0  # total mass of D applied to the indicator of the unit 4-box


def cross_hessian_asymmetry(model: Any, X: np.ndarray, i: int, c: int) -> tuple[float, float]:
    """max over k ≠ m (≠ i) of |H_km − H_kmᵀ| and of |H_km| for g = model(X)[i, c] (torch autograd).

    ``model`` maps a (1, n, d) float64 tensor to (1, n, d). The lemma says the first number is rounding.
    """
    x = torch.as_tensor(np.asarray(X, np.float64))  # (n, d)
    n = x.shape[0]
    H = torch.autograd.functional.hessian(lambda z: model(z.unsqueeze(0))[0, i, c], x)  # (n, d, n, d)
    asym = scale = 0.0
    for k in range(n):
        for m in range(n):
            if k != m and i not in (k, m):
                B = H[k, :, m, :]  # (d, d)
                asym = max(asym, float((B - B.T).abs().max()))
                scale = max(scale, float(B.abs().max()))
    return asym, scale


@dataclass
class SliceWitness:
    """A 4-dimensional slice X(p, q) = X0 + α⊗(p1 e_a + p2 e_b) + α'⊗(q1 e_a + q2 e_b) read at output (i, c)."""

    i: int
    c: int
    a: int
    b: int
    alpha: np.ndarray  # (n,) in {−1, 0, 1}, zero at i
    alpha_q: np.ndarray  # (n,) disjoint support from alpha
    free: np.ndarray  # (n, d) X0 outside the channels a, b of the moving tokens

    def base(self) -> np.ndarray:
        """X0 (n, d): the moving coordinates start where the slice stays inside [0, 1]."""
        X0 = self.free.copy()
        moving = (self.alpha != 0) | (self.alpha_q != 0)
        start = np.maximum(-self.alpha, 0) + np.maximum(-self.alpha_q, 0)
        for ch in (self.a, self.b):
            X0[moving, ch] = start[moving]
        return X0

    def points(self, pq: np.ndarray) -> np.ndarray:
        """(..., 4) parameters (p1, p2, q1, q2) → (..., n, d) inputs on the slice."""
        X = np.broadcast_to(self.base(), pq.shape[:-1] + self.free.shape).copy()
        X[..., self.a] += pq[..., 0:1] * self.alpha + pq[..., 2:3] * self.alpha_q
        X[..., self.b] += pq[..., 1:2] * self.alpha + pq[..., 3:4] * self.alpha_q
        return X

    def unit_forms(self, net: ReluNetwork) -> tuple[np.ndarray, np.ndarray]:
        """Per hidden unit: (A1, A2, B1, B2) (J, 4) and offset e (J,) of u_j on the slice."""
        W = net.W1.reshape(-1, net.n, net.d)  # (J, n, d)
        coef = np.stack(
            [W[:, :, self.a] @ self.alpha, W[:, :, self.b] @ self.alpha, W[:, :, self.a] @ self.alpha_q]
            + [W[:, :, self.b] @ self.alpha_q],
            -1,
        )
        return coef, net.W1 @ self.base().reshape(-1) + net.b1


def _density(coef: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Density at y of Σ_r coef_r U_r (U iid uniform on [0, 1]); coef (..., 4), float64 (search only)."""
    y = y - np.minimum(coef, 0.0).sum(-1)
    a = np.maximum(np.abs(coef), 1e-9)
    s = y[..., None] - a @ SUBSETS.T  # (..., 16)
    sign = (-1.0) ** SUBSETS.sum(1)  # (16,)
    return (sign * np.maximum(s, 0.0) ** 3).sum(-1) / 6.0 / a.prod(-1)


def slice_functional(net: ReluNetwork, w: SliceWitness) -> float:
    """T(f_{i,c}) = ∫_box D f on the slice, float64 (the search's objective; see `slice_functional_exact`)."""
    coef, e = w.unit_forms(net)
    minor = coef[:, 0] * coef[:, 3] - coef[:, 1] * coef[:, 2]  # (J,)
    w2 = net.W2.reshape(net.n, net.d, -1)[w.i, w.c]  # (J,)
    return float((w2 * minor * _density(coef, -e)).sum())


def _density_exact(coef: list[Fraction], y: Fraction) -> Fraction:
    """Exact density at y of Σ_r coef_r U_r; zero coefficients drop out (a lower-dimensional B-spline)."""
    y = y - sum((c for c in coef if c < 0), Fraction(0))
    a = [abs(c) for c in coef if c != 0]
    if not a:
        raise ValueError("all slice coefficients of a unit vanish: its density is a point mass")
    total = Fraction(0)
    for S in itertools.product((0, 1), repeat=len(a)):
        s = y - sum((x for x, t in zip(a, S, strict=True) if t), Fraction(0))
        if s > 0:
            total += (-1) ** sum(S) * s ** (len(a) - 1)
    return total / math.factorial(len(a) - 1) / math.prod(a)


def slice_functional_exact(net: ReluNetwork, w: SliceWitness) -> Fraction:
    """T(f_{i,c}) in exact rational arithmetic from the float64 weights (module docstring)."""
    n, d = net.n, net.d
    W = net.W1.reshape(-1, n, d)
    X0 = w.base().reshape(-1)
    w2 = net.W2.reshape(n, d, -1)[w.i, w.c]
    al = [Fraction(float(x)) for x in w.alpha]
    aq = [Fraction(float(x)) for x in w.alpha_q]
    total = Fraction(0)
    for j in range(W.shape[0]):
        col_a = [Fraction(float(x)) for x in W[j, :, w.a]]
        col_b = [Fraction(float(x)) for x in W[j, :, w.b]]
        A1, A2 = sum(x * y for x, y in zip(col_a, al, strict=True)), sum(x * y for x, y in zip(col_b, al, strict=True))
        B1, B2 = sum(x * y for x, y in zip(col_a, aq, strict=True)), sum(x * y for x, y in zip(col_b, aq, strict=True))
        e = sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(net.W1[j], X0, strict=True))
        e += Fraction(float(net.b1[j]))
        minor = A1 * B2 - A2 * B1
        if minor != 0:
            total += Fraction(float(w2[j])) * minor * _density_exact([A1, A2, B1, B2], -e)
    return total


def slice_functional_quadrature(fn: Any, w: SliceWitness, nodes: int = 24) -> float:
    """T(g) = ∫∫ Δ_{p1}Δ_{q2} g dp2 dq1 − ∫∫ Δ_{p2}Δ_{q1} g dp1 dq2 by Gauss–Legendre (for smooth g, checks).

    ``fn`` maps (B, n, d) arrays to (B, n, d); the value read is output (i, c).
    """
    t, wt = np.polynomial.legendre.leggauss(nodes)
    t, wt = (t + 1) / 2, wt / 2
    S, Tq = np.meshgrid(t, t, indexing="ij")
    W2d = np.outer(wt, wt).reshape(-1)  # (nodes²,)
    S, Tq = S.reshape(-1), Tq.reshape(-1)
    total = 0.0
    for outer, inner in (((0, 3), (1, 2)), ((1, 2), (0, 3))):  # (difference pair, integrated pair)
        sign = 1.0 if outer == (0, 3) else -1.0
        for u, v in itertools.product((0, 1), repeat=2):
            pq = np.zeros((len(S), 4))
            pq[:, outer[0]], pq[:, outer[1]] = u, v
            pq[:, inner[0]], pq[:, inner[1]] = S, Tq
            vals = np.asarray(fn(w.points(pq)))[:, w.i, w.c]  # (nodes²,)
            total += sign * (-1.0) ** (u + v) * float(W2d @ vals)
    return total


def _random_witness(net: ReluNetwork, rng: np.random.Generator, i: int, c: int, a: int, b: int, j: int) -> SliceWitness:
    """Tokens ≠ i split at random between α (signs of unit j's weights on channel a) and α' (channel b)."""
    n, d = net.n, net.d
    W = net.W1.reshape(-1, n, d)
    al, aq = np.zeros(n), np.zeros(n)
    for k in range(n):
        if k == i:
            continue
        if rng.random() < 0.5:
            al[k] = 1.0 if W[j, k, a] >= 0 else -1.0
        else:
            aq[k] = 1.0 if W[j, k, b] >= 0 else -1.0
    return SliceWitness(i, c, a, b, al, aq, rng.uniform(0.0, 1.0, (n, d)))


def _climb(net: ReluNetwork, w: SliceWitness, rng: np.random.Generator, steps: int) -> tuple[float, SliceWitness]:
    """Greedy random local search on |T|: reassign a token (α, α' or neither, sign) or reset a free coordinate."""
    n, d = net.n, net.d
    best = abs(slice_functional(net, w))
    states = [(1.0, 0.0), (-1.0, 0.0), (0.0, 1.0), (0.0, -1.0), (0.0, 0.0)]
    for _ in range(steps):
        al, aq, free = w.alpha.copy(), w.alpha_q.copy(), w.free.copy()
        if rng.random() < 0.5:
            k = int(rng.integers(n))
            if k == w.i:
                continue
            al[k], aq[k] = states[int(rng.integers(len(states)))]
        else:
            free[int(rng.integers(n)), int(rng.integers(d))] = (
                float(rng.integers(2)) if rng.random() < 0.5 else rng.random()
            )
        cand = SliceWitness(w.i, w.c, w.a, w.b, al, aq, free)
        v = abs(slice_functional(net, cand))
        if v > best:
            best, w = v, cand
    return best, w


def data_key_error_lower_bound(
    net: ReluNetwork, *, starts: int = 8, steps: int = 3000, tries: int = 2, seed: int = 0
) -> dict[str, Any]:
    """A certified lower bound on sup_box |g − f| over EVERY one-layer standard form g (module docstring).

    Random slices for every output (i, c), channel pair (a, b) and the 3 largest |W2[(i,c), j]| (``tries``
    each); the ``starts`` best are improved by `_climb` (``steps`` moves); the best is re-evaluated in
    exact rational arithmetic: ``lower_bound`` = |T(f)| / 8 (exact, rounded down to float64).
    """
    t0 = time.process_time()
    if net.n < 3 or net.d < 2:
        raise ValueError(f"the lemma needs n ≥ 3 tokens and d ≥ 2 channels, got n = {net.n}, d = {net.d}")
    rng = np.random.default_rng(seed)
    n, d = net.n, net.d
    W2 = net.W2.reshape(n, d, -1)
    pool: list[tuple[float, SliceWitness]] = []
    for i in range(n):
        for c in range(d):
            for j in np.argsort(-np.abs(W2[i, c]))[:3]:
                for a in range(d):
                    for b in range(d):
                        if a == b:
                            continue
                        for _ in range(tries):
                            w = _random_witness(net, rng, i, c, a, b, int(j))
                            pool.append((abs(slice_functional(net, w)), w))
    pool.sort(key=lambda t: -t[0])
    climbed = [_climb(net, w, rng, steps) for _, w in pool[:starts]]
    best_float, best = max(climbed, key=lambda t: t[0])
    exact = abs(slice_functional_exact(net, best))
    lower = float(exact / 8)
    if Fraction(lower) > exact / 8:  # round down
        lower = math.nextafter(lower, 0.0)
    return {
        "lower_bound": lower,
        "functional_float": best_float,
        "witness": best,
        "slices_searched": len(pool),
        "cpu_seconds": time.process_time() - t0,
    }


def witness_faces(w: SliceWitness, grid: int = 33) -> np.ndarray:
    """(8·grid², n, d) inputs on the faces where T reads its point values (the support of D 1_box)."""
    g = np.linspace(0.0, 1.0, grid)
    S, Tq = (a.reshape(-1) for a in np.meshgrid(g, g, indexing="ij"))
    blocks = []
    for outer, inner in (((0, 3), (1, 2)), ((1, 2), (0, 3))):
        for u, v in itertools.product((0.0, 1.0), repeat=2):
            pq = np.zeros((len(S), 4))
            pq[:, outer[0]], pq[:, outer[1]] = u, v
            pq[:, inner[0]], pq[:, inner[1]] = S, Tq
            blocks.append(pq)
    return w.points(np.concatenate(blocks))


def trained_heads_sweep(
    net: ReluNetwork,
    heads: list[int],
    *,
    steps: int = 1500,
    seed: int = 0,
    witness: SliceWitness | None = None,
    done: dict[int, dict[str, Any]] | None = None,
    on_row: Any = None,
) -> list[dict[str, Any]]:
    """One standard layer with keys reading the data, TRAINED (`train_standard_attention`) at several head counts.

    Per head count: parameters, sup / RMS error on 2,000 uniform test inputs (relative to their range) and
    the largest error on a 33×33 grid of the witness slice's faces — for every one-layer standard form the
    true maximum there is ≥ the certified bound (the grid maximum may fall slightly below it). ``done``
    holds rows already computed (resume); ``on_row(row)`` is called after each new row (checkpoint).
    """
    from uatlab.experiments.paper_b.one_layer_standard import train_standard_attention

    faces = witness_faces(witness) if witness is not None else None
    rows = []
    for h in heads:
        if done and h in done:
            rows.append(done[h])
            continue
        t0 = time.process_time()
        r = train_standard_attention(net, heads=h, keys="data", steps=steps, seed=seed)
        row = {
            "heads": h,
            "steps": steps,
            "params": r["params"],
            "sup_error": r["sup_error"],
            "rms_error": r["rms_error"],
            "output_range": r["output_range"],
            "relative_sup_error": r["relative_sup_error"],
            "cpu_seconds": time.process_time() - t0,
        }
        if faces is not None:
            err = np.abs(r["run"](faces) - net(faces))[:, witness.i, witness.c]
            row["max_error_on_witness_faces"] = float(err.max())
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return rows
