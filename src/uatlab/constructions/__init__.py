"""Theorems as weight builders. Every builder returns a `Construction`.

``BY_THEOREM`` is the table theorem → builder (``build_*`` from a theorem's parameters, ``compile_*`` from
data or from a network). Paper A = Kajitsuka & Sato, ICLR 2024; paper B = Hu et al. 2025; paper C = Kajitsuka
& Sato, ICLR 2025 (next-token memorization).
"""

from uatlab.constructions.contract import Construction
from uatlab.constructions.paper_a.cor1_memorizer import compile_memorizer
from uatlab.constructions.paper_a.prop1_universal_approximator import build_universal_approximator
from uatlab.constructions.paper_a.thm1_hardmax_counterexample import hardmax_counterexample_inputs
from uatlab.constructions.paper_a.thm2_contextual_mapping import build_theorem2_layer
from uatlab.constructions.paper_b.appB_incontext_gd import build_incontext_gd
from uatlab.constructions.paper_b.lem3_11_relu_network import compile_relu_network, compile_relu_network_two_layer
from uatlab.constructions.paper_b.lem3_11_standard_attention import compile_relu_network_standard
from uatlab.constructions.paper_b.thm3_truncated_linear import build_truncated_linear_attention
from uatlab.constructions.paper_c.api import compile_next_token

#: (paper, theorem) → the function that makes it executable. Theorem 1 is a counterexample: its entry
#: builds the inputs on which every hardmax self-attention layer collides.
BY_THEOREM = {
    ("A", "Theorem 1"): hardmax_counterexample_inputs,
    ("A", "Theorem 2"): build_theorem2_layer,
    ("A", "Corollary 1"): compile_memorizer,
    ("A", "Proposition 1"): build_universal_approximator,
    ("B", "Theorem 3.4"): build_truncated_linear_attention,  # mode="sequence"
    ("B", "Theorem 3.9"): build_truncated_linear_attention,  # mode="token"
    ("B", "Lemma 3.11"): compile_relu_network,
    ("B", "Lemma 3.11, two layers"): compile_relu_network_two_layer,
    ("B", "Lemma 3.11, two standard attention layers"): compile_relu_network_standard,
    ("B", "Appendix B"): build_incontext_gd,
    ("C", "next-token memorization"): compile_next_token,  # Kajitsuka & Sato, ICLR 2025
}

__all__ = [
    "BY_THEOREM",
    "Construction",
    "build_incontext_gd",
    "build_theorem2_layer",
    "build_truncated_linear_attention",
    "build_universal_approximator",
    "compile_memorizer",
    "compile_next_token",
    "compile_relu_network",
    "compile_relu_network_standard",
    "compile_relu_network_two_layer",
    "hardmax_counterexample_inputs",
]
