"""A model file's floating-point tensors hold finite numbers: the check every loader of uatlab's model files makes
(the Transformer's, `uatlab.models.io`; the memorizers of Kajitsuka & Sato, ICLR 2025,
`uatlab.constructions.paper_c.model_file`; training checkpoints, `uatlab.training.checkpoint`), and `save` makes
before it writes one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from uatlab.errors import InputError, ModelFileError


def _first_non_finite(tensors: dict[str, Any]) -> str | None:
    """'tensor NAME has K non-finite entries (NaN or ±inf) of N' for the first tensor (in name order) with one."""
    import torch

    for name in sorted(tensors):
        t = tensors[name]
        if not (isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())):
            continue
        bad = int((~torch.isfinite(t)).sum())
        if bad:
            return f"tensor {name} has {bad} non-finite entr{'y' if bad == 1 else 'ies'} (NaN or ±inf) of {t.numel()}"
    return None


def check_finite(path: Path, tensors: dict[str, Any]) -> None:
    """ModelFileError naming the first tensor (in name order) with a NaN or ±inf entry, and how many it has.

    No construction or training run writes a non-finite weight; a model holding one computes NaN logits,
    whose argmax is a constant label, so such a file is refused on load rather than predicted with."""
    what = _first_non_finite(tensors)
    if what is not None:
        raise ModelFileError(f"{path}: {what}; a uatlab model's weights are finite (the file is corrupt or was edited)")


def refuse_non_finite(tensors: dict[str, Any], where: str) -> None:
    """InputError naming the first tensor of a model about to be saved that holds a NaN or ±inf entry: `check_finite`
    refuses such a file on load, so writing it (over an earlier model, too) would leave a model that cannot be
    read back."""
    what = _first_non_finite(tensors)
    if what is not None:
        raise InputError(f"{where}: {what}; a uatlab model's weights are finite, and nothing was written")
