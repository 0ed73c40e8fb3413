"""For n = 2 tokens ONE standard attention layer whose keys read the data is universal (paper B, Sec. 3.3).

Paper B (Hu et al. 2025, Sec. 3.3, Lemma 3.11 / Thm 3.9) needs a non-standard layer (a map across
positions, appended anchors) to compile a one-hidden-layer ReLU network into ONE attention layer; for
n ≥ 3 tokens and d ≥ 2 channels no standard layer can (`uatlab.experiments.paper_b.one_layer_data_keys`:
its outputs have symmetric cross-Hessian blocks). For n = 2 that obstruction is void, and this module
builds the layer.

**Scores.** With z_k = (1, e_k, x_k, out) (constant, one-hot position, data, output channels) a head of
`StandardAttentionNetwork` with head dimension 2d + n gets, at query i and key k,

    s_ik = x_i · r_k + β_i · x_k + ζ_ik                                                       (S)

(components 0..d−1: query x_i, key r_k from the key's position; d..2d−1: query β_i from the query's
position, key x_k; 2d..2d+n−1: query e_i, key ζ_{·k}). For n = 2 and query i (the other token o):
softmax over two keys is σ(s_ii − s_io) = σ(x_i·(r_i − r_o) + β_i·(x_i − x_o) + ζ_ii − ζ_io): with
r_i − r_o = β(w_i + w_o), β_i = −β w_o and ζ_ii − ζ_io = β(b − t) this is σ(β(w_i·x_i + w_o·x_o + b − t)),
an ARBITRARY linear form of both tokens: the head is a sigmoid unit of vec X.

**Head (i, j, s)** (output position i, hidden unit j, step s = 1..m): u_j = W1_j · vec X + b1_j ∈
[L_j, U_j] (exact on the box), Δ_j = U_j / m, t_s = (s − ½)Δ_j; scores (S) with r_i = β_j(w_i + w_o),
r_o = 0, β_i = −β_j w_o, β_o = 0, ζ_ii = β_j(b1_j − t_s), ζ_io = ζ_oi = 0,
ζ_oo = M + β_j max_{x_o ∈ box} (w_i + w_o)·x_o (the head's own query o then keeps weight ≤ e^{−M} on
key i); value [k = i] (the position channel), W_O = Δ_j W2[(i,·), j] into the output channels; P carries
b2. Then at query i the head adds Δ_j W2[(i,c), j] σ(β_j(u_j − t_s)), and

    |ReLU(u) − Σ_s Δ σ(β(u − t_s))| ≤ Δ/2 + Δ(½ + τ) = Δ(1 + τ),   τ = e^{−βΔ/2} + 2e^{−βΔ}/(1 − e^{−βΔ})

for u ≤ U (midpoint staircase error Δ/2; the sigmoids differ from the steps by σ(−β|u − t_s|), at most
½ for the nearest step, e^{−βΔ/2} for the next and a geometric tail). With βΔ = 40 (τ < 10⁻⁸):

    |g(X)_{i,c} − f(X)_{i,c}| ≤ Σ_j |W2[(i,c), j]| Δ_j (1 + τ) + Σ_{heads serving o} e^{−M} |W_O|
                                + rounding (score error · ¼ |W_O| per head, float64).

Notation map (paper B → here): w_j, t_j → ``net.W1[j]``, ``net.b1[j]``; c_j → ``net.W2[(i,c), j]``. No
sequence-wise map, no appended token. Heads: 2·J'·m (J' units active on the box).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from uatlab.constructions.contract import Construction
from uatlab.constructions.paper_b.lem3_11_relu_network import (
    CompiledModelCalls,
    ReluNetwork,
    _as_construction,
    as_relu_network,
    check_compile_request,
    live_hidden_units,
)
from uatlab.constructions.paper_b.lem3_11_standard_attention import StandardAttentionNetwork
from uatlab.errors import InputError

STEEPNESS = 40.0  # β_j Δ_j: each sigmoid is within e^{-20} of its step one half-step away
MASK_SCORE = 60.0  # e^{-60}: weight a head's other query keeps on the key it must ignore
EPS64 = 2.0**-53


def step_error(delta: float, beta: float) -> float:
    """Δ(1 + τ): the sup error of Σ_s Δ σ(β(u − t_s)) against ReLU(u) for u ≤ mΔ (module docstring)."""
    x = beta * delta
    tau = math.exp(-x / 2) + 2 * math.exp(-x) / (1 - math.exp(-x))
    return delta * (1 + tau)


@dataclass
class CompiledTwoTokenRelu(CompiledModelCalls):
    """The one-layer standard network for n = 2, its bound and sizes (interface of the other ReLU compilers)."""

    model: StandardAttentionNetwork
    net: ReluNetwork
    bound: float
    heads: int
    domain: tuple[float, float]
    sigmoids_per_unit: int = 0
    nonstandard: list[str] = field(default_factory=list)


def compile_relu_network_one_standard_layer_two_tokens(
    net: ReluNetwork | nn.Module,
    *,
    n: int | None = None,
    d: int | None = None,
    domain: tuple[float, float] = (0.0, 1.0),
    sigmoids: int | None = None,
    eps: float | None = None,
) -> Construction:
    """Compile f(X) = W2 ReLU(W1 vec X + b1) + b2 on n = 2 tokens into ONE standard attention layer.

    Args:
        net: the ReLU network, n = 2 tokens of d channels, or an ``nn.Sequential(Linear, ReLU, Linear)`` with
            ``n``, ``d`` given (`ReluNetwork.from_torch`).
        n, d: sequence shape (needed for a torch module; for a `ReluNetwork`, if given, they must equal its own).
        domain: X ∈ [lo, hi]^{2×d}.
        sigmoids: steps m per hidden unit, or
        eps: target sup error (m is the smallest with the proven bound ≤ eps, capped at 10⁵).

    Raises:
        InputError: a module that is not Linear → ReLU → Linear, n/d that differ from the network's, n ≠ 2, bad domain / eps / sigmoids, neither or both of sigmoids and eps, no active unit.
    """
    net = as_relu_network(net, n, d)
    lo, hi = check_compile_request(domain, eps, sigmoids, "sigmoids", 1)
    n, d, J = net.n, net.d, net.hidden
    if n != 2:
        raise InputError(
            f"this one-layer form is for n = 2 tokens (for n ≥ 3, d ≥ 2 one layer is not universal), got n = {n}"
        )
    L, U, units = live_hidden_units(net, lo, hi)
    W1 = net.W1.reshape(J, n, d)  # (J, n, d)
    W2 = net.W2.reshape(n, d, J)  # (n, d, J)
    xmax = max(abs(lo), abs(hi))

    def main_term(m: int) -> float:
        return float(max(sum(abs(W2[i, c, j]) * step_error(U[j] / m, STEEPNESS * m / U[j]) for j in units)
                         for i in range(n) for c in range(d)))  # fmt: skip

    if sigmoids is not None:
        m = int(sigmoids)
    else:
        m = 1
        while main_term(m) > eps / 2 and m < 10**5:
            m = max(m + 1, int(m * 1.25))
    c_const, c_pos, c_x, c_out = 0, 1, 1 + n, 1 + n + d
    D = c_out + d
    heads = [(i, j, s) for i in range(n) for j in units for s in range(1, m + 1)]
    hd = 2 * d + n
    model = StandardAttentionNetwork(n, d, D, d, [len(heads)], [hd])
    WQ, WK, WV, WO = model.W_Q[0], model.W_K[0], model.W_V[0], model.W_O[0]
    leak = np.zeros((n, d))  # Σ over heads serving the other position of e^{-M}|W_O|
    rounding = np.zeros((n, d))
    with torch.no_grad():
        model.W_E[:, c_x : c_x + d] = torch.eye(d, dtype=torch.float64)
        model.P[:, c_const] = 1.0
        model.P[:, c_pos : c_pos + n] = torch.eye(n, dtype=torch.float64)
        model.P[:, c_out : c_out + d] = torch.as_tensor(net.b2.reshape(n, d))
        model.W_R[c_out : c_out + d, :] = torch.eye(d, dtype=torch.float64)
        for h, (i, j, s) in enumerate(heads):
            o = 1 - i
            delta = U[j] / m
            beta = STEEPNESS / delta
            w_i, w_o = W1[j, i], W1[j, o]  # (d,), (d,)
            r_i = beta * (w_i + w_o)  # (d,)  r_o = 0
            beta_i = -beta * w_o  # (d,)  β_o = 0
            zeta_ii = beta * (net.b1[j] - (s - 0.5) * delta)
            zeta_oo = MASK_SCORE + beta * float(np.maximum((w_i + w_o) * lo, (w_i + w_o) * hi).sum())
            # (S): x_i · r_k
            WQ[h, :d, c_x : c_x + d] = torch.eye(d, dtype=torch.float64)
            WK[h, :d, c_pos + i] = torch.as_tensor(r_i)
            # β_q · x_k
            WQ[h, d : 2 * d, c_pos + i] = torch.as_tensor(beta_i)
            WK[h, d : 2 * d, c_x : c_x + d] = torch.eye(d, dtype=torch.float64)
            # ζ_qk
            WQ[h, 2 * d : 2 * d + n, c_pos : c_pos + n] = torch.eye(n, dtype=torch.float64)
            WK[h, 2 * d + i, c_pos + i] = zeta_ii
            WK[h, 2 * d + o, c_pos + o] = zeta_oo
            WV[h, 0, c_pos + i] = 1.0
            wo = delta * W2[i, :, j]  # (d,)
            WO[h, c_out : c_out + d] = torch.as_tensor(wo)
            leak[o] += math.exp(-MASK_SCORE) * np.abs(wo)
            score_abs = xmax * float(np.abs(r_i).sum() + np.abs(beta_i).sum()) + abs(zeta_ii) + abs(zeta_oo)
            rounding += (0.25 * 2 * (hd + 2) * EPS64 * score_abs + 4 * EPS64) * np.abs(wo)[None, :]
    main = np.array(
        [[sum(abs(W2[i, c, j]) * step_error(U[j] / m, STEEPNESS * m / U[j]) for j in units) for c in range(d)]
         for i in range(n)]
    )  # fmt: skip
    bound = float((main + leak + rounding).max())
    compiled = CompiledTwoTokenRelu(
        model=model, net=net, bound=bound, heads=len(heads), domain=(lo, hi), sigmoids_per_unit=m
    )
    return _as_construction(compiled, "Sec. 3.3 / Lemma 3.11 with ONE standard attention layer, n = 2 tokens")
