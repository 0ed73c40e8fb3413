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
from dataclasses import dataclass

import numpy as np

from uatlab.constructions.relu_compiler import ReluNetwork
from uatlab.errors import InputError


def boltz_rows(z: np.ndarray, beta: float) -> np.ndarray:
    """Boltzmann operator over the last axis at inverse temperature β (stable: shifted by the max)."""
    m = z.max(-1, keepdims=True)
    w = np.exp(beta * (z - m))
    return (z * w).sum(-1) / w.sum(-1)


@dataclass
class SoftmaxPoolingModel:
    """Per output coordinate o: the affine pieces (p: K_P × (nd+1), q: K_N × (nd+1)) and the bias."""

    net: ReluNetwork
    beta: float
    pieces_pos: list[np.ndarray]  # o → (K_P, nd + 1): rows [coefficients of vec X, constant]
    pieces_neg: list[np.ndarray]

    @property
    def bound(self) -> float:
        return (
            max(math.log(len(p)) + math.log(len(q)) for p, q in zip(self.pieces_pos, self.pieces_neg, strict=True))
            / self.beta
        )

    @property
    def pieces(self) -> int:
        return sum(len(p) + len(q) for p, q in zip(self.pieces_pos, self.pieces_neg, strict=True))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        B = x.shape[0]
        v = np.concatenate([x.reshape(B, -1), np.ones((B, 1))], axis=1)  # (B, nd + 1)
        out = np.empty((B, len(self.pieces_pos)))
        for o, (p, q) in enumerate(zip(self.pieces_pos, self.pieces_neg, strict=True)):
            out[:, o] = self.net.b2[o] + boltz_rows(v @ p.T, self.beta) - boltz_rows(v @ q.T, self.beta)
        return out.reshape(x.shape[0], self.net.n, -1)


def build_softmax_pooling(net: ReluNetwork, beta: float) -> SoftmaxPoolingModel:
    """The DC pieces of every output coordinate (module docstring); β sets the bound (log K_P + log K_N)/β."""
    if not (beta > 0 and math.isfinite(beta)):
        raise InputError(f"beta must be a positive number, got {beta}")
    J = net.hidden
    if J > 16:
        raise InputError(f"{J} hidden units give up to 2^{J} pieces per output coordinate; use at most 16")
    U = np.concatenate([net.W1, net.b1[:, None]], axis=1)  # (J, nd + 1): u_j = U_j · [vec X, 1]
    pos, neg = [], []
    for o in range(net.W2.shape[0]):
        for sign, store in ((1, pos), (-1, neg)):
            idx = [j for j in range(J) if sign * net.W2[o, j] > 0]
            a = np.abs(net.W2[o, idx])[:, None] * U[idx]  # (|idx|, nd + 1)
            rows = [np.zeros(U.shape[1])]
            for r in range(1, len(idx) + 1):
                rows += [a[list(S)].sum(0) for S in itertools.combinations(range(len(idx)), r)]
            store.append(np.stack(rows))
    return SoftmaxPoolingModel(net, beta, pos, neg)
