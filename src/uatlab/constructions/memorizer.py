r"""Compile a labelled sequence data set into a one-layer, one-head, rank-1 softmax Transformer.

The compiled model is an ordinary :class:`uatlab.models.Transformer` (token embedding, 'given'
positional encoding, ONE block F^(FF)∘F^(SA) with ONE head whose W_Q, W_K, W_V, W_O have rank 1, a
linear readout) that classifies every token whose label is not an inherent conflict correctly;
:func:`uatlab.verify.certificate.certify` proves it in the model's floating-point format.

Paper: Kajitsuka & Sato, ICLR 2024 ("paper A"), Theorem 2 (rank-1 attention is a contextual mapping via
the Boltzmann operator), Corollary 1 (memorization by FF∘SA) and the positional-encoding corollary.
The paper's literal weights need ~10^24 bits at CoNLL scale (spec §10); this construction keeps the
paper's mechanism (rank-1 scores, value = key direction, Boltzmann link) but chooses codes and the
feed-forward layer for floating point.

Residual-stream layout (d = k + 3 + C coordinates; notation map paper → ours below)::

    [0, k)        word code c(w): ±1 binary digits of the word id (k = ⌈log2 V⌉, default in float64)
                  or an m-hot {0,1} code (k smallest with C(k, m) ≥ V; default "3-hot" in float32)
    KEY  = k      key/value scalar  a = α_w + π_pos      (embedding + positional encoding)
    QRY  = k + 1  query scalar      b = β (1 + ρ_pos)    (positional encoding only)
    CTX  = k + 2  attention output  h                    (0 in embedding and positional encoding)
    [k+3, k+3+C)  label coordinates: embedding holds e_{base label of w}; FF adds the corrections
    [k+3+C, d)    position code p(k) (only with (word, position) groups, below): 2-hot {0,1} code of the
                  position, held by the positional encoding (0 in the embedding and in W_O)

============================  =========================================================
paper A (Theorem 2 / §6)       here
============================  =========================================================
w (projection direction)       e_KEY (W_K = W_V = e_KEYᵀ), so w^T x = a(x)
c · w wᵀ (= W_Kᵀ W_Q)           W_Q = e_QRYᵀ: score(q, j) = b_q a_j (the query scale is per position)
W_O = ε/(4 r_max) u'            W_O = e_CTX (writes h to its own coordinate; nothing else moves)
boltz(c a_k a)/(c a_k)          h_q = Σ_j softmax_j(b_q a_j) a_j = boltz(b_q a)/b_q
FF interpolant g(z) (§6 step 3) per-word piecewise-linear interpolant in h (below)
positional encoding E           π (keys), ρ (queries) on the KEY/QRY coordinates only
============================  =========================================================

**Why distinct contexts get distinct Boltzmann values.** For a query at position k in a sequence with
keys a_1..a_n, h = Σ softmax(b a_j) a_j = boltz(b a)/b. (i) Same word at two positions of one sequence:
b differs (ρ is strictly increasing in the position) and dh/db = Var_p(a) > 0 unless all keys are equal,
so h differs. (ii) Different sequences: h is a real-analytic, non-constant function of the key codes,
so equal values for different inputs happen only on a measure-zero set of codes; codes are drawn at
random (seeded) on a dyadic grid with all word codes α_w distinct. Paper A's Lemma 1 guarantees a gap of
(log n)^2 e^{−2r} only in a regime (δ > 2 log n + 3) that floats cannot hold (spec §5.3); we instead
*measure* every gap that matters (between differently-labelled neighbours of the same word) and choose
the inverse temperature β among a few powers of two to maximise the smallest gap relative to the rounding
error of h (``beta='auto'``). The certificate then proves the result; nothing rests on genericity.
With (word, position) groups (below) (i) is not needed — occurrences at different positions never share a
unit — so the query scale is chosen per position instead (``beta='auto'``): b_k = β(1 + j/2^m) with β a
power of two and j = (k + s·2^m/3) mod 2^m, s ∈ {0, 1, 2}, picking for each position the candidate with
the fewest label-boundary gaps below ~6 times a rough bound on h's error, then the largest smallest gap
(:func:`_compile_tables`). The h of a token at position k depends on b_k only, and every unit
serves one position, so the choices do not interact.

**Why the feed-forward layer separates them.** Group the occurrences: by word (``group='word'``, the
float64 default) or by (word, position) (``group='word-pos'``, the float32 default; the FF knows the
position through the position code). Sort a group's occurrences by h; where the (majority) label changes
between neighbours h_L < h_F (label A → B) put a ramp from e_A to e_B inside the gap, on
[z_L, z_F] = [h_L + gap/4, h_F − gap/4], built from two ReLU units with knots z_L and z_F:

    unit(x) = ReLU( gate(x) + (x_CTX − z) )                  W1 row: gate weights, 1 on CTX
    W2 column (label coordinates): +σ (e_B − e_A) for the unit at z_L, −σ (e_B − e_A) at z_F,
    σ = 1/(z_F − z_L), so the pair adds (e_B − e_A)·clip((h − z_L)/(z_F − z_L), 0, 1).

The gate is 0 for the group's own tokens and ≤ −G for every other token:

* binary ±1 codes: gate = G·(c(w)ᵀ x_code − k) (W1: G c(w) on the code, b1 = −G k − z); for every other
  word c(w)ᵀ x_code − k = −2·Hamming ≤ −2, so G = ⌈8 (a_max − z_min + 1/8)/2⌉/8.
* m-hot {0,1} codes, *complement gate*: W1 has −G on the k − m code coordinates where c(w) is 0, b1 = −z.
  Another word's code (also m ones, different) has a one outside c(w): its gate is ≤ −G; the own word's
  code is 0 on every coordinate the unit reads, so each of those products is an exact 0 and the
  pre-activation of an own token is the single sum h + b1 — one rounding of size ≤ u·|h − z|, instead of
  a sum of m + 2 terms of total size ~2Gm (that offset is what limited float32 before).
  G = ⌈8 (a_max − z_min + 1/8)⌉/8.
* (word, position) groups add the same complement gate on the position code: −G_pos on the coordinates
  where p(k) is 0 (another position's 2-hot code has a one there), G_pos = ⌈8 (a_max − z_min + 1/8)⌉/8.

Every knot z ≥ z_min (z_min = a_min, or a_min − 1/4 with (word, position) groups, see below) and
h ≤ a_max (h is a convex combination of keys), so another word's (or position's) unit has pre-activation
≤ −G + (a_max − z_min) ≤ −1/8: it is off, whatever the context. (G and G_pos have ≤ 6 significant bits, so
all gate products and G·k are exact in float32.) The group's own units give base + Σ ramps = e_{label(h)}
at every occurrence (each occurrence sits at least gap/4 from every ramp), so logits = label coordinates
have margin 1 exactly. Units exist only where labels change; groups with one label have none.

*Base labels with (word, position) groups.* The embedding holds one base label per word: the most
frequent lowest-h label over the word's position groups. A group whose lowest point has another label
gets one extra *offset ramp* from the base label to that label, placed between a virtual point
h_v = a_min − 1/4 (below every h) and the group's lowest point; its units are on for every token of the
group; its gap is ≥ 1/4, so its slope σ ≤ 8.

**Bounds each weight satisfies.** |codes| ≤ 1; keys |a| ≤ 1 (α on the 2^-15 grid in [−15/16, 15/16] — the
2^-18 grid for vocabularies larger than half the coarse grid — and π on the 2^-15 grid in [−1/32, 1/32],
so α + π is exact in float32 and float64); b = β(1 + j/2^m) ≤ 2β (scores |b a| ≤ 2β); on the coarse grid
a has ≤ 15 significant bits and b ≤ m + 1, so every score b·a is exact in float32 while max_len ≤ 256 (the
certificate checks this per score and then charges no rounding). G ≤ 1.125 (binary) or ≤ 2.5 (m-hot);
|b1| ≤ G k + 1 (binary) or ≤ 1.25 (complement gate); |W2| = σ = 1/(z_F − z_L) = 2/gap (the only large
weights; log2 max|W2| is the number of bits of h the model relies on); readout = selection of label
coordinates.

**Positional encoding.** π (keys) makes h depend on order; ρ (queries) separates repeated words inside
a sequence. Where a sequence repeats a word with different labels, (i) above applies (word groups; with
(word, position) groups the two occurrences are in different groups). With (word, position) groups the
positional encoding also holds the 2-hot position code.

**Causal** (``causal=True``): the same construction with attention over the prefix; inputs are then
identified by their prefix (``ceiling_report(..., context='prefix')``).

**Conflicts.** Identical inputs with different labels get the same h; the majority label (ties: first
seen) is assigned and the losers are counted and listed, never an error.

**How the encoding is stored.** :func:`save_compiled` calls :func:`uatlab.models.save_model` with
``extra = {"encoding": {"tokens": [...id order...], "labels": [...id order...]}, "construction": {...}}``;
the safetensors header metadata key ``uatlab_extra`` holds it as JSON. :func:`load_compiled` returns the
model with ``model.encoding`` (an :class:`uatlab.data.Encoding`) attached, which is what
``uatlab certify`` and ``uatlab train --init`` need to map strings to ids. Token id i is embedding row i.

**Out of core.** :func:`compile_store` compiles a data set held in an on-disk
:class:`uatlab.data.token_store.TokenStore` (what ``uatlab compile`` does): the file is read once into
chunks of integer ids (never the text); h is computed chunk by chunk for every candidate β and the token
records are partitioned by word into buckets; each bucket is grouped alone and reduced to the points the
feed-forward layer needs (:func:`reduce_occurrences`: each word's lowest point and both sides of every label
boundary); the certificate re-reads the file in chunks and counts the ceiling with a spilling counter
(:class:`uatlab.data.ceiling_counter.CeilingCounter`). Memory is bounded by the chunk, the largest bucket
(≥ the most frequent word's occurrences) and the model, not by the data: CoNLL-2003 train repeated 8 times
(1.6M tokens, 200k-token chunks) peaks at 445 MB against 405 MB for one copy. A data error stores the
sequences read so far and names file:line; ``resume=True`` continues from them. The in-memory
:func:`compile_encoded` runs the same code on one bucket, and gives the same model bit for bit.
"""

