"""The one type every construction returns.

A builder (``build_*``: weights from a theorem's parameters) or a data-driven compiler (``compile_*``:
weights from a data set) returns a `Construction`: an ordinary ``nn.Module`` plus the numbers that
say what it is guaranteed to do, the facts of how it was built, and the certificate when one was computed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torch import nn


@dataclass(frozen=True)
class Construction:
    """A constructed model and what is known about it.

    Attributes:
        model: the weights, as an ordinary ``nn.Module`` (call it on tensors).
        guarantee: the bound or property the construction satisfies, as numbers (for example
            ``{"sup_error_bound": 0.01}``); names say what is bounded and in which norm.
        facts: how it was built: ``paper``, ``theorem``, ``parameters`` (count), and the choices made
            (β, anchors, heads, bits relied on, ...).
        certificate: a certificate computed by the builder (see `uatlab.verify`), or None.
        detail: the construction-specific record (plans, vocabularies, targets, helpers that evaluate the
            model on numpy arrays), or None.
    """

    model: nn.Module
    guarantee: Mapping[str, float]
    facts: Mapping[str, Any]
    certificate: Any = None
    detail: Any = None

    @property
    def paper(self) -> str:
        return str(self.facts.get("paper", ""))

    @property
    def theorem(self) -> str:
        return str(self.facts.get("theorem", ""))

    def __repr__(self) -> str:
        guarantee = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.guarantee.items())
        return (
            f"Construction({type(self.model).__name__}, {self.paper} {self.theorem}, "
            f"{self.facts.get('parameters', '?')} parameters, {guarantee or 'no guarantee'})"
        )


def count_parameters(model: nn.Module, nonzero: bool = False) -> int:
    """Parameters of ``model`` (only the non-zero entries with ``nonzero=True``)."""
    if nonzero:
        return int(sum(int((p != 0).sum()) for p in model.parameters()))
    return int(sum(p.numel() for p in model.parameters()))


PAPER_A = "Kajitsuka & Sato, ICLR 2024"
PAPER_B = "Hu et al. 2025"
