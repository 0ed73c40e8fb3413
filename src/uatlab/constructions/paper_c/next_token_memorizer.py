"""The next-token memorizer: one rank-1 attention layer (sequence id) and a deep ReLU network (labels).

Kajitsuka & Sato, "On the Optimal Memorization Capacity of Transformers" (ICLR 2025), next-token
theorem: N sequences of length n with one label each (from C classes) are memorized by a Transformer
with one self-attention layer and a feed-forward network with Õ(√N) parameters, because (i) one
attention layer, used as an average, gives every sequence a distinct id, and (ii) a ReLU network
recovers N labels from Õ(√N) weights of Õ(√N) bits each by bit extraction (Vardi, Yehudai & Shamir,
"On the Optimal Memorization Power of ReLU Neural Networks", ICLR 2022). This module is our derivation
of that construction; the paper's own proof is not reproduced verbatim (its text was not available).

**Input encoding** (the tokens-as-vectors of the paper; ours: a token-position table). The sequence is
left-padded with a pad token to n' = 2^⌈log2 n⌉ and token t at position j is the vector
x_j = (ν[j, t], 1, 0) ∈ R^3, with ν[j, t] ∈ [0, R) random integers drawn from the seed and ν[j, pad] = 0.

**Attention (rank 1, single head, paper A's F^(SA) with skip).** With d = 3, s = 1:

    W^(K) = e_2^T,  W^(Q) = c·e_2^T,  W^(V) = e_1^T,  W^(O) = n'·e_3        (each of rank 1)

Logits c·(e_2^T x_j)(e_2^T x_k) = c are equal, so the softmax weights are exactly 1/n' and the head
computes the Boltzmann operator at equal logits, i.e. the mean (the paper's "averaging" attention;
paper A's Boltzmann contextual mapping is the same head with a varying key direction). At the last
position the residual stream becomes (ν[n', t_n], 1, h) with the *sequence id*

    h = n'·(1/n') Σ_j ν[j, t_j] = Σ_j ν[j, t_j] ∈ [0, n'(R−1)],          an integer.            (1)

Distinct sequences get distinct ids unless a collision of a random subset sum occurs; the compiler
checks this on the data and redraws ν (a new seed) if two sequences with different labels share h.
In float64 every product (1/n')ν and every partial sum is a dyadic rational with numerator < 2^53
(n' is a power of two, h < 2^50), so (1) holds exactly in floating point too.

**Feed-forward network (deep, integer weights).** Three retrieval tables T_1, T_2, T_3 over Z_C (see
`uatlab.constructions.paper_c.retrieval`) with label(h) = T_1[s_1(h)] + T_2[s_2(h)] + T_3[s_3(h)]
mod C, the slots s_t(h) being mixed-radix digits of h. Tables are packed D slots per word (base-C
digits), m words per bank. The network:

1. digits of h (`uatlab.constructions.paper_c.circuit_stages.mixed_radix_digits`): offset o_t,
   word r_t, bank b_t per table;
2. word selection (`uatlab.constructions.paper_c.circuit_stages.select_words`): S_t = W_t[b_t][r_t];
   the words are the weights of one layer: this is where the labels live, ≈ D·log2 C bits per weight;
3. digit extraction (`uatlab.constructions.paper_c.circuit_stages.extract_digit`): y_t = digit o_t
   of S_t (bit extraction, one layer per bit);
4. y = (y_1 + y_2 + y_3) mod C (`uatlab.constructions.paper_c.circuit_stages.sum_mod`);
5. readout (linear, rank 1): logit_c = 2c·y − c², so logit_y − logit_c = (y − c)² ≥ 1 for c ≠ y.

**Bound.** Parameters ≈ 3·(8·banks + banks·m + D·(17⌈log2 C⌉ + 9)) + O(log h) + 2C
(`uatlab.constructions.paper_c.layout`); with unbounded words the optimum is D, banks = Θ(√N),
i.e. Õ(√N) parameters of Õ(√N) bits each (the paper's bound, exact arithmetic). With float64 words
D ≤ ⌊50/log2 C⌋ and the count is linear in N at ≈ 1.23·N·log2 C / 50 · (1 + 7/m) parameters, a
constant factor above the floor N·log2 C / 53 that no float64 network can beat.

Notation map (paper → ours): sequence id / "averaging" SA → h (1); group of √N points → bank;
crafted weight → packed word W_t[b][r]; bit extraction → digit extraction of S_t; N, n, C as in the
paper. Difference: we index labels through a retrieval structure (three hashed slots) instead of
storing each point's id next to its label, which saves ≈ 2 log2 N bits per label.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from uatlab._util import check_integer
from uatlab.constructions.paper_c.circuit_stages import (
    extract_digit,
    mixed_radix_digits,
    residues,
    select_words,
    sum_mod,
)
from uatlab.constructions.paper_c.layout import REGIMES, Layout, choose_layout
from uatlab.constructions.paper_c.relu_circuit import Circuit, evaluate_exact
from uatlab.constructions.paper_c.retrieval import solve_retrieval
from uatlab.data.ids import check_next_token_ids
from uatlab.errors import InputError

PAPER = "Kajitsuka & Sato, ICLR 2025"
THEOREM = "next-token memorization with Õ(√N) parameters (one self-attention layer + deep feed-forward network)"


@dataclass
class NextTokenMemorizer:
    """A compiled next-token memorizer (exact integer weights) and what it relies on."""

    layout: Layout
    nu: list[list[int]]  # (n', V+1) token-position values; column V is the pad token (all 0)
    n: int  # window length before padding
    V: int  # input vocabulary size (without pad)
    circuit: Circuit
    seed: int
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def C(self) -> int:
        return self.layout.C

    def attention_weights(self) -> dict[str, np.ndarray]:
        """W_Q, W_K, W_V (1×3) and W_O (3×1) of the rank-1 head (the softmax logit scale c = 1)."""
        e = np.eye(3)
        return {
            "W_Q": e[1:2].copy(),
            "W_K": e[1:2].copy(),
            "W_V": e[0:1].copy(),
            "W_O": float(self.layout.n_pad) * e[:, 2:3],
        }

    def ids(self, tokens: np.ndarray) -> list[int]:
        """Exact sequence ids h (1) for token rows (P, n) with ids in [0, V)."""
        return sequence_ids(self.nu, tokens, self.layout.n_pad)

    def stream(self, tokens: np.ndarray) -> list[list[int]]:
        """The residual stream at the last position after attention, exactly: (ν[n', t_n], 1, h)."""
        tokens = np.asarray(tokens, dtype=np.int64)
        last = [self.nu[self.layout.n_pad - 1][t] for t in tokens[:, -1].tolist()]
        return [last, [1] * len(tokens), self.ids(tokens)]

    def predict_exact(self, tokens: np.ndarray) -> np.ndarray:
        """Exact predicted class per row (integer arithmetic end to end)."""
        (y,) = evaluate_exact(self.circuit, self.stream(tokens))
        return np.asarray([int(v) for v in y], dtype=np.int64)

    @property
    def parameters(self) -> dict[str, int]:
        emb = self.layout.n_pad * self.V
        attn = 4 * (1 + 3)  # four rank-1 matrices counted as outer products (s + d each)
        ff = self.circuit.parameters
        readout = 2 * self.C
        return {
            "embedding": emb,
            "attention": attn,
            "feed_forward": ff,
            "readout": readout,
            "non_embedding": attn + ff + readout,
            "total": emb + attn + ff + readout,
        }


def sequence_ids(nu: list[list[int]], tokens: np.ndarray, n_pad: int) -> list[int]:
    tokens = np.asarray(tokens, dtype=np.int64)
    P, n = tokens.shape
    start = n_pad - n
    if max(max(r) for r in nu) < 2**62 // max(1, n_pad):
        tab = np.asarray(nu, dtype=np.int64)
        return [int(v) for v in tab[start + np.arange(n)[None, :], tokens].sum(axis=1)]
    return [sum(nu[start + j][t] for j, t in enumerate(row)) for row in tokens.tolist()]


def slots_of(h: list[int], layout: Layout) -> np.ndarray:
    """(P, 3) slot per table: s_t = h mod K_t (K_t pairwise coprime table sizes)."""
    out = np.zeros((len(h), 3), dtype=np.int64)
    for i, v in enumerate(h):
        for t in range(3):
            out[i, t] = v % layout.sizes[t]
    return out


def dedupe(tokens: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Distinct rows, their majority label (ties → smallest), the row → distinct map, and the ceiling.

    The ceiling is the number of input rows whose label equals their row's majority label: no function
    of the sequence can do better.
    """
    uniq, inv = np.unique(tokens, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    order = np.lexsort((labels, inv))
    maj = np.zeros(len(uniq), dtype=np.int64)
    best = np.zeros(len(uniq), dtype=np.int64)
    i = 0
    inv_s, lab_s = inv[order], labels[order]
    while i < len(order):
        j = i
        u = inv_s[i]
        while j < len(order) and inv_s[j] == u:
            k = j
            while k < len(order) and inv_s[k] == u and lab_s[k] == lab_s[j]:
                k += 1
            if k - j > best[u]:
                best[u], maj[u] = k - j, lab_s[j]
            j = k
        i = j
    return uniq, maj, inv, int(best.sum())


def feedforward_circuit(layout: Layout, tables: list[np.ndarray]) -> Circuit:
    """The feed-forward circuit (stages 1–4 of the module docstring) reading (ν_last, 1, h)."""
    C, D, m = layout.C, layout.D, layout.m
    circ = Circuit(n_inputs=3)
    inp = circ.inputs()
    regs = residues(circ, {"h": inp[2]}, "h", list(layout.sizes), layout.h_max, prefix="s")
    for t in range(3):  # s_t = o_t + D (r_t + m b_t)
        regs = mixed_radix_digits(circ, regs, f"s{t}", [D, m, layout.banks[t]], layout.sizes[t], prefix=f"t{t}_")
    words = []
    place = np.asarray([C**o for o in range(D)], dtype=object)
    for t in range(3):
        full = np.zeros(layout.table_sizes[t], dtype=np.int64)
        full[: layout.sizes[t]] = tables[t]
        T = full.reshape(layout.banks[t], m, D)  # slot o + D(r + m b) → [b, r, o]
        words.append([[int((T[b, r].astype(object) * place).sum()) for r in range(m)] for b in range(layout.banks[t])])
    regs = select_words(
        circ,
        regs,
        [f"t{t}_2" for t in range(3)],
        [f"t{t}_1" for t in range(3)],
        words,
        word_bound=C**D,
        keep=[f"t{t}_0" for t in range(3)],
    )
    regs = extract_digit(circ, regs, ["S0", "S1", "S2"], [f"t{t}_0" for t in range(3)], ["y0", "y1", "y2"], C, D)
    regs = sum_mod(circ, regs, ["y0", "y1", "y2"], C, out="y")
    circ.add_layer([regs["y"]])
    return circ


def compile_memorizer(
    tokens: np.ndarray, labels: np.ndarray, V: int, C: int, regime: str = "float64", seed: int = 0, max_tries: int = 12
) -> tuple[NextTokenMemorizer, dict[str, Any]]:
    """Compile N next-token examples into a memorizer; returns it and a report (figures, seconds).

    tokens: (N, n) int in [0, V] (V = pad, for left-padded shorter sequences); labels: (N,) int in [0, C) (C = 1 is
    built as C = 2, a label no example has). regime: 'exact' (unbounded integer
    weights), 'float64' or 'float32' (weights and every intermediate value integers ≤ 2^53 / 2^24).
    Raises PrecisionError before building when N does not fit the regime (with the largest N that does).
    """
    t0 = time.perf_counter()
    seed = check_integer(seed, "seed", 0, 2**32 - 1)
    V = check_integer(V, "V (the vocabulary size, also the pad id)", 1, None)
    # the retrieval tables store a label's digits in base ≥ 2: one label is built as two, the second one no
    # example has (as ``uatlab compile --task next-token`` builds a corpus with one distinct next token)
    C = max(2, check_integer(C, "C (the number of labels)", 1, None))
    check_integer(max_tries, "max_tries", 1, None)
    if regime not in REGIMES:
        raise InputError(f"regime {regime!r}: choose one of {sorted(REGIMES)}")
    tokens, labels = check_next_token_ids(tokens, labels, V, C)
    uniq, maj, _, ceiling = dedupe(tokens, labels)
    N, n = uniq.shape
    slack = None
    rng_seed = seed
    for attempt in range(max_tries):
        from uatlab.constructions.paper_c.layout import RETRIEVAL_SLACK

        slack = (RETRIEVAL_SLACK + 2.0 / math.sqrt(N)) * (1.04 ** (attempt // 3))
        layout = choose_layout(N, C, n, regime, slack=slack)
        rng = np.random.default_rng([rng_seed, attempt])
        nu = rng.integers(0, layout.value_range, size=(layout.n_pad, V + 1), dtype=np.int64)
        nu[:, V] = 0
        nu_l = nu.tolist()
        h = sequence_ids(nu_l, uniq, layout.n_pad)
        if len(set(h)) != N:
            continue  # two distinct sequences share an id: redraw ν
        slots = slots_of(h, layout)
        tables = solve_retrieval(slots, maj, layout.sizes, C)
        if tables is not None:
            break
    else:
        raise RuntimeError(f"retrieval tables not solvable after {max_tries} draws (N = {N})")
    t_solve = time.perf_counter() - t0
    circ = feedforward_circuit(layout, tables)
    memo = NextTokenMemorizer(layout=layout, nu=nu_l, n=n, V=V, circuit=circ, seed=seed)
    params = memo.parameters
    floor = N * math.log2(C) / 53
    memo.facts = {
        "paper": PAPER,
        "theorem": THEOREM,
        "regime": regime,
        "parameters": params,
        "N_distinct": N,
        "N_rows": int(len(tokens)),
        "ceiling_rows": ceiling,
        "n": n,
        "n_pad": layout.n_pad,
        "V": V,
        "C": C,
        "D": layout.D,
        "m": layout.m,
        "banks": list(layout.banks),
        "table_sizes": list(layout.sizes),
        "slack": round(sum(layout.sizes) / N, 4),
        "attempts": attempt + 1,
        "depth": circ.depth,
        "max_weight_bits": max(circ.max_weight_bits(), int(layout.h_max).bit_length()),
        "word_bits": layout.word_bits,
        "h_bits": int(layout.h_max - 1).bit_length(),
        "label_bits": N * math.log2(C),
        "float64_floor_parameters": floor,
        "ratio_to_float64_floor": params["non_embedding"] / floor,
        "dense_feed_forward_size": circ.dense_size(),
    }
    report = {"seconds_solve": t_solve, "seconds_total": time.perf_counter() - t0}
    return memo, report
