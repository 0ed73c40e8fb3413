"""Paper B v2's "one attention layer followed by a softmax": the combination step as Boltzmann pooling.

Paper B (Hu et al. 2025, arXiv 2504.15956 v2, abstract): one self-attention layer followed by a softmax
function is a universal approximator. The combination step is not available; the authors' code pools an
attention output z as Σ_c z_c softmax(z)_c, i.e. the Boltzmann operator boltz_β(z) = Σ_c z_c e^{βz_c} /
Σ_c e^{βz_c}, a smooth maximum. Our derivation of the combination step from that hint:

* a one-hidden-layer ReLU network's output coordinate o is f_o = b2_o + Σ_j W2[o, j] ReLU(u_j), u_j affine;
* split by the sign of W2[o, j]: P_o = Σ_{j∈J+} a_j max(u_j, 0) = max_{S ⊆ J+} Σ_{j∈S} a_j u_j (each term
  picks 0 or a_j u_j independently), likewise N_o for |W2| on J−; so f_o = b2_o + max_S p_S − max_T q_T, a
  difference of two maxima of affine maps of vec X (DC form; every continuous function is approximated
  by such differences, so the step is universal);
* the attention layer (with paper B's linear transformations, which include the sequence-wise map A)
  outputs the affine pieces p_S(X), q_T(X) as channels of token i; the softmax pooling replaces each max:

      g_o = b2_o + boltz_β(p) − boltz_β(q).

Bound (exact arithmetic): for K numbers, max z − (log K)/β ≤ boltz_β(z) ≤ max z (boltz = LSE_β −
H(softmax)/β, LSE_β ≥ max, entropy ≤ log K), so |g_o − f_o| ≤ (log K_P + log K_N)/β ≤ 2|J| log 2 / β.

Rounding (the float64 model, X in the box [lo, hi]^{n×d}, x̄ = max(|lo|, |hi|)). Model of arithmetic and
notation of `uatlab.numerics.float_bounds` (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.):
every operation fl(a ∘ b) = (a ∘ b)(1 + δ) + η, |δ| ≤ u = 2^-53, |η| ≤ ETA = 2^-1074 for products and
quotients that underflow (0 for sums); γ_m = mu/(1 − mu), (1 + γ_a)(1 + γ_b) ≤ 1 + γ_{a+b}; sums of m terms
in any order err by ≤ γ_{m−1} Σ|terms| (Higham Lemma 3.1). Assumption on exp (the one function IEEE 754
does not specify, as in the rest of the package): it errs by at most k ulp (k = ``exp_ulps``, default 5), i.e.
|log(fl(exp t)/exp t)| ≤ ε_e = `exp_relative_error`(u, k) when exp t ≥ e^{−T}, T = −log(tiny) − 1
(`exp_underflow_threshold`, the result is normal), and fl(exp t) ≤ 3·tiny below that. For one output
coordinate o and one side s ∈ {P, N} with K = K_s pieces and the exact piece values z_k(X):

1. *Pieces.* The stored coefficients are Σ_{j∈S} |W2[o,j]| (W1_j, b1_j), each product and the sum rounded:
   error ≤ γ_J Σ_{j∈S} |W2[o,j]| |(W1_j, b1_j)| + J·ETA per entry. The model evaluates ẑ_k = vec X · Ŵ_k + ĉ_k,
   a sum of nd + 1 terms. With R_s = Σ_{j∈J_s(o)} |W2[o,j]| (‖W1_j‖₁ x̄ + |b1_j|) ≥ |z_k|:
       |ẑ_k − z_k| ≤ ζ_s := γ_{J+nd+1} R_s + 2J(nd x̄ + 1)·ETA + nd·ETA,    |ẑ_k| ≤ Z_s := R_s + ζ_s.
   Since |max ẑ − max z| ≤ ζ_s, the exact bound above applied to ẑ costs ζ_s per side.
2. *Weights.* With m = max_k ẑ_k (exact), t_k = β(ẑ_k − m) ≤ 0 and the computed exponent
   t̂_k = fl(β·fl(ẑ_k − m)) = t_k(1 + δ₁)(1 + δ₂) + η: |t̂_k − t_k| ≤ (2u + u²)|t_k| + ETA. A piece with
   t̂_k ≥ −T has |t_k| ≤ T' = (T + ETA)/(1 − u)², so its weight is ŵ_k = exp(t_k + ρ_k) with
   |ρ_k| ≤ ρ := ε_e + (2u + u²)T' + ETA. The maximal piece has t̂ = 0, so W = Σ ŵ_k ≥ e^{−ε_e} ≥ 1/2.
   Every other piece (t̂_k < −T, including t̂ = −∞) has 0 ≤ ŵ_k ≤ 3·tiny.
3. *Average with the computed weights* A = Σ ẑ_k ŵ_k / W. Clearly A ≤ m. For the normal-range pieces,
   ŵ_k = exp(β(y_k − m)) with y_k = ẑ_k + ρ_k/β, so their average is boltz_β(y) − Σ π_k ρ_k/β ≥
   max y − (log K)/β − ρ/β ≥ m − (log K + 2ρ)/β; the others add at most 2Z_s·K·3·tiny/W ≤ 12 K Z_s tiny:
       m − (log K + 2ρ)/β − 12 K Z_s·tiny ≤ A ≤ m.
4. *Sums and quotient* (index_add in any order, then one division): num = Σ ẑ_k ŵ_k (1 + θ_k) + E with
   |θ_k| ≤ γ_K, |E| ≤ K·ETA; den = W(1 + θ̄), |θ̄| ≤ γ_{K−1}; so |num/den − A| ≤ a_s :=
   (Z_s(γ_K + γ_{K−1}) + 2K·ETA)/(1 − γ_{K−1}), and the division adds ≤ u(Z_s + a_s) + ETA. Call the sum
   of both α_s, and B_s = Z_s + α_s ≥ |b̂_s| the bound on the computed pooled value.
5. *Output.* fl(fl(b2_o + b̂_P) − b̂_N) errs by ≤ γ_2 (|b2_o| + B_P + B_N).

Together, for X in the box:

    |ĝ_o − f_o| ≤ (log K_P + log K_N)/β                                              (exact arithmetic)
                  + Σ_s [ζ_s + α_s + 2ρ/β + 12 K_s Z_s·tiny] + γ_2 (|b2_o| + B_P + B_N)   (rounding)

The rounding part is ~(J + nd + 2K)·u·R_s: at large β it dominates the exact part, and the sum is a valid
bound for every β > 0 (the exact part alone is not: float64 errs by ~1e-15 on unit-size outputs, above
(log K_P + log K_N)/β once β ≳ 1e15).

What this shows: the pieces are affine in vec X, so the attention layer acts as a linear map and the
nonlinearity that makes the model universal is the final softmax pooling. The number of pieces is
2^{|J+|} + 2^{|J−|} per output coordinate (exponential in the hidden width).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import torch
from torch import nn

from uatlab.constructions.contract import PAPER_B, Construction, count_parameters
from uatlab.constructions.paper_b.lem3_11_relu_network import ReluNetwork
from uatlab.errors import InputError, PrecisionError
from uatlab.numerics.float_bounds import (
    DEFAULT_EXP_ULPS,
    TINY,
    exp_relative_error,
    exp_underflow_threshold,
    gamma,
    underflow_eta,
    unit_roundoff,
)


def boltz_rows(z: np.ndarray, beta: float) -> np.ndarray:
    """Boltzmann operator over the last axis at inverse temperature β (stable: shifted by the max)."""
    m = z.max(-1, keepdims=True)
    w = np.exp(beta * (z - m))
    return (z * w).sum(-1) / w.sum(-1)


class SoftmaxPoolingModel(nn.Module):
    """X (B, n, d) → (B, n, d): affine pieces of vec X (the attention layer acting as a linear map, with
    paper B's sequence-wise A), then per output coordinate o: b2_o + boltz_β(p_o) − boltz_β(q_o).

    The pieces of all coordinates are stacked: ``W`` (K, nd) and ``c`` (K,) with ``owner`` (K,) the output
    coordinate and ``side`` (K,) +1 (P) / −1 (N) of each piece.
    """

    def __init__(
        self,
        W: np.ndarray,
        c: np.ndarray,
        owner: np.ndarray,
        side: np.ndarray,
        b2: np.ndarray,
        beta: float,
        n: int,
        d_out: int,
    ) -> None:
        super().__init__()
        self.W = nn.Parameter(torch.as_tensor(W, dtype=torch.float64))  # (K, nd)
        self.c = nn.Parameter(torch.as_tensor(c, dtype=torch.float64))  # (K,)
        self.b2 = nn.Parameter(torch.as_tensor(b2, dtype=torch.float64))  # (n·d_out,)
        self.register_buffer("owner", torch.as_tensor(owner, dtype=torch.int64))
        self.register_buffer("side", torch.as_tensor(side, dtype=torch.float64))
        self.beta, self.n, self.d_out = float(beta), n, d_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B = x.shape[0]
        z = x.reshape(B, -1).to(torch.float64) @ self.W.T + self.c  # (B, K) piece values
        O = self.b2.numel()
        out = self.b2.expand(B, O).clone()
        for sgn in (1.0, -1.0):
            mask = self.side == sgn
            zs, own = z[:, mask], self.owner[mask]
            m = torch.full((B, O), -torch.inf, dtype=z.dtype).scatter_reduce(1, own.expand(B, -1), zs, "amax")
            w = torch.exp(self.beta * (zs - m[:, own]))  # (B, K_s) ≤ 1
            num = torch.zeros(B, O, dtype=z.dtype).index_add(1, own, zs * w)
            den = torch.zeros(B, O, dtype=z.dtype).index_add(1, own, w)
            out = out + sgn * num / den
        return out.reshape(B, self.n, self.d_out)


def pooling_rounding_bound(
    net: ReluNetwork, o: int, k_pos: int, k_neg: int, beta: float, xbar: float, exp_ulps: float = DEFAULT_EXP_ULPS
) -> float:
    """The rounding part of the bound for output coordinate ``o`` (module docstring, items 1–5), float64.

    ``k_pos`` / ``k_neg`` are the numbers of pieces K_P, K_N of the coordinate; inputs satisfy |X| ≤ ``xbar``.
    """
    u, eta, tiny = unit_roundoff("float64"), underflow_eta("float64"), TINY["float64"]
    J, nd = net.hidden, net.W1.shape[1]
    size = np.abs(net.W1).sum(1) * xbar + np.abs(net.b1)  # (J,) ≥ |u_j(X)|
    T = exp_underflow_threshold("float64")
    rho = exp_relative_error(u, exp_ulps) + (2 * u + u * u) * (T + eta) / (1 - u) ** 2 + eta
    total, pooled = 0.0, []
    for sign, K in ((1, k_pos), (-1, k_neg)):
        R = float((np.maximum(sign * net.W2[o], 0.0) * size).sum())  # R_s
        zeta = gamma(J + nd + 1, u) * R + 2 * J * (nd * xbar + 1) * eta + nd * eta
        Z = R + zeta
        g_k, g_k1 = gamma(K, u), gamma(max(K - 1, 0), u)
        a = (Z * (g_k + g_k1) + 2 * K * eta) / (1 - g_k1)
        alpha = a + u * (Z + a) + eta
        total += zeta + alpha + 2 * rho / beta + 12 * K * Z * tiny
        pooled.append(Z + alpha)
    return total + gamma(2, u) * (abs(float(net.b2[o])) + pooled[0] + pooled[1])


def build_softmax_pooling(
    net: ReluNetwork,
    beta: float,
    *,
    domain: tuple[float, float] = (0.0, 1.0),
    exp_ulps: float = DEFAULT_EXP_ULPS,
) -> Construction:
    """The DC pieces of every output coordinate (module docstring) pooled at inverse temperature β.

    Args:
        net: the one-hidden-layer ReLU network (at most 16 hidden units).
        beta: inverse temperature β > 0 of the pooling.
        domain: inputs X ∈ [lo, hi]^{n×d}; the rounding part of the bound is proven on this box.
        exp_ulps: assumed error of exp in ulps (module docstring; default 5).

    Returns a `Construction`: ``guarantee["sup_error_bound"]`` = max_o of the exact-arithmetic bound
    (log K_P + log K_N)/β plus the float64 rounding bound of the module docstring, valid for every β on
    the box; ``guarantee["exact_arithmetic_bound"]`` and ``guarantee["rounding_bound"]`` (maxima over o of
    the two parts); ``facts["pieces"]`` the number of affine pieces.

    Raises:
        InputError: β not a positive number, more than 16 hidden units, a domain that is not a finite box.
        PrecisionError: the pieces are so large that their float64 values may overflow.
    """
    if not isinstance(net, ReluNetwork):
        raise TypeError(
            f"build_softmax_pooling() takes a ReluNetwork (uatlab.constructions.paper_b.lem3_11_relu_network; an "
            f"nn.Sequential(Linear, ReLU, Linear) becomes one with ReluNetwork.from_torch(net, n, d)), not a "
            f"{type(net).__name__}"
        )
    if not (beta > 0 and math.isfinite(beta)):
        raise InputError(f"beta must be a positive number, got {beta}")
    lo, hi = (float(v) for v in domain)
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
        raise InputError(f"domain [{lo}, {hi}] is not a compact box: need finite lo < hi")
    J = net.hidden
    if J > 16:
        raise InputError(f"{J} hidden units give up to 2^{J} pieces per output coordinate; use at most 16")
    xbar = max(abs(lo), abs(hi))
    U = np.concatenate([net.W1, net.b1[:, None]], axis=1)  # (J, nd + 1): u_j = U_j · [vec X, 1]
    rows, owner, side = [], [], []
    exact_bound = rounding = bound = 0.0
    for o in range(net.W2.shape[0]):
        logs, counts = 0.0, []
        for sign in (1, -1):
            idx = [j for j in range(J) if sign * net.W2[o, j] > 0]
            a = np.abs(net.W2[o, idx])[:, None] * U[idx]  # (|idx|, nd + 1)
            piece = [np.zeros(U.shape[1])]
            for r in range(1, len(idx) + 1):
                piece += [a[list(S)].sum(0) for S in itertools.combinations(range(len(idx)), r)]
            rows += piece
            owner += [o] * len(piece)
            side += [sign] * len(piece)
            logs += math.log(len(piece))
            counts.append(len(piece))
        rnd = pooling_rounding_bound(net, o, counts[0], counts[1], beta, xbar, exp_ulps)
        exact_bound, rounding = max(exact_bound, logs / beta), max(rounding, rnd)
        bound = max(bound, logs / beta + rnd)
    reach = float((np.abs(net.W2) * (np.abs(net.W1).sum(1) * xbar + np.abs(net.b1))).sum(1).max())  # max_o Σ R_s
    if not (math.isfinite(bound) and reach < 1e300):
        raise PrecisionError(f"the affine pieces reach {reach:.3g} on the domain and may overflow float64")
    P = np.stack(rows)  # (K, nd + 1)
    model = SoftmaxPoolingModel(
        P[:, :-1], P[:, -1], np.array(owner), np.array(side), net.b2, beta, net.n, net.W2.shape[0] // net.n
    )
    facts = {
        "paper": PAPER_B,
        "theorem": "v2: one attention layer followed by a softmax (combination step derived as Boltzmann pooling)",
        "parameters": count_parameters(model, nonzero=True),
        "parameters_counted": "non-zero entries",
        "pieces": len(rows),
        "beta": beta,
        "domain": (lo, hi),
        "dtype": "float64",
        "exp_ulps_assumed": float(exp_ulps),
        "nonstandard": ["the affine pieces read the whole flattened sequence (paper B's sequence-wise A)"],
    }
    guarantee = {"sup_error_bound": bound, "exact_arithmetic_bound": exact_bound, "rounding_bound": rounding}
    return Construction(model=model, guarantee=guarantee, facts=facts)


def evaluate(c: Construction, x: np.ndarray) -> np.ndarray:
    """The model on numpy inputs (B, n, d) → (B, n, d_out)."""
    with torch.no_grad():
        return c.model(torch.as_tensor(np.asarray(x, np.float64))).numpy()
