"""Residual-stream layout and the codes the memorizer writes into it (paper A, Corollary 1).

Coordinates (d = k + 3 + C [+ k_p]):

    [0, k)        word code c(w): ±1 binary digits of the word id (k = ⌈log2 V⌉, default in float64)
                  or an m-hot {0,1} code (k smallest with C(k, m) ≥ V; default "3-hot" in float32)
    KEY  = k      key/value scalar  a = α_w + π_pos      (embedding + positional encoding)
    QRY  = k + 1  query scalar      b = β (1 + ρ_pos)    (positional encoding only)
    CTX  = k + 2  attention output  h                    (0 in embedding and positional encoding)
    [k+3, k+3+C)  label coordinates: embedding holds e_{base label of w}; FF adds the corrections
    [k+3+C, d)    position code p(k) (only with (word, position) groups): 2-hot {0,1} code of the
                  position, held by the positional encoding (0 in the embedding and in W_O)

Bounds: |codes| ≤ 1; keys |a| ≤ 1 (α on the 2^-15 grid in [−15/16, 15/16] — the 2^-18 grid for
vocabularies larger than half the coarse grid — and π on the 2^-15 grid in [−1/32, 1/32], so α + π is
exact in float32 and float64); b = β(1 + j/2^m) ≤ 2β, so on the coarse grid every score b·a is exact in
float32 while max_len ≤ 256 (the certificate checks this per score).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from uatlab.errors import InputError

ALPHA_GRID = 2.0**-15  # word key codes α_w: distinct multiples of 2^-15 in [−15/16, 15/16] ...
ALPHA_GRID_FINE = 2.0**-18  # ... or of 2^-18 when the vocabulary needs more than half of the coarse grid
PI_GRID = 2.0**-15  # positional key codes π_k: multiples of 2^-15 in [−1/32, 1/32]
QUERY_SHIFTS = 3  # (word, position) groups: query scales b_k = β(1 + ((k + s 2^m/3) mod 2^m)/2^m), s < 3
POSITION_CODE = "2-hot"  # position code of (word, position)-gated units (in the positional encoding)


@dataclass
class Layout:
    """Coordinates of the residual stream (see the module docstring)."""

    k: int  # code bits
    num_labels: int
    kp: int = 0  # position code bits (FF units gated on (word, position)); 0 if units are gated on words

    @property
    def pos_code(self) -> slice:
        return slice(self.k + 3 + self.num_labels, self.k + 3 + self.num_labels + self.kp)

    @property
    def key(self) -> int:
        return self.k

    @property
    def query(self) -> int:
        return self.k + 1

    @property
    def ctx(self) -> int:
        return self.k + 2

    @property
    def labels(self) -> slice:
        return slice(self.k + 3, self.k + 3 + self.num_labels)

    @property
    def d_model(self) -> int:
        return self.k + 3 + self.num_labels + self.kp


def alpha_grid(num_words: int) -> float:
    """The grid of the word key codes: 2^-15, or 2^-18 when the vocabulary needs more than half of it."""
    return ALPHA_GRID if num_words <= int((15 / 16) / ALPHA_GRID) else ALPHA_GRID_FINE


def word_key_codes(num_words: int, seed: int) -> np.ndarray:
    """α_w: distinct random multiples of 2^-15 (2^-18 for vocabularies over half that grid) in [−15/16, 15/16]
    (exact in float32), shape (V,)."""
    rng = np.random.default_rng([seed, 1])
    grid = alpha_grid(num_words)
    half = int((15 / 16) / grid)
    if num_words > 2 * half + 1:
        raise InputError(f"vocabulary of {num_words} words exceeds the {2 * half + 1} distinct key codes")
    ints = rng.choice(2 * half + 1, size=num_words, replace=False) - half
    return ints.astype(np.float64) * grid


def positional_codes(max_len: int, beta: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """π_k (keys; random multiples of 2^-15 in [−1/32, 1/32]) and b_k = β(1 + k/2^m) (queries), (n,) each.

    2^m ≥ max_len so b ∈ [β, 2β); β is a power of two, so every b is exact in float32.
    """
    rng = np.random.default_rng([seed, 2])
    half = int((1 / 32) / PI_GRID)
    pi = (rng.integers(-half, half + 1, size=max_len)).astype(np.float64) * PI_GRID
    m = max(1, math.ceil(math.log2(max(max_len, 2))))
    b = beta * (1.0 + np.arange(max_len, dtype=np.float64) / 2.0**m)
    return pi, b


def key_extremes(alpha: np.ndarray, pi: np.ndarray, max_len: int) -> tuple[float, float]:
    """(min, max) of the keys a = α_w + π_k over every word w and position k < ``max_len``, in float64.

    float64 addition is monotone in each argument, so the extremes of the rounded sums are the rounded sums of
    the extremes, exactly: O(V + n), not a V × n table (quadratic in the length of one long sequence)."""
    return float(alpha.min() + pi[:max_len].min()), float(alpha.max() + pi[:max_len].max())


def query_scales(max_len: int, beta: float, shift: int = 0) -> np.ndarray:
    """b_k = β(1 + ((k + shift·2^m/S) mod 2^m)/2^m), S = QUERY_SHIFTS, 2^m ≥ max_len: in [β, 2β) with m + 1
    significant bits (exact in float32); shift 0 is `positional_codes`' b."""
    m = max(1, math.ceil(math.log2(max(max_len, 2))))
    kk = (np.arange(max_len) + (shift * 2**m) // QUERY_SHIFTS) % 2**m
    return beta * (1.0 + kk / 2.0**m)


def resolve_auto(dtype: str, code: str = "auto", labels: str = "auto", group: str = "auto") -> tuple[str, str, str]:
    """(code, labels, group) with each ``"auto"`` replaced by its choice for ``dtype``: float64 binary gate codes,
    ordinal labels and word groups; float32 3-hot codes (complement gate: an own token's pre-activation is one
    rounding), one-hot labels (label steps of 1) and (word, position) groups."""
    if code == "auto":
        code = "binary" if dtype == "float64" else "3-hot"
    if labels == "auto":
        labels = "ordinal" if dtype == "float64" else "one-hot"
    if group == "auto":
        group = "word-pos" if dtype == "float32" else "word"
    return code, labels, group


def code_ones(scheme: str) -> int:
    """m of an ``"m-hot"`` code scheme, 0 for ``"binary"`` (±1 codes); InputError for any other name."""
    if scheme == "binary":
        return 0
    if scheme.endswith("-hot") and scheme[:-4].isdigit() and int(scheme[:-4]) >= 1:
        return int(scheme[:-4])
    raise InputError(f"unknown code scheme {scheme!r}: use 'binary', 'M-hot' (e.g. '3-hot') or 'auto'")


def code_width(count: int, scheme: str) -> int:
    """Coordinates k of the ``scheme`` code of ``count`` ids (`word_codes`, without building the codes):
    binary ⌈log2 count⌉ (at least 1), m-hot the smallest k with C(k, m) ≥ count."""
    m = code_ones(scheme)
    if m == 0:
        return max(1, math.ceil(math.log2(max(count, 2))))
    hi = m
    while math.comb(hi, m) < count:
        hi *= 2
    lo = m
    while lo < hi:  # smallest k in [lo, hi] with C(k, m) ≥ count (C(k, m) grows with k)
        mid = (lo + hi) // 2
        if math.comb(mid, m) >= count:
            hi = mid
        else:
            lo = mid + 1
    return lo


def word_codes(V: int, scheme: str) -> tuple[np.ndarray, int]:
    """Word codes for the FF gate: (codes (V, k), m) with m = 0 for ±1 binary codes, m ones for m-hot codes.

    * ``"binary"``: c(w) ∈ {−1, +1}^k, the binary digits of w (k = ⌈log2 V⌉). Another word's code agrees
      in ≤ k − 1 places, so c(w')ᵀc(w) − k ≤ −2. Small d, but the gate sums k terms of size G.
    * ``"m-hot"`` (e.g. ``"3-hot"``): c(w) ∈ {0, 1}^k with exactly m ones (the w-th m-subset of [k] in
      lexicographic order; k the smallest with C(k, m) ≥ V). Another word has a one where c(w) has a 0,
      which the complement gate (−G on the zeros of c(w)) turns into ≤ −G. Larger d, but an own token's
      gate products are all exact zeros: its pre-activation is the single rounding of h + b1 instead of a
      sum of k + 2 terms of total size ~2Gk, which is what float32 needs. Also used for positions.
    """
    m, k = code_ones(scheme), code_width(V, scheme)
    if m == 0:
        return np.where(((np.arange(V)[:, None] >> np.arange(k)[None, :]) & 1) == 1, 1.0, -1.0), 0
    codes = np.zeros((V, k))
    for w, subset in enumerate(itertools.islice(itertools.combinations(range(k), m), V)):
        codes[w, list(subset)] = 1.0
    return codes, m
