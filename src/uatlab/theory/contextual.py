"""The (r, δ) that a layer actually achieves as a contextual mapping (paper A, Definition 2).

Definition. q is an (r, δ)-contextual mapping for X^(1..N) if

1. ‖q(X^(i))_k‖ ≤ r for all i, k;
2. ‖q(X^(i))_k − q(X^(j))_l‖ > δ whenever V^(i) ≠ V^(j) or x^(i)_k ≠ x^(j)_l.

So the best δ a layer achieves is the smallest distance between two outputs whose *keys*
(V^(i), x^(i)_k) differ, and the best r is the largest output norm. The layer is a contextual
mapping for the sequences (for some δ > 0) exactly when that smallest distance is positive. Outputs
with equal keys may coincide; for a permutation-equivariant layer they do.

Notation map (paper → uatlab): q(X^(i))_{:,k} → ``outputs[i, k]``; the key (V^(i), x^(i)_k) →
`uatlab.theory.separatedness.Separatedness.context_keys`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from uatlab.errors import InputError
from uatlab.theory.separatedness import Separatedness, as_sequences, tokenwise_separatedness

__all__ = ["ContextualMargin", "contextual_margin", "contextual_margin_of_outputs"]


@dataclass(frozen=True)
class ContextualMargin:
    """What a layer achieves on a set of sequences.

    Attributes:
        r: max output norm (condition 1 holds for this r).
        delta: min distance between outputs with different keys (condition 2 holds for every δ below it;
            0 means two such outputs collide and the layer is not a contextual mapping here).
        worst_pair: ((i, k), (j, l)) sequence/position pair attaining ``delta`` (None if all keys are equal).
        distinct_ids: number of distinct keys (V^(i), token).
        same_key_spread: max distance between outputs with the *same* key (0 for permutation-equivariant
            layers evaluated exactly; a few ulps in floating point).
        separatedness: the input analysis (vocabulary, keys, ε, …).
    """

    r: float
    delta: float
    worst_pair: tuple[tuple[int, int], tuple[int, int]] | None
    distinct_ids: int
    same_key_spread: float
    separatedness: Separatedness

    @property
    def is_contextual(self) -> bool:
        return self.delta > 0

    def describe_worst_pair(self) -> str:
        if self.worst_pair is None:
            return "no pair of positions with different keys"
        (i, k), (j, l) = self.worst_pair
        return f"sequence {i} position {k} vs sequence {j} position {l} (outputs {self.delta:.3g} apart)"


def contextual_margin_of_outputs(outputs: Any, sep: Separatedness, chunk: int | None = None) -> ContextualMargin:
    """(r, δ) of precomputed outputs (N, n, d_out) for inputs analysed by `tokenwise_separatedness`.

    Exact pairwise distances in chunks of rows: O((Nn)^2 d) time, about 32 MB of memory by default.
    """
    Y = outputs.detach().to(torch.float64).cpu().numpy() if isinstance(outputs, torch.Tensor) else np.asarray(outputs)
    Y = Y.astype(np.float64)
    N, n = sep.token_ids.shape
    if Y.ndim != 3 or Y.shape[:2] != (N, n):
        raise InputError(f"outputs of shape {Y.shape} do not match the {N} sequences of length {n}")
    if not np.isfinite(Y).all():
        i, k = (int(v) for v in np.argwhere(~np.isfinite(Y))[0][:2])
        raise InputError(f"the layer's output at sequence {i}, position {k} is not finite (overflow?)")
    flat = Y.reshape(N * n, -1)  # (Nn, d_out)
    keys = sep.context_keys().reshape(-1)  # (Nn,)
    r = float(np.linalg.norm(flat, axis=1).max())
    best, pair, spread = np.inf, None, 0.0
    chunk = chunk or max(1, 4_000_000 // (flat.shape[0] * max(1, flat.shape[1])))
    for s in range(0, len(flat), chunk):
        block = flat[s : s + chunk]  # (b, d_out)
        dist = np.linalg.norm(block[:, None, :] - flat[None, :, :], axis=-1)  # (b, Nn)
        same = keys[s : s + chunk, None] == keys[None, :]  # (b, Nn)
        if same.any():
            spread = max(spread, float(dist[same].max()))
        masked = np.where(same, np.inf, dist)
        a, b = np.unravel_index(int(masked.argmin()), masked.shape)
        if masked[a, b] < best:
            best, pair = float(masked[a, b]), (divmod(s + int(a), n), divmod(int(b), n))
    if pair is not None:
        (i, k), (j, l) = pair
        pair = ((int(i), int(k)), (int(j), int(l)))
        if pair[0] > pair[1]:
            pair = (pair[1], pair[0])
    return ContextualMargin(
        r=r,
        delta=float(best) if pair is not None else float("inf"),
        worst_pair=pair,
        distinct_ids=len(np.unique(keys)),
        same_key_spread=spread,
        separatedness=sep,
    )


def contextual_margin(
    layer: Callable[[torch.Tensor], torch.Tensor] | torch.nn.Module, sequences: Any
) -> ContextualMargin:
    """Evaluate ``layer`` on the sequences and measure the (r, δ) it achieves as a contextual mapping.

    Args:
        layer: maps a (N, n, d) tensor to (N, n, d_out), e.g. `uatlab.models.MultiHeadSelfAttention`.
            Inputs are passed in the layer's parameter dtype when it has parameters, else float64.
        sequences: (N, n, d) array/tensor or list of (n, d) sequences.

    Returns:
        `ContextualMargin`; ``worst_pair`` names the colliding positions when δ = 0.
    """
    X = as_sequences(sequences)  # (N, n, d), float64, validated
    sep = tokenwise_separatedness(X)
    dtype = torch.float64
    if isinstance(layer, torch.nn.Module):
        params = list(layer.parameters())
        if params:
            dtype = params[0].dtype
    with torch.no_grad():
        out = layer(torch.from_numpy(X).to(dtype))  # (N, n, d_out)
    return contextual_margin_of_outputs(out, sep)
