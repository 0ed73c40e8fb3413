"""Tokenwise separatedness (paper A, Definition 1) and the vocabulary of a set of sequences.

Definition: sequences X^(1..N), each n tokens in R^d, are tokenwise
(r_min, r_max, ε)-separated if

1. ‖x^(i)_k‖ > r_min for every token,
2. ‖x^(i)_k‖ ≤ r_max for every token,
3. ‖x^(i)_k − x^(j)_l‖ > ε whenever the two tokens differ (within and across sequences).

The vocabulary V is the set of distinct tokens; V^(i) is the set of tokens of sequence i. Theorem 2
also assumes **no duplicate token within a sequence**; a positional encoding (x_k ↦ x_k + E_k with
far-apart E_k) lifts that restriction.

Notation map (paper → uatlab): X^(i) ∈ R^{d×n} (columns) → ``sequences[i]`` of shape (n, d) (rows);
V → `Separatedness.vocabulary` (|V|, d); V^(i) → `Separatedness.vocab_sets` [i]
(a frozenset of vocabulary ids); the token at (i, k) has id ``token_ids[i][k]``.

"Distinct" means not exactly equal (bitwise on float64 values, with −0.0 = 0.0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from uatlab.errors import InputError

__all__ = [
    "Separatedness",
    "as_sequences",
    "require_no_duplicates",
    "tokenwise_separatedness",
]


def as_sequences(sequences: Any) -> np.ndarray:
    """Validate and stack sequences into a float64 array of shape (N, n, d).

    Accepts an (N, n, d) array/tensor, a single (n, d) sequence, or a list of (n, d) array-likes.

    Raises:
        InputError: no sequences, an empty sequence, ragged lengths, mismatched token dimensions,
            or NaN/inf entries (naming the sequence and position).
    """
    if isinstance(sequences, torch.Tensor):
        sequences = sequences.detach().to(torch.float64).cpu().numpy()
    if isinstance(sequences, np.ndarray):
        if sequences.ndim == 2:
            sequences = sequences[None]
        if sequences.ndim != 3:
            raise InputError(f"expected sequences of shape (N, n, d), got an array of shape {sequences.shape}")
        items = list(sequences)
    else:
        items = list(sequences)
    if not items:
        raise InputError("no sequences given (need at least one)")
    arrays = []
    for i, seq in enumerate(items):
        try:
            arr = np.asarray(seq.detach().cpu().numpy() if isinstance(seq, torch.Tensor) else seq, dtype=np.float64)
        except (ValueError, TypeError) as exc:
            raise InputError(f"sequence {i} is not an (n, d) array of numbers: {exc}") from None
        if arr.size == 0:
            raise InputError(f"sequence {i} is empty (no tokens)")
        if arr.ndim != 2:
            raise InputError(f"sequence {i} has shape {arr.shape}; expected (n, d), one token per row")
        arrays.append(arr)
    n0, d0 = arrays[0].shape
    for i, arr in enumerate(arrays):
        if arr.shape[1] != d0:
            raise InputError(f"sequence {i} has tokens of dimension {arr.shape[1]}, but sequence 0 has dimension {d0}")
        if arr.shape[0] != n0:
            raise InputError(
                f"ragged input: sequence {i} has {arr.shape[0]} tokens, sequence 0 has {n0}; "
                "the definitions need a common length n (pad and mask, or group by length)"
            )
    X = np.stack(arrays)  # (N, n, d)
    bad = np.argwhere(~np.isfinite(X))
    if len(bad):
        i, k, c = (int(v) for v in bad[0])
        raise InputError(f"sequence {i}, position {k} has a non-finite entry {X[i, k, c]} in coordinate {c}")
    return X


@dataclass(frozen=True)
class Separatedness:
    """The separatedness figures of a set of sequences.

    Attributes:
        r_min: smallest token norm (the definition asks for norms *strictly above* its r_min).
        r_max: largest token norm.
        eps: smallest distance between two distinct tokens (inf if |V| = 1); the family is
            (r, r', ε')-separated for every ε' < eps.
        closest_pair: ((i, k), (j, l)) positions of two distinct tokens at distance ``eps`` (None if |V| = 1).
        vocabulary: (|V|, d) distinct tokens, in lexicographic order.
        token_ids: (N, n) vocabulary id of every token.
        vocab_sets: per sequence, the frozenset of its vocabulary ids (V^(i)).
        duplicates: (sequence, position, position) for every repeated token within a sequence.
    """

    r_min: float
    r_max: float
    eps: float
    closest_pair: tuple[tuple[int, int], tuple[int, int]] | None
    vocabulary: np.ndarray
    token_ids: np.ndarray
    vocab_sets: tuple[frozenset[int], ...]
    duplicates: tuple[tuple[int, int, int], ...]

    @property
    def vocab_size(self) -> int:
        return int(self.vocabulary.shape[0])

    def context_keys(self) -> np.ndarray:
        """(N, n) integer key of each position's (V^(i), token) pair: equal keys may share a context id."""
        set_index: dict[frozenset[int], int] = {}
        set_ids = np.array([set_index.setdefault(s, len(set_index)) for s in self.vocab_sets], dtype=np.int64)
        return set_ids[:, None] * self.vocab_size + self.token_ids

    def holds(self, r_min: float, r_max: float, eps: float) -> bool:
        """Whether the sequences are tokenwise (r_min, r_max, eps)-separated."""
        return self.r_min > r_min and self.r_max <= r_max and self.eps > eps


