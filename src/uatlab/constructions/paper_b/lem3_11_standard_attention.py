"""A one-hidden-layer ReLU network compiled into TWO STANDARD multi-head attention layers (paper B, Sec. 3.3).

Paper B (Hu et al. 2025, arXiv 2504.15956, Sec. 3.3 and App. G.5) computes f(X) = W2 ReLU(W1 vec X + b1) + b2
with two attention layers, but its first layer uses a linear map ACROSS positions and appended anchor tokens
(`uatlab.constructions.paper_b.lem3_11_relu_network`). Here both layers are standard: every linear map acts
on each token separately, the softmax runs over the n keys of the sequence, a positional encoding P is
added to the embedded input once, each layer has a residual connection, and a token-wise readout follows:

    H_0 = X W_E + P,    H_l = H_{l−1} + Σ_h softmax(H_{l−1} W_Q^h (H_{l−1} W_K^h)ᵀ) H_{l−1} W_V^h W_O^h,    out = H_2 W_R

(β is folded into W_Q). Notation map (paper B → here): w_j, t_j → ``net.W1[j]``, ``net.b1[j]``; c_j →
``net.W2[(i,c), j]``; the anchors L_k of Thm 3.9 → the n tokens themselves through P (token-wise form).

Channels of H (D = 1 + n + d + J + d): ``const`` (P ≡ 1), ``pos`` one-hot e_i (P), ``x`` (the input,
W_E), ``y`` y'_j = u_j / U_j (P holds b1_j/U_j, layer 1 adds the rest), ``out`` (P holds b2[(i,·)],
layer 2 adds the rest). [L_j, U_j] is the exact range of u_j = W1_j vec X + b1_j on the box; units with
U_j ≤ 0 vanish on the box and are dropped; ReLU(u_j) = U_j Range_[0,1](y'_j).

Layer 1, gather (exact): head (j, σ, c) has query 1 (const), key k = log κ_k with κ_k = max(σ W1[j,k,c], 0)
(keys with κ_k = 0 get log κ_max − 700), value x_{k,c}, W_O = σ S / U_j into y_j, S = Σ_k κ_k. The scores
do not depend on the query, so EVERY position receives Σ_k κ_k x_{k,c} / S · σ S / U_j; summed over
(σ, c) and with P's bias, channel y_j = y'_j at every position (up to n e^{−700} relative).

Layer 2, interpolation and combination: head (j, i, s) serves output position i, unit j and sub-interval
s of [0, 1] split into S pieces with n anchors each (Δ = 1/(S(n−1)), a_s = s(n−1)Δ, anchors
L_k = a_s + kΔ at token k, telescoping Range_[0,1] = Σ_s (Range_[a_s,a_{s+1}] − a_s)):

    query = (2β y'_j, −β, M(1 − [position = i])),   key_k = (kΔ, kΔ(L_k + L_0), [k = 0]),   value_k = kΔ,
    W_O = U_j W2[(i,·), j]  into ``out``.

For query i the score is −β[(y' − L_k)² − (y' − L_0)²]: the paper's interpolation, output ≈
Range_s(y') − a_s; every other query adds M to key 0 (value 0), so it reads 0 up to n e^{−60}.
M = β·2(ȳ + 1)(n − 1)Δ + 60 with ȳ = max|y'|.

Bound: with the truncated-linear plan (heads S, anchors n, its proven bound ε_plan, float term incl.):

    |g(X)_{i,c} − f(X)_{i,c}| ≤ Σ_j |W2[(i,c), j]| U_j ε_plan + Σ_{heads not serving i} n e^{−60} |W_O| (n−1)Δ
                                + Σ_j |W2[(i,c), j]| U_j · 2 n e^{−700}·ȳ   (layer-1 floor, negligible)

No sequence-wise map, no appended token: ``nonstandard`` is empty. The price is in heads: S·n·J' in layer 2
against J' in the non-standard two-layer form (the row-sum argument in the docs explains why a standard
layer cannot give different output positions different multiples of one hidden unit without separate
heads or a per-position query mask).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

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
from uatlab.constructions.paper_b.thm3_truncated_linear import InterpolationPlan, plan_interpolation
from uatlab.errors import InputError

MASK_SCORE = 60.0  # e^{-60}: weight left on keys a query must ignore (layer 2)
FLOOR = 700.0  # e^{-700}: weight left on zero-weight keys (layer 1)


class StandardAttentionNetwork(nn.Module):
    """X (B, n, d_in) → (B, n, d_out): embedding + positional encoding, standard MHA layers (residual), readout."""

    def __init__(self, n: int, d_in: int, d_model: int, d_out: int, heads: list[int], head_dims: list[int]) -> None:
        super().__init__()
        dt = torch.float64
        self.W_E = nn.Parameter(torch.zeros(d_in, d_model, dtype=dt))  # (d_in, D)
        self.P = nn.Parameter(torch.zeros(n, d_model, dtype=dt))  # (n, D) positional encoding
        self.W_Q = nn.ParameterList(
            [nn.Parameter(torch.zeros(h, s, d_model, dtype=dt)) for h, s in zip(heads, head_dims, strict=True)]
        )
        self.W_K = nn.ParameterList(
            [nn.Parameter(torch.zeros(h, s, d_model, dtype=dt)) for h, s in zip(heads, head_dims, strict=True)]
        )
        self.W_V = nn.ParameterList([nn.Parameter(torch.zeros(h, 1, d_model, dtype=dt)) for h in heads])
        self.W_O = nn.ParameterList([nn.Parameter(torch.zeros(h, d_model, dtype=dt)) for h in heads])  # value is 1-dim
        self.W_R = nn.Parameter(torch.zeros(d_model, d_out, dtype=dt))  # (D, d_out)

    def forward(self, x: torch.Tensor, head_chunk: int = 256) -> torch.Tensor:
        H = x.to(torch.float64) @ self.W_E + self.P  # (B, n, D)
        for WQ, WK, WV, WO in zip(self.W_Q, self.W_K, self.W_V, self.W_O, strict=True):
            upd = torch.zeros_like(H)
            for a in range(0, WQ.shape[0], head_chunk):
                q = torch.einsum("bnD,hsD->bhns", H, WQ[a : a + head_chunk])  # (B, h, n, s)
                k = torch.einsum("bnD,hsD->bhns", H, WK[a : a + head_chunk])
                v = torch.einsum("bnD,hD->bhn", H, WV[a : a + head_chunk, 0])  # (B, h, n)
                att = torch.softmax(q @ k.transpose(-1, -2), dim=-1)  # (B, h, n_query, n_key)
                upd = upd + torch.einsum("bhqk,bhk,hD->bqD", att, v, WO[a : a + head_chunk])
            H = H + upd
        return H @ self.W_R


@dataclass
class CompiledStandardRelu(CompiledModelCalls):
    """The standard two-layer network, its bound and sizes (same interface as the other ReLU compilers)."""

    model: StandardAttentionNetwork
    net: ReluNetwork
    plan: InterpolationPlan
    bound: float
    heads: int
    domain: tuple[float, float]
    heads_layer1: int = 0
    heads_layer2: int = 0
    sub_intervals: int = 0
    nonstandard: list[str] = field(default_factory=list)

    eval_chunk: ClassVar[int] = 4  # inputs per forward pass (thousands of heads)


def compile_relu_network_standard(
    net: ReluNetwork | nn.Module,
    *,
    n: int | None = None,
    d: int | None = None,
    domain: tuple[float, float] = (0.0, 1.0),
    anchors: int | None = None,
    eps: float | None = None,
) -> Construction:
    """Compile f(X) = W2 ReLU(W1 vec X + b1) + b2 into two standard attention layers (module docstring).

    Args:
        net: the ReLU network (n, d, J), or an ``nn.Sequential(Linear, ReLU, Linear)`` with ``n``, ``d`` given
            (`ReluNetwork.from_torch`).
        n, d: sequence shape (needed for a torch module; for a `ReluNetwork`, if given, they must equal its own).
        domain: X ∈ [lo, hi]^{n×d}.
        anchors: total interpolation points m on [0, 1] (rounded up to S(n−1)+1), or
        eps: target sup error (S is grown until the bound ≤ eps).

    Raises:
        InputError: a module that is not Linear → ReLU → Linear, n/d that differ from the network's, bad domain /
            eps, neither or both of anchors and eps, n < 2, no active unit.
    """
    net = as_relu_network(net, n, d)
    lo, hi = check_compile_request(domain, eps, anchors)
    n, d, J = net.n, net.d, net.hidden
    if n < 2:
        raise InputError(f"the token-wise form needs n ≥ 2 tokens as anchors, got n = {n}")
    Lw, U, units = live_hidden_units(net, lo, hi)
    W1 = net.W1.reshape(J, n, d)  # (J, n, d)
    W2 = net.W2.reshape(n, d, J)  # (n, d, J)
    y_bound = max(1.0, max(abs(Lw[j] / U[j]) for j in units))
    coef = np.zeros((n, d))  # Σ_j |W2[(i,c), j]| U_j
    for j in units:
        coef += np.abs(W2[:, :, j]) * U[j]

    def plan_for(S: int) -> InterpolationPlan:
        return plan_interpolation(0.0, 1.0, anchors=n, heads=S, y_bound=y_bound, dtype="float64")

    if anchors is not None:
        S = max(1, math.ceil((anchors - 1) / (n - 1)))
        plan = plan_for(S)
    else:
        S = 1
        while True:
            plan = plan_for(S)
            if float(coef.max()) * plan.bound <= eps or S > 10**4:
                break
            S = max(S + 1, int(S * 1.3))
    beta, delta = plan.beta, plan.delta
    M = beta * 2 * (y_bound + 1) * (n - 1) * delta + MASK_SCORE
    # channels
    c_const, c_pos, c_x = 0, 1, 1 + n
    c_y = {j: 1 + n + d + t for t, j in enumerate(units)}
    c_out = 1 + n + d + len(units)
    D = c_out + d
    h1 = [(j, sg, c) for j in units for sg in (1, -1) for c in range(d) if np.any(sg * W1[j, :, c] > 0)]
    h2 = [(j, i, s) for j in units for i in range(n) for s in range(S) if np.any(W2[i, :, j] != 0)]
    model = StandardAttentionNetwork(n, d, D, d, [len(h1), len(h2)], [1, 3])
    k = np.arange(n, dtype=np.float64)
    with torch.no_grad():
        model.W_E[:, c_x : c_x + d] = torch.eye(d, dtype=torch.float64)
        model.P[:, c_const] = 1.0
        model.P[:, c_pos : c_pos + n] = torch.eye(n, dtype=torch.float64)
        for j in units:
            model.P[:, c_y[j]] = float(net.b1[j] / U[j])
        model.P[:, c_out : c_out + d] = torch.as_tensor(net.b2.reshape(n, d))
        model.W_R[c_out : c_out + d, :] = torch.eye(d, dtype=torch.float64)
        # layer 1: gather
        for h, (j, sg, c) in enumerate(h1):
            kappa = np.maximum(sg * W1[j, :, c], 0.0)  # (n,)
            S_h = float(kappa.sum())
            logk = np.where(kappa > 0, np.log(np.where(kappa > 0, kappa, 1.0)), math.log(kappa.max()) - FLOOR)
            model.W_Q[0][h, 0, c_const] = 1.0
            model.W_K[0][h, 0, c_pos : c_pos + n] = torch.as_tensor(logk)
            model.W_V[0][h, 0, c_x + c] = 1.0
            model.W_O[0][h, c_y[j]] = sg * S_h / U[j]
        # layer 2: interpolation per (unit, output position, sub-interval)
        for h, (j, i, s) in enumerate(h2):
            a_s = s * (n - 1) * delta
            L = a_s + k * delta  # anchors at the n tokens
            model.W_Q[1][h, 0, c_y[j]] = 2 * beta
            model.W_Q[1][h, 1, c_const] = -beta
            model.W_Q[1][h, 2, c_const] = M
            model.W_Q[1][h, 2, c_pos + i] = -M
            model.W_K[1][h, 0, c_pos : c_pos + n] = torch.as_tensor(k * delta)
            model.W_K[1][h, 1, c_pos : c_pos + n] = torch.as_tensor(k * delta * (L + L[0]))
            model.W_K[1][h, 2, c_pos] = 1.0
            model.W_V[1][h, 0, c_pos : c_pos + n] = torch.as_tensor(k * delta)
            model.W_O[1][h, c_out : c_out + d] = torch.as_tensor(U[j] * W2[i, :, j])
    leak = np.zeros((n, d))
    for j, i, _s in h2:
        leak += (np.arange(n) != i)[:, None] * (
            n * math.exp(-MASK_SCORE) * (n - 1) * delta * U[j] * np.abs(W2[i, :, j])
        )[None, :]
    floor1 = coef * 2 * n * math.exp(-FLOOR) * y_bound
    bound = float((coef * plan.bound + leak + floor1).max())
    compiled = CompiledStandardRelu(
        model=model,
        net=net,
        plan=plan,
        bound=bound,
        heads=len(h1) + len(h2),
        domain=(lo, hi),
        heads_layer1=len(h1),
        heads_layer2=len(h2),
        sub_intervals=S,
    )
    return _as_construction(compiled, "Lemma 3.11 with two standard attention layers (token-wise maps only)")
