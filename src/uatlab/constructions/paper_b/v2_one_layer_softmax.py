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

Bound (exact): for K numbers, max z − (log K)/β ≤ boltz_β(z) ≤ max z (boltz = LSE_β − H(softmax)/β,
LSE_β ≥ max, entropy ≤ log K), so |g_o − f_o| ≤ (log K_P + log K_N)/β ≤ 2|J| log 2 / β.

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
from uatlab.errors import InputError


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


def build_softmax_pooling(net: ReluNetwork, beta: float) -> Construction:
    """The DC pieces of every output coordinate (module docstring); β sets the bound (log K_P + log K_N)/β.

    Returns a `Construction`: ``guarantee["sup_error_bound"]`` = max_o (log K_P + log K_N)/β,
    ``facts["pieces"]`` the number of affine pieces.
    """
    if not (beta > 0 and math.isfinite(beta)):
        raise InputError(f"beta must be a positive number, got {beta}")
    J = net.hidden
    if J > 16:
        raise InputError(f"{J} hidden units give up to 2^{J} pieces per output coordinate; use at most 16")
    U = np.concatenate([net.W1, net.b1[:, None]], axis=1)  # (J, nd + 1): u_j = U_j · [vec X, 1]
    rows, owner, side, bound = [], [], [], 0.0
    for o in range(net.W2.shape[0]):
        logs = 0.0
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
        bound = max(bound, logs / beta)
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
        "nonstandard": ["the affine pieces read the whole flattened sequence (paper B's sequence-wise A)"],
    }
    return Construction(model=model, guarantee={"sup_error_bound": bound}, facts=facts)


def evaluate(c: Construction, x: np.ndarray) -> np.ndarray:
    """The model on numpy inputs (B, n, d) → (B, n, d_out)."""
    with torch.no_grad():
        return c.model(torch.as_tensor(np.asarray(x, np.float64))).numpy()