def _min_pair_distance(V: np.ndarray) -> tuple[float, int, int]:
    """Smallest distance between two distinct rows of V (|V| ≥ 2) and their indices.

    A k-d tree nearest-neighbour query: exact Euclidean distances, O(|V| log |V|) in low dimension.
    """
    from scipy.spatial import cKDTree

    dist, idx = cKDTree(V).query(V, k=2)  # (|V|, 2): column 0 is the point itself
    a = int(dist[:, 1].argmin())
    b = int(idx[a, 1])
    return float(np.linalg.norm(V[a] - V[b])), min(a, b), max(a, b)


def tokenwise_separatedness(
    sequences: Any,
    *,
    r_min: float | None = None,
    r_max: float | None = None,
    eps: float | None = None,
    allow_duplicates: bool = True,
) -> Separatedness:
    """Measure (r_min, r_max, ε), the vocabulary and within-sequence duplicates of a set of sequences.

    Args:
        sequences: (N, n, d) array/tensor or list of (n, d) sequences (row convention).
        r_min, r_max, eps: optional claimed constants; each one given is checked and a violation raises.
        allow_duplicates: if False, a repeated token within a sequence raises (Theorem 2's hypothesis).

    Raises:
        InputError: malformed input (see `as_sequences`), a token with norm ≤ the claimed r_min or
            > r_max (naming it), two distinct tokens not farther apart than the claimed eps (naming the
            pair and their distance), or a duplicate when ``allow_duplicates`` is False.
    """
    X = as_sequences(sequences)  # (N, n, d)
    N, n, d = X.shape
    flat = X.reshape(N * n, d)
    vocab, inverse = np.unique(flat, axis=0, return_inverse=True)  # (|V|, d), (N·n,)
    token_ids = inverse.reshape(N, n)
    norms = np.linalg.norm(X, axis=-1)  # (N, n)
    if r_min is not None and not (norms > r_min).all():
        i, k = np.unravel_index(int(norms.argmin()), norms.shape)
        raise InputError(
            f"sequence {i}, position {k} has norm {norms[i, k]:.6g}, not above the claimed r_min = {r_min}"
        )
    if r_max is not None and not (norms <= r_max).all():
        i, k = np.unravel_index(int(norms.argmax()), norms.shape)
        raise InputError(f"sequence {i}, position {k} has norm {norms[i, k]:.6g}, above the claimed r_max = {r_max}")

    first_pos = {}
    for idx, t in enumerate(inverse):
        first_pos.setdefault(int(t), divmod(idx, n))
    if len(vocab) >= 2:
        dist, a, b = _min_pair_distance(vocab)
        closest = (first_pos[a], first_pos[b])
    else:
        dist, closest = math.inf, None
    if eps is not None and not dist > eps:
        (i, k), (j, l) = closest
        raise InputError(
            f"tokens at sequence {i} position {k} and sequence {j} position {l} are distinct but only "
            f"{dist:.6g} apart, not more than the claimed eps = {eps}"
        )

    duplicates: list[tuple[int, int, int]] = []
    for i in range(N):
        seen: dict[int, int] = {}
        for k, t in enumerate(token_ids[i]):
            if int(t) in seen:
                duplicates.append((i, seen[int(t)], k))
            else:
                seen[int(t)] = k
    if duplicates and not allow_duplicates:
        require_no_duplicates(duplicates)
    return Separatedness(
        r_min=float(norms.min()),
        r_max=float(norms.max()),
        eps=float(dist),
        closest_pair=closest,
        vocabulary=vocab,
        token_ids=token_ids,
        vocab_sets=tuple(frozenset(int(t) for t in row) for row in token_ids),
        duplicates=tuple(duplicates),
    )


def require_no_duplicates(sep_or_duplicates: Separatedness | Any) -> None:
    """Raise `InputError` naming the first repeated token (Theorem 2 forbids them).

    Accepts a `Separatedness` or its ``duplicates`` list.
    """
    dups = sep_or_duplicates.duplicates if isinstance(sep_or_duplicates, Separatedness) else sep_or_duplicates
    if dups:
        i, k, l = dups[0]
        raise InputError(
            f"sequence {i} repeats a token at positions {k} and {l} ({len(dups)} repeat(s) in all); "
            "Theorem 2 assumes no duplicate token within a sequence. Adding a positional encoding "
            "(x_k + E_k with far-apart E_k) makes the tokens distinct and lifts this restriction."
        )
