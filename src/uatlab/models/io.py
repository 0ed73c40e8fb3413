"""Saving and loading uatlab models: one safetensors file holding the weights and the config.

The config travels in the safetensors header metadata (``uatlab_config``, JSON) next to a format
tag (``uatlab_format``), so a single file is a complete model. Loading checks the tag, the config
and every tensor's shape, and turns every failure into a :class:`ModelFileError` naming the file.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from safetensors import safe_open
from safetensors.torch import save_file

from uatlab.errors import InputError, ModelFileError
from uatlab.models.transformer import Transformer, TransformerConfig

FORMAT_TAG = "uatlab-transformer-v1"


def save_model(model: Transformer, path: str | os.PathLike, extra: dict[str, Any] | None = None) -> Path:
    """Write ``model`` to ``path`` atomically (temp file + rename). ``extra`` is saved as JSON metadata."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    metadata = {"uatlab_format": FORMAT_TAG, "uatlab_config": model.config.to_json()}
    if extra:
        metadata["uatlab_extra"] = json.dumps(extra, sort_keys=True, default=str)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata=metadata)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def read_metadata(path: str | os.PathLike) -> dict[str, str]:
    """The header metadata of a uatlab model file (raises ModelFileError if it is not one)."""
    path = Path(path)
    if not path.is_file():
        raise ModelFileError(f"model file {path} does not exist")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
    except Exception as exc:  # safetensors raises its own error types for bad headers
        raise ModelFileError(f"{path} is not a readable safetensors file (truncated or corrupt?): {exc}") from None
    if meta.get("uatlab_format") != FORMAT_TAG:
        raise ModelFileError(f"{path} is a safetensors file but not a uatlab model (no '{FORMAT_TAG}' tag)")
    return meta


def load_model(path: str | os.PathLike) -> tuple[Transformer, dict[str, Any]]:
    """Load a model saved by :func:`save_model`. Returns (model in eval mode, extra metadata)."""
    path = Path(path)
    meta = read_metadata(path)
    try:
        config = TransformerConfig.from_json(meta["uatlab_config"])
    except (KeyError, json.JSONDecodeError, InputError, TypeError) as exc:
        raise ModelFileError(f"{path}: the stored config is invalid: {exc}") from None
    model = Transformer(config)
    try:
        with safe_open(str(path), framework="pt") as f:
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as exc:
        raise ModelFileError(f"{path}: cannot read tensors (truncated or corrupt?): {exc}") from None
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        raise ModelFileError(f"{path}: tensors do not match the config (missing {missing}, unexpected {unexpected})")
    for k, v in tensors.items():
        if tuple(v.shape) != tuple(expected[k].shape):
            raise ModelFileError(
                f"{path}: tensor {k} has shape {tuple(v.shape)}, the config needs {tuple(expected[k].shape)}"
            )
    model.load_state_dict(tensors)
    model.eval()
    extra = json.loads(meta["uatlab_extra"]) if "uatlab_extra" in meta else {}
    return model, extra
