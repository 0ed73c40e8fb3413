"""Yun et al. (ICLR 2020)'s deep memorizer, as runnable weights verified in exact rational arithmetic.

Yun, Bhojanapalli, Rawat, Reddi & Kumar, "Are Transformers universal approximators of
sequence-to-sequence functions?" (ICLR 2020, arXiv 1912.10077), Section 4 and Appendix C: a
Transformer with *hardmax* attention approximates any continuous permutation-equivariant map in
three stages. Tokens are columns x_k ∈ [0, 1)^d of X ∈ R^{d×n}; δ is the grid step, u = (1, δ^{-1},
…, δ^{-d+1}), and l_k = uᵀ x_k is a token's scalar code (a multiple of δ in [0, δ^{-d+1})).

Notation map (Yun et al. → here): δ → ``delta``; G_δ = {0, δ, …, 1−δ}^d → ``grid``; u → ``u``;
ψ(·; b) and Ψ(·; b) (selective shift) → `HardmaxShiftLayer`; the final "global shift" →
`GlobalShiftLayer`; g_v (value mapping) → `BumpLayer`.

Stage 1, quantisation (Lemma 5, d/δ feed-forward layers). Layer (i, k) maps the coordinate z_i from
[kδ, (k+1)δ) to kδ with three ReLUs (piecewise linear, slope 1 then −s on a band of width η):

    z_i ← z_i − [ReLU(z_i − kδ) − (1+s) ReLU(z_i − (k+1)δ + η) + s ReLU(z_i − (k+1)δ)],  s = (δ−η)/η,

exact outside the bands [(k+1)δ − η, (k+1)δ) (measure ≤ dη/δ of the cube; Yun et al. also quantise
"except on a set of small measure").

Stage 2, contextual mapping (Lemma 6, δ^{-d} + 1 hardmax attention layers). The selective shift for
b ∈ {0, δ, …, δ^{-d+1} − δ} in increasing order has two hardmax heads, ψ(Z; b − δ/2) − ψ(Z; b + δ/2), with
ψ(Z; c)_k = uᵀ z_{j*} e^(1) where j* = argmax_j (uᵀ z_j)(uᵀ z_k − c): a token with l_k > c attends to the
largest code, one with l_k < c to the smallest. So the tokens with l_k = b move by δ^{-d}(max_j l_j −
min_j l_j) and every other token stays (W_O = δ^{-d} e^(1)). On n distinct codes l_1 < … < l_n this gives
l̃_1 = l_1 + δ^{-d}(l_n − l_1), l̃_k = l_k + δ^{-d}(l̃_{k−1} − l_k): each shifted code becomes the new
maximum, and l̃_n is an injective function of the sorted codes. The global shift layer (one head,
query constant, hardmax to the largest code) adds δ^{-(n+1)d} · max_j l̃_j to every token's first
coordinate, so a token's id = l̃_k + δ^{-(n+1)d} l̃_n identifies (its code, the set of codes).

Stage 3, value mapping (Lemma 7, one feed-forward layer per id). Layer m adds y_m · bump(z_1 − g_m) to an
output coordinate, bump a trapezoid of four ReLUs equal to 1 at 0 and 0 beyond half the smallest gap
between ids: exact on every id. (Yun et al. write the value into the token itself; an extra output
coordinate keeps the ids readable by later layers, same count of layers.)

Bound it satisfies: on every sequence of n distinct grid tokens, the output equals the label of
(token, set of tokens) exactly (hardmax and ReLU are exact in rational arithmetic); verified by
`verify_exact` on every such sequence.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from torch import nn

from uatlab.constructions.contract import Construction
from uatlab.errors import InputError

PAPER_YUN = "Yun et al., ICLR 2020"
Vec = list[Fraction]  # one token, d (+1 output) coordinates


def relu(v: Fraction) -> Fraction:
    return v if v > 0 else Fraction(0)


@dataclass(frozen=True)
class QuantiseLayer:
    """Stage 1: residual FF layer mapping coordinate ``i`` from [kδ, (k+1)δ) to kδ (three ReLUs)."""

    i: int
    lo: Fraction  # kδ
    hi: Fraction  # (k+1)δ
    eta: Fraction  # band width

    def __call__(self, Z: list[Vec]) -> list[Vec]:
        s = (self.hi - self.lo - self.eta) / self.eta
        out = []
        for z in Z:
            t = z[self.i]
            g = relu(t - self.lo) - (1 + s) * relu(t - self.hi + self.eta) + s * relu(t - self.hi)
            z = list(z)
            z[self.i] = t - g
            out.append(z)
        return out

    params = 9  # W1 (3 × 1 coordinate) + b1 (3) + W2 (1 × 3)
    kind = "feed-forward"


@dataclass(frozen=True)
class HardmaxShiftLayer:
    """Stage 2: the selective shift Ψ(Z; b) = ψ(Z; b − δ/2) − ψ(Z; b + δ/2), scaled by δ^{-d} (two heads)."""

    u: tuple[Fraction, ...]
    b: Fraction
    delta: Fraction
    scale: Fraction  # δ^{-d}

    def _psi(self, codes: list[Fraction], c: Fraction) -> list[Fraction]:
        out = []
        for lk in codes:
            scores = [lj * (lk - c) for lj in codes]  # key uᵀz_j times query uᵀz_k − c
            best = max(scores)
            arg = [j for j, s in enumerate(scores) if s == best]
            out.append(sum((codes[j] for j in arg), Fraction(0)) / len(arg))  # hardmax averages ties
        return out

    def __call__(self, Z: list[Vec]) -> list[Vec]:
        d = len(self.u)
        codes = [sum((ui * z[i] for i, ui in enumerate(self.u)), Fraction(0)) for z in Z]
        lo = self._psi(codes, self.b - self.delta / 2)
        hi = self._psi(codes, self.b + self.delta / 2)
        out = []
        for z, a, c in zip(Z, lo, hi, strict=True):
            z = list(z)
            z[0] += self.scale * (a - c)
            out.append(z)
        assert len(out[0]) >= d
        return out

    @property
    def params(self) -> int:
        d = len(self.u)
        return 2 * (3 * d + 2)  # per head: W_Q (d) + query bias + W_K (d) + W_V (d) + W_O (1)

    kind = "attention"


@dataclass(frozen=True)
class GlobalShiftLayer:
    """Stage 2, last layer: every token adds M · max_j uᵀ z_j to its first coordinate (one hardmax head)."""

    u: tuple[Fraction, ...]
    M: Fraction

    def __call__(self, Z: list[Vec]) -> list[Vec]:
        codes = [sum((ui * z[i] for i, ui in enumerate(self.u)), Fraction(0)) for z in Z]
        top = max(codes)  # query constant > 0: hardmax attends to the largest key
        return [[z[0] + self.M * top, *z[1:]] for z in Z]

    @property
    def params(self) -> int:
        return 3 * len(self.u) + 2

    kind = "attention"


@dataclass(frozen=True)
class BumpLayer:
    """Stage 3: output coordinate += y · trapezoid(z_1 − g) (four ReLUs; 1 at g, 0 beyond w from g)."""

    g: Fraction
    y: Fraction
    w: Fraction  # half-width (≤ half the smallest gap between ids)

    def __call__(self, Z: list[Vec]) -> list[Vec]:
        w, h = self.w, self.w / 2
        out = []
        for z in Z:
            t = z[0] - self.g
            bump = (relu(t + w) - relu(t + h) - relu(t - h) + relu(t - w)) / (w - h)
            z = list(z)
            z[-1] += self.y * bump
            out.append(z)
        return out

    params = 12  # W1 (4) + b1 (4) + W2 (4)
    kind = "feed-forward"


class YunMemorizer(nn.Module):
    """The deep hardmax network: the three stages' layers in order, with its facts.

    An ``nn.Module`` without tensors: its layers compute in exact rationals (`fractions.Fraction`), so
    ``net(X)`` takes one sequence of n tokens (lists of d numbers) and returns n lists of d + 1 fractions,
    the last coordinate being the label.
    """

    def __init__(self, d: int, n: int, delta: Fraction, eta: Fraction) -> None:
        super().__init__()
        self.d, self.n, self.delta, self.eta = d, n, delta, eta
        self.layers: list[Any] = []
        self.ids: dict[tuple[frozenset, tuple], Fraction] = {}

    def forward(self, X: Any) -> list[Vec]:
        """Run the network on one sequence (n tokens of d numbers, taken exactly); returns n (d+1)-vectors."""
        Z = [[Fraction(v) for v in tok] + [Fraction(0)] for tok in X]
        for layer in self.layers:
            Z = layer(Z)
        return Z

    def count(self, kind: str | None = None) -> int:
        return sum(1 for layer in self.layers if kind is None or layer.kind == kind)

    @property
    def params(self) -> int:
        return sum(layer.params for layer in self.layers)


def grid(d: int, delta: Fraction) -> list[tuple[Fraction, ...]]:
    """G_δ = {0, δ, …, 1 − δ}^d."""
    steps = int(1 / delta)
    return [tuple(Fraction(k) * delta for k in ks) for ks in itertools.product(range(steps), repeat=d)]


def contextual_layers(d: int, n: int, delta: Fraction) -> tuple[tuple[Fraction, ...], list[Any]]:
    """u and the δ^{-d} selective-shift layers plus the global shift (stage 2)."""
    u = tuple(delta ** (-i) for i in range(d))
    steps = int(1 / delta)
    codes = sorted({sum((ui * gi for ui, gi in zip(u, g, strict=True)), Fraction(0)) for g in grid(d, delta)})
    assert len(codes) == steps**d
    layers: list[Any] = [HardmaxShiftLayer(u, b, delta, delta ** (-d)) for b in codes]
    layers.append(GlobalShiftLayer(u, delta ** (-(n + 1) * d)))
    return u, layers


def build_yun_memorizer(
    labels: dict[tuple[frozenset, tuple], Any], d: int, n: int, delta: Fraction | float, eta: Fraction | None = None
) -> Construction:
    """Build Yun et al.'s three stages for labels of (set of grid tokens, token) keys.

    Returns:
        `uatlab.constructions.contract.Construction`: ``model`` the `YunMemorizer` (exact
        rationals); ``guarantee`` ``max_label_error`` = 0 on every labelled context (exact arithmetic, checked
        by `verify_exact`) and the ids' ``min_id_gap``; ``facts`` the layer counts, parameters and bits
        relied on.

    Args:
        labels: {(frozenset of n distinct grid tokens, token in it): label (number)}; every key is a
            context the network must map to its label.
        d, n: token dimension and sequence length.
        delta: grid step δ = 1/K.
        eta: width of the quantisation bands (default δ/64).

    Raises:
        InputError: δ not of the form 1/K, n < 2, no labels, or a key that is not n distinct grid tokens.
    """
    delta = Fraction(delta).limit_denominator(10**6)
    if delta <= 0 or delta.numerator != 1:
        raise InputError(f"delta must be 1/K for an integer K ≥ 1, got {delta}")
    if n < 2 or d < 1:
        raise InputError(f"need n ≥ 2 and d ≥ 1, got n = {n}, d = {d}")
    if not labels:
        raise InputError("no labelled contexts: labels must map at least one (set, token) key to a label")
    eta = Fraction(eta) if eta is not None else delta / 64
    steps = int(1 / delta)
    net = YunMemorizer(d=d, n=n, delta=delta, eta=eta)
    for i in range(d):
        for k in range(steps):
            net.layers.append(QuantiseLayer(i, k * delta, (k + 1) * delta, eta))
    _, ctx_layers = contextual_layers(d, n, delta)
    net.layers += ctx_layers
    # ids: run stages 1–2 on one ordering per set
    cut = len(net.layers)
    g = set(grid(d, delta))
    for key in labels:
        s, tok = key
        if len(s) != n or tok not in s or not s <= g:
            raise InputError(f"context {sorted(s)}, token {tok}: need n = {n} distinct grid tokens containing it")
    sets = sorted({s for s, _ in labels}, key=sorted)
    for s in sets:
        seq = sorted(s)
        Z = [[Fraction(v) for v in tok] + [Fraction(0)] for tok in seq]
        for layer in net.layers[:cut]:
            Z = layer(Z)
        for tok, z in zip(seq, Z, strict=True):
            net.ids[(s, tok)] = z[0]
    vals = sorted(set(net.ids.values()))
    if len(vals) != len(net.ids):
        raise InputError("two contexts received the same id (the contextual mapping is not injective here)")
    gap = min((b - a for a, b in zip(vals, vals[1:], strict=False)), default=Fraction(1))
    for key, y in labels.items():
        net.layers.append(BumpLayer(net.ids[key], Fraction(y), gap / 2))
    facts = {
        "paper": PAPER_YUN,
        "theorem": "Lemmas 5–7 (deep hardmax memorizer)",
        "parameters": net.params,
        "layers": len(net.layers),
        "attention_layers": net.count("attention"),
        "feed_forward_layers": net.count("feed-forward"),
        "contexts": len(labels),
        "bits_relied_on": bits_relied_on(net),
        "d": d,
        "n": n,
        "delta": str(delta),
    }
    return Construction(model=net, guarantee={"max_label_error": 0.0, "min_id_gap": float(gap)}, facts=facts)


def verify_exact(net: YunMemorizer, labels: dict[tuple[frozenset, tuple], Any], seed: int = 0) -> dict[str, Any]:
    """Run every ordering of every labelled set through the network in rationals; count exact matches.

    Each ordering is run on the grid tokens and once more with every coordinate moved inside its cell
    by a random rational in [0, δ − η) (the quantisation stage must undo it).
    """
    rng = np.random.default_rng(seed)
    span = int((net.delta - net.eta) * 10**6)
    checked = wrong = 0
    for s in sorted({s for s, _ in labels}, key=sorted):
        for seq in itertools.permutations(sorted(s)):
            jitter = [[Fraction(int(rng.integers(0, span)), 10**6) for _ in t] for t in seq]
            for X in (
                [list(t) for t in seq],
                [[v + j for v, j in zip(t, jt, strict=True)] for t, jt in zip(seq, jitter, strict=True)],
            ):
                out = net(X)
                for tok, z in zip(seq, out, strict=True):
                    checked += 1
                    wrong += z[-1] != Fraction(labels[(s, tok)])
    return {"tokens_checked": checked, "wrong": wrong, "exact": wrong == 0}


def float64_check(net: YunMemorizer, labels: dict[tuple[frozenset, tuple], Any]) -> dict[str, Any]:
    """The same network in float64 (every weight rounded once): how many tokens still get their label."""
    ok = total = 0
    for s in sorted({s for s, _ in labels}, key=sorted):
        seq = sorted(s)
        Z = [[float(v) for v in tok] + [0.0] for tok in seq]
        for layer in net.layers:
            Z = _float_layer(layer, Z)
        for tok, z in zip(seq, Z, strict=True):
            total += 1
            ok += abs(z[-1] - float(labels[(s, tok)])) < 0.5
    return {"float64_correct": ok, "float64_tokens": total}


def _float_layer(layer: Any, Z: list[list[float]]) -> list[list[float]]:
    def r(v: float) -> float:
        return v if v > 0 else 0.0

    if isinstance(layer, QuantiseLayer):
        lo, hi, eta = float(layer.lo), float(layer.hi), float(layer.eta)
        s = (hi - lo - eta) / eta
        out = []
        for z in Z:
            t = z[layer.i]
            z = list(z)
            z[layer.i] = t - (r(t - lo) - (1 + s) * r(t - hi + eta) + s * r(t - hi))
            out.append(z)
        return out
    if isinstance(layer, (HardmaxShiftLayer, GlobalShiftLayer)):
        u = [float(v) for v in layer.u]
        codes = [sum(ui * z[i] for i, ui in enumerate(u)) for z in Z]
        if isinstance(layer, GlobalShiftLayer):
            return [[z[0] + float(layer.M) * max(codes), *z[1:]] for z in Z]

        def psi(c: float) -> list[float]:
            res = []
            for lk in codes:
                sc = [lj * (lk - c) for lj in codes]
                best = max(sc)
                arg = [j for j, v in enumerate(sc) if v == best]
                res.append(sum(codes[j] for j in arg) / len(arg))
            return res

        b, dl = float(layer.b), float(layer.delta)
        lo, hi = psi(b - dl / 2), psi(b + dl / 2)
        return [[z[0] + float(layer.scale) * (a - c), *z[1:]] for z, a, c in zip(Z, lo, hi, strict=True)]
    w, h, g, y = float(layer.w), float(layer.w) / 2, float(layer.g), float(layer.y)
    out = []
    for z in Z:
        t = z[0] - g
        z = list(z)
        z[-1] += y * (r(t + w) - r(t + h) - r(t - h) + r(t - w)) / (w - h)
        out.append(z)
    return out


def bits_relied_on(net: YunMemorizer) -> float:
    """log2(largest id / smallest gap between ids): the relative precision the value mapping needs."""
    vals = sorted(net.ids.values())
    gap = min((b - a for a, b in zip(vals, vals[1:], strict=False)), default=Fraction(1))
    return math.log2(max(abs(v) for v in vals) / gap)


def yun_layer_formula(d: int, n: int, delta: Fraction) -> dict[str, int]:
    """Yun et al.'s layer counts for this case: d/δ FF + (δ^{-d} + 1) attention + one FF per id."""
    K = int(1 / delta)
    return {"quantise": d * K, "attention": K**d + 1, "value_mapping": math.comb(K**d, n) * n}


