"""Claims of paper A and paper B, each with a computed check (see `uatlab.claims.registry`)."""

from __future__ import annotations

import importlib

from uatlab.claims.registry import (
    Claim,
    ClaimContext,
    ClaimResult,
    ClaimRun,
    all_claims,
    register_claim,
    run_claims,
)

# One module per area; each registers its claims on import. Add a line when adding an area.
CLAIM_MODULES: list[str] = [
    "uatlab.claims.paper_a_theory",
    "uatlab.claims.memorization",
    "uatlab.claims.approximation",
    "uatlab.claims.training",
    "uatlab.claims.paper_b_experiments",
    "uatlab.claims.paper_b_registered",
    "uatlab.claims.paper_a_registered",
    "uatlab.claims.baselines",
    "uatlab.claims.equivariance",
    "uatlab.claims.next_token",
    "uatlab.claims.incontext",
    "uatlab.claims.paper_b_one_layer",
]

_loaded = False


def load_claim_modules() -> None:
    """Import every claim module once (registration happens on import)."""
    global _loaded
    if _loaded:
        return
    for name in CLAIM_MODULES:
        importlib.import_module(name)
    _loaded = True


__all__ = [
    "CLAIM_MODULES",
    "Claim",
    "ClaimContext",
    "ClaimResult",
    "ClaimRun",
    "all_claims",
    "load_claim_modules",
    "register_claim",
    "run_claims",
]
