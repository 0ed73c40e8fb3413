"""Training uatlab Transformers: trainer, length-bucketed batches, checkpoints, full-pass metrics."""

from uatlab.training.batching import collate, encode, epoch_batches, fit_encoding
from uatlab.training.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from uatlab.training.metrics import EvalResult, entity_f1, evaluate
from uatlab.training.trainer import (
    DEFAULT_TARGETS,
    PAPER_ACCURACY,
    TrainConfig,
    TrainingError,
    TrainResult,
    epochs_to_targets,
    init_model,
    learning_rate,
    train,
)

__all__ = [
    "DEFAULT_TARGETS",
    "PAPER_ACCURACY",
    "CheckpointError",
    "EvalResult",
    "TrainConfig",
    "TrainResult",
    "TrainingError",
    "init_model",
    "collate",
    "encode",
    "entity_f1",
    "epoch_batches",
    "epochs_to_targets",
    "evaluate",
    "fit_encoding",
    "learning_rate",
    "load_checkpoint",
    "save_checkpoint",
    "train",
]
