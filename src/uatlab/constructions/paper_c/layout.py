"""How the next-token memorizer sizes its tables: digits per word, words per bank, banks, id range.

Notation (ours ↔ Kajitsuka & Sato, ICLR 2025, next-token memorization; Vardi, Yehudai & Shamir 2022):

- N distinct sequences, C classes, n tokens (padded to n' = 2^⌈log2 n⌉).
- h ∈ [0, h_max): the sequence id written by the attention layer (the paper's "sequence id" from the
  averaging self-attention layer).
- Three retrieval tables of K_t slots (t = 1, 2, 3; K_t pairwise coprime, ≈ 1.23 N / 3), entries in
  Z_C (see `uatlab.constructions.paper_c.retrieval`). The slot of a sequence in table t is
  s_t = h mod K_t, written s_t = o_t + D·(r_t + m·b_t): offset o_t in the word, word r_t in the bank,
  bank b_t. By the Chinese remainder theorem any two slots (s_t, s_u) are uniform on K_t × K_u when h is
  uniform on a range ≥ 8·K_t K_u; we take 8·K_1K_2K_3 (all three independent) where the regime allows it,
  and at least 8·K_t K_u (pairwise) otherwise.
- A *word* packs D slots as base-C digits, Word = Σ_o T[o]·C^o < C^D: the paper's "crafted weight" that
  holds many labels, read back by bit (here: digit) extraction. D is the bit complexity knob:
  ≈ D·log2 C bits per weight.
- A *bank* is m words selected together by one one-hot unit (the paper's "group" of √N points).

Parameter count, to first order (exact counts come from the built circuit):

    P(D, m) ≈ 3·[ 7·banks + banks·m + 7m + D·(15⌈log2 C⌉ + 6) ] + O(log h_max) + 2C,
    banks ≈ 1.23 N / (3 D m).

With unbounded word size (exact arithmetic), minimising over D gives D ≈ √(1.23N / (3·15⌈log2C⌉)),
banks ≈ the same, so P = Θ(√(N log C)·…) = Õ(√N): the √N law of the paper. With float64 words
(≤ 50 bits so that every intermediate value stays an integer below 2^53), D ≤ ⌊50 / log2 C⌋ and the
count becomes ≈ 3·banks·m ≈ 1.23 N / D ≈ 1.23·N·log2 C / 50 words: linear in N, a constant factor above
the information floor N log2 C / 53 ("the bend").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from uatlab.errors import PrecisionError

# word and id sizes per regime: (max bits of a packed word, max bits of the id h, mantissa bits)
REGIMES: dict[str, tuple[int | None, int | None, int | None]] = {
    "exact": (None, None, None),
    "float64": (50, 50, 53),
    "float32": (21, 21, 24),
}
#: mantissa bits p of each floating-point regime (every integer of magnitude ≤ 2^p is exact in it)
MANTISSA_BITS = {regime: p for regime, (_, _, p) in REGIMES.items() if p is not None}
RETRIEVAL_SLACK = 1.23  # total slots / keys; the 3-hypergraph peeling threshold is 1.222
HASH_MARGIN_BITS = 3  # id range ≥ 2^3 × product of radices: the top digit stays close to uniform


@dataclass(frozen=True)
class Layout:
    """Sizes of one memorizer (see module docstring)."""

    regime: str
    C: int
    D: int  # digits (slots) per word
    m: int  # words per bank
    sizes: tuple[int, int, int]  # K_t, pairwise coprime
    n_pad: int  # n' (power of two)
    value_range: int  # R: token-position values ν ∈ [0, R)

    @property
    def banks(self) -> tuple[int, int, int]:
        return tuple(-(-k // (self.D * self.m)) for k in self.sizes)  # type: ignore[return-value]

    @property
    def table_sizes(self) -> tuple[int, int, int]:
        """Slots stored (banks_t·m·D ≥ K_t; the slots past K_t are never addressed and hold 0)."""
        return tuple(self.D * self.m * b for b in self.banks)  # type: ignore[return-value]

    @property
    def h_max(self) -> int:
        """Exclusive upper bound of the id h = Σ_j ν_j."""
        return self.n_pad * (self.value_range - 1) + 1

    @property
    def word_bits(self) -> int:
        return (self.C**self.D - 1).bit_length()


def bits_per_digit(C: int) -> int:
    return max(1, (C - 1).bit_length())


def estimate_parameters(C: int, D: int, m: int, banks: int, h_bits: int) -> int:
    """First-order parameter count of the circuit (see module docstring); used to choose D and m."""
    per_table = 7 * banks + banks * m + (7 * m if m > 1 else 0) + D * (15 * bits_per_digit(C) + 6)
    return 3 * per_table + 30 * h_bits + 2 * C


def max_digits(C: int, regime: str) -> int | None:
    word_bits = REGIMES[regime][0]
    if word_bits is None:
        return None
    return max(0, int(math.floor(word_bits / math.log2(C) + 1e-12)))


def coprime_sizes(b0: int) -> tuple[int, int, int]:
    """The three smallest pairwise coprime integers ≥ b0 (greedy)."""
    out: list[int] = []
    b = max(1, b0)
    while len(out) < 3:
        if all(math.gcd(b, c) == 1 for c in out) and (b > 1 or not out):
            out.append(b)
        b += 1
    return out[0], out[1], out[2]


def choose_layout(
    N: int, C: int, n: int, regime: str, slack: float = RETRIEVAL_SLACK, _raise_with_fit: bool = True
) -> Layout:
    """The (D, m, banks) with the fewest estimated parameters that the regime's word size allows.

    Raises PrecisionError (before anything is built) when N keys cannot be addressed within the
    regime's id bits, naming the largest N that fits.
    """
    if regime not in REGIMES:
        raise ValueError(f"unknown regime {regime!r}; choose one of {sorted(REGIMES)}")
    if C < 2:
        raise ValueError("need at least two classes")
    n_pad = 1 << max(0, (n - 1).bit_length())
    K = max(1, math.ceil(slack * max(N, 1) / 3))
    dmax = max_digits(C, regime)
    if dmax is not None and dmax < 1:
        raise PrecisionError(
            f"{regime}: one label of {C} classes needs {math.log2(C):.1f} bits, more than a word holds"
        )
    h_bits_cap = REGIMES[regime][1]
    best = None
    d_hi = dmax if dmax is not None else max(1, int(4 * math.sqrt(K)) + 2)
    for D in range(1, d_hi + 1):
        for m in (1, 2, 4, 8, 16, 32, 64, 128, 256):
            if m > 1 and D * m > K:
                break
            sizes = coprime_sizes(K)
            banks = -(-sizes[2] // (D * m))
            pair = (sizes[1] * sizes[2]).bit_length() + HASH_MARGIN_BITS
            need = math.prod(sizes).bit_length() + HASH_MARGIN_BITS  # all three slots independent
            if h_bits_cap is not None:
                if pair > h_bits_cap:
                    continue
                need = min(need, h_bits_cap)  # past the cap: pairwise independence only
            cost = estimate_parameters(C, D, m, banks, need)
            if best is None or cost < best[0]:
                best = (cost, D, m, sizes, need)
    if best is None:
        if not _raise_with_fit:
            raise PrecisionError("does not fit")
        n_fit = largest_n(C, n, regime, slack)
        raise PrecisionError(
            f"N = {N} distinct sequences need a longer sequence id than {regime} holds exactly "
            f"({h_bits_cap} bits); the largest N that fits is {n_fit}"
        )
    _, D, m, sizes, h_bits = best
    value_range = max(2, (1 << h_bits) // n_pad)
    return Layout(regime=regime, C=C, D=D, m=m, sizes=sizes, n_pad=n_pad, value_range=value_range)


def largest_n(C: int, n: int, regime: str, slack: float = RETRIEVAL_SLACK) -> int:
    """The largest N for which `choose_layout` finds a layout (bisection over N)."""
    lo, hi = 1, 2
    while _fits(hi, C, n, regime, slack) and hi < 10**12:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _fits(mid, C, n, regime, slack) else (lo, mid)
    return lo


def _fits(N: int, C: int, n: int, regime: str, slack: float) -> bool:
    try:
        choose_layout(N, C, n, regime, slack, _raise_with_fit=False)
    except PrecisionError:
        return False
    return True
