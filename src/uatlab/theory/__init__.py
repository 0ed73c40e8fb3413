"""Theory primitives of paper A: the Boltzmann operator and Lemma 1, tokenwise separatedness,
the projection-direction lemma, and the contextual margin (r, δ) a layer achieves."""

from uatlab.theory.boltzmann import (
    Lemma1Hypotheses,
    boltz,
    boltz_exact,
    boltz_grad,
    lemma1_bound,
    lemma1_hypotheses,
    lemma1_log10_bound,
    lemma1_required_gap,
    require_lemma1_hypotheses,
)
from uatlab.theory.contextual import ContextualMargin, contextual_margin, contextual_margin_of_outputs
from uatlab.theory.projection import (
    ProjectionDirection,
    ProjectionSearchError,
    find_projection_direction,
    projection_constant,
)
from uatlab.theory.separatedness import Separatedness, as_sequences, require_no_duplicates, tokenwise_separatedness

__all__ = [
    "ContextualMargin",
    "Lemma1Hypotheses",
    "ProjectionDirection",
    "ProjectionSearchError",
    "Separatedness",
    "as_sequences",
    "boltz",
    "boltz_exact",
    "boltz_grad",
    "contextual_margin",
    "contextual_margin_of_outputs",
    "find_projection_direction",
    "lemma1_bound",
    "lemma1_hypotheses",
    "lemma1_log10_bound",
    "lemma1_required_gap",
    "projection_constant",
    "require_lemma1_hypotheses",
    "require_no_duplicates",
    "tokenwise_separatedness",
]
