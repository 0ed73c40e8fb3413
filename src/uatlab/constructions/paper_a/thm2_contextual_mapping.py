"""Theorem 2 of paper A, literally: one rank-1 softmax attention head is a contextual mapping.

Statement (Kajitsuka & Sato, ICLR 2024, Theorem 2; constants re-derived here). Let
X^(1..N) have no duplicate token within a sequence and be tokenwise (r_min, r_max, ε)-separated with
vocabulary V. Then there are rank-1 W_Q, W_K, W_V ∈ R^{s×d}, W_O ∈ R^{d×s} such that one softmax
head F^(SA) is an (r, δ)-contextual mapping with

    r = r_max + ε/4,        δ = ε (log n)^2 e^{−2 c r_max^2} / (4 c r_max^2),
    c = (|V|+1)^4 (2 log n + 3) π d / (8 ε r_min).

Construction (s = 1; notation map paper → uatlab in brackets):

* step 1: a unit w with |wᵀ(p − p')| ≥ sqrt(8/(πd))/(|V|+1)^2 ‖p − p'‖ on P = V ∪ {0}
  (`uatlab.theory.find_projection_direction`) [``w``];
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

**Verification** (`certify_theorem2`): every ordered sequence of n distinct vocabulary tokens is
pushed through the literal layer in ``arb`` ball arithmetic (`uatlab.numerics.arb.arb_attention`);
the certificate proves (a) max ‖F‖ ≤ r, (b) every same-token/different-set pair of outputs is more
than δ_theorem (and 0) apart, (c) every different-token pair is too (triangle inequality with the
certified displacement). `theorem2_literal` finds the smallest precision at which the
certificate passes (doubling, then bisection) and evaluates the same weights in float64.
"""

from __future__ import annotations

import itertools
import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from flint import arb

from uatlab._util import check_integer, check_positive
from uatlab.constructions.contract import PAPER_A, Construction, count_parameters
from uatlab.errors import InputError
from uatlab.models.attention import MultiHeadSelfAttention
from uatlab.numerics.arb import arb_log10, working_precision
from uatlab.theory.projection import find_projection_direction, projection_constant
from uatlab.theory.separatedness import tokenwise_separatedness

