"""A model file's floating-point tensors hold finite numbers: the check every loader of uatlab's model files makes
(the Transformer's, `uatlab.models.io`; the memorizers of Kajitsuka & Sato, ICLR 2025,
`uatlab.constructions.paper_c.model_file`; training checkpoints, `uatlab.training.checkpoint`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from uatlab.errors import ModelFileError


def check_finite(path: Path, tensors: dict[str, Any]) -> None:
    """ModelFileError naming the first tensor (in name order) with a NaN or ±inf entry, and how many it has.

    No construction or training run writes a non-finite weight; a model holding one computes NaN logits,
    whose argmax is a constant label, so such a file is refused on load rather than predicted with."""
    import torch

    for name in sorted(tensors):
        t = tensors[name]
        if not (isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())):
            continue
        bad = int((~torch.isfinite(t)).sum())
        if bad:
            raise ModelFileError(
                f"{path}: tensor {name} has {bad} non-finite entr{'y' if bad == 1 else 'ies'} (NaN or ±inf) of "
                f"{t.numel()}; a uatlab model's weights are finite (the file is corrupt or was edited)"
            )
