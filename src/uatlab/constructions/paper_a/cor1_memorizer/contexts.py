"""The attention output h of every token (paper A's Boltzmann operator) and its grouping into the points the
feed-forward layer interpolates (paper A, Theorem 2 and Corollary 1).

For a query at position q with keys a_1..a_n, h_q = Σ_j softmax_j(b_q a_j) a_j = boltz(b_q a)/b_q
(paper A's ``boltz``; our b_q = c·a_q of the paper, chosen per position). Tokens are grouped by word (or by
(word, position)) and sorted by h; identical inputs with different labels get the same h: the majority
label (ties: first seen) is assigned and the losers are counted and listed as conflicts, never an error.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from uatlab.constructions.paper_a.cor1_memorizer.layout import positional_codes, query_scales
from uatlab.data.dataset import token_line
from uatlab.data.information import input_groups
from uatlab.data.token_store import TokenTable


def boltzmann_context(
    words: list[np.ndarray],
    alpha: np.ndarray,
    pi: np.ndarray,
    b: np.ndarray,
    causal: bool,
    batch_tokens: int = 2_000_000,
) -> list[np.ndarray]:
    """h for every token: h_q = Σ_j softmax_j(b_q a_j) a_j with a_j = α_{w_j} + π_j (float64 reference).

    Sequences are bucketed by length (no padding). Scores are formed for at most ``batch_tokens`` (query, key)
    pairs at a time: several short sequences at once, or blocks of queries of one long sequence, so memory
    is linear in the sequence length. Returns one (n,) array per sequence.
    """
    if not words:
        return []
    h = _boltzmann_columns(words, alpha, pi, [b], causal, batch_tokens)[:, 0]
    return np.split(h, np.cumsum([len(w) for w in words])[:-1])


def _boltzmann_columns(
    words: list[np.ndarray],
    alpha: np.ndarray,
    pi: np.ndarray,
    scales: list[np.ndarray],
    causal: bool,
    batch_tokens: int = 2_000_000,
) -> np.ndarray:
    """(T, K): h of every token (sequences concatenated) for each query scale b in ``scales``: per batch of
    sequences of one length, the keys a are formed once and every scale's scores from them (`_boltzmann_rows`)."""
    lengths = np.array([len(w) for w in words], dtype=np.int64)
    offsets = np.cumsum(lengths) - lengths
    H = np.empty((int(lengths.sum()), len(scales)), dtype=np.float64)
    # one (B, n, n) score array for every batch and scale, reused: a fresh array of this size per scale costs a
    # page fault per 4 kB on first touch
    scratch: np.ndarray | None = None
    for n in np.unique(lengths).tolist():
        idx = np.flatnonzero(lengths == n)
        if n * n > batch_tokens:  # one long sequence at a time, in blocks of queries
            for i in idx.tolist():
                a = alpha[words[i]] + pi[:n]
                for c, b in enumerate(scales):
                    H[offsets[i] : offsets[i] + n, c] = _boltzmann_context_blocked(a, b[:n], causal, batch_tokens)
            continue
        step = max(1, batch_tokens // (n * n))
        for s in range(0, len(idx), step):
            sel = idx[s : s + step]
            ids = np.stack([words[i] for i in sel.tolist()])  # (B, n)
            a = alpha[ids] + pi[:n]  # (B, n) keys = values
            rows = (offsets[sel][:, None] + np.arange(n)).ravel()  # (B·n,) the tokens' rows in H
            if scratch is None or scratch.size < len(sel) * n * n:
                scratch = np.empty(max(len(sel) * n * n, min(batch_tokens, 1 << 21)))
            S = scratch[: len(sel) * n * n].reshape(len(sel), n, n)
            for c, b in enumerate(scales):
                H[rows, c] = _boltzmann_rows(a, b[:n], causal, out=S).ravel()
    return H


def _boltzmann_rows(a: np.ndarray, b: np.ndarray, causal: bool, out: np.ndarray | None = None) -> np.ndarray:
    """h (B, n) of B sequences of one length n with keys = values ``a`` (B, n) and query scales ``b`` (n,).
    ``out``: a (B, n, n) float64 array for the scores (overwritten), else a new one."""
    n = a.shape[1]
    # S_bqk = fl(b_q a_bk), one product each (einsum forms the same products as a broadcast multiply, faster)
    S = np.einsum("q,bk->bqk", b, a, out=out)  # (B, n_q, n_k)
    if causal:
        np.copyto(S, -np.inf, where=~np.tril(np.ones((n, n), dtype=bool))[None])
    if np.all(b > 0):
        # max_k fl(b_q a_k) = fl(b_q max_k a_k) (rounding is monotone and b_q > 0): the same maximum (up to the
        # sign of a zero, which S − M and exp do not see) without a reduction over the short last axis
        M = np.maximum.accumulate(a, axis=1) if causal else a.max(axis=1, keepdims=True)  # (B, n) or (B, 1)
        S -= (b[None, :] * M)[:, :, None]
    else:
        S -= S.max(axis=-1, keepdims=True)
    np.exp(S, out=S)
    if causal:
        return _prefix_weighted_means(S, a)
    S /= S.sum(axis=-1, keepdims=True)
    return np.einsum("bqk,bk->bq", S, a)  # (B, n)


def _prefix_weighted_means(P: np.ndarray, a: np.ndarray, q0: int = 0) -> np.ndarray:
    """h_q = Σ_{k≤q} P_qk a_k / Σ_{k≤q} P_qk for weights P (..., n_q, n) of the queries q0, q0 + 1, … and values a
    (..., n): both sums are sequential prefix sums (np.cumsum) read at k = q, so h_q is computed from the prefix
    alone, in the same order whatever the sequence's length (a pairwise sum over a row of n entries, masked ones
    included, rounds differently for different n). One prefix in sequences of different lengths thus gets one
    h, bit for bit; the keys after the last query (masked for every query here) may be left out of P and a."""
    r = np.arange(P.shape[-2])
    den = np.cumsum(P, axis=-1)[..., r, q0 + r]
    num = np.cumsum(P * a[..., None, :], axis=-1)[..., r, q0 + r]
    return num / den


def _boltzmann_context_blocked(a: np.ndarray, b: np.ndarray, causal: bool, batch_tokens: int) -> np.ndarray:
    """h of one sequence (keys = values ``a``, (n,); query scales ``b``, (n,)), ``batch_tokens // n`` queries
    at a time: the same per-row arithmetic as `boltzmann_context`, in O(batch_tokens + n) memory."""
    n = len(a)
    h = np.empty(n, dtype=np.float64)
    block = max(1, batch_tokens // n)
    for q0 in range(0, n, block):
        q1 = min(n, q0 + block)
        if causal:  # keys after q1 are masked for every query of the block: left out
            S = b[q0:q1, None] * a[None, :q1]  # (block, q1)
            S = np.where(np.arange(q1)[None, :] <= np.arange(q0, q1)[:, None], S, -np.inf)
            S -= S.max(axis=-1, keepdims=True)
            h[q0:q1] = _prefix_weighted_means(np.exp(S), a[:q1], q0)
            continue
        S = b[q0:q1, None] * a[None, :]  # (block, n_k)
        S -= S.max(axis=-1, keepdims=True)
        P = np.exp(S)
        P /= P.sum(axis=-1, keepdims=True)
        h[q0:q1] = np.einsum("qk,k->q", P, a)
    return h


def context_columns(alpha: np.ndarray, max_len: int, pool: list[tuple[float, int]], seed: int, causal: bool):
    """A function words-of-some-sequences → (T, K) float64: h of every token for each query-scale candidate."""
    pi, _ = positional_codes(max_len, 1.0, seed)  # π does not depend on β
    scales = [query_scales(max_len, beta, shift) for beta, shift in pool]
    return functools.partial(_context_columns, alpha, pi, scales, causal)  # picklable: runs in worker processes


def _context_columns(
    alpha: np.ndarray, pi: np.ndarray, scales: list[np.ndarray], causal: bool, words: list[np.ndarray]
) -> np.ndarray:
    return _boltzmann_columns(words, alpha, pi, scales, causal)


@dataclass
class Occurrences:
    """Tokens sorted by (group, h), grouped into distinct (group, h) points with majority labels.

    A group is a word (``group == word``) or a (word, position) pair (see `context_groups`). After
    `reduce_occurrences` only the points the feed-forward layer needs are kept (each group's lowest
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


def group_value_order(group: np.ndarray, h: np.ndarray) -> np.ndarray:
    """``np.lexsort((h, group))`` for integer groups: the tokens sorted by group, then by h, ties in both kept in
    data order.

    Formed from one (unstable) sort of h and one sort of the int64 key (group − min, dense rank of h, index),
    which is unique and orders exactly as lexsort compares (h by ``<``, so −0.0 and 0.0 tie): the same
    permutation, about three times faster than lexsort's two stable passes. Groups are renumbered densely if
    their span would overflow the key; falls back to lexsort when h holds a NaN or the key still does not fit.
    """
    N = len(h)
    if N == 0 or not np.issubdtype(group.dtype, np.integer):
        return np.lexsort((h, group))
    r = np.argsort(h)  # (N,) ties in any order: the index in the key below orders them
    hs = h[r]
    if np.isnan(hs[-1]):
        return np.lexsort((h, group))
    dense_sorted = np.zeros(N, dtype=np.int64)
    np.cumsum(hs[1:] != hs[:-1], out=dense_sorted[1:])  # dense rank of h along the sorted order
    D = int(dense_sorted[-1]) + 1
    lo = int(group.min())
    if (int(group.max()) - lo + 1) * D * N < 2**63:
        g = group.astype(np.int64) - lo
    else:
        uniq, inverse = np.unique(group, return_inverse=True)
        if len(uniq) * D * N >= 2**63:
            return np.lexsort((h, group))
        g = inverse.reshape(-1).astype(np.int64)
    dense = np.empty(N, dtype=np.int64)
    dense[r] = dense_sorted
    key = g * D
    key += dense
    key *= N
    key += np.arange(N, dtype=np.int64)
    return np.argsort(key)


def group_occurrences(
    table: TokenTable,
    h: np.ndarray,
    id2tok: list[str],
    id2lab: list[str],
    lines: np.ndarray,
    max_listed: int = 50,
    by_position: int | None = None,
    token_lines: bool = False,
) -> Occurrences:
    """Group the tokens of ``table`` (``h`` (T,) their contexts) into (group, h) points; groups are words, or
    (word, position) pairs when ``by_position`` (the model's max_len) is given.

    ``table`` must hold every occurrence of each of its words, in data order (ties between labels of one
    point go to the label seen first). ``lines`` maps a global sequence index to its source line; with
    ``token_lines`` (one token per line, CoNLL) a conflict names its tokens' own lines (``lines[i]`` plus the
    position), else the sequences' lines.

    A point whose tokens have several labels is a conflict if its tokens are one input, else a collision: two
    tokens are one input only if both input keys agree, ``table.key`` and the salted ``table.key2``
    (`uatlab.data.information.input_groups`). The points and their labels do not depend on the keys.
    """
    word, lab, hh = table.word, table.label, h
    T = len(word)
    if T == 0:
        e = np.zeros(0, dtype=np.int64)
        return Occurrences(e, np.zeros(0), e, 0, 0, [], 0, pos=e if by_position else None, distinct=0)
    num_labels = len(id2lab)
    pos_all = table.pos if by_position else None
    grp = context_groups(word, table.pos, by_position)
    order = group_value_order(grp, hh)  # = np.lexsort((hh, grp)): tokens of one (group, h) point in data order
    w_s, h_s, l_s, g_s = word[order], hh[order], lab[order], grp[order]
    new = np.r_[True, (g_s[1:] != g_s[:-1]) | (h_s[1:] != h_s[:-1])]
    first = np.flatnonzero(new)  # (G,) first sorted token of each point
    G = len(first)
    size = np.diff(np.r_[first, T])  # (G,) tokens per point
    # majority label per point: a one-token point has its token's label; on the tokens of the other points,
    # count (point, label) pairs; ties → label seen first in data order
    label = l_s[first].astype(np.int64)
    shared = size > 1
    on_shared = np.repeat(shared, size)  # (T,) tokens of points with several tokens
    gid = (np.cumsum(new) - 1)[on_shared]  # point id per such token
    pair = gid * (num_labels + 1) + l_s[on_shared]
    uniq, first_pos, counts = np.unique(pair, return_index=True, return_counts=True)
    p_gid = uniq // (num_labels + 1)
    p_lab = uniq % (num_labels + 1)
    first_tok = order[on_shared][first_pos]  # data-order index of the first token with this (point, label)
    best = np.lexsort((first_tok, -counts, p_gid))  # per point: highest count, then earliest
    is_first = np.ones(len(best), dtype=bool)  # (may be empty: no point with several tokens)
    is_first[1:] = p_gid[best][1:] != p_gid[best][:-1]
    win = best[is_first]
    label[p_gid[win]] = p_lab[win]
    ceiling = int(G - shared.sum() + counts[win].sum())
    # conflicts vs collisions: a point whose tokens have several labels
    multi = np.bincount(p_gid, minlength=G) > 1
    conflicts: list[dict[str, Any]] = []
    collision = 0
    if multi.any():
        # one id per input (both keys agree), formed on the tokens of these points only: ids are compared within
        # a point, so grouping that subset gives the same equalities as grouping every token, at its cost
        on_multi = np.repeat(multi, size)  # (T,) in sorted order
        k_s = np.full(T, -1, dtype=np.int64)
        sub = order[on_multi]
        k_s[on_multi] = input_groups(table.key[sub], None if table.key2 is None else table.key2[sub])
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
                    pos = int(table.pos[t0])
                    conflicts.append(
                        {
                            "sequences": seqs[:16],
                            "lines": sorted({token_line(lines[q], pos, token_lines) for q in seqs})[:16],
                            "position": pos,
                            "token": id2tok[int(w_s[members[0]])],
                            "label_counts": counts_g,
                            "majority": id2lab[int(label[g])],
                        }
                    )
            else:  # different inputs, same h: the construction cannot separate them
                wrong = int((l_s[members] != label[g]).sum())
                collision += wrong - _conflict_losers(keys, l_s[members])
    return Occurrences(
        w_s[first],
        h_s[first],
        label,
        T,
        ceiling,
        conflicts,
        collision,
        group=g_s[first],
        pos=None if pos_all is None else pos_all[order][first],
    )


def reduce_occurrences(occ: Occurrences) -> Occurrences:
    """Keep each group's first and last (lowest-, highest-h) points and the two points around every label
    boundary.

    Between two kept points of a group that are not a boundary pair, every dropped point has the same label
    (a label change would be a boundary), so `label_boundaries`, the first and the last point per group,
    all that `assemble_ramp_model` and the knot interpolant (`.knots`) read, are unchanged. Memory then
    scales with the model, not the data.
    """
    if len(occ.h) == 0:
        return occ
    new_group = occ.group[1:] != occ.group[:-1]
    keep = np.r_[True, new_group] | np.r_[new_group, True]
    bidx, _ = label_boundaries(occ)
    keep[bidx] = True
    keep[bidx + 1] = True
    return Occurrences(
        occ.word[keep],
        occ.h[keep],
        occ.label[keep],
        occ.tokens,
        occ.ceiling_tokens,
        occ.conflicts,
        occ.collision_tokens,
        group=occ.group[keep],
        pos=None if occ.pos is None else occ.pos[keep],
        distinct=occ.distinct,
    )


def merge_occurrences(parts: list[Occurrences], max_listed: int = 50) -> Occurrences:
    """Concatenate the occurrences of disjoint word sets (buckets), sorted by (group, h)."""

    def cat(name: str, dt) -> np.ndarray:
        return np.concatenate([getattr(p, name) for p in parts]) if parts else np.zeros(0, dt)

    word, h, label, group = cat("word", np.int64), cat("h", np.float64), cat("label", np.int64), cat("group", np.int64)
    by_pos = bool(parts) and parts[0].pos is not None
    pos = cat("pos", np.int64) if by_pos else None
    # each part is sorted by (group, h) and a group lies in one part: a stable sort by group alone gives
    # the (group, h) order with ties in data order, the lexsort's order (checked; else the lexsort)
    order = np.argsort(group, kind="stable") if len(parts) > 1 else None
    g_o, h_o = (group, h) if order is None else (group[order], h[order])
    if not np.all((g_o[1:] > g_o[:-1]) | ((g_o[1:] == g_o[:-1]) & (h_o[1:] >= h_o[:-1]))):
        order = np.lexsort((h, group))

    def take(a: np.ndarray) -> np.ndarray:
        return a if order is None else a[order]

    conflicts = sorted((c for p in parts for c in p.conflicts), key=lambda c: (c["sequences"][0], c["position"]))
    return Occurrences(
        take(word),
        take(h),
        take(label),
        sum(p.tokens for p in parts),
        sum(p.ceiling_tokens for p in parts),
        conflicts[:max_listed],
        sum(p.collision_tokens for p in parts),
        group=take(group),
        pos=None if pos is None else take(pos),
        distinct=sum(p.distinct for p in parts),
    )


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
