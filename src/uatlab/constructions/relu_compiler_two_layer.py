"""Compile a one-hidden-layer ReLU network into TWO softmax attention layers (paper B, Sec. 3.3 "Step 2").

Target (paper B's seq2seq experiment, spec ATTENTION_ONLY_APPROXIMATION.md §4 item 4 and §6.6; Lemma 3.11)::

    f(X)_{i,c} = Σ_j W2[(i,c), j] · ReLU(u_j) + b2[(i,c)],   u_j = W1_j · vec(X) + b1_j,   X ∈ [lo, hi]^{n×d}

Paper B (v2/ICLR Sec. 3.3, proof in App. G.5, eq. G.42) computes every hidden unit as a truncated-linear
model with attention (layer 1) and lets a second attention layer combine the hidden units into the output
tokens. The exact constants of the paper are not available (spec §4: MISSING); this is our derivation.

Notation map (paper B → here)
-----------------------------
=====================================  ==========================================================
paper B                                 here
=====================================  ==========================================================
w_j, t_j (hidden unit j)                ``net.W1[j]``, ``net.b1[j]``;  u_j = w_jᵀ vec(X) + t_j
c_j (combination weight)                ``net.W2[(i,c), j]`` (per output coordinate (i, c))
A1 (sequence-wise map before layer 1)   ``layers[0].seq_map`` + ``layers[0].anchors``  (non-standard)
p (interpolation points)                ``anchors`` m of layer 1
A2 (map before layer 2)                 ``layers[1].in_proj`` + ``layers[1].pos_bias`` (one-hot PE)
β                                       ``layers[0].config.beta`` (layer 2 uses β = 1)
=====================================  ==========================================================

Layer 1: hidden units as truncated-linear heads (paper B Thm 3.4, sequence-wise A)
-------------------------------------------------------------------------------------
Let [L_j, U_j] be the exact range of u_j on the box (interval arithmetic). Units with U_j ≤ 0 are 0 on the
whole domain and are dropped. For U_j > 0, since u_j ≤ U_j::

    ReLU(u_j) = U_j · Range_[0,1](u_j / U_j) =: U_j · r_j

Hidden unit j = g·(n−1) + k is placed at token k < n−1, channel g (G = ⌈J/(n−1)⌉ groups); the last token
s = n−1 of every group holds no unit: the "sink" token used by layer 2. Layer 1 has G heads, head g is
the sequence-wise truncated-linear construction of :mod:`uatlab.constructions.truncated_linear` with
a = 0, b = 1, m anchors appended to the sequence, and query input y'_{k,g} = u_{j(g,k)} / U_{j(g,k)} (0 for
empty / dropped slots). Forming y'_{k,g} needs the whole sequence: ``seq_map`` (a linear map across
positions). Its output at token k, channel g is r̂_{k,g} ≈ r_{j(g,k)}. By the truncated-linear bound
(Δ' = 1/(m−1), x = βΔ'², n dead data keys)::

    |r̂ − r| ≤ ε₁ := Δ'/2 + T_in + T_dead + float₁          (every real unit: y' ≤ 1 always; y' < 0 is the
                                                            clamp region, error ≤ ε₀ ≤ ε₁)
    |r̂|     ≤ ε₀ := T_out + T_dead + float₁                 (y' = 0 = L_0, empty slots incl. the sink)

Layer 2: positional-selector attention combining the hidden units (token-wise: only a PE is used)
---------------------------------------------------------------------------------------------------
For output channel c, sign σ ∈ {+, −} and group g, head h = (c, σ, g) has the non-negative weights::

    κ^h_{ik} = max(σ W2[(i,c), j(g,k)], 0) · U_{j(g,k)}     (0 for empty/dropped slots)
    M^h = max_i Σ_k κ^h_{ik},   κ_min^h = e^{−60} M^h,   Z^h = 2 (M^h + n κ_min^h)

and scores (β = 1) S^h_{ik} = log κ̃^h_{ik} with κ̃ = κ where κ > 0, κ̃ = κ_min on the other non-sink
tokens, and κ̃_{is} = Z^h − Σ_{k≠s} κ̃_{ik} ≥ Z^h/2 on the sink. Then Σ_k κ̃_{ik} = Z^h for every i, so the
softmax weights are exactly P^h_{ik} = κ̃^h_{ik} / Z^h. The score is a bilinear form of positions only:
query_i = e_i (a one-hot positional encoding in ``pos_bias``), key_k = W_K^h e_k = (log κ̃^h_{·k}), so layer 2
is a standard (token-wise) attention layer with a positional encoding. Values read channel g of layer 1
(W_V^h), W_O^h = σ Z^h writes into output channel c. In exact arithmetic::

    out_{i,c} = Σ_h σ Z^h Σ_k P^h_{ik} r̂_{k,g(h)} + b2[(i,c)]
              = Σ_j W2[(i,c), j] U_j r̂_j + b2[(i,c)]  +  Σ_h σ(κ_min-floor terms + κ̃_{is} r̂_s)

Error bound (layer-1 error propagated through layer 2's combination weights)
-----------------------------------------------------------------------------
Layer 2 introduces no interpolation error (its weights do not depend on the data). Subtracting
f(X)_{i,c} = Σ_j W2[(i,c),j] U_j r_j + b2::

    |g(X)_{i,c} − f(X)_{i,c}| ≤ ε₁ · Σ_j |W2[(i,c), j]| U_j⁺                         (propagated layer-1 error)
                              + Σ_{h→c} [ n κ_min^h (1 + ε₁) + Z^h ε₀ + float₂^h ]    (floors, sink, rounding)

with float₂^h = Z^h (1 + ε₁)(e^{2η} − 1 + 4nu), η = 4u·max|S^h| (an estimate of the softmax rounding, u the
unit roundoff, not a proof; float₁ is the estimate of :func:`plan_interpolation`). The reported ``bound`` is
the maximum over (i, c).

Non-standard maps this construction needs (listed in ``nonstandard``; paper B's reviewer R3 flags them):
layer 1's linear map across positions (``seq_map``) and its m appended anchor tokens. Layer 2 and the
output bias b2 use only per-position biases (positional encodings), which a standard Transformer has.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from uatlab.constructions.relu_compiler import (
    CompiledReluNetwork,
    ReluNetwork,
    check_compile_request,
    hidden_unit_ranges,
)
from uatlab.constructions.truncated_linear import (
    DEAD_SCORE,
    InterpolationPlan,
    plan_interpolation,
    tail_inside,
    tail_outside,
)
from uatlab.errors import InputError
from uatlab.models.attention_only import AttentionOnlyConfig, AttentionOnlyLayer, AttentionOnlyNetwork

#: relative weight e^{−FLOOR_GAP} given (via the score) to tokens a layer-2 head must ignore
FLOOR_GAP = 60.0


@dataclass
class CompiledReluNetworkTwoLayer(CompiledReluNetwork):
    """Two-layer compiled network (``model.layers`` has length 2). ``heads`` counts both layers.

    Extra attributes: ``heads_layer1`` / ``heads_layer2``, ``layer1_bound`` (ε₁, per normalised hidden unit)
    and ``propagated_bound`` (the ε₁ · Σ|W2|U part of ``bound``).
    """

    heads_layer1: int = 0
    heads_layer2: int = 0
    layer1_bound: float = math.nan
    propagated_bound: float = math.nan
    details: dict[str, float] = field(default_factory=dict)



def compile_relu_network_two_layer(
    net: ReluNetwork | nn.Module,
    *,
    n: int | None = None,
    d: int | None = None,
    domain: tuple[float, float] = (0.0, 1.0),
    eps: float | None = None,
    anchors: int | None = None,
    dtype: str = "float64",
) -> CompiledReluNetworkTwoLayer:
    """Compile f(X) = W2 ReLU(W1 vec X + b1) + b2 into two softmax attention layers (module docstring).

    Args:
        net: a :class:`ReluNetwork`, or an ``nn.Sequential(Linear, ReLU, Linear)`` with ``n``, ``d`` given.
        n, d: sequence shape (needed for a torch module).
        domain: inputs X ∈ [lo, hi]^{n×d}.
        eps: target sup error per output coordinate (the anchor count is chosen so the proven bound ≤ eps).
        anchors: layer-1 anchors m on [0, 1] instead of eps.
        dtype: "float64" (default) or "float32".

    Raises:
        InputError: wrong network input size, bad domain, eps ≤ 0, neither/both of eps and anchors,
            no active hidden unit.
        PrecisionError: the layer-1 temperature overflows / loses the accuracy in ``dtype``.
    """
    if not isinstance(net, ReluNetwork):
        if n is None or d is None:
            raise InputError("compiling a torch module needs the sequence shape: pass n= and d=")
        net = ReluNetwork.from_torch(net, n, d)
    lo, hi = check_compile_request(domain, eps, anchors)
    n, d, J = net.n, net.d, net.hidden
    if n < 2:
        raise InputError(f"the two-layer construction needs sequences of length n ≥ 2 (a sink token), got n={n}")
    G = math.ceil(J / (n - 1))  # groups of n − 1 unit slots; the last token n − 1 of every group is the sink
    sink = n - 1
    Lw, U = hidden_unit_ranges(net, lo, hi)  # (J,), (J,)
    live = U > 0  # (J,) units that are not identically 0 on the box
    if not live.any():
        raise InputError("every hidden unit is inactive on the domain: nothing to compile")
    Upos = np.where(live, U, 0.0)  # (J,)
    y_bound = max(1.0, float(np.max(np.abs(Lw[live]) / U[live])))

    # ---- layer-2 weights κ^h (independent of the layer-1 plan)
    W2 = net.W2.reshape(n, d, J)  # (n, d, J): W2[(i,c), j]
    slots = np.zeros((G, n), dtype=np.int64) - 1  # unit index held by (group, token), −1 = empty
    for j in range(J):
        slots[j // (n - 1), j % (n - 1)] = j
    heads2: list[tuple[int, int, int, np.ndarray]] = []  # (c, σ, g, κ (n, n) indexed [i, k])
    for c in range(d):
        for sign in (1, -1):
            for g in range(G):
                kappa = np.zeros((n, n))  # (query i, key k)
                for k in range(n):
                    j = slots[g, k]
                    if j >= 0 and live[j]:
                        kappa[:, k] = np.maximum(sign * W2[:, c, j], 0.0) * Upos[j]
                if kappa.sum() > 0:
                    heads2.append((c, sign, g, kappa))
    if not heads2:
        raise InputError("every hidden unit has zero output weights: nothing to compile")
    u = float(torch.finfo(torch.float64 if dtype == "float64" else torch.float32).eps) / 2

    def bounds_for(plan: InterpolationPlan) -> tuple[float, float, float, float, dict[str, float]]:
        dl, x, m = plan.delta, plan.x, plan.anchors
        t_dead = n * math.exp(-DEAD_SCORE) * 4.0
        eps1 = dl / 2 + tail_inside(dl, x, m) + t_dead + plan.float_term
        eps0 = tail_outside(dl, x, m) + t_dead + plan.float_term
        prop = eps1 * (np.abs(W2) * Upos).sum(-1)  # (n, d)
        extra = np.zeros((n, d))
        for c, _s, _g, kappa in heads2:
            M = float(kappa.sum(1).max())
            kmin = math.exp(-FLOOR_GAP) * M
            Z = 2 * (M + n * kmin)
            s_max = abs(math.log(kmin)) + abs(math.log(Z))
            eta = 4 * u * s_max
            f2 = Z * (1 + eps1) * (math.expm1(2 * eta) + 4 * n * u)
            extra[:, c] += n * kmin * (1 + eps1) + Z * eps0 + f2
        tot = prop + extra
        return float(tot.max()), eps1, eps0, float(prop.max()), {"floor_sink_float": float(extra.max())}

    if anchors is not None:
        plan = plan_interpolation(0.0, 1.0, anchors=anchors, dtype=dtype, y_bound=y_bound, n_dead=n)
    else:
        worst = float((np.abs(W2) * Upos).sum(-1).max())  # Σ_j |W2| U_j at the worst coordinate
        m = max(2, math.ceil(worst / eps) + 1)  # Δ'/2 · worst ≤ eps/2
        while True:
            plan = plan_interpolation(0.0, 1.0, anchors=m, dtype=dtype, y_bound=y_bound, n_dead=n)
            if bounds_for(plan)[0] <= eps or m > 10**6:
                break
            m = int(m * 1.1) + 1
    bound, eps1, eps0, prop, details = bounds_for(plan)
    m = plan.anchors

    # ---- layer 1: G sequence-wise truncated-linear heads on [0, 1]
    # lifted channels: 0 const | 1 key1 | 2 key2 (dead C for data tokens) | 3 value | 4 + g: y'_{k,g}
    cfg1 = AttentionOnlyConfig(
        d_in=d,
        d_model=4 + G,
        d_out=G,
        n_heads=G,
        head_dim=2,
        max_len=n,
        n_anchors=m,
        beta=plan.beta,
        positional_bias=True,
        sequence_map=True,
        residual=False,
        dtype=dtype,
    )
    layer1 = AttentionOnlyLayer(cfg1).zero_()
    dt = cfg1.torch_dtype
    kk = torch.arange(m, dtype=torch.float64)
    La = kk * plan.delta  # (m,) anchors L_k = kΔ' on [0, 1]
    W1 = torch.as_tensor(net.W1.reshape(J, n, d))  # (J, n, d)
    with torch.no_grad():
        layer1.pos_bias[:, 0] = 1.0
        layer1.pos_bias[:, 2] = DEAD_SCORE / plan.beta  # data tokens are dead keys: score −DEAD_SCORE
        layer1.anchors[:, 1] = La.to(dt)  # key1 = kΔ'
        layer1.anchors[:, 2] = (La * (La + La[0])).to(dt)  # key2 = kΔ'(L_k + L_0)
        layer1.anchors[:, 3] = La.to(dt)  # value = L_k
        for g in range(G):
            for k in range(n):
                j = int(slots[g, k])
                if j >= 0 and live[j]:
                    # y'_{k,g} = (W1_j · vec X + b1_j) / U_j: token k reads the WHOLE sequence (seq_map)
                    layer1.seq_map[k, 4 + g] = (W1[j] / float(U[j])).to(dt)  # (n, d)
                    layer1.pos_bias[k, 4 + g] = float(net.b1[j] / U[j])
            layer1.W_Q[g, 0, 4 + g] = 2.0  # query = β(2y', −1)
            layer1.W_Q[g, 1, 0] = -1.0
            layer1.W_K[g, 0, 1] = 1.0  # key = (kΔ', kΔ'(L_k + L_0)); data tokens (0, C)
            layer1.W_K[g, 1, 2] = 1.0
            layer1.W_V[g, 0, 3] = 1.0  # value = L_k (0 for data tokens)
            layer1.W_O[g, g, 0] = 1.0  # r̂_{k,g} into channel g

    # ---- layer 2: positional-selector heads, token-wise (one-hot PE), β = 1
    # lifted channels: 0..G−1: r̂ (copied by in_proj) | G + k: one-hot of position k (pos_bias)
    H2 = len(heads2)
    cfg2 = AttentionOnlyConfig(
        d_in=G,
        d_model=G + n,
        d_out=d,
        n_heads=H2,
        head_dim=n,
        max_len=n,
        n_anchors=0,
        beta=1.0,
        positional_bias=True,
        sequence_map=False,
        residual=False,
        dtype=dtype,
    )
    layer2 = AttentionOnlyLayer(cfg2).zero_()
    with torch.no_grad():
        layer2.in_proj[:G, :G] = torch.eye(G, dtype=dt)
        layer2.pos_bias[:, G:] = torch.eye(n, dtype=dt)  # one-hot positional encoding e_k
        for h, (c, sign, g, kappa) in enumerate(heads2):
            M = float(kappa.sum(1).max())
            kmin = math.exp(-FLOOR_GAP) * M
            Z = 2 * (M + n * kmin)
            s = sink
            kt = np.where(kappa > 0, kappa, kmin)  # (n, n) κ̃ on non-sink tokens
            kt[:, s] = 0.0
            kt[:, s] = Z - kt.sum(1)  # sink weight makes every row sum to Z (≥ Z/2 > 0)
            # score_{ik} = query_i · key_k = e_i · W_K[:, G + k] = log κ̃_{ik}
            layer2.W_Q[h, :, G:] = torch.eye(n, dtype=dt)  # query_i = e_i  (head_dim n)
            layer2.W_K[h, :, G:] = torch.as_tensor(np.log(kt)).to(dt)  # W_K[a, G + k] = log κ̃_{a k}
            layer2.W_V[h, 0, g] = 1.0  # value = r̂_{k,g}
            layer2.W_O[h, c, 0] = sign * Z  # σ Z^h into output channel c
    model = AttentionOnlyNetwork([layer1, layer2], output_bias=torch.as_tensor(net.b2.reshape(n, d)).to(dt))
    return CompiledReluNetworkTwoLayer(
        model=model,
        net=net,
        plan=plan,
        bound=bound,
        heads=G + H2,
        domain=(lo, hi),
        nonstandard=[
            "layer 1 seq_map: a linear map across positions (token k reads the whole flattened sequence to form "
            "u_j / U_j)",
            f"layer 1 anchors: {m} anchor tokens appended to the sequence (dropped before layer 2)",
            "layer 2 pos_bias: a one-hot positional encoding (token-wise valid) selecting hidden-unit tokens",
            "output bias: per-position b2 (a positional encoding on the output, token-wise valid)",
        ],
        heads_layer1=G,
        heads_layer2=H2,
        layer1_bound=eps1,
        propagated_bound=prop,
        details={"eps0": eps0, **details},
    )
