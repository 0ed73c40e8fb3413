"""Arbitrary-precision certificate of paper A, Theorem 2: the literal rank-1 layer is an (r, δ)-contextual mapping."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from flint import arb

from uatlab.constructions.paper_a.thm2_contextual_mapping import Theorem2Construction, all_sequences
from uatlab.numerics.arb import (
    arb_attention,
    arb_log10,
    arb_norm_lower,
    arb_norm_upper,
    arb_to_str,
    bits_to_digits,
    working_precision,
)


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
