"""Theorem 2 of paper A with a causal mask, certified in exact (arb ball) arithmetic, and its float64 collapse.

Paper A (Kajitsuka & Sato, ICLR 2024), Theorem 2 builds one rank-1 softmax head F (weights of
`uatlab.constructions.paper_a.thm2_contextual_mapping.build_theorem2_layer`, unchanged). With a causal mask token
k attends only to its prefix x_1..x_k, so F_causal(X)_k = F(X_{1:k})_k: the literal layer applied to the
prefix, read at its last token. The context of token k is then (the SET of its prefix, x_k): the layer is
still permutation-equivariant inside the prefix, so two prefixes with the same set and the same last
token must get the same output (a check, not an assumption: their enclosures are merged).

Certificate (`certify_causal`): every ordered sequence of n distinct tokens and every prefix of it
is evaluated in arb; it proves that outputs of DIFFERENT contexts are more than 0 apart (reporting the
smallest certified separation δ_causal) and that max ‖F‖ ≤ r = r_max + ε/4. Lemma 1's bound is stated for
sets of equal size n; prefixes have sizes 1..n, so δ_theorem(n) is reported beside δ_causal, not asserted.
The float64 evaluation of the same weights
(`uatlab.experiments.thm2_precision.float64_causal_collapse`) counts contexts whose outputs coincide
within float64's noise floor.
"""

from __future__ import annotations

import copy
import itertools
import math
from typing import Any

from flint import arb

from uatlab.constructions.contract import Construction
from uatlab.constructions.paper_a.thm2_contextual_mapping import Theorem2Construction, build_theorem2_layer
from uatlab.errors import PrecisionError
from uatlab.numerics.arb import arb_attention, arb_log10, arb_norm_lower, arb_norm_upper, arb_to_str, working_precision


def certify_causal(con: Theorem2Construction, digits: int) -> dict[str, Any]:
    """Certify distinct contexts → separated outputs for every prefix of every sequence, at ``digits``."""
    V = con.vocabulary
    W = [[con.weights[k].tolist()] for k in ("W_Q", "W_K", "W_V", "W_O")]
    with working_precision(digits=digits):
        r = con.constants()["r"]
        hull: dict[tuple[frozenset[int], int], list[arb]] = {}
        max_norm = arb(0)
        for seq in itertools.permutations(range(len(V)), con.n):
            for k in range(con.n):
                pre = seq[: k + 1]
                key = (frozenset(pre), pre[-1])
                if key in hull:
                    continue  # same set and last token: equal by equivariance (checked in the tests)
                y = arb_attention([V[t].tolist() for t in pre], *W)[-1]
                hull[key] = y
                max_norm = max_norm.max(arb_norm_upper(y))
        keys = list(hull)
        lowest: arb | None = None
        pair = None
        uncertified = 0
        for k1, k2 in itertools.combinations(keys, 2):
            lo = arb_norm_lower([a - b for a, b in zip(hull[k1], hull[k2], strict=True)])
            if not lo > 0:
                uncertified += 1
            if lowest is None or lo.mid() < lowest.mid():
                lowest, pair = lo, (k1, k2)
        norm_ok = bool(max_norm <= r)
        delta_log10 = arb_log10(lowest) if lowest is not None and lowest > 0 else -math.inf
        return {
            "contexts": len(keys),
            "pairs": len(keys) * (len(keys) - 1) // 2,
            "uncertified_pairs": uncertified,
            "passes": uncertified == 0 and norm_ok,
            "delta_causal": arb_to_str(lowest) if lowest is not None else "n/a",
            "log10_delta_causal": delta_log10,
            "closest_contexts": [[sorted(s), t] for s, t in pair] if pair else None,
            "max_norm_certified_le_r": norm_ok,
            "max_norm": float(max_norm.mid()),
        }


def build_theorem2_causal_layer(
    vocabulary: Any,
    n: int,
    eps: float = 0.5,
    r_min: float = 1.0,
    r_max: float = 2.0,
    seed: int = 0,
    max_digits: int = 100_000,
) -> Construction:
    """The literal Theorem-2 layer with a causal mask, certified on every prefix (digits doubled from 32).

    Returns:
        `uatlab.constructions.contract.Construction`: ``model`` the float64 layer of
        `build_theorem2_layer` with ``causal=True``; ``certificate`` the dict of `certify_causal`
        at the first passing precision plus δ_theorem(n) (reported beside δ_causal, not asserted);
        ``guarantee`` r and log10 δ_causal; ``facts`` those of Theorem 2 plus the digits used; ``detail`` the
        `Theorem2Construction` (weights, vocabulary, constants).

    Raises:
        InputError: parameters or vocabulary that violate the theorem's hypotheses.
        PrecisionError: the certificate does not pass within ``max_digits`` decimal digits.
    """
    literal = build_theorem2_layer(vocabulary, n, eps, r_min, r_max, seed=seed)
    con = literal.detail
    digits, res = 32, None
    while digits <= max_digits:
        res = certify_causal(con, digits)
        if res["passes"]:
            break
        digits *= 2
    if res is None or not res["passes"]:
        raise PrecisionError(f"the causal certificate did not pass within {max_digits} digits")
    with working_precision(digits=digits):
        delta_th = con.constants()["delta"]
        res["delta_theorem_n"] = arb_to_str(delta_th)
        res["log10_delta_theorem_n"] = arb_log10(delta_th)
    model = copy.deepcopy(con.layer)
    model.causal = True
    facts = {**literal.facts, "theorem": "Theorem 2 with a causal mask", "digits": digits}
    guarantee = {"r": literal.guarantee["r"], "log10_delta_causal": res["log10_delta_causal"]}
    return Construction(model=model, guarantee=guarantee, facts=facts, certificate=res, detail=con)
