"""Training uatlab Transformers: trainer, length-bucketed batches, checkpoints, full-pass metrics.

The names below are imported on first use (PEP 562), so ``uatlab.training.limits``, the option ranges the
command line reads when it starts, loads without PyTorch."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "collate": "uatlab.training.batching",
    "encode": "uatlab.training.batching",
    "epoch_batches": "uatlab.training.batching",
    "fit_encoding": "uatlab.training.batching",
    "CheckpointError": "uatlab.training.checkpoint",
    "load_checkpoint": "uatlab.training.checkpoint",
    "save_checkpoint": "uatlab.training.checkpoint",
    "EvalResult": "uatlab.training.metrics",
    "entity_f1": "uatlab.training.metrics",
    "evaluate": "uatlab.training.metrics",
    "DEFAULT_TARGETS": "uatlab.training.trainer",
    "PAPER_ACCURACY": "uatlab.training.trainer",
    "TrainConfig": "uatlab.training.trainer",
    "TrainingError": "uatlab.training.trainer",
    "TrainResult": "uatlab.training.trainer",
    "epochs_to_targets": "uatlab.training.trainer",
    "init_model": "uatlab.training.trainer",
    "learning_rate": "uatlab.training.trainer",
    "train": "uatlab.training.trainer",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'uatlab.training' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
