r"""How many bits of label information a memorizing model must hold, by one definition used everywhere.

A token classifier that memorizes a data set (Kajitsuka & Sato, ICLR 2024, Corollary 1; and the bit
complexity discussion of Kajitsuka & Sato, ICLR 2025, "On the Optimal Memorization Capacity of
Transformers") maps each input — a sequence and a position — to a label. How much of that map the
*non-embedding* weights must store depends on what the embedding already stores: a token embedding has one
row per word, so it can hold one label per word for free. The information left for the rest of the network
is therefore the **label entropy given the word**, summed over tokens:

    I_word = Σ_tokens H(label | word) = Σ_w Σ_c n_{w,c} log2(n_w / n_{w,c})          (bits)

with n_{w,c} the number of tokens of word w with label c, n_w = Σ_c n_{w,c}. **Conflicts are excluded**:
tokens whose input (the whole sequence and the position, or the prefix for causal models) also occurs
with another, more frequent label cannot be memorized by any model; they are dropped before counting (only
the majority label of each identical input — the ceiling — remains). Two tokens are one input only if two
64-bit keys of their inputs agree, as in the certificate: the rolling hash `uatlab.data.keys.input_keys`
(linear mod 2^64, so colliding inputs can be built on purpose) and `uatlab.data.keys.salted_input_keys` over
values drawn from a random salt per run, which data written without knowing the salt makes collide with
probability about 2^-64 per pair of different inputs. This is the figure
``bits per non-embedding parameter`` divides: I_word / (non-embedding parameters).

Other figures reported beside it (same exclusion of conflicts):

* ``marginal_bits`` Σ_tokens −log2 p(label): the label entropy without the word; most of it is what
  the embedding stores, so it overstates what the other weights hold (it was the old figure);
* ``word_position_bits`` Σ_tokens H(label | word, position): what is left if a positional table could
  also hold one label per (word, position) pair;
* ``exception_code_bits``: a two-part code of the tokens whose label differs from their word's
  majority label: log2(T + 1) bits for their number E, log2 binom(T, E) for which tokens they are, and
  E·log2(C − 1) for their labels. An upper bound on what an encoder that knows each word's majority
  label needs (I_word ≤ it up to the cost of the majority labels, by the usual entropy-vs-code argument);
* ``uniform_label_bits`` T·log2 C: the information in T uniformly random labels (N·n·log2 C for N
  sequences of length n), the worst case the parameter count must allow for.

The **bit-complexity floor**: a model whose parameters are b-bit numbers holds at most b bits per
parameter, so it needs at least I / b parameters; ``bits per parameter`` compares a model against that.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from fractions import Fraction
from typing import Any

import numpy as np


@dataclass(frozen=True)
class LabelInformation:
    """Label-information figures of one data set (bits; see the module docstring for the definitions)."""

    tokens: int  # T, all tokens
    ceiling_tokens: int  # tokens left after excluding conflicts
    classes: int  # C, labels that occur
    words: int  # distinct words
    marginal_bits: float
    word_bits: float  # I_word, THE figure bits per parameter divide
    word_position_bits: float
    exceptions: int  # E, ceiling tokens whose label differs from their word's majority label
    exception_code_bits: float
    uniform_label_bits: float
    label_counts: tuple[int, ...] = ()  # ceiling tokens per label id
    # word_bits and word_position_bits as the exact sums of their per-(word, label) terms, so that the figures of a
    # data set split into parts (`merge_label_information`) are the same floats however it was split
    word_bits_exact: Fraction | None = field(default=None, repr=False, compare=False)
    word_position_bits_exact: Fraction | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.name.endswith("_exact")}


def _conditional_bits(group: np.ndarray, label: np.ndarray) -> Fraction:
    """Σ_tokens H(label | group) = Σ_g Σ_c n_gc log2(n_g / n_gc) for integer arrays (T,), as the exact sum of the
    float64 terms (`exact_sum`): a data set split into parts of disjoint groups sums to the same value."""
    if len(group) == 0:
        return Fraction(0)
    _, g = np.unique(group, return_inverse=True)
    C = int(label.max()) + 1
    pair, n_gc = np.unique(g.astype(np.int64) * C + label, return_counts=True)
    n_g = np.bincount(g)[pair // C]
    return exact_sum(n_gc * np.log2(n_g / n_gc))


def exact_sum(terms: np.ndarray) -> Fraction:
    """The exact sum of finite float64 ``terms`` (a Fraction; float() of it is the correctly rounded sum), whatever
    their order or grouping: each term is m·2^(e−53) with an integer 53-bit mantissa m (`np.frexp`), and the
    mantissas of one exponent are added as Python integers."""
    terms = np.asarray(terms, dtype=np.float64).reshape(-1)
    if not np.isfinite(terms).all():
        raise ValueError("exact_sum needs finite terms")
    mantissa, exponent = np.frexp(terms)  # terms = mantissa · 2^exponent, |mantissa| in [0.5, 1) (0 for 0)
    m = (mantissa * 2.0**53).astype(np.int64)  # exact: a float64 mantissa has 53 bits
    total = Fraction(0)
    for e in np.unique(exponent).tolist():
        total += Fraction(sum(m[exponent == e].tolist())) * Fraction(2) ** (e - 53)
    return total


def input_groups(key: np.ndarray, key2: np.ndarray | None = None) -> np.ndarray:
    """(T,) int64: one id per distinct input, tokens with equal ``key`` and equal ``key2`` (if given) sharing it.

    ``key``: `uatlab.data.keys.input_keys`; ``key2``: `uatlab.data.keys.salted_input_keys` under a salt drawn
    at random for the run (`uatlab.data.keys.fresh_salt`). The rolling key alone can be made to collide by data
    built for it; with both, two different inputs share an id with probability about 2^-64 (data written without
    knowing the salt).
    """
    key = np.asarray(key, dtype=np.int64)
    if key2 is None:
        return np.unique(key, return_inverse=True)[1].reshape(-1).astype(np.int64)
    key2 = np.asarray(key2, dtype=np.int64)
    if len(key2) != len(key):
        raise ValueError(f"{len(key2)} second keys for {len(key)} keys")
    order = np.argsort(key, kind="stable")
    k, k2 = key[order], key2[order]
    same = k[1:] == k[:-1]
    if not (k2[1:][same] == k2[:-1][same]).all():  # a key shared by two inputs: sort by the second key too
        order = np.lexsort((key2, key))
        k, k2 = key[order], key2[order]
        same = k[1:] == k[:-1]
    # with every run of equal keys sorted by key2 (one key2 per run in the usual case), an input starts wherever
    # either key changes
    new = np.r_[True, ~same | (k2[1:] != k2[:-1])] if len(k) else np.zeros(0, dtype=bool)
    ids = np.empty(len(key), dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    return ids


def ceiling_mask(key: np.ndarray, label: np.ndarray, key2: np.ndarray | None = None) -> np.ndarray:
    """(T,) bool: True for the tokens a ceiling-reaching model gets right — per identical input (equal
    ``key`` and, if given, equal salted ``key2``: `input_groups`), the tokens of its most frequent label (ties:
    the label seen first); the rest are conflicts."""
    T = len(key)
    if T == 0:
        return np.zeros(0, dtype=bool)
    inp = input_groups(key, key2)
    C = int(label.max()) + 1
    pair = inp.astype(np.int64) * C + label
    uniq, first, inv, counts = np.unique(pair, return_index=True, return_inverse=True, return_counts=True)
    p_inp = uniq // C
    best = np.lexsort((first, -counts, p_inp))  # per input: highest count, then earliest in data order
    is_first = np.r_[True, p_inp[best][1:] != p_inp[best][:-1]]
    winner = np.zeros(len(uniq), dtype=bool)
    winner[best[is_first]] = True
    return winner[inv]


def label_information(
    word: np.ndarray,
    label: np.ndarray,
    pos: np.ndarray,
    key: np.ndarray,
    num_labels: int | None = None,
    key2: np.ndarray | None = None,
) -> LabelInformation:
    """The figures of the module docstring from per-token integer arrays, each (T,): word id, label id,
    position in the sequence, input key (``input_keys``) and second, salted input key ``key2``
    (``salted_input_keys`` under a salt drawn for the run): two tokens are one input only if both agree
    (`input_groups`; without ``key2``, equal ``key`` alone, which data built for it can make collide).
    ``num_labels``: C (default: the labels that occur)."""
    word, label, pos, key = (np.asarray(a, dtype=np.int64) for a in (word, label, pos, key))
    T = len(word)
    keep = ceiling_mask(key, label, key2)
    w, y, p = word[keep], label[keep], pos[keep]
    Tc = len(w)
    C = num_labels if num_labels is not None else (int(len(np.unique(label))) if T else 0)
    counts = np.bincount(y, minlength=num_labels or 0)
    if Tc:
        nz = counts > 0
        marginal = float((counts[nz] * np.log2(Tc / counts[nz])).sum())
        # majority label per word (ties: smallest label id — any choice gives the same E only up to ties)
        C1 = int(y.max()) + 1
        pair, n_wc = np.unique(w * C1 + y, return_counts=True)
        order = np.lexsort((pair % C1, -n_wc, pair // C1))
        first = np.r_[True, (pair // C1)[order][1:] != (pair // C1)[order][:-1]]
        majority_count = int(n_wc[order][first].sum())
        E = Tc - majority_count
        p_max = int(p.max()) + 1
        word_pos = _conditional_bits(w * p_max + p, y)
    else:
        marginal, E, word_pos = 0.0, 0, Fraction(0)
    word_bits = _conditional_bits(w, y)
    two_part = math.log2(Tc + 1) + _log2_binom(Tc, E) + E * math.log2(max(C - 1, 1))
    return LabelInformation(
        tokens=T,
        ceiling_tokens=Tc,
        classes=C,
        words=int(len(np.unique(word))),
        marginal_bits=marginal,
        word_bits=float(word_bits),
        word_position_bits=float(word_pos),
        exceptions=E,
        exception_code_bits=two_part,
        uniform_label_bits=T * math.log2(C) if C > 1 else 0.0,
        label_counts=tuple(int(c) for c in counts),
        word_bits_exact=word_bits,
        word_position_bits_exact=word_pos,
    )


def merge_label_information(parts: list[LabelInformation]) -> LabelInformation:
    """The figures of a data set split into parts with disjoint words (e.g. the compiler's word buckets):
    every per-word sum adds up; the marginal entropy and the two-part code are recomputed from the totals."""
    T = sum(p.tokens for p in parts)
    Tc = sum(p.ceiling_tokens for p in parts)
    C = max((p.classes for p in parts), default=0)
    counts = np.zeros(max((len(p.label_counts) for p in parts), default=0), dtype=np.int64)
    for p in parts:
        counts[: len(p.label_counts)] += np.asarray(p.label_counts, dtype=np.int64)
    nz = counts > 0
    E = sum(p.exceptions for p in parts)
    # per-word sums: exact when every part carries them (the same float however the words were split)
    exact = all(p.word_bits_exact is not None and p.word_position_bits_exact is not None for p in parts)
    word_bits = sum((p.word_bits_exact for p in parts), Fraction(0)) if exact else None
    word_pos = sum((p.word_position_bits_exact for p in parts), Fraction(0)) if exact else None
    return LabelInformation(
        tokens=T,
        ceiling_tokens=Tc,
        classes=C,
        words=sum(p.words for p in parts),
        marginal_bits=float((counts[nz] * np.log2(Tc / counts[nz])).sum()) if Tc else 0.0,
        word_bits=float(word_bits) if exact else sum(p.word_bits for p in parts),
        word_position_bits=float(word_pos) if exact else sum(p.word_position_bits for p in parts),
        exceptions=E,
        exception_code_bits=math.log2(Tc + 1) + _log2_binom(Tc, E) + E * math.log2(max(C - 1, 1)),
        uniform_label_bits=T * math.log2(C) if C > 1 else 0.0,
        label_counts=tuple(int(c) for c in counts),
        word_bits_exact=word_bits,
        word_position_bits_exact=word_pos,
    )


def _log2_binom(n: int, k: int) -> float:
    return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)) / math.log(2)


def label_information_of(records: Iterable[tuple[list[str], list[str]]], context: str = "sequence") -> LabelInformation:
    """`label_information` of string records (tokens, labels); ``context`` "sequence" (the model sees
    the whole sequence) or "prefix" (causal). Inputs are told apart by both keys, the salted one under a salt
    drawn at random for this call (`uatlab.data.keys.fresh_salt`)."""
    from uatlab.data.keys import freshly_salted_input_keys, input_keys_of_words

    tok_id: dict[str, int] = {}
    lab_id: dict[str, int] = {}
    W: list[int] = []
    Y: list[int] = []
    P: list[int] = []
    K: list[int] = []
    lengths: list[int] = []
    for rec in records:
        toks, labs = rec[0], rec[1]
        W += [tok_id.setdefault(t, len(tok_id)) for t in toks]
        Y += [lab_id.setdefault(y, len(lab_id)) for y in labs]
        P += range(len(toks))
        K.append(list(toks))
        lengths.append(len(toks))
    word = np.array(W, dtype=np.int64)
    key2 = freshly_salted_input_keys(word, lengths, context)
    keys = input_keys_of_words(K, context)
    return label_information(word, np.array(Y, dtype=np.int64), np.array(P, dtype=np.int64), keys, key2=key2)


def bits_per_parameter(info: LabelInformation, parameters: int) -> float:
    """I_word / parameters: label bits (given the word) held per non-embedding parameter."""
    return info.word_bits / max(parameters, 1)
