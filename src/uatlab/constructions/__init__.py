"""Theorems as weight builders. Every builder returns a `Construction`.

``BY_THEOREM`` is the table theorem → builder (``build_*`` from a theorem's parameters, ``compile_*`` from
data or from a network). Paper A = Kajitsuka & Sato, ICLR 2024; paper B = Hu et al. 2025; paper C = Kajitsuka
& Sato, ICLR 2025 (next-token memorization).
"""

from __future__ import annotations

import importlib

from uatlab.constructions.contract import Construction

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: builder → the module defining it, imported on first use: a command that needs one construction (e.g.
#: `compile_memorizer`) does not import all of them (python-flint, paper B's and paper C's among them)
_BUILDERS = {
    "build_yun_memorizer": "uatlab.constructions.baselines.yun2020",
    "compile_memorizer": "uatlab.constructions.paper_a.cor1_memorizer",
    "build_positional_approximator": "uatlab.constructions.paper_a.prop1_positional_encoding",
    "build_universal_approximator": "uatlab.constructions.paper_a.prop1_universal_approximator",
    "build_hardmax_counterexample": "uatlab.constructions.paper_a.thm1_hardmax_counterexample",
    "hardmax_counterexample_inputs": "uatlab.constructions.paper_a.thm1_hardmax_counterexample",
    "build_theorem2_causal_layer": "uatlab.constructions.paper_a.thm2_causal_mask",
    "build_theorem2_layer": "uatlab.constructions.paper_a.thm2_contextual_mapping",
    "build_incontext_features": "uatlab.constructions.paper_b.appB_incontext_features",
    "build_incontext_gd": "uatlab.constructions.paper_b.appB_incontext_gd",
    "build_incontext_ridge": "uatlab.constructions.paper_b.appB_incontext_ridge",
    "compile_relu_network": "uatlab.constructions.paper_b.lem3_11_relu_network",
    "compile_relu_network_two_layer": "uatlab.constructions.paper_b.lem3_11_relu_network",
    "compile_relu_network_standard": "uatlab.constructions.paper_b.lem3_11_standard_attention",
    "compile_relu_network_one_standard_layer_two_tokens": "uatlab.constructions.paper_b.lem3_11_standard_two_tokens",
    "build_truncated_linear_attention": "uatlab.constructions.paper_b.thm3_truncated_linear",
    "build_softmax_pooling": "uatlab.constructions.paper_b.v2_one_layer_softmax",
    "compile_next_token": "uatlab.constructions.paper_c.api",
    "compile_seq2seq_deep": "uatlab.constructions.paper_c.seq2seq_api",
}


def _by_theorem() -> dict[tuple[str, str], Any]:
    """``BY_THEOREM``: (paper, theorem) → the function that makes it executable; each returns a `Construction`.
    Theorem 1 is a counterexample: its entry pairs a hardmax layer with the inputs on which every hardmax
    self-attention layer collides."""
    return {
        ("A", "Theorem 1"): __getattr__("build_hardmax_counterexample"),
        ("A", "Theorem 2"): __getattr__("build_theorem2_layer"),
        ("A", "Theorem 2, causal mask"): __getattr__("build_theorem2_causal_layer"),
        ("A", "Corollary 1"): __getattr__("compile_memorizer"),
        ("A", "Proposition 1"): __getattr__("build_universal_approximator"),
        ("A", "Proposition 1, positional encoding"): __getattr__("build_positional_approximator"),
        ("B", "Theorem 3.4"): __getattr__("build_truncated_linear_attention"),  # mode="sequence"
        ("B", "Theorem 3.9"): __getattr__("build_truncated_linear_attention"),  # mode="token"
        ("B", "Lemma 3.11"): __getattr__("compile_relu_network"),
        ("B", "Lemma 3.11, two layers"): __getattr__("compile_relu_network_two_layer"),
        ("B", "Lemma 3.11, two standard attention layers"): __getattr__("compile_relu_network_standard"),
        ("B", "Lemma 3.11, one standard attention layer, n = 2"): __getattr__(
            "compile_relu_network_one_standard_layer_two_tokens"
        ),
        ("B", "Appendix B"): __getattr__("build_incontext_gd"),
        ("B", "Appendix B, ridge"): __getattr__("build_incontext_ridge"),
        ("B", "Appendix B, ridge on anchor-interpolated features"): __getattr__("build_incontext_features"),
        ("B", "v2: one attention layer and a softmax"): __getattr__("build_softmax_pooling"),
        ("C", "next-token memorization"): __getattr__("compile_next_token"),  # Kajitsuka & Sato, ICLR 2025
        ("C", "seq2seq memorization, deep feed-forward"): __getattr__("compile_seq2seq_deep"),
        ("Yun et al. 2020", "Lemmas 5–7"): __getattr__("build_yun_memorizer"),  # the deep hardmax baseline
    }


def __getattr__(name: str) -> Any:
    if name == "BY_THEOREM":
        value: Any = _by_theorem()
    elif name in _BUILDERS:
        value = getattr(importlib.import_module(_BUILDERS[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_BUILDERS) | {"BY_THEOREM"})


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
    "compile_relu_network_one_standard_layer_two_tokens",
    "compile_relu_network_standard",
    "compile_relu_network_two_layer",
    "compile_seq2seq_deep",
    "hardmax_counterexample_inputs",
]
