"""Theorems as weight builders. Every builder returns a `Construction`.

``BY_THEOREM`` is the table theorem → builder (``build_*`` from a theorem's parameters, ``compile_*`` from
data or from a network). Paper A = Kajitsuka & Sato, ICLR 2024; paper B = Hu et al. 2025; paper C = Kajitsuka
& Sato, ICLR 2025 (next-token memorization).
"""

from uatlab.constructions.baselines.yun2020 import build_yun_memorizer
from uatlab.constructions.contract import Construction
from uatlab.constructions.paper_a.cor1_memorizer import compile_memorizer
from uatlab.constructions.paper_a.prop1_positional_encoding import build_positional_approximator
from uatlab.constructions.paper_a.prop1_universal_approximator import build_universal_approximator
from uatlab.constructions.paper_a.thm1_hardmax_counterexample import (
    build_hardmax_counterexample,
    hardmax_counterexample_inputs,
)
from uatlab.constructions.paper_a.thm2_causal_mask import build_theorem2_causal_layer
from uatlab.constructions.paper_a.thm2_contextual_mapping import build_theorem2_layer
from uatlab.constructions.paper_b.appB_incontext_features import build_incontext_features
from uatlab.constructions.paper_b.appB_incontext_gd import build_incontext_gd
from uatlab.constructions.paper_b.appB_incontext_ridge import build_incontext_ridge
from uatlab.constructions.paper_b.lem3_11_relu_network import compile_relu_network, compile_relu_network_two_layer
from uatlab.constructions.paper_b.lem3_11_standard_attention import compile_relu_network_standard
from uatlab.constructions.paper_b.thm3_truncated_linear import build_truncated_linear_attention
from uatlab.constructions.paper_b.v2_one_layer_softmax import build_softmax_pooling
from uatlab.constructions.paper_c.api import compile_next_token
from uatlab.constructions.paper_c.seq2seq_api import compile_seq2seq_deep

#: (paper, theorem) → the function that makes it executable; each returns a `Construction`.
#: Theorem 1 is a counterexample: its entry pairs a hardmax layer with the inputs on which every hardmax
#: self-attention layer collides.
BY_THEOREM = {
    ("A", "Theorem 1"): build_hardmax_counterexample,
    ("A", "Theorem 2"): build_theorem2_layer,
    ("A", "Theorem 2, causal mask"): build_theorem2_causal_layer,
    ("A", "Corollary 1"): compile_memorizer,
    ("A", "Proposition 1"): build_universal_approximator,
    ("A", "Proposition 1, positional encoding"): build_positional_approximator,
    ("B", "Theorem 3.4"): build_truncated_linear_attention,  # mode="sequence"
    ("B", "Theorem 3.9"): build_truncated_linear_attention,  # mode="token"
    ("B", "Lemma 3.11"): compile_relu_network,
    ("B", "Lemma 3.11, two layers"): compile_relu_network_two_layer,
    ("B", "Lemma 3.11, two standard attention layers"): compile_relu_network_standard,
    ("B", "Appendix B"): build_incontext_gd,
    ("B", "Appendix B, ridge"): build_incontext_ridge,
    ("B", "Appendix B, ridge on anchor-interpolated features"): build_incontext_features,
    ("B", "v2: one attention layer and a softmax"): build_softmax_pooling,
    ("C", "next-token memorization"): compile_next_token,  # Kajitsuka & Sato, ICLR 2025
    ("C", "seq2seq memorization, deep feed-forward"): compile_seq2seq_deep,
    ("Yun et al. 2020", "Lemmas 5–7"): build_yun_memorizer,  # the deep hardmax baseline
}

__all__ = [
    "BY_THEOREM",
    "Construction",
    "build_hardmax_counterexample",
    "build_incontext_features",
    "build_incontext_gd",
    "build_incontext_ridge",
    "build_positional_approximator",
    "build_softmax_pooling",
    "build_theorem2_causal_layer",
    "build_theorem2_layer",
    "build_truncated_linear_attention",
    "build_universal_approximator",
    "build_yun_memorizer",
    "compile_memorizer",
    "compile_next_token",
    "compile_relu_network",
    "compile_relu_network_standard",
    "compile_relu_network_two_layer",
    "compile_seq2seq_deep",
    "hardmax_counterexample_inputs",
]
