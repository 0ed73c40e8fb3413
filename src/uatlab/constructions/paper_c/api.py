"""``compile_next_token``: next-token data → `uatlab.constructions.contract.Construction`.

Kajitsuka & Sato, "On the Optimal Memorization Capacity of Transformers" (ICLR 2025), next-token
memorization; the construction, its derivation and its bound are in
`uatlab.constructions.paper_c.next_token_memorizer`.
"""

from __future__ import annotations

import numpy as np

from uatlab.constructions.contract import Construction
from uatlab.constructions.paper_c.next_token_memorizer import PAPER, THEOREM, compile_memorizer


def compile_next_token(
    tokens: np.ndarray, labels: np.ndarray, V: int, C: int, regime: str = "float64", seed: int = 0, certify: bool = True
) -> Construction:
    """Compile N next-token examples (tokens (N, n) in [0, V], V = pad; labels (N,) in [0, C)).

    Ids are integers (integral floats are accepted; a fractional id is an InputError, never truncated). Rows
    are left-padded: the pad id V may only precede a row's first real token, and no row is all padding.

    regime: 'exact' (integer weights of any size, evaluated exactly), 'float64' or 'float32' (every weight
    and every intermediate value an integer ≤ 2^53 / 2^24). Raises PrecisionError before building when N
    does not fit the regime, naming the largest N that does.
    """
    from uatlab.constructions.paper_c.model_file import module_for
    from uatlab.verify.next_token import certify_next_token

    memo, report = compile_memorizer(tokens, labels, V=V, C=C, regime=regime, seed=seed)
    model = module_for(memo)
    cert = certify_next_token(memo, tokens, labels) if certify else None
    guarantee = {"min_logit_margin": 1.0, "certified_examples": float(cert.certified_rows) if cert else float("nan")}
    facts = dict(memo.facts) | {
        "paper": PAPER,
        "theorem": THEOREM,
        "parameters": memo.parameters["total"],
        "seconds": report["seconds_total"],
    }
    return Construction(model=model, guarantee=guarantee, facts=facts, certificate=cert, detail=memo)
