"""Atomic training checkpoints: everything needed to continue to the same numbers.

A checkpoint holds the model config and weights, the optimizer state, the training config, the
vocabulary, the position in the run (completed epochs, batches done in the current epoch, global
step), the history of per-epoch metrics and the torch RNG state. The learning-rate schedule is a
pure function of the step (`uatlab.training.trainer.learning_rate`), so it needs no state.

Files are written to a temporary file in the same folder and renamed (``os.replace``), so a
SIGKILL during a save leaves the previous checkpoint intact.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from uatlab.errors import ModelFileError
from uatlab.io_safety import atomic_path, not_a_regular_file
from uatlab.models.finite import check_finite

CHECKPOINT_FORMAT = "uatlab-train-checkpoint-v1"


class CheckpointError(ModelFileError):
    """A checkpoint that cannot be used: missing, truncated, corrupt, or for another model shape."""


def save_checkpoint(state: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write ``state`` (plain containers and tensors) atomically to ``path``."""
    path = Path(path)
    with atomic_path(path) as tmp:
        torch.save({"format": CHECKPOINT_FORMAT, **state}, tmp)
    return path


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Read a checkpoint written by `save_checkpoint`.

    Raises:
        CheckpointError: if the file is missing, truncated or corrupt, or not a uatlab checkpoint, or if a weight
            of its model is NaN or ±inf (naming the tensor, as `uatlab.models.finite.check_finite` does for models).
    """
    path = Path(path)
    why = not_a_regular_file(path)
    if why is not None:
        raise CheckpointError(f"checkpoint {path} {why} (nothing to resume)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises RuntimeError/EOFError/UnpicklingError for damaged files
        # torch's own message may advise weights_only=False, which would run arbitrary code: never pass it on
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        detail = "" if "weights_only" in str(exc) else f": {type(exc).__name__}: {first[:160]}"
        raise CheckpointError(
            f"checkpoint {path} is unreadable (truncated, corrupt, or not a uatlab checkpoint){detail}; "
            "move it away to start again, or restore a good copy"
        ) from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{path} is not a uatlab training checkpoint (no '{CHECKPOINT_FORMAT}' tag)")
    if isinstance(state.get("model"), dict):  # training never saves a non-finite weight (a NaN loss stops it)
        try:
            check_finite(path, state["model"])
        except ModelFileError as exc:
            raise CheckpointError(str(exc)) from None
    return state


def config_differences(saved: dict[str, Any], wanted: dict[str, Any]) -> list[str]:
    """Human-readable ``field: saved → wanted`` lines for every field that differs."""
    out = []
    for k in sorted(set(saved) | set(wanted)):
        if saved.get(k) != wanted.get(k):
            out.append(f"{k}: checkpoint has {saved.get(k)!r}, this run asks for {wanted.get(k)!r}")
    return out
