"""The sequence-to-sequence memorizer with a deep feed-forward network: a label for every token.

Kajitsuka & Sato, "On the Optimal Memorization Capacity of Transformers" (ICLR 2025), sequence-to-sequence
theorem: N sequences of length n with a label per token are memorized by one self-attention layer followed
by a (deep) feed-forward network with Õ(√(nN)) parameters: the attention layer gives every sequence an id,
each token's id is that id combined with the token's own position, and a ReLU network recovers the n·N
labels from packed weights by bit extraction (Vardi, Yehudai & Shamir, ICLR 2022). This module is our
derivation of that construction (the paper's proof is not reproduced verbatim); it reuses the next-token
memorizer's retrieval circuit (`uatlab.constructions.paper_c.next_token_memorizer`).

**Input encoding** (tokens as vectors; ours: a token-position table ν, a positional value μ and one number
per word v). The model's context is n' = 2^⌈log2 n_max⌉ positions; a sentence of n ≤ n' tokens is padded
with the pad token to n'. Token w at position j is

    x_j = (ν[j, w], 1, μ_j, v[w]) ∈ R^4,     ν[j, w] ∈ [0, R − 1) random, ν[j, pad] = 0, μ_j ∈ [1, n'(R−1)],

with v[w] = 1 + (the word's label) when every ceiling token of w has that one label, and v[w] = 0 for the
*ambiguous* words (one label per word: what the information definition lets the embedding hold).

**Attention (rank 1, single head, paper A's F^(SA) with skip; s = 1, d = 4).**

    W^(K) = e_2^T,  W^(Q) = e_2^T,  W^(V) = e_1^T,  W^(O) = n'·e_3                         (each rank 1)

All logits are equal, the softmax weights are exactly 1/n' (the paper's averaging attention), and the
third coordinate of token j becomes its *token id*

    k_j = μ_j + n'·(1/n') Σ_i ν[i, w_i] = μ_j + S,      S = Σ_i ν[i, w_i]  (the sentence id)        (1)

an integer < 2n'(R − 1) + 1 = h_max. Distinct (sentence, position) pairs get distinct ids unless two random
sums collide; the compiler checks it on the data and redraws ν, μ if two ids with different labels meet.
In float64 (h_max ≤ 2^50, n' a power of two) every product and partial sum of (1) is a dyadic rational
with numerator < 2^53: (1) is exact in floating point.

**Feed-forward network (deep, integer weights).** Reads (k_j, v[w_j]); every stage is a stack of ReLU
layers with integer weights, exact on integer inputs (gadgets G1, G2 of
`uatlab.constructions.paper_c.circuit_stages`):

0. gate (two layers): a = ReLU(1 − v) = 1[v = 0], g = ReLU(k − B + B·a) with B = h_max, so g = k for
   ambiguous words and g = 0 otherwise (|terms| ≤ 3·h_max);
1. slots: s_t = g mod K_t for three tables of K_t = D·K'_t slots (K'_t pairwise coprime), written
   s_t = o + D(r_t + m·b_t); since D divides every K_t the offset o = g mod D is the same in all three;
2. words: table t is packed into words W_t[b][r] = Σ_o T_t[o + D(r + m b)]·β^o with β = 3(C' − 1) + 1
   (C' = C + 1), and looked up one table after the other by an interpolating layer: with p_k = ReLU(b − k)
   and a±_j = ReLU(±(r − j)),  e_j = ReLU(W[0][j] + Σ_k s_{k,j} p_k − K(a+_j + a−_j)),  s = the second
   differences of column j, so e_j = W[b][j]·1[r = j] (K = β^D); the words are these weights, and the
   layer's dense size is ≈ m·(B + 2m), about the number of words;
3. S = S_1 + S_2 + S_3 (linear): digit o of S in base β is T_1[s_1] + T_2[s_2] + T_3[s_3] ≤ 3(C' − 1) < β,
   no carry; one digit extraction (two layers per bit) reads it;
4. y_ret = digit mod C' (two comparisons). The tables are solved (hypergraph peeling, Botelho, Pagh &
   Ziviani 2007) so that y_ret = 1 + label on every ambiguous ceiling token's id and y_ret = 0 at g = 0.

**Readout** (linear, reads y_ret and v): y = y_ret + v − 1, logit_c = 2c·y − c², so
logit_y − logit_c = (y − c)² ≥ 1: ambiguous tokens get y = label, the others y = 0 + (1 + label) − 1.

**Bound.** K = K_amb + 1 keys (K_amb: distinct (sentence, position) pairs of ambiguous words) in
≈ 1.25·K/D words of D·log2 β bits; floating point limits β^D·(1 + (B − 1)B + 2m) ≤ 2^52 (B banks).
Dense non-embedding parameters ≈ 1.25·K/D·(1 + 2m/B) for the word layers + O(D·log β·w²) for the
digit extraction (width w ≈ 8) + O(log h_max) for the slots: linear in the ambiguous tokens with a small
constant; in the paper's exact regime (unbounded words) D and the banks grow as Θ(√(nN)) and the count is
Õ(√(nN)). Float32 (ids and words ≤ 21–23 bits) holds a few hundred keys; the layout raises PrecisionError
before building beyond that.

Notation map (paper → ours): sequence id from the averaging SA → S; token id (sequence id, position) → k_j
(1); crafted weights and bit extraction → packed words and digit extraction; N, n, C as in the paper.
Differences: labels are indexed through a retrieval structure (three hashed slots sharing one offset)
instead of stored with their ids, and only ambiguous words' tokens are keys (the embedding's one label per
word covers the others).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from uatlab._util import check_integer
from uatlab.constructions.paper_c.circuit_stages import extract_digit, mixed_radix_digits, residues, sum_mod
from uatlab.constructions.paper_c.layout import RETRIEVAL_SLACK
from uatlab.constructions.paper_c.relu_circuit import Circuit, Lin, evaluate_exact
from uatlab.constructions.paper_c.retrieval import solve_retrieval
from uatlab.data.ids import integer_ids
from uatlab.errors import InputError

PAPER = "Kajitsuka & Sato, ICLR 2025"
THEOREM = (
    "sequence-to-sequence memorization with Õ(√(nN)) parameters (one self-attention layer + deep feed-forward network)"
)


@dataclass
class Seq2SeqData:
    """Sentences as one padded id array plus the ceiling of every token."""

    ids: np.ndarray  # (U, n') distinct sentences, padded with V
    lengths: np.ndarray  # (U,)
    sentence_of: np.ndarray  # (S,) distinct-sentence index of every input sentence
    token_sentence: np.ndarray  # (T,) input sentence of every token
    token_pos: np.ndarray  # (T,)
    token_word: np.ndarray  # (T,)
    token_label: np.ndarray  # (T,)
    majority: np.ndarray  # (T,) the majority label of the token's input (ties: the label seen first)

    @property
    def ceiling(self) -> np.ndarray:
        return self.token_label == self.majority


def _id_row(values: Any, i: int, kind: str) -> np.ndarray:
    """Sentence i's token or label ids as int64: InputError naming the sentence and position for a fractional,
    non-finite or non-numeric id (``astype(int64)`` would truncate 1.9 to 1) or a row that is not 1-D."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise InputError(f"sentence {i}: the {kind} ids must be one row (1-D), got shape {arr.shape}")
    try:
        return integer_ids(arr, kind, position="position")
    except InputError as exc:
        raise InputError(f"sentence {i}: {exc}") from None


