"""uatlab: what softmax attention can express, made executable.

The public names below are imported lazily (on first use), so ``import uatlab`` and the command line stay
fast; subpackages are the stages a user thinks in: `uatlab.models` (paper A's Transformer),
`uatlab.theory`, `uatlab.constructions` (theorems as weight builders, each returning a
`Construction`), `uatlab.verify` (certificates), `uatlab.data`, `uatlab.training`,
`uatlab.experiments`, `uatlab.claims`, `uatlab.report` and the CLI (`uatlab.cli`).

"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs ~10 ms before the CLI can answer Ctrl-C
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"  # the one place the version is defined (pyproject.toml reads it from here)

_EXPORTS = {
    # models
    "Transformer": "uatlab.models.transformer",
    "TransformerConfig": "uatlab.models.transformer",
    "SelfAttention": ("uatlab.models.attention", "MultiHeadSelfAttention"),
    "MultiHeadSelfAttention": "uatlab.models.attention",
    "FeedForward": "uatlab.models.feedforward",
    "AttentionOnlyConfig": "uatlab.models.attention_only",
    "AttentionOnlyLayer": "uatlab.models.attention_only",
    "save": "uatlab.models.io",
    "load": "uatlab.models.io",
    # constructions (every builder of constructions.BY_THEOREM)
    "Construction": "uatlab.constructions.contract",
    "build_hardmax_counterexample": "uatlab.constructions.paper_a.thm1_hardmax_counterexample",
    "hardmax_counterexample_inputs": "uatlab.constructions.paper_a.thm1_hardmax_counterexample",
    "build_theorem2_layer": "uatlab.constructions.paper_a.thm2_contextual_mapping",
    "build_theorem2_causal_layer": "uatlab.constructions.paper_a.thm2_causal_mask",
    "compile_memorizer": "uatlab.constructions.paper_a.cor1_memorizer",
    "build_universal_approximator": "uatlab.constructions.paper_a.prop1_universal_approximator",
    "build_positional_approximator": "uatlab.constructions.paper_a.prop1_positional_encoding",
    "build_truncated_linear_attention": "uatlab.constructions.paper_b.thm3_truncated_linear",
    "compile_relu_network": "uatlab.constructions.paper_b.lem3_11_relu_network",
    "compile_relu_network_two_layer": "uatlab.constructions.paper_b.lem3_11_relu_network",
    "compile_relu_network_standard": "uatlab.constructions.paper_b.lem3_11_standard_attention",
    "compile_relu_network_one_standard_layer_two_tokens": "uatlab.constructions.paper_b.lem3_11_standard_two_tokens",
    "build_incontext_gd": "uatlab.constructions.paper_b.appB_incontext_gd",
    "build_incontext_ridge": "uatlab.constructions.paper_b.appB_incontext_ridge",
    "build_incontext_features": "uatlab.constructions.paper_b.appB_incontext_features",
    "build_softmax_pooling": "uatlab.constructions.paper_b.v2_one_layer_softmax",
    "compile_next_token": "uatlab.constructions.paper_c.api",
    "compile_seq2seq_deep": "uatlab.constructions.paper_c.seq2seq_api",
    "build_yun_memorizer": "uatlab.constructions.baselines.yun2020",
    # certificates
    "certify": "uatlab.verify.certificate",
    "Certificate": "uatlab.verify.certificate",
    # data
    "Encoding": "uatlab.data.dataset",
    "SequenceDataset": "uatlab.data.dataset",
    "read_conll": "uatlab.data.conll",
    "read_jsonl": "uatlab.data.jsonl",
    # training and claims
    "train": "uatlab.training.trainer",
    "TrainConfig": "uatlab.training.trainer",
    "run_claims": "uatlab.claims",
}

__all__ = sorted([*_EXPORTS, "__version__"])


# subpackages reachable as attributes after a plain ``import uatlab`` (imported on first use)
_SUBPACKAGES = (
    "models",
    "theory",
    "constructions",
    "verify",
    "data",
    "training",
    "experiments",
    "claims",
    "report",
    "interop",
    "numerics",
)


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f"uatlab.{name}")  # the import binds it as an attribute of uatlab
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'uatlab' has no attribute {name!r}")
    module, attr = target if isinstance(target, tuple) else (target, name)
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS) | set(_SUBPACKAGES))