def random_set_labels(d: int, n: int, delta: Fraction, classes: int, seed: int = 0) -> dict:
    """A random label in {0..classes−1} for every (set of n distinct grid tokens, token) context."""
    rng = np.random.default_rng(seed)
    out = {}
    for s in itertools.combinations(grid(d, Fraction(delta)), n):
        fs = frozenset(s)
        for tok in s:
            out[(fs, tok)] = int(rng.integers(0, classes))
    return out


def run_case(d: int, n: int, delta: Fraction, classes: int = 3, seed: int = 0) -> dict[str, Any]:
    """Build, verify exactly and in float64, and report layers, parameters, bits and seconds."""
    t0 = time.perf_counter()
    labels = random_set_labels(d, n, delta, classes, seed)
    net = build_yun_memorizer(labels, d, n, delta).model
    t_build = time.perf_counter() - t0
    ver = verify_exact(net, labels)
    f64 = float64_check(net, labels)
    return {
        "d": d,
        "n": n,
        "delta": str(delta),
        "contexts": len(labels),
        "layers": len(net.layers),
        "attention_layers": net.count("attention"),
        "feed_forward_layers": net.count("feed-forward"),
        "formula": yun_layer_formula(d, n, delta),
        "params": net.params,
        "bits_relied_on": bits_relied_on(net),
        "seconds_build": t_build,
        "seconds_total": time.perf_counter() - t0,
        **ver,
        **f64,
        "labels": labels,
    }
