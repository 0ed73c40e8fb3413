"""Theorem 2 of paper A, literally: one rank-1 softmax attention head is a contextual mapping.

Statement (Kajitsuka & Sato, ICLR 2024, Theorem 2; constants [R], re-derived [D], spec §5.1). Let
X^(1..N) have no duplicate token within a sequence and be tokenwise (r_min, r_max, ε)-separated with
vocabulary V. Then there are rank-1 W_Q, W_K, W_V ∈ R^{s×d}, W_O ∈ R^{d×s} such that one softmax
head F^(SA) is an (r, δ)-contextual mapping with

    r = r_max + ε/4,        δ = ε (log n)^2 e^{−2 c r_max^2} / (4 c r_max^2),
    c = (|V|+1)^4 (2 log n + 3) π d / (8 ε r_min).

Construction (spec §5.2, s = 1; notation map paper → uatlab in brackets):

* step 1: a unit w with |wᵀ(p − p')| ≥ sqrt(8/(πd))/(|V|+1)^2 ‖p − p'‖ on P = V ∪ {0}
  (:func:`uatlab.theory.find_projection_direction`) [``w``];
* step 2: W_K = wᵀ, W_Q = c wᵀ, so W_Kᵀ W_Q = c w wᵀ and the score of key j for query k is
  c a_j a_k with a(x) = wᵀx; every logit gap c |a_k| |a_j − a_j'| ≥ 2 log n + 3 (Lemma 1's gap)
  and every logit |c a_j a_k| ≤ c r_max^2 (Lemma 1's r) [``W_K``, ``W_Q``, ``c``];
* step 3: W_V = wᵀ: the value of token j is the scalar a_j [``W_V``];
* step 4: W_O = (ε / (4 r_max)) w: each token moves by at most ε/4 [``W_O``].

Then F(X)_k = x_k + (ε/(4 r_max)) w · boltz(c a_k a)/(c a_k), and Lemma 1 separates the same token in
different vocabulary sets by ≥ δ while different tokens stay ≥ ε/2 apart.

**Exactly representable weights.** So that the float64 model and the arbitrary-precision check use
*the same* weights, every entry is a binary64 number and the factorisation is exact: w is truncated to
26 significant bits (towards 0, after scaling by 1 − 2^-30, so ‖w‖ ≤ 1 still holds and the lemma's
bound is re-checked), c is rounded *up* to 26 bits (c_used ≥ c: the gap condition still holds) and
ε/(4 r_max) *down* to 26 bits (the move stays ≤ ε/4). A product of two 26-bit numbers is exact in
binary64, so W_Q = c_used·wᵀ and W_O = o·w hold exactly. δ_theorem below is the paper's formula with
the exact real c; the certificate checks the stored weights directly.

**Verification** (:func:`certify_theorem2`): every ordered sequence of n distinct vocabulary tokens is
pushed through the literal layer in ``arb`` ball arithmetic (:func:`uatlab.verify.exact.arb_attention`);
the certificate proves (a) max ‖F‖ ≤ r, (b) every same-token/different-set pair of outputs is more
than δ_theorem (and 0) apart, (c) every different-token pair is too (triangle inequality with the
certified displacement). :func:`theorem2_literal` finds the smallest precision at which the
certificate passes (doubling, then bisection) and evaluates the same weights in float64.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from flint import arb

from uatlab.errors import InputError, PrecisionError
from uatlab.models.attention import MultiHeadSelfAttention
from uatlab.theory.contextual import contextual_margin_of_outputs
from uatlab.theory.projection import find_projection_direction, projection_constant
from uatlab.theory.separatedness import tokenwise_separatedness
from uatlab.verify.exact import (
    arb_attention,
    arb_log10,
    arb_norm_lower,
    arb_norm_upper,
    arb_to_str,
    bits_to_digits,
    working_precision,
)

__all__ = [
    "Theorem2Certificate",
    "Theorem2Construction",
    "build_theorem2_layer",
    "certify_theorem2",
    "float64_collapse",
    "random_vocabulary",
    "separation_vs_scale",
    "theorem2_constants",
    "theorem2_literal",
]

_BITS = 26  # significant bits kept in w, c and ε/(4 r_max): 26 + 26 ≤ 53, so products are exact


def _round_bits(x: float, bits: int, mode: str) -> float:
    """x rounded to ``bits`` significant bits: mode 'up' (towards +inf), 'down' (towards −inf) or 'zero'."""
    if x == 0:
        return 0.0
    m, e = math.frexp(x)  # x = m 2^e, 0.5 ≤ |m| < 1
    scaled = m * 2.0**bits
    r = {"up": math.ceil, "down": math.floor, "zero": math.trunc}[mode](scaled)
    return math.ldexp(r, e - bits)


def _validate_parameters(n: int, eps: float, r_min: float, r_max: float) -> None:
    if int(n) != n or n < 2:
        raise InputError(f"sequence length n must be an integer ≥ 2 (log n > 0), got {n}")
    for name, v in (("eps", eps), ("r_min", r_min), ("r_max", r_max)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise InputError(f"{name} must be a positive finite number, got {v}")
    if not r_min < r_max:
        raise InputError(f"need r_min < r_max, got r_min = {r_min}, r_max = {r_max}")


def theorem2_constants(vocab_size: int, n: int, d: int, eps: float, r_min: float, r_max: float) -> dict[str, arb]:
    """The paper's c, r and δ as ``arb`` balls (at the current flint precision).

    c = (|V|+1)^4 (2 log n + 3) π d / (8 ε r_min);  r = r_max + ε/4;
    δ = ε (log n)^2 e^{−2 c r_max^2} / (4 c r_max^2)  (equal to spec §5.1's long form).
    """
    _validate_parameters(n, eps, r_min, r_max)
    V1 = arb(vocab_size + 1)
    logn = arb(n).log()
    c = V1**4 * (2 * logn + 3) * arb.pi() * d / (8 * arb(eps) * arb(r_min))
    R2 = arb(r_max) ** 2
    delta = arb(eps) * logn**2 * (-2 * c * R2).exp() / (4 * c * R2)
    return {"c": c, "r": arb(r_max) + arb(eps) / 4, "delta": delta}


def random_vocabulary(
    size: int, dim: int, eps: float, r_min: float, r_max: float, seed: int = 0, max_tries: int = 100_000
) -> np.ndarray:
    """``size`` random tokens in R^dim with norms in (r_min, r_max] and pairwise distances > eps.

    Rejection sampling (direction ~ N(0, I) normalised, radius uniform in (r_min, r_max]), seeded.

    Raises:
        InputError: when impossible by volume (more points than disjoint ε/2-balls fit in the shell
            r_min − ε/2 < ‖x‖ ≤ r_max + ε/2) or when ``max_tries`` draws did not place them all.
    """
    if int(size) != size or size < 1 or int(dim) != dim or dim < 1:
        raise InputError(f"need size ≥ 1 and dim ≥ 1, got size = {size}, dim = {dim}")
    _validate_parameters(2, eps, r_min, r_max)
    cap = ((r_max + eps / 2) ** dim - max(0.0, r_min - eps / 2) ** dim) / (eps / 2) ** dim
    if size > cap:
        raise InputError(
            f"a vocabulary of {size} tokens in R^{dim} with norms in ({r_min}, {r_max}] and pairwise distances "
            f"> {eps} cannot exist: disjoint balls of radius ε/2 around them must fit in the shell "
            f"{max(0.0, r_min - eps / 2):g} < ‖x‖ ≤ {r_max + eps / 2:g}, which holds at most {math.floor(cap)}"
        )
    rng = np.random.default_rng(seed)
    pts: list[np.ndarray] = []
    for _ in range(max_tries):
        u = rng.standard_normal(dim)
        u /= np.linalg.norm(u)
        x = (r_max - rng.random() * (r_max - r_min)) * u  # radius in (r_min, r_max]
        if not (r_min < np.linalg.norm(x) <= r_max):
            continue
        if all(np.linalg.norm(x - p) > eps for p in pts):
            pts.append(x)
            if len(pts) == size:
                return np.array(pts)
    raise InputError(
        f"placed only {len(pts)} of {size} tokens after {max_tries} random draws (norms in ({r_min}, {r_max}], "
        f"distances > {eps} in R^{dim}); the shell is too crowded for rejection sampling. "
        "Use fewer tokens, a smaller eps, a wider (r_min, r_max] or a larger dimension."
    )


@dataclass(frozen=True)
class Theorem2Construction:
    """The literal Theorem-2 layer and its constants.

    Attributes:
        layer: float64 :class:`MultiHeadSelfAttention` (h = 1, s = 1, rank 1, softmax) holding the weights.
        weights: the paper's matrices as float64 arrays: W_Q, W_K, W_V (1, d) and W_O (d, 1).
        vocabulary: (|V|, d) tokens; n, eps, r_min, r_max: the theorem's parameters.
        w: (d,) projection direction (26-bit entries, ‖w‖ ≤ 1); projection_ratio: its worst pair ratio
            on V ∪ {0}; projection_constant: sqrt(8/(πd))/(|V|+1)^2.
        c: the paper's constant (float, nearest); c_used: the binary64 value in W_Q (≥ c).
        out_scale: ε/(4 r_max) as stored in W_O (≤ ε/(4 r_max)).
        max_logit: max |c_used a_j a_k| over the vocabulary (≤ c r_max^2).
    """

    layer: MultiHeadSelfAttention
    weights: dict[str, np.ndarray]
    vocabulary: np.ndarray
    n: int
    eps: float
    r_min: float
    r_max: float
    w: np.ndarray
    projection_ratio: float
    projection_constant: float
    c: float
    c_used: float
    out_scale: float
    max_logit: float
    c_scale: float = 1.0

    @property
    def d(self) -> int:
        return int(self.vocabulary.shape[1])

    def constants(self) -> dict[str, arb]:
        """Paper's c, r, δ as balls (current precision)."""
        return theorem2_constants(len(self.vocabulary), self.n, self.d, self.eps, self.r_min, self.r_max)


def build_theorem2_layer(
    vocabulary: Any,
    n: int,
    eps: float,
    r_min: float,
    r_max: float,
    seed: int = 0,
    max_tries: int = 100,
    c_scale: float = 1.0,
) -> Theorem2Construction:
    """Build the literal Theorem-2 layer for a vocabulary (see the module docstring for every step).

    Args:
        vocabulary: (|V|, d) distinct tokens, norms in (r_min, r_max], pairwise distances > eps.
        n: sequence length (2 ≤ n ≤ |V|: sequences have no duplicates).
        eps, r_min, r_max: the separatedness constants the theorem is applied with.
        seed: seed of the projection-direction search.
        max_tries: retry limit of that search.
        c_scale: multiplies the paper's c (1 = literal; other values are for studying the scale only,
            the theorem's guarantee needs c_scale ≥ 1).

    Raises:
        InputError: parameters or vocabulary that violate the theorem's hypotheses (named).
    """
    _validate_parameters(n, eps, r_min, r_max)
    V = np.asarray(vocabulary, dtype=np.float64)
    if V.ndim != 2 or V.shape[0] < 1:
        raise InputError(f"vocabulary must be a (|V|, d) array, got shape {V.shape}")
    if n > V.shape[0]:
        raise InputError(f"n = {n} exceeds |V| = {V.shape[0]}: a sequence of n distinct tokens is impossible")
    if not (math.isfinite(c_scale) and c_scale > 0):
        raise InputError(f"c_scale must be positive, got {c_scale}")
    sep = tokenwise_separatedness(V[None], r_min=r_min, r_max=r_max, eps=eps, allow_duplicates=False)
    K, d = V.shape
    del sep

    with working_precision(bits=256):
        consts = theorem2_constants(K, n, d, eps, r_min, r_max)
        c_exact = consts["c"] * arb(c_scale)
        c_used = _round_bits(float(c_exact.upper().mid()), _BITS, "up")
        while not arb(c_used) >= c_exact:
            c_used = _round_bits(math.nextafter(c_used, math.inf), _BITS, "up")
        o_exact = arb(eps) / (4 * arb(r_max))
        out_scale = _round_bits(float(o_exact.lower().mid()), _BITS, "down")
        while not arb(out_scale) <= o_exact:
            out_scale = _round_bits(math.nextafter(out_scale, 0.0), _BITS, "down")
        c_float = float(consts["c"].mid())

    # Step 1: projection direction on P = V ∪ {0} (M = |V| + 1 points), rounded to 26 bits.
    P = np.vstack([V, np.zeros((1, d))])  # (|V|+1, d)
    const = projection_constant(d, K + 1)
    rng = np.random.default_rng(seed)
    ia, ib = np.triu_indices(K + 1, k=1)
    D = P[ia] - P[ib]  # (pairs, d)
    for _ in range(max_tries):
        found = find_projection_direction(P, seed=rng, max_tries=max_tries, constant=const)
        w = np.array([_round_bits(v * (1 - 2.0**-30), _BITS, "zero") for v in found.w])  # (d,)
        ratio = float((np.abs(D @ w) / np.linalg.norm(D, axis=1)).min())
        if ratio >= const and float(np.linalg.norm(w)) <= 1.0:
            break
    else:  # pragma: no cover - rounding by 2^-26 never destroys a bound with this much slack in practice
        raise InputError("could not round the projection direction to 26 bits within the retry limit")

    # Steps 2–4: the paper's matrices (s = 1), each an exact binary64 product.
    W_K = w[None, :].copy()  # (1, d): W_K = wᵀ
    W_Q = c_used * w[None, :]  # (1, d): W_Q = c wᵀ, so W_Kᵀ W_Q = c w wᵀ (exact: 26-bit × 26-bit)
    W_V = w[None, :].copy()  # (1, d): W_V = wᵀ, value of token j = a_j = wᵀ x_j
    W_O = out_scale * w[:, None]  # (d, 1): W_O = ε/(4 r_max) · w, ‖W_O‖ ≤ ε/(4 r_max)
    layer = MultiHeadSelfAttention(d, n_heads=1, head_dim=1, rank=1, attention="softmax", dtype=torch.float64)
    one = torch.ones(1, 1, 1, dtype=torch.float64)
    row = torch.from_numpy(w)[None, None, :]  # (1, 1, d)
    layer.W_K.set_factors(one, row)
    layer.W_V.set_factors(one, row)
    layer.W_Q.set_factors(one * c_used, row)
    layer.W_O.set_factors(torch.from_numpy(w)[None, :, None], one * out_scale)  # (1, d, 1) @ (1, 1, 1)
    eff = layer.effective_weights()
    assert torch.equal(eff["W_Q"][0], torch.from_numpy(W_Q)) and torch.equal(eff["W_O"][0], torch.from_numpy(W_O))

    a = V @ w  # (|V|,) projections a(x) = wᵀx
    return Theorem2Construction(
        layer=layer,
        weights={"W_Q": W_Q, "W_K": W_K, "W_V": W_V, "W_O": W_O},
        vocabulary=V,
        n=int(n),
        eps=float(eps),
        r_min=float(r_min),
        r_max=float(r_max),
        w=w,
        projection_ratio=ratio,
        projection_constant=const,
        c=c_float,
        c_used=c_used,
        out_scale=out_scale,
        max_logit=float(c_used * np.abs(a).max() ** 2),
        c_scale=float(c_scale),
    )


def all_sequences(vocab_size: int, n: int, mode: str = "all") -> list[tuple[int, ...]]:
    """Vocabulary-id sequences: 'all' ordered n-tuples of distinct ids, or 'sets' (one sorted tuple per set)."""
    if mode == "all":
        return list(itertools.permutations(range(vocab_size), n))
    if mode == "sets":
        return list(itertools.combinations(range(vocab_size), n))
    raise InputError(f"unknown sequence mode {mode!r}: use 'all' or 'sets'")


@dataclass
class Theorem2Certificate:
    """The outcome of one arbitrary-precision check at one precision.

    All bounds are ``arb`` balls; ``passes`` is True only if every inequality is *certain*.
    ``definite`` is True when some inequality is certainly *violated* (more precision cannot help).
    The same-token fields are None when no two sequences with different vocabulary sets share a
    token (e.g. n = |V|: a single set), in which case only different-token pairs are required.
    """

    bits: int
    passes: bool
    same_token_lower: arb | None  # certified lower bound on the min same-token/different-set distance
    same_token_value: arb | None  # ball enclosing that min distance
    same_token_pair: tuple[tuple[int, ...], int, tuple[int, ...], int] | None  # (seq, pos, seq, pos) of the min
    different_token_lower: arb  # certified lower bound on all different-token distances
    max_norm_upper: arb  # certified upper bound on max ‖F(X)_k‖
    failures: list[str] = field(default_factory=list)
    definite: bool = False

    @property
    def digits(self) -> int:
        return bits_to_digits(self.bits)


def certify_theorem2(
    con: Theorem2Construction, bits: int, sequences: list[tuple[int, ...]] | None = None
) -> Theorem2Certificate:
    """Certify the (r, δ_theorem)-contextual-mapping property of ``con.layer`` at ``bits`` of precision.

    Args:
        con: the construction.
        bits: arb working precision.
        sequences: vocabulary-id sequences (default: every ordered sequence of n distinct tokens).
    """
    seqs = sequences if sequences is not None else all_sequences(len(con.vocabulary), con.n, "all")
    V = con.vocabulary
    Wq = [con.weights["W_Q"].tolist()]  # (h=1, s=1, d)
    Wk = [con.weights["W_K"].tolist()]
    Wv = [con.weights["W_V"].tolist()]
    Wo = [con.weights["W_O"].tolist()]  # (1, d, 1)
    failures: list[str] = []
    with working_precision(bits=bits):
        consts = con.constants()
        delta_th, r = consts["delta"], consts["r"]
        hull: dict[tuple[frozenset[int], int], list[arb]] = {}  # key (set, token) → enclosure of the output
        where: dict[tuple[frozenset[int], int], tuple[tuple[int, ...], int]] = {}
        max_norm = arb(0)
        max_norm_low = arb(0)
        disp: dict[int, arb] = {}  # token → upper bound on ‖F(X)_k − x_k‖
        for seq in seqs:
            out = arb_attention([V[t].tolist() for t in seq], Wq, Wk, Wv, Wo)  # n × d balls
            key_set = frozenset(seq)
            for k, t in enumerate(seq):
                y = out[k]
                nu = arb_norm_upper(y)
                max_norm = max_norm.max(nu)
                max_norm_low = max_norm_low.max(arb_norm_lower(y))
                du = arb_norm_upper([yc - arb(float(xc)) for yc, xc in zip(y, V[t], strict=True)])
                disp[t] = disp[t].max(du) if t in disp else du
                key = (key_set, t)
                if key in hull:
                    hull[key] = [h.union(v) for h, v in zip(hull[key], y, strict=True)]
                else:
                    hull[key], where[key] = y, (seq, k)
        # (a) max ‖F‖ ≤ r
        definite = False
        if not max_norm <= r:
            failures.append(f"max ‖F‖ ≤ {arb_to_str(max_norm)} is not certified ≤ r = {arb_to_str(r)}")
            definite = definite or bool(max_norm_low > r)
        # (b) same token, different vocabulary sets
        by_token: dict[int, list[frozenset[int]]] = {}
        for s, t in hull:
            by_token.setdefault(t, []).append(s)
        same_lo: arb | None = None
        same_val: arb | None = None
        same_pair = None
        for t, sets in by_token.items():
            for s1, s2 in itertools.combinations(sets, 2):
                diff = [a - b for a, b in zip(hull[(s1, t)], hull[(s2, t)], strict=True)]
                lo = arb_norm_lower(diff)
                val = arb_norm_upper(diff).union(lo)
                if not (lo > 0 and lo >= delta_th):
                    up = arb_norm_upper(diff)
                    failures.append(
                        f"token {t} in sets {sorted(s1)} vs {sorted(s2)}: separation not certified > δ_theorem "
                        f"(enclosure [{arb_to_str(lo)}, {arb_to_str(up)}])"
                    )
                    definite = definite or bool(up < delta_th)
                if same_val is None or arb_log10(val) < arb_log10(same_val):
                    same_lo, same_val = lo, val
                    (q1, k1), (q2, k2) = where[(s1, t)], where[(s2, t)]
                    same_pair = (q1, k1, q2, k2)
        # (c) different tokens: ‖F_x − F_x'‖ ≥ ‖x − x'‖ − disp(x) − disp(x')
        diff_lo: arb | None = None
        toks = sorted(disp)
        for t1, t2 in itertools.combinations(toks, 2):
            gap = arb_norm_lower([arb(float(a)) - arb(float(b)) for a, b in zip(V[t1], V[t2], strict=True)])
            lo = gap - disp[t1] - disp[t2]
            diff_lo = lo if diff_lo is None or lo.mid() < diff_lo.mid() else diff_lo
            if not (lo > 0 and lo >= delta_th):
                # The triangle bound is not enough: check every pair of outputs of these two tokens directly.
                for (sa, ta), ya in hull.items():
                    for (sb, tb), yb in hull.items():
                        if {ta, tb} != {t1, t2} or ta > tb:
                            continue
                        diff = [a - b for a, b in zip(ya, yb, strict=True)]
                        dlo = arb_norm_lower(diff)
                        if not (dlo > 0 and dlo >= delta_th):
                            failures.append(
                                f"tokens {ta} (set {sorted(sa)}) and {tb} (set {sorted(sb)}): separation not "
                                f"certified > δ_theorem (lower bound {arb_to_str(dlo)})"
                            )
                            definite = definite or bool(arb_norm_upper(diff) < delta_th)
        if diff_lo is None:
            diff_lo = arb(0)
    return Theorem2Certificate(
        bits=bits,
        passes=not failures,
        same_token_lower=same_lo,
        same_token_value=same_val,
        same_token_pair=same_pair,
        different_token_lower=diff_lo,
        max_norm_upper=max_norm,
        failures=failures,
        definite=definite,
    )


def float64_collapse(con: Theorem2Construction, sequences: list[tuple[int, ...]]) -> dict[str, Any]:
    """Evaluate the same weights in float64 and count the context ids that collapse.

    Two ids (different (V^(i), token) keys) collapse when some outputs of theirs are no farther apart
    than the float64 noise floor: max(same-key spread, 8 ulp · max‖F‖). Ids are merged transitively.
    """
    X = np.stack([con.vocabulary[list(s)] for s in sequences])  # (N, n, d)
    with torch.no_grad():
        out = con.layer(torch.from_numpy(X))  # (N, n, d)
    sep = tokenwise_separatedness(X)
    m = contextual_margin_of_outputs(out, sep)
    Y = out.reshape(-1, X.shape[-1]).numpy()  # (Nn, d)
    keys = sep.context_keys().reshape(-1)
    floor = max(m.same_key_spread, 8 * np.finfo(np.float64).eps * m.r)
    uniq, first = np.unique(keys, return_index=True)
    parent = {int(k): int(k) for k in uniq}

    def find(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    dist = np.linalg.norm(Y[:, None, :] - Y[None, :, :], axis=-1) if len(Y) <= 4000 else None
    if dist is None:
        raise InputError(f"{len(Y)} outputs are too many for the float64 collapse count (limit 4000)")
    close = np.argwhere((dist <= floor) & (keys[:, None] != keys[None, :]))
    for a, b in close:
        ra, rb = find(int(keys[a])), find(int(keys[b]))
        if ra != rb:
            parent[ra] = rb
    f64_ids = len({find(int(k)) for k in uniq})
    return {
        "exact_distinct_ids": len(uniq),
        "float64_distinct_ids": f64_ids,
        "float64_collapsed_ids": len(uniq) - f64_ids,
        "float64_delta": m.delta,
        "float64_noise_floor": floor,
        "float64_max_norm": m.r,
        "float64_worst_pair": m.describe_worst_pair(),
    }


def theorem2_literal(
    vocab_size: int = 4,
    dim: int = 2,
    n: int = 3,
    seed: int = 0,
    eps: float = 0.5,
    r_min: float = 1.0,
    r_max: float = 2.0,
    max_digits: int = 100_000,
    sequences: str = "all",
    vocabulary: Any = None,
    c_scale: float = 1.0,
    max_sequences: int = 20_000,
    progress: Callable[[int, bool], None] | None = None,
) -> dict[str, Any]:
    """Build the literal Theorem-2 layer on a random (or given) vocabulary and certify it exactly.

    Steps: vocabulary (seeded, :func:`random_vocabulary`) → weights (:func:`build_theorem2_layer`) →
    smallest passing precision (digits 16, 32, … doubling until the certificate passes, then bisection
    to one digit) → a final certificate at 1.1× that precision + 20 digits for the reported figures →
    the float64 evaluation of the same weights (:func:`float64_collapse`).

    Returns:
        a JSON-able dict: ``passes``, ``delta_achieved`` / ``delta_achieved_lower`` / ``delta_theorem``
        (strings such as '1.234e-3373'), their log10, ``digits`` (smallest passing precision),
        ``float64_collapsed_ids`` and friends, the constants, the search trace and ``seconds``.

    Raises:
        InputError: impossible parameters or vocabulary; too many sequences.
        PrecisionError: the certificate does not pass within ``max_digits`` (the message says how many
            digits the data likely need).
    """
    t0 = time.perf_counter()
    _validate_parameters(n, eps, r_min, r_max)
    if max_digits < 16:
        raise PrecisionError(f"--max-digits {max_digits} is below the minimum of 16 decimal digits")
    if vocabulary is None:
        V = random_vocabulary(vocab_size, dim, eps, r_min, r_max, seed=seed)
    else:
        V = np.asarray(vocabulary, dtype=np.float64)
    if n > len(V):
        raise InputError(f"n = {n} exceeds the vocabulary size {len(V)}: sequences need n distinct tokens")
    count = math.perm(len(V), n) if sequences == "all" else math.comb(len(V), n)
    if count > max_sequences:
        raise InputError(
            f"{count} sequences ({sequences}) exceed the limit of {max_sequences}; use sequences='sets' "
            "(one ordering per set: the layer is permutation-equivariant) or a smaller |V| or n"
        )
    con = build_theorem2_layer(V, n, eps, r_min, r_max, seed=seed, c_scale=c_scale)
    seqs = all_sequences(len(V), n, sequences)
    a = V @ con.w
    spread = max(abs(con.c_used * ak) * (a.max() - a.min()) for ak in a)  # largest logit range of a query
    estimate = int(spread / math.log(10)) + 10

    trace: list[tuple[int, bool]] = []

    def attempt(digits: int) -> Theorem2Certificate:
        cert = certify_theorem2(con, int(math.ceil(digits * math.log2(10))), seqs)
        trace.append((digits, cert.passes))
        if progress is not None:
            progress(digits, cert.passes)
        return cert

    lo, digits = 0, 16
    while True:
        cert = attempt(digits)
        if cert.passes or cert.definite:
            break
        lo = digits
        if digits >= max_digits:
            raise PrecisionError(
                f"the exact certificate did not pass at the cap of {max_digits} decimal digits; the largest "
                f"logit range here is {spread:.4g}, which suggests up to about {estimate} digits. "
                "Raise --max-digits (the cost grows faster than linearly with it) or use smaller |V|, d or n."
            )
        digits = min(2 * digits, max_digits)
    hi = digits
    if cert.passes:
        # Informed probes: outputs are O(1) and must be resolved to δ, so about −log10 δ digits are needed.
        # Probing just below and above that guess shrinks the bisection interval (the search stays exact).
        guess = math.nan
        if cert.same_token_value is not None:
            with working_precision(bits=cert.bits):
                guess = -arb_log10(cert.same_token_value) if cert.same_token_value > 0 else math.nan
        if math.isfinite(guess):
            for probe in (int(guess) - 8, int(guess) + 8):
                if lo < probe < hi:
                    if attempt(probe).passes:
                        hi = probe
                    else:
                        lo = probe
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if attempt(mid).passes:
                hi = mid
            else:
                lo = mid
    final = certify_theorem2(con, int(math.ceil((1.1 * hi + 20) * math.log2(10))), seqs) if cert.passes else cert
    with working_precision(bits=final.bits):
        consts = con.constants()
        delta_th = consts["delta"]
        r = consts["r"]
        # δ achieved: the same-token/different-set minimum (the binding one); with a single vocabulary
        # set there is none and the certified different-token bound is the δ achieved.
        same = final.same_token_value is not None
        d_val = final.same_token_value if same else final.different_token_lower
        d_low = final.same_token_lower if same else final.different_token_lower
        res: dict[str, Any] = {
            "passes": bool(final.passes),
            "delta_achieved": arb_to_str(d_val),
            "delta_achieved_lower": arb_to_str(d_low),
            "delta_kind": "same token, different sets" if same else "different tokens (one vocabulary set)",
            "delta_theorem": arb_to_str(delta_th),
            "log10_delta_achieved": arb_log10(d_val),
            "log10_delta_theorem": arb_log10(delta_th),
            "achieved_over_theorem_log10": arb_log10(d_val) - arb_log10(delta_th),
            "digits": hi if final.passes else None,
            "bits": int(math.ceil(hi * math.log2(10))),
            "digits_estimate": estimate,
            "different_token_lower": float(final.different_token_lower.mid()),
            "max_norm": float(final.max_norm_upper.mid()),
            "r": float(r.mid()),
            "failures": final.failures[:5],
        }
    res.update(
        {
            "vocab_size": len(V),
            "dim": int(V.shape[1]),
            "length": n,
            "eps": eps,
            "r_min": r_min,
            "r_max": r_max,
            "seed": seed,
            "sequences": sequences,
            "n_sequences": len(seqs),
            "c": con.c,
            "c_used": con.c_used,
            "c_scale": c_scale,
            "max_logit": con.max_logit,
            "w": con.w.tolist(),
            "projection_ratio": con.projection_ratio,
            "projection_constant": con.projection_constant,
            "worst_pair": (
                None
                if final.same_token_pair is None
                else {
                    "sequence_a": list(final.same_token_pair[0]),
                    "position_a": final.same_token_pair[1],
                    "sequence_b": list(final.same_token_pair[2]),
                    "position_b": final.same_token_pair[3],
                }
            ),
            "vocabulary": V.tolist(),
            "precision_search": [{"digits": dg, "passes": ok} for dg, ok in trace],
        }
    )
    res.update(float64_collapse(con, seqs))
    res["seconds"] = round(time.perf_counter() - t0, 3)
    return res


def separation_vs_scale(
    scales: list[float],
    vocab_size: int = 4,
    dim: int = 2,
    n: int = 3,
    seed: int = 0,
    eps: float = 0.5,
    r_min: float = 1.0,
    r_max: float = 2.0,
) -> list[dict[str, Any]]:
    """Same-token separation in exact arithmetic and in float64 as the paper's c is scaled.

    For each factor in ``scales`` the layer is rebuilt with c_scale = factor (one vocabulary, one w;
    factors < 1 leave the theorem's regime and are for the study only) and evaluated on every sorted
    sequence (one per vocabulary set, enough by permutation equivariance): exact δ (arb, at a precision
    chosen from the logit range, certified lower bound reported) against the float64 margin and
    collapsed ids.
    """
    V = random_vocabulary(vocab_size, dim, eps, r_min, r_max, seed=seed)
    seqs = all_sequences(len(V), n, "sets")
    rows = []
    for f in scales:
        con = build_theorem2_layer(V, n, eps, r_min, r_max, seed=seed, c_scale=f)
        a = V @ con.w
        spread = max(abs(con.c_used * ak) * (a.max() - a.min()) for ak in a)
        digits = int(spread / math.log(10)) + 40
        cert = certify_theorem2(con, int(math.ceil(digits * math.log2(10))), seqs)
        with working_precision(bits=cert.bits):
            same = cert.same_token_value is not None
            exact_lower = cert.same_token_lower if same else cert.different_token_lower
            row = {
                "c_scale": f,
                "c_used": con.c_used,
                "exact_log10_delta": arb_log10(cert.same_token_value if same else exact_lower),
                "exact_delta_certified_positive": bool(exact_lower > 0),
                "digits": digits,
            }
        row.update(float64_collapse(con, seqs))
        rows.append(row)
    return rows
