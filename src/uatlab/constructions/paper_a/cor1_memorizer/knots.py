r"""The memorizer's feed-forward layer as a piecewise-linear interpolant with one ReLU per slope change.

Paper: Kajitsuka & Sato, ICLR 2024 ("paper A"), Corollary 1 (memorization by F^(FF) ∘ F^(SA), rank-1
single-head attention) and its parameter count 4(s + d) + d(2nN + d); the feed-forward recipe is paper A's
§6 interpolant g(z) = t_(1) + Σ_m (s_m − s_{m−1}) ReLU(z − z_(m)) through sorted context ids, applied per
word (or per (word, position)) on the Boltzmann context h, with units only where the slope changes. The
attention layer, the codes α, π, b and the grouping of tokens are those of `.layout`,
`.contexts` and `.select` (unchanged); this module replaces how `.assemble` turns the grouped
points into feed-forward weights (``ff="ramps"`` keeps that construction: two ReLUs per label change).

Notation map (paper A §6 → here): context id q_m → the token's context h (one scalar, the CTX coordinate);
projection w2ᵀ q → h itself; sorted points z_(m) → a group's distinct h values (after rounding to the
model's dtype, z̃_m); targets t_m → the label code of the point's majority label minus the label code the
embedding holds for the word ("base"); slopes s_m → the same, per group; W^(1) = 1_q w2ᵀ → each unit reads
CTX (weight 1), the constant coordinate ONE (weight −z̃ − G·k, the knot) and its group's gate.

**Residual stream** (d = k + 4 + L + k_p; L = 1 for ordinal labels, C for one-hot):

    [0, k)       gate code of the word: ±1 binary digits (float64) or an m-hot {0,1} code (float32) of the
                 word's index among the A *ambiguous* words (words with at least one unit); every other
                 word gets one shared code that no unit has (so k = ⌈log2(A + 1)⌉, not ⌈log2 V⌉)
    KEY, QRY     a = α_w + π_k (keys and values), b_k (query scale)       as in the memorizer
    CTX          h, written by W_O (0 in embedding and positional encoding)
    ONE          1, held by the positional encoding (replaces every bias: the FF has no b1, b2)
    LAB (L)      label code: ordinal c ∈ {0, …, C−1} (L = 1) or one-hot e_c (L = C); the embedding holds
                 the word's base label, the FF adds the corrections
    POS (k_p)    2-hot position code ((word, position) groups only; in the positional encoding)

**Theorem (one unit per slope change; exact interpolation).** Let a group have points
z̃_1 < … < z̃_M (distinct h values of its tokens, as stored) with target label codes t_1 = 0, t_2, …, t_M
(t_1 = 0: the lowest point's label is the base, or a virtual point below every h is prepended, see
below). Define s_0 = 0, s_m = (t_{m+1} − t_m)/(z̃_{m+1} − z̃_m) (1 ≤ m < M) and
g(z) = Σ_{m=1}^{M−1} (s_m − s_{m−1}) ReLU(z − z̃_m). Then g(z̃_j) = t_j for every j, and only the m with
s_m ≠ s_{m−1} need a unit.

*Proof.* For z ∈ [z̃_j, z̃_{j+1}] the active units are m ≤ j, so g is linear there with slope
Σ_{m≤j} (s_m − s_{m−1}) = s_j (telescoping) and g(z̃_1) = 0 = t_1; by induction
g(z̃_{j+1}) = g(z̃_j) + s_j (z̃_{j+1} − z̃_j) = t_{j+1}. Units with s_m = s_{m−1} have coefficient 0. ∎

*Counting.* A group with M points has at most M − 1 units (knots at z̃_1, …, z̃_{M−1}; the slope after the
last point is irrelevant — the compiler's reduced points keep every group's highest point, so no token of
the group lies above it). A single-point run between two label changes costs ONE unit (the slope changes
once, at that point); a run of several points costs two (slope to 0 at its first point, away from 0 at its
last); groups with one label cost none. A (word, position) group whose lowest point is not its word's base
label gets one virtual point, hence ≤ M units. In all q ≤ P ≤ nN, where P is the number of distinct
(group, h) points (every point is a token; n = max_len).

**Never above paper A's count.** The model has 4(1 + d) attention parameters (four rank-1 factors, s = 1),
2qd feed-forward parameters (W1 ∈ R^{q×d}, W2 ∈ R^{d×q}, no biases) and C·d readout parameters (no bias).
Paper A counts 4(s + d) + d(2nN + d). So ours ≤ paper A's ⇔ 2qd + Cd ≤ 2dnN + d² ⇔ 2q + C ≤ 2nN + d.
With q ≤ nN this holds whenever C ≤ d (always with one-hot labels); otherwise the residual stream is padded (zero coordinates) to
d = max(d, 2q + C − 2nN) *before building*, which restores it. So every compile is at most paper A's count
for its own (s, d, n, N); `paper_a_budget_dim` does the check.

**Gates** (unchanged in kind from the memorizer, on fewer coordinates). Binary ±1: W1 has G c(w) on the
code coordinates and −G k − z̃ on ONE; an own token receives G k − G k + h − z̃ = h − z̃, any other word
(code differing in ≥ 1 digit) ≤ −2G + h − z̃. m-hot {0,1}: W1 has −G on the code coordinates where c(w) is
0 and −z̃ on ONE; an own token's code products are exact zeros (pre-activation h − z̃), any other code has a
one outside c(w): ≤ −G + h − z̃. (word, position) groups add −G_pos on the position-code coordinates where
the group's position code is 0. With G (resp. G/2 binary) and G_pos ≥ a_max − z_min + 1/8 every other
group's unit is ≤ −1/8 for every h ≤ a_max and knot z̃ ≥ z_min: it is exactly 0, whatever the context.
Words with one label everywhere have no unit and share one code, which no unit carries.

**Base labels.** Word groups: the embedding holds the label of the word's lowest-h point (t_1 = 0).
(word, position) groups: the most frequent lowest-h label over the word's position groups; a group whose
lowest point has another label gets a virtual point h_v = a_min − 1/4 (below every h) with target 0
prepended (one more knot, at h_v: it is on for every token of the group).

**Readout.** One-hot: logit_c = x_{LAB+c}: margin 1 at exact targets. Ordinal: logit_c = c·x_LAB − (c²/2)·x_ONE;
at x_LAB = t (an integer), logit_t − logit_c = (t − c)²/2 ≥ 1/2 for c ≠ t. Both are linear maps (C·d weights).

**Floating point.** Knots are stored through W1[:, ONE] = −(G k + z) rounded to the dtype (z̃ is the stored
value, computed back exactly); coefficients s_m − s_{m−1} are computed with *error feedback*: each slope is
chosen so that the exact model, with the already rounded coefficients, hits the next target exactly, then
rounded; so rounding never accumulates along a group. A change between points whose stored knots
coincide cannot be represented: the upper point keeps the lower one's target (its tokens are lost,
counted in ``unresolved_boundaries``). A token at point z̃_m sits at its knot: the certificate bounds the
error of that half-on unit by |s_m − s_{m−1}|·r(z), and the on units below act linearly (their input
errors sum to s_{m−1}·r(h)). So the needed precision is ~ r(h)·|Δ label code|/gap, the same order as two
ramps per change at a quarter of the gap.

**Bounds.** |codes| ≤ 1, |a| ≤ 1, b ≤ 2β as in the memorizer; G ≤ 1.125 (binary) or ≤ 2.5 (m-hot); W1 ∈
{±G, −G_pos, 1, the ONE weights −G k − z̃ (|·| ≤ G k + 1.25)}; |W2| = |s_m − s_{m−1}| ≤ 2 |Δt|/gap_min
(the only large weights); readout weights ≤ (C − 1)²/2 (ordinal) or 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from uatlab.constructions.paper_a.cor1_memorizer.assemble import CONSTRUCTION, rank1_memorizer_base
from uatlab.constructions.paper_a.cor1_memorizer.layout import POSITION_CODE, key_extremes, resolve_auto, word_codes
from uatlab.errors import DimensionTooSmallError, InputError

VIRTUAL_BELOW = 0.25  # (word, position) groups: virtual point at a_min − 1/4 below every h
OFF_MARGIN = 0.125  # every other group's unit has pre-activation ≤ −OFF_MARGIN


@dataclass
class KnotLayout:
    """Coordinates of the residual stream (module docstring)."""

    k: int  # gate code coordinates
    label_dims: int  # 1 (ordinal) or C (one-hot)
    kp: int = 0  # position code coordinates
    pad: int = 0  # zero coordinates added to stay within paper A's count

    key = property(lambda self: self.k)
    query = property(lambda self: self.k + 1)
    ctx = property(lambda self: self.k + 2)
    one = property(lambda self: self.k + 3)

    @property
    def labels(self) -> slice:
        return slice(self.k + 4, self.k + 4 + self.label_dims)

    @property
    def pos_code(self) -> slice:
        s = self.k + 4 + self.label_dims
        return slice(s, s + self.kp)

    @property
    def d_model(self) -> int:
        return self.k + 4 + self.label_dims + self.kp + self.pad


@dataclass
class KnotUnits:
    """The FF units of all groups: unit i has knot z̃_i, coefficient coef[i] (label-code space), word, pos."""

    knot: np.ndarray  # (q,) stored knots z̃ (float64, exactly the dtype value)
    coef: np.ndarray  # (q, L) W2 coefficients on the label coordinates (dtype-exact)
    word: np.ndarray  # (q,)
    pos: np.ndarray | None  # (q,) positions ((word, position) groups)
    unresolved: int  # label changes dropped for lack of precision
    virtual_points: int  # (word, position) groups that start from a virtual point
    boundaries: int  # label changes between consecutive points of a group


def label_code_matrix(C: int, labels: str) -> np.ndarray:
    """(C, L): ordinal codes [c] (L = 1) or one-hot rows (L = C)."""
    if labels == "ordinal":
        return np.arange(C, dtype=np.float64)[:, None]
    if labels == "one-hot":
        return np.eye(C)
    raise InputError(f"label code must be 'ordinal' or 'one-hot', got {labels!r}")


def base_labels(occ, V: int, C: int, by_pos: bool) -> np.ndarray:
    """(V,) the label the embedding holds per word (module docstring, 'Base labels')."""
    base = np.zeros(V, dtype=np.int64)
    if len(occ.h) == 0:
        return base
    first = np.r_[0, np.flatnonzero(occ.group[1:] != occ.group[:-1]) + 1]
    fw, fl = occ.word[first], occ.label[first]
    if not by_pos:
        base[fw] = fl
        return base
    pair, cnt = np.unique(fw * C + fl, return_counts=True)
    best = np.lexsort((-cnt, pair // C))
    firsts = np.r_[True, (pair // C)[best][1:] != (pair // C)[best][:-1]]
    base[(pair // C)[best][firsts]] = (pair % C)[best][firsts]
    return base


def knot_units(occ, base: np.ndarray, codes: np.ndarray, h_v: float, GK: float, dtype: str) -> KnotUnits:
    """Units of the interpolants of every group (module docstring, Theorem), with error feedback.

    ``occ``: `uatlab.constructions.paper_a.cor1_memorizer.contexts.Occurrences` sorted by (group, h), possibly reduced, but
    holding each group's lowest and highest point and both sides of every label change; ``codes`` (C, L) label codes; ``h_v`` the virtual
    point ((word, position) groups; ignored for word groups, whose base is their first label); ``GK`` the
    binary gate's G·k (0 for m-hot), which shares the ONE weight with the knot.

    The error-feedback recursion is sequential along a group but independent between groups, so it runs
    over all groups at once: step m advances every group with more than m + 1 points by one point (groups
    sorted by length, the active ones a prefix). Each group sees exactly the float64 operations of a
    point-by-point loop (``need = t_{m+1} − g``, ``c = fl_dtype(need/Δz − S)``, ``S += c`` if c ≠ 0,
    ``g += S·Δz``), elementwise, so the units and their bits do not depend on this order.
    """
    np_dt = np.float32 if dtype == "float32" else np.float64
    by_pos = occ.pos is not None
    P = len(occ.h)
    L = codes.shape[1]
    if P == 0:
        return KnotUnits(np.zeros(0), np.zeros((0, L)), np.zeros(0, np.int64), None, 0, 0, 0)
    grp, word, lab, h = occ.group, occ.word, occ.label, occ.h
    pos = occ.pos if by_pos else np.zeros(P, dtype=np.int64)
    starts = np.r_[0, np.flatnonzero(grp[1:] != grp[:-1]) + 1]
    boundaries = int(((grp[1:] == grp[:-1]) & (lab[1:] != lab[:-1])).sum())
    # stored knots: W1[:, ONE] = −(G k + z) rounded to the dtype; z̃ = −stored − G k is exact in float64
    stored = (-GK - h).astype(np_dt).astype(np.float64)
    zt = -stored - GK
    stored_v = float(np.asarray(-GK - h_v).astype(np_dt))
    zv = -stored_v - GK
    T = codes[lab] - codes[base[word]]  # (P, L) targets relative to the embedding's base label
    # a group whose lowest point is not the base label starts from the virtual point (zv, target 0)
    virt = np.flatnonzero(np.any(T[starts] != 0, axis=1))
    z = np.insert(zt, starts[virt], zv)  # (P', ) the points with the virtual ones, in group order
    t = np.insert(T, starts[virt], 0.0, axis=0)  # (P', L)
    idx = np.insert(np.arange(P), starts[virt], starts[virt])  # (P',) the original point of each
    nvirt = np.zeros(len(starts), dtype=np.int64)
    nvirt[virt] = 1
    xs = starts + np.r_[0, np.cumsum(nvirt)[:-1]]  # (groups,) start of each group in the extended arrays
    xlen = np.diff(np.r_[xs, len(z)])
    # groups with ≥ 2 points and some target different from their first
    differs = np.any(t != t[np.repeat(xs, xlen)], axis=1)
    live = (xlen >= 2) & (np.add.reduceat(differs, xs) > 0)
    order = np.flatnonzero(live)
    order = order[np.argsort(-xlen[order], kind="stable")]  # longest first: the active groups are a prefix
    gs, gl = xs[order], xlen[order]
    S = np.zeros((len(order), L))  # current slope per group (sum of the rounded coefficients)
    g = np.zeros((len(order), L))  # value of the exact interpolant at the current point
    emitted, coefs = [], []
    unresolved = 0
    steps = int(gl.max()) - 1 if len(gl) else 0
    active = len(order)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for m in range(steps):
            while active and gl[active - 1] < m + 2:
                active -= 1
            at = gs[:active] + m  # (a,) extended index of point m of each active group
            dz = z[at + 1] - z[at]
            Sa, ga = S[:active], g[:active]
            need = t[at + 1] - ga
            ok = dz > 0.0
            if not ok.all():  # an unrepresentable change: the upper point keeps the lower point's code
                unresolved += int(np.any(need[~ok] != 0, axis=1).sum())
            c = (need / dz[:, None] - Sa).astype(np_dt).astype(np.float64)
            emit = ok & np.any(c != 0, axis=1)
            if emit.any():
                emitted.append(at[emit])
                coefs.append(c[emit])
                Sa[emit] += c[emit]
            ga[ok] += Sa[ok] * dz[ok, None]
    at = np.concatenate(emitted) if emitted else np.zeros(0, np.int64)
    coef = np.concatenate(coefs) if coefs else np.zeros((0, L))
    srt = np.argsort(at, kind="stable")  # group order, then point order (as built point by point)
    at, coef = at[srt], coef[srt]
    ii = idx[at]
    q = len(at)
    return KnotUnits(
        knot=z[at].astype(np.float64),
        coef=np.ascontiguousarray(coef, dtype=np.float64).reshape(q, L),
        word=word[ii],
        pos=pos[ii] if by_pos else None,
        unresolved=unresolved,
        virtual_points=len(virt),
        boundaries=boundaries,
    )


def paper_a_budget_dim(d: int, q: int, C: int, n: int, N: int) -> int:
    """The smallest d' ≥ d with 4(1+d') + 2qd' + Cd' ≤ 4(1+d') + d'(2nN + d') (module docstring), i.e.
    2q + C ≤ 2nN + d'."""
    return max(d, 2 * q + C - 2 * n * N)


def gate_codes(ambiguous: np.ndarray, V: int, code: str) -> tuple[np.ndarray, int, np.ndarray]:
    """Per-word gate codes (V, k): the A ambiguous words get codes 1..A of the scheme, every other word code 0.

    Returns (codes of the words (V, k), m (0 for binary), codes of the A + 1 code ids (A + 1, k)).
    """
    A = len(ambiguous)
    table, m = word_codes(A + 1, code)
    cid = np.zeros(V, dtype=np.int64)
    cid[ambiguous] = np.arange(1, A + 1)
    return table[cid], m, table


def assemble_knot_model(
    enc,
    occ,
    alpha: np.ndarray,
    pi: np.ndarray,
    b: np.ndarray,
    beta,
    max_len: int,
    dtype: str,
    causal: bool,
    seed: int,
    sequences: int,
    d_model: int | None = None,
    code: str = "auto",
    labels: str = "auto",
):
    """Assemble the model (module docstring); returns (Transformer, info) like `.assemble.assemble_ramp_model`."""
    V, C = len(enc.token_to_id), len(enc.label_to_id)
    # labels: ordinal: 1 coordinate; one-hot: C coordinates but |Δ code| ≤ 1 (float32 precision)
    code, labels, _ = resolve_auto(dtype, code, labels)
    np_dt = np.float32 if dtype == "float32" else np.float64
    by_pos = occ.pos is not None
    a_min, a_max = key_extremes(alpha, pi, max_len)
    h_v = a_min - VIRTUAL_BELOW if by_pos else a_min
    z_min = h_v
    lab_codes = label_code_matrix(C, labels)
    base = base_labels(occ, V, C, by_pos)
    # the gate code's size is needed before the knots (G k shares the ONE weight): units exist only for
    # words with a label change or a virtual point, known from the points alone
    grp = occ.group
    if len(grp):
        starts = np.r_[0, np.flatnonzero(grp[1:] != grp[:-1]) + 1]
        has_change = np.add.reduceat(np.r_[(grp[1:] == grp[:-1]) & (occ.label[1:] != occ.label[:-1]), False], starts)
        first_off = occ.label[starts] != base[occ.word[starts]]
        ambiguous = np.unique(occ.word[starts[(has_change > 0) | first_off]])
    else:
        ambiguous = np.zeros(0, dtype=np.int64)
    wcodes, m, _ = gate_codes(ambiguous, V, code)
    k = wcodes.shape[1]
    mismatch = 2.0 if m == 0 else 1.0
    G = math.ceil(8.0 * (a_max - z_min + OFF_MARGIN) / mismatch) / 8.0
    G_pos = math.ceil(8.0 * (a_max - z_min + OFF_MARGIN)) / 8.0
    GK = G * k if m == 0 else 0.0
    units = knot_units(occ, base, lab_codes, h_v, GK, dtype)
    q = len(units.knot)
    pcodes = word_codes(max_len, POSITION_CODE)[0] if by_pos else np.zeros((max_len, 0))
    lay = KnotLayout(k, lab_codes.shape[1], pcodes.shape[1])
    if d_model is not None and d_model < lay.d_model:
        raise DimensionTooSmallError(
            d_model,
            lay.d_model,
            f"{k} code coordinates + 4 attention/constant coordinates + {lay.label_dims} label coordinates"
            + (f" + {lay.kp} position code coordinates" if lay.kp else ""),
        )
    d = max(lay.d_model, d_model or 0)
    d_budget = paper_a_budget_dim(d, q, C, max_len, sequences)
    lay.pad = d_budget - lay.d_model  # pad so that the count stays within paper A's (module docstring)
    d = lay.d_model

    # a unit's row: its word's gate (the same for every unit of the word: one row per word, gathered), CTX
    # weight 1, its position gate and its knot
    word_rows = np.zeros((V, d), dtype=np_dt)
    word_rows[:, :k] = G * wcodes if m == 0 else -G * (1.0 - wcodes)
    word_rows[:, lay.ctx] = 1.0
    W1 = word_rows[units.word]  # (q, d)
    del word_rows
    if q:
        if by_pos:
            W1[:, lay.pos_code] = -G_pos * (1.0 - pcodes[units.pos])
        W1[:, lay.one] = -GK - units.knot  # exact: the stored value
    W2 = np.zeros((d, q), dtype=np_dt)
    W2[lay.labels, :] = units.coef.T
    E = np.zeros((V, d), dtype=np_dt)
    E[:, :k] = wcodes
    E[:, lay.key] = alpha
    E[:, lay.labels] = lab_codes[base]
    Pz = np.zeros((max_len, d), dtype=np_dt)
    Pz[:, lay.key] = pi[:max_len]
    Pz[:, lay.query] = b[:max_len]
    Pz[:, lay.one] = 1.0
    Pz[:, lay.pos_code] = pcodes
    R = np.zeros((C, d), dtype=np_dt)
    if labels == "ordinal":
        cc = np.arange(C, dtype=np.float64)
        R[:, lay.labels.start] = cc
        R[:, lay.one] = -(cc**2) / 2.0
    else:
        R[np.arange(C), lay.labels.start + np.arange(C)] = 1.0

    model, ranks = rank1_memorizer_base(
        lay,
        E,
        Pz,
        d=d,
        q=q,
        V=V,
        C=C,
        max_len=max_len,
        causal=causal,
        dtype=dtype,
        readout_bias=False,
        ff_bias=False,
        W1=W1,
        W2=W2,
        meta={
            "construction": CONSTRUCTION,
            "ff": "knots",
            "beta": beta,
            "seed": seed,
            "code": code,
            "code_bits": k,
            "G": G,
            "group": "word-pos" if by_pos else "word",
            "pos_code_bits": lay.kp,
            "labels": labels,
        },
    )
    with torch.no_grad():
        tdt = model.config.torch_dtype
        model.readout.weight.copy_(torch.from_numpy(R).to(tdt))
    gaps = np.diff(occ.h)[(occ.group[1:] == occ.group[:-1]) & (occ.label[1:] != occ.label[:-1])]
    info = {
        "ff": "knots",
        "label_code": labels,
        "code": code,
        "code_bits": k,
        "code_weight": m,
        "G": G,
        "ambiguous_words": int(len(ambiguous)),
        "label_boundaries": units.boundaries,
        "group": "word-pos" if by_pos else "word",
        "pos_code_bits": lay.kp,
        "offset_ramps": units.virtual_points,
        "padding_for_paper_a": lay.pad,
        "preactivation_magnitude": GK
        + max(abs(a_min), abs(a_max))
        + (float(np.abs(W1[:, lay.one]).max()) if q else 0.0),
        "unresolved_boundaries": units.unresolved,
        "ff_width": q,
        "d_model": d,
        "min_gap": float(gaps.min()) if len(gaps) else None,
        "max_abs_W2": float(np.abs(units.coef).max()) if q else 0.0,
        "a_range": [a_min, a_max],
        "ranks": ranks,
    }
    return model, info