from __future__ import annotations

import itertools
import math
import os
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from uatlab.data.dataset import Encoding, SequenceDataset
from uatlab.data.token_store import TokenStore, TokenTable, encode_sequence
from uatlab.errors import InputError
from uatlab.models.io import load_model, save_model
from uatlab.models.transformer import Transformer, TransformerConfig
from uatlab.verify.certificate import Certificate, certify, input_keys
from uatlab.verify.float_bounds import DEFAULT_EXP_ULPS

CONSTRUCTION = "uatlab.memorizer.v1"
# Key codes on a coarse dyadic grid: a = α + π has ≤ 15 significant bits and b = β(1 + k/2^m) has m + 1, so
# every score b·a is exact in float32 while m ≤ 8 (max_len ≤ 256); the certificate then charges it nothing
ALPHA_GRID = 2.0**-15  # word key codes α_w: distinct multiples of 2^-15 in [−15/16, 15/16] ...
ALPHA_GRID_FINE = 2.0**-18  # ... or of 2^-18 when the vocabulary needs more than half of the coarse grid
PI_GRID = 2.0**-15  # positional key codes π_k: multiples of 2^-15 in [−1/32, 1/32]
BETA_CANDIDATES = (0.5, 1.0, 2.0, 4.0, 8.0)
OFF_MARGIN = 0.125  # every other word's unit has pre-activation ≤ −OFF_MARGIN
VIRTUAL_BELOW = 0.25  # (word, position) groups: offset ramps start from a virtual point at a_min − 1/4
QUERY_SHIFTS = 3  # (word, position) groups: query scales b_k = β(1 + ((k + s 2^m/3) mod 2^m)/2^m), s < 3
RISKY_RELATIVE_GAP = 6.0  # a boundary gap below 6 r_h (rough h error) is likely too small to certify
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


@dataclass
class EncodedData:
    """An in-memory data set as integer ids (the out-of-core counterpart is TokenStore)."""

    token_to_id: dict[str, int] = field(default_factory=dict)
    label_to_id: dict[str, int] = field(default_factory=dict)
    word: list[np.ndarray] = field(default_factory=list)  # per sequence: token ids (n,)
    label: list[np.ndarray] = field(default_factory=list)  # per sequence: label ids (n,)
    key: list[np.ndarray] = field(default_factory=list)  # per sequence: input keys (n,) int64
    lines: list[int] = field(default_factory=list)
    source: str = "<memory>"

    @property
    def sequences(self) -> int:
        return len(self.word)

    def add(self, tokens: list[str], labels: list[str], line: int, context: str) -> None:
        w, lab = encode_sequence(tokens, labels, f"{self.source}:{line}", self.token_to_id, self.label_to_id)
        self.word.append(w)
        self.label.append(lab)
        keys = np.array(input_keys(tokens, context), dtype=np.int64)
        self.key.append(keys)
        self.lines.append(line)


# ------------------------------------------------------------------------------------------------
# attention codes


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


