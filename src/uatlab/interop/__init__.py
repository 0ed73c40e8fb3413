"""Interoperability with other tools: TransformerLens (``HookedTransformer``) export and import.

TransformerLens is an optional dependency (``pip install -e '.[interop]'``); it is imported only
when a function below is called.
"""

from uatlab.interop.transformer_lens import (
    ExportError,
    LogitComparison,
    compare_logits,
    default_tolerance,
    encode,
    from_hooked_transformer,
    load_hooked,
    max_logit_difference,
    save_hooked,
    to_hooked_transformer,
    unsupported_features,
)

__all__ = [
    "ExportError",
    "LogitComparison",
    "compare_logits",
    "default_tolerance",
    "encode",
    "from_hooked_transformer",
    "load_hooked",
    "max_logit_difference",
    "save_hooked",
    "to_hooked_transformer",
    "unsupported_features",
]