__all__ = [
    "Theorem2Construction",
    "all_sequences",
    "build_theorem2_layer",
    "random_vocabulary",
    "theorem2_constants",
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


def validate_parameters(n: int, eps: float, r_min: float, r_max: float) -> None:
    """Theorem 2's hypotheses on its constants: n ≥ 2 (log n > 0), ε, r_min, r_max positive and finite, r_min <
    r_max, and tokens of norm up to r_max + ε whose squares stay finite in float64 (TypeError for a value that is
    not a number, InputError naming the constant otherwise)."""
    if isinstance(n, bool) or not isinstance(n, (numbers.Integral, np.integer)):
        raise TypeError(f"sequence length n must be an integer, got {n!r} ({type(n).__name__})")
    if n < 2:
        raise InputError(f"sequence length n must be an integer ≥ 2 (log n > 0), got {n}")
    for name, v in (("eps", eps), ("r_min", r_min), ("r_max", r_max)):
        check_positive(v, name)
    if not r_min < r_max:
        raise InputError(f"need r_min < r_max, got r_min = {r_min}, r_max = {r_max}")
    if r_max + eps > FLOAT64_NORM_LIMIT:
        raise InputError(
            f"r_max + eps = {r_max + eps:g} exceeds {FLOAT64_NORM_LIMIT:g}: the squared norms of tokens this long "
            "overflow float64 (the vocabulary is drawn and compared in float64)"
        )


FLOAT64_NORM_LIMIT = 1e150  # ‖x‖² and ‖x − y‖² of tokens up to this long stay finite in float64 (max ≈ 1.8e308)


def theorem2_constants(vocab_size: int, n: int, d: int, eps: float, r_min: float, r_max: float) -> dict[str, arb]:
    """The paper's c, r and δ as ``arb`` balls (at the current flint precision).

    c = (|V|+1)^4 (2 log n + 3) π d / (8 ε r_min);  r = r_max + ε/4;
    δ = ε (log n)^2 e^{−2 c r_max^2} / (4 c r_max^2)  (equal to the paper's long form).
    """
    validate_parameters(n, eps, r_min, r_max)
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
    validate_parameters(2, eps, r_min, r_max)
    # cap = ((r_max + ε/2)^dim − max(0, r_min − ε/2)^dim) / (ε/2)^dim, in logarithms (no overflow or underflow)
    outer, inner = r_max + eps / 2, max(0.0, r_min - eps / 2)
    log_cap = dim * (math.log(outer) - math.log(eps / 2)) + math.log1p(-((inner / outer) ** dim))
    exact = log_cap < 700 and (eps / 2) ** dim > 0  # then the direct formula neither overflows nor divides by 0
    cap_value = (outer**dim - inner**dim) / (eps / 2) ** dim if exact else math.inf
    if (size > cap_value) if exact else (math.log(size) > log_cap):
        cap = f"{math.floor(cap_value)}" if exact else f"about 10^{log_cap / math.log(10):.0f}"
        raise InputError(
            f"a vocabulary of {size} tokens in R^{dim} with norms in ({r_min}, {r_max}] and pairwise distances "
            f"> {eps} cannot exist: disjoint balls of radius ε/2 around them must fit in the shell "
            f"{inner:g} < ‖x‖ ≤ {outer:g}, which holds at most {cap}"
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
        layer: float64 `MultiHeadSelfAttention` (h = 1, s = 1, rank 1, softmax) holding the weights.
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
) -> Construction:
    """Build the literal Theorem-2 layer for a vocabulary (see the module docstring for every step).

    Returns:
        `uatlab.constructions.contract.Construction`: ``model`` the float64
        `MultiHeadSelfAttention`; ``guarantee`` the theorem's r and log10 δ of the
        (r, δ)-contextual mapping (δ underflows float64); ``detail`` the `Theorem2Construction`
        (vocabulary, weights, constants) that `uatlab.verify.theorem2.certify_theorem2` checks.

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
    validate_parameters(n, eps, r_min, r_max)
    try:
        V = np.asarray(vocabulary, dtype=np.float64)
    except (TypeError, ValueError) as exc:  # strings, ragged rows: numpy's message would not say which argument
        raise InputError(f"vocabulary must be a (|V|, d) array of real numbers: {exc}") from None
    if V.ndim != 2 or V.shape[0] < 1:
        raise InputError(f"vocabulary must be a (|V|, d) array, got shape {V.shape}")
    if n > V.shape[0]:
        raise InputError(f"n = {n} exceeds |V| = {V.shape[0]}: a sequence of n distinct tokens is impossible")
    check_positive(c_scale, "c_scale")
    check_integer(seed, "seed", 0, None, "build_theorem2_layer()")
    check_integer(max_tries, "max_tries", 1, None, "build_theorem2_layer()")
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
        guarantee = {"r": float(consts["r"].upper().mid()), "log10_delta": arb_log10(consts["delta"])}

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
    detail = Theorem2Construction(
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
    facts = {
        "paper": PAPER_A,
        "theorem": "Theorem 2",
        "parameters": count_parameters(layer),
        "n": int(n),
        "vocabulary_size": K,
        "d": d,
        "eps": float(eps),
        "c": c_float,
        "c_used": c_used,
        "c_scale": float(c_scale),
        "max_logit": detail.max_logit,
    }
    return Construction(model=layer, guarantee=guarantee, facts=facts, detail=detail)


def all_sequences(vocab_size: int, n: int, mode: str = "all") -> list[tuple[int, ...]]:
    """Vocabulary-id sequences: 'all' ordered n-tuples of distinct ids, or 'sets' (one sorted tuple per set)."""
    if mode == "all":
        return list(itertools.permutations(range(vocab_size), n))
    if mode == "sets":
        return list(itertools.combinations(range(vocab_size), n))
    raise InputError(f"unknown sequence mode {mode!r}: use 'all' or 'sets'")