def boltzmann_context(words: list[np.ndarray], alpha: np.ndarray, pi: np.ndarray, b: np.ndarray, causal: bool,
                      batch_tokens: int = 2_000_000) -> list[np.ndarray]:  # fmt: skip
    """h for every token: h_q = Σ_j softmax_j(b_q a_j) a_j with a_j = α_{w_j} + π_j (float64 reference).

    Sequences are bucketed by length (no padding). Returns one (n,) array per sequence.
    """
    out: list[np.ndarray | None] = [None] * len(words)
    lengths = np.array([len(w) for w in words])
    for n in np.unique(lengths):
        idx = np.flatnonzero(lengths == n)
        step = max(1, batch_tokens // (n * n))
        for s in range(0, len(idx), step):
            sel = idx[s : s + step]
            ids = np.stack([words[i] for i in sel])  # (B, n)
            a = alpha[ids] + pi[:n]  # (B, n) keys = values
            S = b[:n][None, :, None] * a[:, None, :]  # (B, n_q, n_k)
            if causal:
                S = np.where(np.tril(np.ones((n, n), dtype=bool))[None], S, -np.inf)
            S = S - S.max(axis=-1, keepdims=True)
            P = np.exp(S)
            P /= P.sum(axis=-1, keepdims=True)
            h = np.einsum("bqk,bk->bq", P, a)  # (B, n)
            for j, i in enumerate(sel):
                out[i] = h[j]
    return out  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------------
# per-word interpolation


@dataclass
class Occurrences:
    """Tokens sorted by (group, h), grouped into distinct (group, h) points with majority labels.

    A group is a word (``group == word``) or a (word, position) pair (see :func:`context_groups`). After
    :func:`reduce_occurrences` only the points the feed-forward layer needs are kept (each group's lowest
    point and both sides of every label boundary); ``distinct`` still counts all of them.
    """

    word: np.ndarray  # (G,) per point
    h: np.ndarray  # (G,)
    label: np.ndarray  # (G,) majority label
    tokens: int
    ceiling_tokens: int
    conflicts: list[dict[str, Any]]
    collision_tokens: int  # tokens lost because different inputs got exactly the same h
    group: np.ndarray | None = None  # (G,) group id per point (None: the word)
    pos: np.ndarray | None = None  # (G,) position per point when groups are (word, position) pairs
    distinct: int = -1  # distinct (group, h) points before any reduction

    def __post_init__(self) -> None:
        if self.group is None:
            self.group = self.word
        if self.distinct < 0:
            self.distinct = len(self.h)


def context_groups(word: np.ndarray, pos: np.ndarray, max_len: int | None) -> np.ndarray:
    """Group id of each token for the FF's interpolation: the word, or (word, position) if ``max_len``."""
    return word if max_len is None else word * max_len + pos


def group_occurrences(table: TokenTable, h: np.ndarray, id2tok: list[str], id2lab: list[str], lines: np.ndarray,
                      max_listed: int = 50, by_position: int | None = None) -> Occurrences:  # fmt: skip
    """Group the tokens of ``table`` (``h`` (T,) their contexts) into (group, h) points; groups are words, or
    (word, position) pairs when ``by_position`` (the model's max_len) is given.

    ``table`` must hold every occurrence of each of its words, in data order (ties between labels of one
    point go to the label seen first). ``lines`` maps a global sequence index to its source line.
    """
    word, lab, key, hh = table.word, table.label, table.key, h
    T = len(word)
    if T == 0:
        e = np.zeros(0, dtype=np.int64)
        return Occurrences(e, np.zeros(0), e, 0, 0, [], 0, pos=e if by_position else None, distinct=0)
    num_labels = len(id2lab)
    pos_all = table.pos if by_position else None
    grp = context_groups(word, table.pos, by_position)
    tok_index = np.arange(T)
    order = np.lexsort((tok_index, hh, grp))
    w_s, h_s, l_s, k_s, g_s = word[order], hh[order], lab[order], key[order], grp[order]
    new = np.r_[True, (g_s[1:] != g_s[:-1]) | (h_s[1:] != h_s[:-1])]
    gid = np.cumsum(new) - 1  # (T,) point id per sorted token
    G = int(gid[-1]) + 1
    # majority label per point: count (point, label) pairs; ties → label seen first in data order
    pair = gid * (num_labels + 1) + l_s
    uniq, first_pos, counts = np.unique(pair, return_index=True, return_counts=True)
    p_gid = uniq // (num_labels + 1)
    p_lab = uniq % (num_labels + 1)
    first_tok = order[first_pos]  # data-order index of the first token with this (point, label)
    best = np.lexsort((first_tok, -counts, p_gid))  # per point: highest count, then earliest
    is_first = np.r_[True, p_gid[best][1:] != p_gid[best][:-1]]
    win = best[is_first]
    label = np.empty(G, dtype=np.int64)
    label[p_gid[win]] = p_lab[win]
    ceiling = int(counts[win].sum())
    # conflicts vs collisions: a point whose tokens have several labels
    multi = np.bincount(p_gid, minlength=G) > 1
    conflicts: list[dict[str, Any]] = []
    collision = 0
    if multi.any():
        starts = np.r_[np.flatnonzero(new), T]
        for g in np.flatnonzero(multi):
            members = np.arange(starts[g], starts[g + 1])
            keys = k_s[members]
            if np.all(keys == keys[0]):  # identical inputs: an inherent conflict
                t0 = order[members[0]]
                counts_g: dict[str, int] = {}
                for li in l_s[members]:
                    counts_g[id2lab[li]] = counts_g.get(id2lab[li], 0) + 1
                if len(conflicts) < max_listed:
                    seqs = sorted({int(table.seq[order[m]]) for m in members})
                    conflicts.append({
                        "sequences": seqs[:16], "lines": sorted({int(lines[q]) for q in seqs})[:16],
                        "position": int(table.pos[t0]), "token": id2tok[int(w_s[members[0]])],
                        "label_counts": counts_g, "majority": id2lab[int(label[g])],
                    })  # fmt: skip
            else:  # different inputs, same h: the construction cannot separate them
                wrong = int((l_s[members] != label[g]).sum())
                collision += wrong - _conflict_losers(keys, l_s[members])
    first = np.flatnonzero(new)
    return Occurrences(w_s[first], h_s[first], label, T, ceiling, conflicts, collision, group=g_s[first],
                       pos=None if pos_all is None else pos_all[order][first])  # fmt: skip


def reduce_occurrences(occ: Occurrences) -> Occurrences:
    """Keep each group's first (lowest-h) point and the two points around every label boundary.

    Between two kept points of a group that are not a boundary pair, every dropped point has the same label
    (a label change would be a boundary), so :func:`label_boundaries` and the first point per group, all
    that :func:`build_model` reads, are unchanged. Memory then scales with the model, not the data.
    """
    if len(occ.h) == 0:
        return occ
    keep = np.r_[True, occ.group[1:] != occ.group[:-1]]
    bidx, _ = label_boundaries(occ)
    keep[bidx] = True
    keep[bidx + 1] = True
    return Occurrences(occ.word[keep], occ.h[keep], occ.label[keep], occ.tokens, occ.ceiling_tokens,
                       occ.conflicts, occ.collision_tokens, group=occ.group[keep],
                       pos=None if occ.pos is None else occ.pos[keep], distinct=occ.distinct)  # fmt: skip


def merge_occurrences(parts: list[Occurrences], max_listed: int = 50) -> Occurrences:
    """Concatenate the occurrences of disjoint word sets (buckets), sorted by (group, h)."""

    def cat(name: str, dt) -> np.ndarray:
        return np.concatenate([getattr(p, name) for p in parts]) if parts else np.zeros(0, dt)

    word, h, label, group = cat("word", np.int64), cat("h", np.float64), cat("label", np.int64), cat("group", np.int64)
    by_pos = bool(parts) and parts[0].pos is not None
    pos = cat("pos", np.int64) if by_pos else None
    order = np.lexsort((h, group))
    conflicts = sorted((c for p in parts for c in p.conflicts), key=lambda c: (c["sequences"][0], c["position"]))
    return Occurrences(
        word[order], h[order], label[order], sum(p.tokens for p in parts), sum(p.ceiling_tokens for p in parts),
        conflicts[:max_listed], sum(p.collision_tokens for p in parts), group=group[order],
        pos=None if pos is None else pos[order], distinct=sum(p.distinct for p in parts),
    )  # fmt: skip


def _conflict_losers(keys: np.ndarray, labels: np.ndarray) -> int:
    """Tokens that lose inside identical-input groups (inherent conflicts) among the given members."""
    lost = 0
    for k in np.unique(keys):
        ls = labels[keys == k]
        lost += len(ls) - np.bincount(ls).max()
    return lost


def label_boundaries(occ: Occurrences) -> tuple[np.ndarray, np.ndarray]:
    """Indices i of points where point i and i+1 belong to the same group with different labels; gaps."""
    same = occ.group[1:] == occ.group[:-1]
    change = same & (occ.label[1:] != occ.label[:-1])
    idx = np.flatnonzero(change)
    return idx, occ.h[idx + 1] - occ.h[idx]


def h_error_scale(beta: float, dtype: str) -> float:
    """Rough size of the rounding error of h relative to u (scores ≤ 2β, keys ≤ 1), for choosing β."""
    return 4.0 * (2.0 * beta) + 8.0


def resolution_estimate(beta: float, dtype: str, gate_terms: int, gate_magnitude: float) -> float:
    """Rough smallest label-boundary gap a model in ``dtype`` resolves (ramps sit gap/4 from points).

    The feed-forward pre-activation sums ``gate_terms`` code terms of total size G·m (and a bias of the same
    size), so its rounding is about γ_{terms+2}·(2 G m + 2); the softmax adds ~u·(score range + 8) to h.
    Used only to *choose* β; the certificate decides.
    """
    from uatlab.verify.float_bounds import unit_roundoff

    u = unit_roundoff(dtype)
    return 4.0 * u * ((gate_terms + 2) * (2.0 * gate_magnitude + 2.0) + h_error_scale(beta, dtype))


def gate_size(V: int, code: str, dtype: str) -> tuple[int, float]:
    """(code terms that are non-zero for an own token, their total size) of a unit's gate for ``code``:
    (k, G·k) for the binary gate, (0, 0) for the complement gate of m-hot codes (keys span < 2)."""
    if code == "auto":
        code = "binary" if dtype == "float64" else "3-hot"
    codes, m = word_codes(V, code)
    k = codes.shape[1]
    # m-hot codes use the complement gate: an own token's pre-activation sums only h and the bias
    return (k, 1.125 * k) if m == 0 else (0, 0.0)


# ------------------------------------------------------------------------------------------------
# building the model


@dataclass
class CompileResult:
    model: Transformer
    certificate: Certificate | None
    encoding: Encoding
    report: dict[str, Any]


def progress_bar(enabled: bool, total: int | None, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, disable=not enabled, leave=False, unit="seq", dynamic_ncols=True)


def build_model(enc: EncodedData, occ: Occurrences, alpha: np.ndarray, pi: np.ndarray, b: np.ndarray,
                beta: float, max_len: int, dtype: str, causal: bool, seed: int,
                d_model: int | None = None, code: str = "auto") -> tuple[Transformer, dict]:  # fmt: skip
    """Assemble embedding, positional encoding, rank-1 attention, FF and readout (see module doc).

    ``d_model`` larger than the layout's k + 3 + C pads the residual stream with coordinates that are 0
    in every weight (they change nothing); smaller is an error naming the minimum.
    """
    V, C = len(enc.token_to_id), len(enc.label_to_id)
    if code == "auto":
        code = "binary" if dtype == "float64" else "3-hot"
    codes, m = word_codes(V, code)
    k = codes.shape[1]
    by_pos = occ.pos is not None
    pcodes = word_codes(max_len, POSITION_CODE)[0] if by_pos else np.zeros((max_len, 0))
    lay = Layout(k, C, pcodes.shape[1])
    if d_model is not None and d_model < lay.d_model:
        raise InputError(
            f"--dim {d_model} is too small: this data needs d ≥ {lay.d_model} ({k} code coordinates + 3 attention "
            f"coordinates + {C} labels" + (f" + {lay.kp} position code coordinates)" if lay.kp else ")")
        )
    d = max(lay.d_model, d_model or 0)
    np_dt = np.float32 if dtype == "float32" else np.float64

    # ---- boundaries: (group, h below, h above, label below, label above) ---------------------------
    bidx, gaps = label_boundaries(occ)
    a_all = (alpha[:, None] + pi[None, :max_len]).ravel()
    a_min, a_max = float(a_all.min()), float(a_all.max())
    first_point = np.r_[0, np.flatnonzero(occ.group[1:] != occ.group[:-1]) + 1]
    base = np.zeros(V, dtype=np.int64)  # label of the embedding (coordinate L0 + base[w] is 1)
    if by_pos:
        # base[w]: the most frequent lowest-h label over w's position groups; groups starting with another
        # label get an offset ramp from a virtual point h_v = a_min − 1/4 (below every h) to their first point
        fw, fl = occ.word[first_point], occ.label[first_point]
        pair, cnt = np.unique(fw * C + fl, return_counts=True)
        best = np.lexsort((-cnt, pair // C))
        firsts = np.r_[True, (pair // C)[best][1:] != (pair // C)[best][:-1]]
        base[(pair // C)[best][firsts]] = (pair % C)[best][firsts]
        off = first_point[fl != base[fw]]
        h_v = a_min - VIRTUAL_BELOW
    else:
        base[occ.word[first_point]] = occ.label[first_point]
        off = np.zeros(0, dtype=np.int64)
        h_v = a_min
    b_grp = np.r_[occ.group[bidx], occ.group[off]]
    h_lo = np.r_[occ.h[bidx], np.full(len(off), h_v)]
    h_hi = np.r_[occ.h[bidx + 1], occ.h[off]]
    lab_A = np.r_[occ.label[bidx], base[occ.word[off]]]
    lab_B = np.r_[occ.label[bidx + 1], occ.label[off]]
    b_word = np.r_[occ.word[bidx], occ.word[off]]
    b_pos = np.r_[occ.pos[bidx], occ.pos[off]] if by_pos else None
    srt = np.lexsort((h_lo, b_grp))
    b_grp, h_lo, h_hi, lab_A, lab_B, b_word = b_grp[srt], h_lo[srt], h_hi[srt], lab_A[srt], lab_B[srt], b_word[srt]
    if by_pos:
        b_pos = b_pos[srt]
    bgaps = h_hi - h_lo
    # G: every other word's (or position's) unit has pre-activation ≤ −G·mismatch + (a_max − z_min) ≤ −1/8
    # for every knot z ≥ z_min (module doc). G is a multiple of 1/8 (≤ 6 significant bits, exact in float32).
    z_min = h_v
    mismatch = 2.0 if m == 0 else 1.0
    G = math.ceil(8.0 * (a_max - z_min + OFF_MARGIN) / mismatch) / 8.0
    G_pos = math.ceil(8.0 * (a_max - z_min + OFF_MARGIN)) / 8.0
    GK = G * k if m == 0 else 0.0  # binary gate: b1 = −G k − z; complement gate (m-hot): b1 = −z
    zL = h_lo + bgaps / 4
    zF = h_hi - bgaps / 4
    # knots are stored through the bias b1 = −G k − z (binary) or −z; use the stored (rounded) values
    b1L = (-GK - zL).astype(np_dt).astype(np.float64)
    b1F = (-GK - zF).astype(np_dt).astype(np.float64)
    zL_s, zF_s = -b1L - GK, -b1F - GK  # exact in float64 (G k is a small integer times 2^e)
    ok = (zL_s > h_lo) & (zF_s < h_hi) & (zF_s > zL_s)
    unresolved = int((~ok).sum())
    if unresolved:
        # a boundary dropped for lack of precision must not shift the labels of everything above it:
        # each kept ramp starts from the label the previous kept ramp of the same group ended on
        b_grp, zL_s, zF_s, b1L, b1F = b_grp[ok], zL_s[ok], zF_s[ok], b1L[ok], b1F[ok]
        b_word, lab_B = b_word[ok], lab_B[ok]
        b_pos = b_pos[ok] if by_pos else None
        prev_same = np.r_[False, b_grp[1:] == b_grp[:-1]]
        lab_A = np.where(prev_same, np.r_[0, lab_B[:-1]], base[b_word])
        keep = lab_A != lab_B
        b_grp, zL_s, zF_s, b1L, b1F = b_grp[keep], zL_s[keep], zF_s[keep], b1L[keep], b1F[keep]
        b_word, lab_A, lab_B = b_word[keep], lab_A[keep], lab_B[keep]
        b_pos = b_pos[keep] if by_pos else None
    sigma = (1.0 / (zF_s - zL_s)).astype(np_dt).astype(np.float64)  # ramp slope, |W2| entries
    nb = len(b_grp)
    q = 2 * nb

    # ---- W1 (q, d), b1 (q,): unit 2i is the knot z_L of boundary i, unit 2i+1 the knot z_F -----------
    W1 = np.zeros((q, d), dtype=np_dt)
    # binary: G c(w) (±1 codes, own word receives G k); m-hot: −G on the coordinates where c(w) is 0
    gate = G * codes[b_word] if m == 0 else -G * (1.0 - codes[b_word])
    W1[0::2, :k] = gate
    W1[1::2, :k] = gate
    if by_pos:  # −G_pos on the position-code coordinates where the group's position code is 0
        pgate = -G_pos * (1.0 - pcodes[b_pos])
        W1[0::2, lay.pos_code] = pgate
        W1[1::2, lay.pos_code] = pgate
    W1[:, lay.ctx] = 1.0
    b1 = np.empty(q, dtype=np_dt)
    b1[0::2], b1[1::2] = b1L, b1F
    # ---- W2 (d, q): ±σ (e_B − e_A) on the label coordinates ----------------------------------------
    W2 = np.zeros((d, q), dtype=np_dt)
    cols = np.arange(nb)
    L0 = lay.labels.start
    W2[L0 + lab_B, 2 * cols] += sigma
    W2[L0 + lab_A, 2 * cols] -= sigma
    W2[L0 + lab_B, 2 * cols + 1] -= sigma
    W2[L0 + lab_A, 2 * cols + 1] += sigma

    # ---- embedding (V, d): code, key code α_w, label of the word's lowest-h point ------------------
    E = np.zeros((V, d), dtype=np_dt)
    E[:, :k] = codes
    E[:, lay.key] = alpha
    E[np.arange(V), L0 + base] = 1.0
    # ---- positional encoding (max_len, d): π on KEY, b = β(1 + ρ_k) on QRY --------------------------
    Pz = np.zeros((max_len, d), dtype=np_dt)
    Pz[:, lay.key] = pi[:max_len]
    Pz[:, lay.query] = b[:max_len]
    Pz[:, lay.pos_code] = pcodes  # m-hot position code (empty unless units are gated on (word, position))

    config = TransformerConfig(
        d_model=d, n_layers=1, n_heads=1, head_dim=1, rank=1, ff_width=q, vocab_size=V, num_labels=C,
        max_len=max_len, positional="given", attention="softmax", beta=1.0, causal=causal, readout_bias=True,
        dtype=dtype,
        meta={"construction": CONSTRUCTION, "beta": beta, "seed": seed, "code": code, "code_bits": k, "G": G,
              "group": "word-pos" if by_pos else "word", "pos_code_bits": lay.kp},
    )  # fmt: skip
    model = _new_transformer(config)
    with torch.no_grad():
        tdt = config.torch_dtype
        model.embed.weight.copy_(torch.from_numpy(E).to(tdt))
        model.pos.copy_(torch.from_numpy(Pz).to(tdt))
        attn = model.blocks[0].attn

        def unit(i: int) -> torch.Tensor:
            e = torch.zeros(1, 1, d, dtype=tdt)
            e[0, 0, i] = 1.0
            return e

        one = torch.ones(1, 1, 1, dtype=tdt)
        attn.W_K.set_factors(one, unit(lay.key))  # a = x_KEY           (1, 1, d)
        attn.W_V.set_factors(one, unit(lay.key))  # value = key (paper A: W_V = w^T)
        attn.W_Q.set_factors(one, unit(lay.query))  # b = x_QRY
        attn.W_O.set_factors(unit(lay.ctx).transpose(1, 2), one)  # writes h to CTX   (1, d, 1)
        ff = model.blocks[0].ff
        ff.hidden.weight.copy_(torch.from_numpy(W1).to(tdt))
        ff.hidden.bias.copy_(torch.from_numpy(b1).to(tdt))
        ff.output.weight.copy_(torch.from_numpy(W2).to(tdt))
        ff.output.bias.zero_()
        R = torch.zeros(C, d, dtype=tdt)
        R[torch.arange(C), L0 + torch.arange(C)] = 1.0
        model.readout.weight.copy_(R)
        model.readout.bias.zero_()
    ranks = attn.check_ranks()
    if any(r != [1] for r in ranks.values()):
        raise AssertionError(f"compiled attention is not rank 1: {ranks}")
    info = {
        "code": code, "code_bits": k, "code_weight": m, "G": G, "label_boundaries": int(len(label_boundaries(occ)[0])),
        "group": "word-pos" if by_pos else "word", "pos_code_bits": lay.kp, "offset_ramps": int(len(off)),
        # Σ|terms| of an own token's pre-activation: G·k (binary gate) + |h| + |b1| (complement gate: no G term)
        "preactivation_magnitude": GK + max(abs(a_min), abs(a_max)) + (float(np.abs(b1).max()) if q else 0.0),
        "unresolved_boundaries": unresolved, "ff_width": q, "d_model": d,
        "min_gap": float(gaps.min()) if len(gaps) else None,
        "max_abs_W2": float(sigma.max()) if len(sigma) else 0.0, "a_range": [a_min, a_max], "ranks": ranks,
    }  # fmt: skip
    return model, info


def _new_transformer(config: TransformerConfig) -> Transformer:
    """Transformer(config), silencing torch's warning about initialising a width-0 FF (no label changes)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Initializing zero-element tensors is a no-op")
        return Transformer(config)


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
    if scheme == "binary":
        k = max(1, math.ceil(math.log2(max(V, 2))))
        return np.where(((np.arange(V)[:, None] >> np.arange(k)[None, :]) & 1) == 1, 1.0, -1.0), 0
    if scheme.endswith("-hot") and scheme[:-4].isdigit() and int(scheme[:-4]) >= 1:
        m = int(scheme[:-4])
        k = m
        while math.comb(k, m) < V:
            k += 1
        codes = np.zeros((V, k))
        for w, subset in enumerate(itertools.islice(itertools.combinations(range(k), m), V)):
            codes[w, list(subset)] = 1.0
        return codes, m
    raise InputError(f"unknown code scheme {scheme!r}: use 'binary', 'M-hot' (e.g. '3-hot') or 'auto'")


def encoding_of(enc: EncodedData | TokenStore) -> Encoding:
    return Encoding(dict(enc.token_to_id), dict(enc.label_to_id))


def _check_request(dtype: str, beta: float | str, group: str) -> tuple[str, list[tuple[float, int]]]:
    """Validate dtype, β and grouping; return the grouping and the (β, shift) query-scale candidates."""
    if dtype not in ("float32", "float64"):
        raise InputError(f"dtype must be float32 or float64, got {dtype!r}")
    if group == "auto":
        group = "word-pos" if dtype == "float32" else "word"
    if group not in ("word", "word-pos"):
        raise InputError(f"group must be 'word', 'word-pos' or 'auto', got {group!r}")
    if beta == "auto":
        shifts = QUERY_SHIFTS if group == "word-pos" else 1
        return group, [(b, s) for s in range(shifts) for b in BETA_CANDIDATES]
    beta = float(beta)
    if not (beta > 0 and math.frexp(beta)[0] == 0.5):
        raise InputError(f"beta must be a positive power of two (exact codes), got {beta}")
    return group, [(beta, 0)]


def query_scales(max_len: int, beta: float, shift: int = 0) -> np.ndarray:
    """b_k = β(1 + ((k + shift·2^m/S) mod 2^m)/2^m), S = QUERY_SHIFTS, 2^m ≥ max_len: in [β, 2β) with m + 1
    significant bits (exact in float32); shift 0 is :func:`positional_codes`' b."""
    m = max(1, math.ceil(math.log2(max(max_len, 2))))
    kk = (np.arange(max_len) + (shift * 2**m) // QUERY_SHIFTS) % 2**m
    return beta * (1.0 + kk / 2.0**m)


def context_columns(alpha: np.ndarray, max_len: int, pool: list[tuple[float, int]], seed: int, causal: bool):
    """A function words-of-some-sequences → (T, K) float64: h of every token for each query-scale candidate."""
    pi, _ = positional_codes(max_len, 1.0, seed)  # π does not depend on β
    scales = [query_scales(max_len, beta, shift) for beta, shift in pool]

    def columns(words: list[np.ndarray]) -> np.ndarray:
        return np.stack([np.concatenate(boltzmann_context(words, alpha, pi, b, causal)) for b in scales], axis=1)

    return columns


def _choose_beta(occs: list[Occurrences], candidates: list[float], V: int, code: str,
                 dtype: str) -> tuple[int, dict]:  # fmt: skip
    """One β for all positions, among ``candidates`` (their occurrences ``occs``): fewest label-boundary gaps
    below the dtype's resolution, then the largest smallest gap relative to the rounding-error scale of h.
    Returns its index."""
    scores = {}
    best = None
    terms, magnitude = gate_size(V, code, dtype)
    for i, (beta, occ) in enumerate(zip(candidates, occs, strict=True)):
        _, gaps = label_boundaries(occ)
        g = float(gaps.min()) if len(gaps) else math.inf
        too_small = int((gaps < resolution_estimate(beta, dtype, terms, magnitude)).sum())
        score = (-too_small, g / h_error_scale(beta, dtype))
        scores[beta] = {"min_gap": g, "gaps_below_resolution": too_small}
        if best is None or score > best[0]:
            best = (score, i)
    assert best is not None
    return best[1], scores


def _position_scores(table: TokenTable, pool: list[tuple[float, int]], max_len: int,
                     dtype: str) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Per (candidate, position) of one table with (word, position) groups: the number of tokens next to a
    label boundary whose gap is below ``RISKY_RELATIVE_GAP·r_h``, and the smallest gap relative to r_h
    (r_h = :func:`h_error_estimate`). Both add up over tables (buckets) holding disjoint groups."""
    K = len(pool)
    risky, ratio = np.zeros((K, max_len)), np.full((K, max_len), np.inf)
    grp = context_groups(table.word, table.pos, max_len)
    for c, (beta, _) in enumerate(pool):
        hh = table.h[:, c]
        o = np.lexsort((hh, grp))
        g_s, h_s, l_s, n_s = grp[o], hh[o], table.label[o], table.length[o]
        change = (g_s[1:] == g_s[:-1]) & (l_s[1:] != l_s[:-1]) & (h_s[1:] != h_s[:-1])
        # per boundary between sorted neighbours: gap relative to the error scale of the two tokens' h
        rh = h_error_estimate(beta, dtype, np.maximum(n_s[1:], n_s[:-1]))
        rel = np.where(change, (h_s[1:] - h_s[:-1]) / rh, np.inf)
        bpos = g_s[:-1] % max_len  # position of each boundary
        # the two tokens next to a boundary are the ones a knot can come too close to (gap/4 < 2 r_h)
        risky[c] = np.bincount(bpos, weights=2.0 * (rel < RISKY_RELATIVE_GAP), minlength=max_len)
        np.minimum.at(ratio[c], bpos, rel)
    return risky, ratio


def h_error_estimate(beta: float | np.ndarray, dtype: str, n: np.ndarray) -> np.ndarray:
    """Rough bound on the error of h for query scale ~β and n keys: u (8β + 12 + 2n) (softmax + sum)."""
    from uatlab.verify.float_bounds import unit_roundoff

    return unit_roundoff(dtype) * (8.0 * np.asarray(beta) + 12.0 + 2.0 * np.asarray(n, dtype=np.float64))


def _compile_tables(tables: Callable[[], Iterable[TokenTable]], vocab: EncodedData | TokenStore, group: str,
                    pool: list[tuple[float, int]], lines: np.ndarray, sequences: int, max_len: int, dtype: str,
                    causal: bool, seed: int, d_model: int | None, code: str,
                    times: dict[str, float]) -> tuple[Transformer, dict]:  # fmt: skip
    """Group the tables (disjoint word sets; column c of ``table.h`` is h under candidate ``pool[c]``), choose
    the query scales, build the model: one code path for the in-memory and the out-of-core compiler.

    Word groups: one β for all positions (:func:`_choose_beta`). (word, position) groups with β auto: the
    query scale b_k is chosen per position k among the (β, shift) candidates. The h of a token at position k
    depends on b_k only (the keys do not depend on β) and every FF unit serves one position, so the choice
    decomposes over positions: per position, fewest tokens next to a boundary gap below
    ``RISKY_RELATIVE_GAP·r_h``, then the largest smallest gap relative to r_h. A heuristic; the certificate
    decides.
    """
    t = time.perf_counter()
    id2tok, id2lab = list(vocab.token_to_id), list(vocab.label_to_id)
    V = len(id2tok)
    by_position = max_len if group == "word-pos" else None
    scales = [query_scales(max_len, beta, shift) for beta, shift in pool]
    query_choice = None
    if by_position and len(pool) > 1:
        risky, ratio = np.zeros((len(pool), max_len)), np.full((len(pool), max_len), np.inf)
        for table in tables():  # pass 1: scores per (candidate, position)
            r, q = _position_scores(table, pool, max_len, dtype)
            risky += r
            ratio = np.minimum(ratio, q)
        choice = np.array([min(range(len(pool)), key=lambda c: (risky[c, k], -ratio[c, k], c)) for k in range(max_len)])
        parts = []
        for table in tables():  # pass 2: group with each token's chosen column
            h = table.h[np.arange(len(table)), choice[table.pos]]
            parts.append(
                reduce_occurrences(group_occurrences(table, h, id2tok, id2lab, lines, by_position=by_position))
            )
        occ = merge_occurrences(parts)
        b = np.array([scales[c][k] for k, c in enumerate(choice)])
        beta: float | str = "per-position"
        counts: dict[str, int] = {}
        for c in choice:
            name = f"beta {pool[c][0]:g} shift {pool[c][1]}"
            counts[name] = counts.get(name, 0) + 1
        beta_scores = {"per_position_choices": counts,
                       "tokens_in_risky_groups": int(sum(risky[c, k] for k, c in enumerate(choice)))}  # fmt: skip
        query_choice = b
    else:
        per: list[list[Occurrences]] = [[] for _ in pool]
        for table in tables():
            for c in range(len(pool)):
                per[c].append(
                    reduce_occurrences(
                        group_occurrences(table, table.h[:, c], id2tok, id2lab, lines, by_position=by_position)
                    )  # fmt: skip
                )
        occs = [merge_occurrences(p) for p in per]
        if len(pool) > 1:
            i, beta_scores = _choose_beta(occs, [p[0] for p in pool], V, code, dtype)
        else:
            i, beta_scores = 0, {}
        beta, occ, b = pool[i][0], occs[i], scales[i]
    times["group contexts per word"] = time.perf_counter() - t
    t = time.perf_counter()
    alpha = word_key_codes(V, seed)
    pi, _ = positional_codes(max_len, 1.0, seed)  # π does not depend on β
    model, info = build_model(vocab, occ, alpha, pi, b, beta, max_len, dtype, causal, seed, d_model, code)
    model.encoding = encoding_of(vocab)
    times["feed-forward construction"] = time.perf_counter() - t
    report = {
        "sequences": sequences,
        "tokens": occ.tokens,
        "distinct_contexts": int(occ.distinct),
        # the true ceiling also counts collision tokens as winnable (only conflicts are inherent)
        "ceiling_tokens": occ.ceiling_tokens + occ.collision_tokens,
        "conflict_tokens": occ.tokens - occ.ceiling_tokens - occ.collision_tokens,
        "conflicts": occ.conflicts,
        "collision_tokens": occ.collision_tokens,
        "vocabulary": V,
        "labels": id2lab,
        "max_len": max_len,
        "beta": beta,
        "beta_search": beta_scores,
        "query_scales": None if query_choice is None else query_choice.tolist(),
        "causal": causal,
        "dtype": dtype,
        **info,
        "stage_seconds": times,
    }
    return model, report


def compile_encoded(enc: EncodedData, dtype: str = "float64", causal: bool = False, beta: float | str = "auto",
                    seed: int = 0, max_len: int | None = None, progress: bool = False,
                    d_model: int | None = None, code: str = "auto", group: str = "auto") -> tuple[Transformer, dict]:  # fmt: skip
    """Compile already-encoded in-memory data (see :class:`EncodedData`); returns (model, report).

    ``group``: gate the FF units on the word (``"word"``) or on (word, position) (``"word-pos"``, needs an
    m-hot ``code``); ``"auto"``: word-pos in float32, word in float64.
    """
    group, pool = _check_request(dtype, beta, group)
    if enc.sequences == 0:
        raise InputError(f"{enc.source}: no sequences to compile")
    times: dict[str, float] = {}
    t = time.perf_counter()
    max_len = max(max_len or 0, max(len(w) for w in enc.word))
    alpha = word_key_codes(len(enc.token_to_id), seed)
    h = context_columns(alpha, max_len, pool, seed, causal)(enc.word)  # (T, K)
    table = TokenTable.from_sequences(enc.word, enc.label, enc.key, 0, h)
    times["attention (h per token)"] = time.perf_counter() - t
    model, report = _compile_tables(lambda: [table], enc, group, pool, np.asarray(enc.lines), enc.sequences, max_len,
                                    dtype, causal, seed, d_model, code, times)  # fmt: skip
    report["label_counts"] = np.bincount(table.label, minlength=len(enc.label_to_id)).tolist()
    return model, report


def compile_store(store: TokenStore, dtype: str = "float64", causal: bool = False, beta: float | str = "auto",
                  seed: int = 0, max_len: int | None = None, progress: bool = False,
                  d_model: int | None = None, code: str = "auto", group: str = "auto") -> tuple[Transformer, dict]:  # fmt: skip
    """Compile a data set held in an on-disk :class:`~uatlab.data.token_store.TokenStore` (out of core).

    h is computed chunk by chunk for every query-scale candidate and the token records are partitioned by
    word into buckets; each bucket is grouped on its own and reduced to the points the model needs
    (:func:`reduce_occurrences`), so memory scales with the chunk, the largest bucket and the model.
    """
    group, pool = _check_request(dtype, beta, group)
    if store.sequences == 0:
        raise InputError(f"{store.source}: no sequences to compile")
    times: dict[str, float] = {}
    t = time.perf_counter()
    max_len = max(max_len or 0, store.max_len)
    alpha = word_key_codes(len(store.token_to_id), seed)
    columns = context_columns(alpha, max_len, pool, seed, causal)
    signature = {"pool": [list(p) for p in pool], "seed": seed, "max_len": max_len, "causal": causal,
                 "alpha_grid": float(alpha_grid(len(store.token_to_id)))}  # fmt: skip
    bar = progress_bar(progress, store.sequences, "attention")
    try:
        store.bucketize(columns, len(pool), signature, progress=bar.update)
    finally:
        bar.close()
    times["attention (h per token)"] = time.perf_counter() - t
    model, report = _compile_tables(store.bucket_tables, store, group, pool, store.lines, store.sequences, max_len,
                                    dtype, causal, seed, d_model, code, times)  # fmt: skip
    report["label_counts"] = store.label_counts.tolist()
    return model, report


def paper_a_param_count(d: int, n: int, N: int, s: int = 1) -> int:
    """Paper A's memorization parameter count 4(s+d) + d(2nN + d) (spec §6)."""
    return 4 * (s + d) + d * (2 * n * N + d)


def label_information_bits(label_counts: list[int] | np.ndarray) -> float:
    """Σ over tokens of −log2 p(label) with p the empirical label distribution (bits of label information)."""
    counts = np.asarray(label_counts, dtype=np.float64)
    p = counts / counts.sum()
    nz = counts > 0
    return float(-(counts[nz] * np.log2(p[nz])).sum())


def summarize(model: Transformer, report: dict[str, Any], cert: Certificate | None) -> dict:
    """The figures the issue asks for, as one flat dict (JSON contract fields first)."""
    p_total = model.num_parameters()
    p_ne = model.num_parameters(non_embedding=True)
    paper = paper_a_param_count(model.config.d_model, report["max_len"], report["sequences"])
    max_w = max(float(t.detach().abs().max()) for t in model.state_dict().values() if t.numel())
    bits = label_information_bits(report["label_counts"])
    out = {
        "sequences": report["sequences"],
        "tokens": report["tokens"],
        "conflict_tokens": report["conflict_tokens"],
        "ceiling_tokens": report["ceiling_tokens"],
        "correct_tokens": cert.correct_tokens if cert else None,
        "certified": cert.certified if cert else None,
        "certified_fraction": cert.certified_fraction if cert else None,
        "certified_tokens": cert.certified_tokens if cert else None,
        "min_certified_margin": cert.min_certified_margin if cert else None,
        "min_margin_at": cert.min_margin_at if cert else None,
        "params_total": p_total,
        "params_non_embedding": p_ne,
        "paper_a_param_count": paper,
        "non_embedding_vs_paper_a": p_ne / paper,
        "ff_width": model.config.layer_ff_width(0),
        "d_model": model.config.d_model,
        "max_abs_weight": max_w,
        # log2(largest |W2| × own-token pre-activation term sum / margin 1/2): bits of h the model relies on
        "bits_of_precision_relied_on": math.log2(
            max(report["max_abs_W2"], 1.0) * 2 * max(report["preactivation_magnitude"], 1.0)
        ),
        "code": report["code"],
        "dtype": report["dtype"],
        "distinct_contexts": report["distinct_contexts"],
        "conflicts": report["conflicts"],
        "torch_spot_check": cert.torch_spot_check if cert else None,
        "exp_ulps": cert.exp_ulps if cert else None,
        "environment": cert.environment if cert else None,
        "assumptions": cert.assumptions if cert else None,
        "collision_tokens": report["collision_tokens"],
        "accuracy": (cert.correct_tokens / report["tokens"]) if cert else None,
        "ceiling_accuracy": report["ceiling_tokens"] / report["tokens"],
        "label_information_bits": bits,
        "bits_per_param_non_embedding": bits / max(p_ne, 1),
        "bits_per_param_total": bits / max(p_total, 1),
        "beta": report["beta"],
        "causal": report["causal"],
        "min_gap": report["min_gap"],
        "unresolved_boundaries": report["unresolved_boundaries"],
        "vocabulary": report["vocabulary"],
        "max_len": report["max_len"],
        "stage_seconds": report["stage_seconds"],
    }  # fmt: skip
    return out


# ------------------------------------------------------------------------------------------------
# public entry points


def encode_dataset(data: SequenceDataset, causal: bool = False) -> EncodedData:
    """Integer ids of an in-memory data set (the out-of-core path is :class:`~uatlab.data.token_store.TokenStore`)."""
    enc = EncodedData(source=data.source)
    context = "prefix" if causal else "sequence"
    for i, (toks, labs) in enumerate(data):
        enc.add(toks, labs, data.lines[i] if i < len(data.lines) else i + 1, context)
    return enc


def compile_dataset(data: SequenceDataset, dtype: str = "float64", causal: bool = False,
                    beta: float | str = "auto", seed: int = 0, run_certificate: bool = True,
                    progress: bool = False, d_model: int | None = None, code: str = "auto",
                    group: str = "auto", exp_ulps: float = DEFAULT_EXP_ULPS) -> CompileResult:  # fmt: skip
    """Compile ``data`` and (by default) certify the result; returns model, certificate and all figures."""
    t0 = time.perf_counter()
    enc = encode_dataset(data, causal)
    t_read = time.perf_counter() - t0
    model, report = compile_encoded(
        enc,
        dtype=dtype,
        causal=causal,
        beta=beta,
        seed=seed,
        progress=progress,
        d_model=d_model,
        code=code,
        group=group,
    )
    report["stage_seconds"] = {"read + encode": t_read, **report["stage_seconds"]}
    cert = None
    if run_certificate:
        t = time.perf_counter()
        cert = certify_with_progress(model, data, progress, exp_ulps)
        report["stage_seconds"]["certify"] = time.perf_counter() - t
    report["seconds"] = time.perf_counter() - t0
    return CompileResult(model, cert, model.encoding, {**summarize(model, report, cert), "seconds": report["seconds"]})


def certify_with_progress(model: Transformer, data: SequenceDataset, progress: bool,
                          exp_ulps: float = DEFAULT_EXP_ULPS) -> Certificate:  # fmt: skip
    bar = progress_bar(progress, len(data), "certify")
    done = [0]

    def cb(n: int, total: int) -> None:
        bar.update(n - done[0])
        done[0] = n

    try:
        return certify(model, data, progress=cb, exp_ulps=exp_ulps)
    finally:
        bar.close()


def compile_memorizer(dataset: SequenceDataset, dtype: str = "float64", causal: bool = False,
                      beta: float | str = "auto", seed: int = 0) -> tuple[Transformer, Certificate]:  # fmt: skip
    """Compile ``dataset`` into a one-layer single-head rank-1 Transformer and certify it.

    Returns:
        (model, certificate); ``model.encoding`` maps token/label strings to ids.
    """
    res = compile_dataset(dataset, dtype=dtype, causal=causal, beta=beta, seed=seed)
    assert res.certificate is not None
    return res.model, res.certificate


def save_compiled(model: Transformer, path: str | os.PathLike, report: dict[str, Any] | None = None) -> Path:
    """Save a compiled model with its encoding (see module doc, 'How the encoding is stored')."""
    enc: Encoding = model.encoding
    extra = {
        "encoding": {"tokens": enc.id_to_token, "labels": enc.id_to_label},
        "construction": {k: v for k, v in (report or {}).items() if k not in ("conflicts", "min_margin_at")},
    }
    return save_model(model, path, extra=extra)


def load_compiled(path: str | os.PathLike) -> Transformer:
    """Load any uatlab model; attach ``model.encoding`` if the file stores one."""
    with warnings.catch_warnings():  # a compiled model may have a width-0 FF (see _new_transformer)
        warnings.filterwarnings("ignore", message="Initializing zero-element tensors is a no-op")
        model, extra = load_model(path)
    e = extra.get("encoding")
    if e is not None:
        model.encoding = Encoding({t: i for i, t in enumerate(e["tokens"])}, {y: i for i, y in enumerate(e["labels"])})
    return model


def certify_chunks_with_progress(model: Transformer, records: Iterable[tuple[list[str], list[str], int]],
                                 source: str, total: int | None, progress: bool,
                                 exp_ulps: float = DEFAULT_EXP_ULPS) -> Certificate:  # fmt: skip
    """Certify streamed records (e.g. ``iter_conll(path)``) chunk by chunk, with a progress bar."""
    from uatlab.verify.certificate import certify_chunks, stream_chunks

    bar = progress_bar(progress, total, "certify")
    done = [0]

    def cb(n: int, _total: int) -> None:
        bar.update(n - done[0])
        done[0] = n

    try:
        return certify_chunks(model, stream_chunks(records, source), total, progress=cb, exp_ulps=exp_ulps)
    finally:
        bar.close()