def prepare(sentences: list[np.ndarray], labels: list[np.ndarray], V: int, n_pad: int | None = None) -> Seq2SeqData:
    """Distinct sentences, padded with the pad id V to ``n_pad`` positions (default n' = 2^⌈log2 n_max⌉; a
    compiled model's context when its certificate is re-run on other data), and each token's majority label (the
    ceiling). ``sentences`` and ``labels`` may be lists of rows or 2-D arrays (one row per sentence)."""
    try:  # a 2-D array: its rows (its truth value is ambiguous)
        sentences, labels = list(sentences), list(labels)
    except TypeError:
        raise InputError(
            f"sentences and labels must be lists of id rows (or 2-D arrays), got {type(sentences).__name__} and "
            f"{type(labels).__name__}"
        ) from None
    if not sentences or len(sentences) != len(labels):
        raise InputError(f"need ≥ 1 sentence and one label row per sentence, got {len(sentences)} and {len(labels)}")
    sentences, labels = (
        [_id_row(s, i, "token") for i, s in enumerate(sentences)],
        [_id_row(y, i, "label") for i, y in enumerate(labels)],
    )
    for i, (s, y) in enumerate(zip(sentences, labels, strict=True)):
        if len(s) == 0 or len(s) != len(y):
            raise InputError(f"sentence {i}: {len(s)} tokens and {len(y)} labels (need equal, ≥ 1)")
    n_max = max(len(s) for s in sentences)
    if n_pad is None:
        n_pad = 1 << max(0, (n_max - 1).bit_length())
    elif n_pad < n_max:
        raise InputError(f"a sentence has {n_max} tokens, more than the {n_pad} positions to pad to")
    index: dict[tuple[int, ...], int] = {}
    sentence_of = np.asarray([index.setdefault(tuple(int(t) for t in s), len(index)) for s in sentences])
    ids = np.full((len(index), n_pad), V, dtype=np.int64)
    lengths = np.zeros(len(index), dtype=np.int64)
    for s, u in index.items():
        ids[u, : len(s)] = s
        lengths[u] = len(s)
    lens = np.asarray([len(s) for s in sentences])
    tok_sent = np.repeat(np.arange(len(sentences)), lens)
    tok_pos = np.concatenate([np.arange(n) for n in lens])
    tok_word = np.concatenate([np.asarray(s, dtype=np.int64) for s in sentences])
    tok_label = np.concatenate([np.asarray(y, dtype=np.int64) for y in labels])
    if tok_word.min() < 0 or tok_word.max() >= V:
        raise InputError(f"token ids must lie in [0, {V})")
    C = int(tok_label.max()) + 1
    inp = sentence_of[tok_sent] * n_pad + tok_pos  # identical inputs: same distinct sentence and position
    pair = inp * C + tok_label
    uniq, first, inv, counts = np.unique(pair, return_index=True, return_inverse=True, return_counts=True)
    p_inp = uniq // C
    best = np.lexsort((first, -counts, p_inp))
    is_first = np.r_[True, p_inp[best][1:] != p_inp[best][:-1]]
    winners = uniq[best[is_first]]
    maj_of_inp = dict(zip((winners // C).tolist(), (winners % C).tolist(), strict=True))
    majority = np.asarray([maj_of_inp[i] for i in inp.tolist()], dtype=np.int64)
    return Seq2SeqData(ids, lengths, sentence_of, tok_sent, tok_pos, tok_word, tok_label, majority)


def word_labels(data: Seq2SeqData, V: int) -> np.ndarray:
    """v[w] (V+1,): 1 + label if every ceiling token of w has that label, 0 if w is ambiguous or unseen."""
    keep = data.ceiling
    w, y = data.token_word[keep], data.token_label[keep]
    lo = np.full(V + 1, np.iinfo(np.int64).max)
    hi = np.full(V + 1, -1)
    np.minimum.at(lo, w, y)
    np.maximum.at(hi, w, y)
    return np.where((hi >= 0) & (lo == hi), hi + 1, 0).astype(np.int64)


@dataclass
class Seq2SeqMemorizer:
    """A compiled seq2seq memorizer (exact integer weights) and what it relies on."""

    layout: DeepLayout
    context: int  # n', the model's context length (a power of two)
    nu: np.ndarray  # (n', V+1) int64 token-position values; column V is the pad token (0)
    mu: np.ndarray  # (n',) int64 positional values ≥ 1
    v: np.ndarray  # (V+1,) int64 one label per word (1 + label) or 0 (ambiguous)
    V: int
    C: int  # classes
    circuit: Circuit
    seed: int
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def h_max(self) -> int:
        """Exclusive bound of the token ids (1)."""
        return self.layout.h_max

    def token_ids(self, ids: np.ndarray) -> np.ndarray:
        """(U, n') exact token ids k_j = μ_j + Σ_i ν[i, w_i] (1) of padded sentences (U, n')."""
        if ids.ndim != 2 or ids.shape[1] != self.context:  # (a narrower array would broadcast: another input)
            raise InputError(f"sentences padded to {ids.shape[-1]} positions, the model's context is {self.context}")
        S = self.nu[np.arange(self.context)[None, :], ids].sum(axis=1)  # (U,) < 2^50: int64 is exact
        return self.mu[None, :] + S[:, None]

    def attention_weights(self) -> dict[str, np.ndarray]:
        """W_Q, W_K, W_V (1×4) and W_O (4×1) of the rank-1 head."""
        e = np.eye(4)
        return {
            "W_Q": e[1:2].copy(),
            "W_K": e[1:2].copy(),
            "W_V": e[0:1].copy(),
            "W_O": float(self.context) * e[:, 2:3],
        }

    def predict_exact(self, keys: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Exact label per token from its id k and its word's v (both (P,) int64)."""
        (y_ret,) = evaluate_exact(self.circuit, [keys, v])
        return np.asarray([int(t) for t in y_ret], dtype=np.int64) + v - 1

    @property
    def parameters(self) -> dict[str, int]:
        d = 4
        emb = int(self.nu.size + self.mu.size + self.v.size)
        attn = 4 * (1 + d)  # four rank-1 matrices as outer products (s + d each)
        readout = 3 * self.C  # logit_c = 2c·(y_ret + v) − (2c + c²): two weights and a bias per class
        ff_nonzero = self.circuit.parameters
        ff_dense = self.circuit.dense_size()
        return {
            "embedding": emb,
            "attention": attn,
            "feed_forward_nonzero": ff_nonzero,
            "feed_forward_dense": ff_dense,
            "readout": readout,
            "non_embedding": attn + ff_dense + readout,
            "non_embedding_nonzero": attn + ff_nonzero + readout,
            "total": emb + attn + ff_dense + readout,
        }


def _carry_layer(circuit: Circuit, regs: dict[str, Lin], extra: list[Lin]) -> tuple[dict[str, Lin], list[Lin]]:
    """One layer: every live register (≥ 0, carried as ReLU(x) = x) and the extra units."""
    names = [k for k, v in regs.items() if v.terms or v.const]
    units = circuit.add_layer([regs[k] for k in names] + extra)
    return dict(zip(names, units[: len(names)], strict=True)) | {
        k: v for k, v in regs.items() if not (v.terms or v.const)
    }, units[len(names) :]


def _one(u: Lin) -> int:
    (k,) = u.terms
    return k


@dataclass(frozen=True)
class DeepLayout:
    """Sizes of the seq2seq circuit: K_t = D·K'_t slots per table (K'_t pairwise coprime), so every key has
    the same offset o = k mod D in the three tables; D digits of base 3C' − 2 per word, m words per bank."""

    regime: str
    C: int  # C' = classes + 1 (the retrieval's modulus)
    D: int
    m: int
    cores: tuple[int, int, int]  # K'_t
    context: int  # n'
    value_range: int  # R

    @property
    def base(self) -> int:
        return 3 * (self.C - 1) + 1  # three table digits add up without a carry

    @property
    def sizes(self) -> tuple[int, int, int]:
        return tuple(self.D * k for k in self.cores)  # type: ignore[return-value]

    @property
    def banks(self) -> tuple[int, int, int]:
        return tuple(-(-k // self.m) for k in self.cores)  # type: ignore[return-value]

    @property
    def h_max(self) -> int:
        """Exclusive bound of the token ids (1): k < n'(R − 2) + n'(R − 1) + 1."""
        return 2 * self.context * (self.value_range - 1) + 1

    @property
    def word_bound(self) -> int:
        return self.base**self.D


ID_BITS = {"float64": 50, "float32": 21}
GATE_LAYERS = 2  # the circuit's first two layers compute the gated id g (stage 0)
FLOAT_BITS = {"float64": 52, "float32": 23}  # every |term| sum stays ≤ 2^53 / 2^24 with a factor 2 to spare


def choose_deep_layout(K: int, C1: int, context: int, regime: str, slack: float, name_fit: bool = True) -> DeepLayout:
    """(D, m) with the fewest dense parameters (built and counted) among those whose float bound holds.

    Float bound of the word layer: word_bound·(1 + (B − 1)B + 2m) ≤ 2^FLOAT_BITS (B banks). The ids need
    log2(8·D·K'_1K'_2K'_3) bits (three independent slots, as in the next-token layout) or at least the
    pairwise 8·D·K'_tK'_u; raises PrecisionError when not even that fits the regime.
    """
    from uatlab.constructions.paper_c.layout import coprime_sizes
    from uatlab.errors import PrecisionError

    base = 3 * (C1 - 1) + 1
    best = None
    feasible = 0
    for D in range(max(1, FLOAT_BITS[regime] // max(1, (base - 1).bit_length())), 0, -1):
        if base**D > 2 ** FLOAT_BITS[regime] or feasible >= 3:  # the largest three feasible D
            continue
        cores = coprime_sizes(max(1, math.ceil(slack * K / (3 * D))))
        need = (8 * D * math.prod(cores)).bit_length()
        pair = (8 * D * cores[1] * cores[2]).bit_length()
        if pair > ID_BITS[regime]:
            continue
        bits = min(need, ID_BITS[regime])
        feasible_d = False
        for m in (1, 2, 4, 8, 16, 32, 64, 128):
            B = -(-cores[2] // m)
            if base**D * (1 + (B - 1) * B + 2 * m) > 2 ** FLOAT_BITS[regime]:
                continue
            lay = DeepLayout(regime, C1, D, m, cores, context, max(3, (1 << bits) // (2 * context)))
            dense = _dense_size(lay)
            feasible_d = True
            if best is None or dense < best[0]:
                best = (dense, lay)
        feasible += int(feasible_d)
    if best is None:
        fit = _largest_fit(C1, context, regime) if name_fit and K > 1 else "smaller"
        raise PrecisionError(
            f"{regime}: {K} keys (tokens of ambiguous words) need token ids of more than {ID_BITS[regime]} bits "
            f"(pairwise independent slots); the largest number of keys that fits is {fit}; use float64"
        )
    return best[1]


def _largest_fit(C1: int, context: int, regime: str) -> int:
    """The largest key count :func:`choose_deep_layout` accepts (bisection; the error message names it)."""
    from uatlab.errors import PrecisionError

    def fits(K: int) -> bool:
        try:
            choose_deep_layout(K, C1, context, regime, RETRIEVAL_SLACK + 2.0 / math.sqrt(K), name_fit=False)
        except PrecisionError:
            return False
        return True

    lo, hi = 0, 2
    while fits(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


@functools.lru_cache(maxsize=256)
def _dense_size(layout: DeepLayout) -> int:
    """Dense size of the circuit for this layout (the widths do not depend on the table contents)."""
    return build_circuit(layout, [np.zeros(k, dtype=np.int64) for k in layout.sizes]).dense_size()


def select_and_sum(
    circuit: Circuit, regs: dict[str, Lin], layout: DeepLayout, words: list[np.ndarray]
) -> tuple[dict[str, Lin], Lin]:
    """S = Σ_t words[t][b_t][r_t] (three interpolated lookups, one per table; b_t = t{t}_2, r_t = t{t}_1).

    For table t (B banks, m words per bank), with b, r integers:
    Layer A: p_k = ReLU(b − k), k = 0 … B − 2, and a±_j = ReLU(±(r − j)), j < m.
    Layer C: e_j = ReLU(W[0][j] + Σ_k s_{k,j} p_k − K(a+_j + a−_j)), with s_{0,j} = W[1][j] − W[0][j] and
             s_{k,j} = W[k+1][j] − 2W[k][j] + W[k−1][j]: the piecewise-linear interpolant of column j through
             (c, W[c][j]) is exact at integer b, so e_j = ReLU(W[b][j] − K|r − j|) = W[b][j]·1[r = j] (G2,
             K = word_bound > every word). The words live in these weights.
    S_t = Σ_j e_j. Float bound of layer C: |terms| ≤ K(1 + (B − 1)B + 2m).
    """
    K = layout.word_bound
    pending = {k: v for k, v in regs.items() if not k.startswith(("t0_", "t1_", "t2_"))}
    pending["o"] = regs.get("t0_0", Lin())
    todo = {t: (regs.get(f"t{t}_2", Lin()), regs.get(f"t{t}_1", Lin())) for t in range(3)}
    total = Lin()
    for t in range(3):
        W = words[t]  # (B, m) object
        B, m = W.shape
        b, r = todo.pop(t)
        carry = dict(pending) | {f"__b{u}": todo[u][0] for u in todo} | {f"__r{u}": todo[u][1] for u in todo}
        carry["__sum"] = total
        units = [b - k for k in range(B - 1)]
        if m > 1:
            units += [u for j in range(m) for u in (r - j, j - r)]
        carried, A = _carry_layer(circuit, carry, units)
        slopes = np.zeros((max(B - 1, 0), m), dtype=object)
        if B > 1:
            slopes[0] = W[1] - W[0]
            slopes[1:] = W[2:] - 2 * W[1:-1] + W[:-2]
        e_units = []
        for j in range(m):
            u = Lin({_one(A[k]): int(slopes[k, j]) for k in range(B - 1)}, int(W[0, j]))
            if m > 1:
                u = u - (A[B - 1 + 2 * j] + A[B - 1 + 2 * j + 1]) * K
            e_units.append(u)
        carried, E = _carry_layer(circuit, carried, e_units)
        total = carried.pop("__sum", Lin())
        for e in E:
            total = total + e
        todo = {u: (carried.pop(f"__b{u}"), carried.pop(f"__r{u}")) for u in todo}
        pending = carried
    return pending, total


def build_circuit(layout: DeepLayout, tables: list[np.ndarray]) -> Circuit:
    """The feed-forward circuit (stages 0–4 of the module docstring), reading (k, v)."""
    Bh = layout.h_max
    circ = Circuit(n_inputs=2)
    k, v = circ.inputs()
    k1, a = circ.add_layer([k, 1 - v])  # k ≥ 0 carried; a = 1[v = 0] for integer v ≥ 0
    (g,) = circ.add_layer([k1 - Bh + a * Bh])  # g = k if v = 0, else 0 (k < Bh)
    regs = residues(circ, {"h": g}, "h", list(layout.sizes), Bh, prefix="s")
    for t in range(3):  # s_t = o + D(r_t + m b_t), the same o in every table (D divides K_t)
        regs = mixed_radix_digits(
            circ, regs, f"s{t}", [layout.D, layout.m, layout.banks[t]], layout.sizes[t], prefix=f"t{t}_"
        )
    place = np.asarray([layout.base**o for o in range(layout.D)], dtype=object)
    words = []
    for t in range(3):
        full = np.zeros(layout.D * layout.m * layout.banks[t], dtype=np.int64)
        full[: layout.sizes[t]] = tables[t]
        T = full.reshape(layout.banks[t], layout.m, layout.D).astype(object)  # slot o + D(r + m b) → [b, r, o]
        words.append((T * place[None, None, :]).sum(axis=2))
    regs, S = select_and_sum(circ, regs, layout, words)
    regs = extract_digit(circ, {"S": S, "o": regs["o"]}, ["S"], ["o"], ["d"], layout.base, layout.D)
    regs = sum_mod(circ, regs, ["d"], layout.C, out="y")
    circ.add_layer([regs["y"]])
    return circ


#: the steps of `compile_seq2seq` that its progress callback reports (stage "construct")
CONSTRUCT_STEPS = ("distinct sentences and ceiling", "layout and retrieval tables", "feed-forward circuit")
ProgressFn = Callable[[str, int, int | None], None]


def _unsolvable(
    sentences: list[np.ndarray],
    layout: DeepLayout,
    K: int,
    tries: int,
    clashes: int,
    where: Callable[[int], str] | None,
) -> InputError:
    """The error when no draw of ν, μ gave solvable retrieval tables: it names the longest sentence, which sets
    the context n' and with it how far apart the ids of the other (shorter) sentences can be drawn."""
    lengths = np.asarray([len(s) for s in sentences])
    i = int(lengths.argmax())
    name = where(i) if where is not None else f"sentence {i}"
    mean = float(lengths.mean())
    cause = f"in {clashes} of them two tokens of different labels got the same id" if clashes else ""
    if clashes < tries:
        cause += f"{'; in the others' if clashes else 'in every one'} the hashed slots could not be peeled"
    hint = (
        f"; it is far longer than the mean ({mean:.1f}), and the ids of sentences much shorter than the context "
        "lie close together: split the longest sentences or compile them separately"
        if lengths[i] >= 4 * mean
        else ""
    )
    return InputError(
        f"{name}: the retrieval tables were not solvable in {tries} draws of the token values ({K} keys; {cause}): "
        f"the longest sentence ({lengths[i]} tokens) sets the context to n' = {layout.context} positions and the "
        f"ids k = μ_j + Σ_i ν[i, w_i] < {layout.h_max}{hint}"
    )


def compile_seq2seq(
    sentences: list[np.ndarray],
    labels: list[np.ndarray],
    V: int,
    C: int,
    regime: str = "float64",
    seed: int = 0,
    max_tries: int = 12,
    progress: ProgressFn | None = None,
    where: Callable[[int], str] | None = None,
) -> tuple[Seq2SeqMemorizer, Seq2SeqData, dict[str, Any]]:
    """Compile labelled sentences (ids in [0, V), labels in [0, C)) into the deep memorizer.

    Returns the memorizer, the prepared data (for the certificate) and a report (seconds, attempts).
    regime 'float64' or 'float32' (every weight and intermediate value an integer ≤ 2^53 / 2^24); raises
    PrecisionError before building when the keys do not fit the regime, and InputError naming the longest
    sentence (``where(i)``, default "sentence i") when the token ids of different labels collide in every one
    of ``max_tries`` draws of ν, μ. ``progress(stage, done, total)`` is told each of the `CONSTRUCT_STEPS`
    as it ends (stage ``"construct"``); it does not change the result.
    """
    t0 = time.perf_counter()
    seed = check_integer(seed, "seed", 0, 2**32 - 1)
    if regime not in ("float64", "float32"):
        raise InputError(f"regime must be float64 or float32, got {regime!r}")
    if max_tries < 1:
        raise InputError(f"max_tries must be ≥ 1, got {max_tries}")

    def step(done: int) -> None:
        if progress is not None:
            progress("construct", done, len(CONSTRUCT_STEPS))

    step(0)
    data = prepare(sentences, labels, V)
    step(1)
    if data.token_label.max() >= C or data.token_label.min() < 0:
        raise InputError(f"labels must lie in [0, {C})")
    n_pad = data.ids.shape[1]
    v = word_labels(data, V)
    # the keys: ambiguous words' distinct (sentence, position) inputs, ceiling tokens only
    amb = data.ceiling & (v[data.token_word] == 0)
    inp = data.sentence_of[data.token_sentence[amb]] * n_pad + data.token_pos[amb]
    inp_u, first = np.unique(inp, return_index=True)
    key_sent, key_pos = inp_u // n_pad, inp_u % n_pad
    key_label = data.token_label[amb][first] + 1  # 1 + label ∈ [1, C]
    K = len(inp_u) + 1  # + the gate's key 0
    clashes = 0  # draws in which two keys of different labels got the same id
    for attempt in range(max_tries):
        # the keys split into D independent peeling problems (one per offset): slack for ~K/D keys each
        layout = choose_deep_layout(K, C + 1, n_pad, regime, RETRIEVAL_SLACK + 2.0 / math.sqrt(K))
        slack = (RETRIEVAL_SLACK + 3.0 / math.sqrt(K / layout.D)) * (1.05**attempt)
        layout = choose_deep_layout(K, C + 1, n_pad, regime, slack)
        R = layout.value_range
        rng = np.random.default_rng([seed, attempt])
        nu = rng.integers(0, R - 1, size=(n_pad, V + 1), dtype=np.int64)
        nu[:, V] = 0
        mu = rng.integers(1, n_pad * (R - 1) + 1, size=n_pad, dtype=np.int64)
        S = nu[np.arange(n_pad)[None, :], data.ids].sum(axis=1)  # (U,)
        keys = np.r_[0, S[key_sent] + mu[key_pos]]
        labs = np.r_[0, key_label]
        order = np.unique(keys, return_index=True)[1]
        if len(order) != K:  # two inputs share an id: merge if their labels agree, else redraw
            uk, inv = np.unique(keys, return_inverse=True)
            lab_of = np.full(len(uk), -1)
            clash = False
            for i, lab in zip(inv.tolist(), labs.tolist(), strict=True):
                if lab_of[i] not in (-1, lab):
                    clash = True
                    break
                lab_of[i] = lab
            if clash:
                clashes += 1
                continue
            keys, labs = uk, lab_of
        slots = np.stack([keys % k for k in layout.sizes], axis=1)
        tables = solve_retrieval(slots, labs, layout.sizes, C + 1)
        if tables is not None:
            break
    else:
        raise _unsolvable(sentences, layout, K, max_tries, clashes, where)
    step(2)
    t_solve = time.perf_counter() - t0
    circ = build_circuit(layout, tables)
    step(3)
    memo = Seq2SeqMemorizer(layout, n_pad, nu, mu, v, V, C, circ, seed)
    params = memo.parameters
    memo.facts = {
        "paper": PAPER,
        "theorem": THEOREM,
        "regime": regime,
        "parameters": params,
        "context": n_pad,
        "sentences": len(sentences),
        "distinct_sentences": int(data.ids.shape[0]),
        "tokens": int(len(data.token_label)),
        "ceiling_tokens": int(data.ceiling.sum()),
        "ambiguous_words": int(((v[:V] == 0) & (np.bincount(data.token_word, minlength=V) > 0)).sum()),
        "keys": int(len(keys)),
        "C": C,
        "D": layout.D,
        "m": layout.m,
        "banks": list(layout.banks),
        "table_sizes": list(layout.sizes),
        "digit_base": layout.base,
        "attempts": attempt + 1,
        "depth": circ.depth,
        "max_weight_bits": max(circ.max_weight_bits(), int(layout.h_max).bit_length()),
        "word_bits": int(layout.word_bound - 1).bit_length(),
        "id_bits": int(layout.h_max - 1).bit_length(),
    }
    return memo, data, {"seconds_solve": t_solve, "seconds_total": time.perf_counter() - t0}
