"""The seq2seq deep memorizer in uatlab's one model file format: safetensors tensors + JSON metadata.

A saved memorizer (Kajitsuka & Sato, ICLR 2025, sequence-to-sequence memorization; the construction and its
derivation are in `uatlab.constructions.paper_c.seq2seq_memorizer`) holds exactly what its forward pass and
its certificate (`uatlab.verify.seq2seq_deep`) need:

| tensor | shape, dtype | what |
|---|---|---|
| ``nu`` | (n', V+1) int64 | token-position values ν[j, w] (column V: the pad token, 0) |
| ``mu`` | (n',) int64 | positional values μ_j |
| ``v`` | (V+1,) int64 | one label per word: 1 + label, or 0 for an ambiguous word |
| ``layer{i}.ptr``, ``layer{i}.cols`` | int64 | ReLU layer i in compressed sparse rows |
| ``layer{i}.weights``, ``layer{i}.bias`` | int64, or ``.sign`` + ``.limbs`` | exact integers (see below) |

The integer weights are stored exactly by `uatlab.constructions.paper_c.integer_tensors`: one int64 tensor
when every entry fits 62 bits, else 62-bit limbs and a sign (the float regimes keep every weight ≤ 2^53, so
their files use int64 only). The attention weights (W_Q = W_K = e_2^T, W_V = e_1^T, W_O = n'·e_3) and the
readout (logit_c = 2c·y − c²) are functions of n' and C and are rebuilt, not stored.

The header carries ``uatlab_format = "uatlab-seq2seq-deep-v1"`` and ``uatlab_seq2seq_deep``: JSON with the
layout (regime, C' = C + 1, D, m, cores K'_t, n', value range R), V, C, seed, depth, the construction facts,
the encoding (tokens in id order, labels, ``unknown_token``: null, i.e. an unknown word is an error naming
it), the uatlab version and what the compiler adds (its figures, the compile-time certificate).
`uatlab.models.io.load` dispatches on the tag.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from uatlab.constructions.paper_c.integer_tensors import (
    check_token_table,
    circuit_from_tensors,
    circuit_header,
    circuit_tensors,
    write_model_file,
)
from uatlab.constructions.paper_c.model import REGIME_DTYPES
from uatlab.constructions.paper_c.seq2seq_memorizer import DeepLayout, Seq2SeqMemorizer
from uatlab.data.dataset import Encoding
from uatlab.errors import InputError, ModelFileError, PrecisionError

FORMAT_TAG = "uatlab-seq2seq-deep-v1"
HEADER_KEY = "uatlab_seq2seq_deep"


def _checked_encoding(enc: Any, V: int, C: int, where: str) -> Any:
    """An `Encoding` (from an Encoding or its JSON) that names V tokens and at most C labels."""
    if isinstance(enc, dict):
        try:
            enc = Encoding.from_json(enc)  # names what is missing or wrong
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
    if not isinstance(enc, Encoding):
        raise InputError(f"{where}: the encoding must be a uatlab.Encoding, got {type(enc).__name__}")
    if enc.unknown_token is not None:
        raise InputError(f"{where}: the deep memorizer has no unknown-word id (unknown words are an error)")
    if len(enc.token_to_id) != V:
        raise InputError(f"{where}: the encoding lists {len(enc.token_to_id)} distinct tokens, the model reads V = {V}")
    if not 1 <= len(enc.label_to_id) <= C:
        raise InputError(f"{where}: the encoding lists {len(enc.label_to_id)} labels, the model has C = {C}")
    return enc


def save_seq2seq_deep(
    memo: Seq2SeqMemorizer, path: str | os.PathLike, encoding: Any = None, extra: dict[str, Any] | None = None
) -> Path:
    """Write ``memo`` and its encoding (default: token i ↔ ``str(i)``) to ``path`` atomically.

    ``extra`` (JSON-able) is stored in the header beside the layout, facts, encoding and uatlab version.
    Raises InputError (before touching ``path``) when the encoding does not match the memorizer."""
    from uatlab import __version__

    enc = Encoding.of_ids(memo.V, memo.C) if encoding is None else encoding
    enc = _checked_encoding(enc, memo.V, memo.C, "save")
    tensors: dict[str, torch.Tensor] = {
        "nu": torch.from_numpy(np.ascontiguousarray(memo.nu, dtype=np.int64)),  # (n', V+1)
        "mu": torch.from_numpy(np.ascontiguousarray(memo.mu, dtype=np.int64)),  # (n',)
        "v": torch.from_numpy(np.ascontiguousarray(memo.v, dtype=np.int64)),  # (V+1,)
    }
    circuit_tensors(memo.circuit, tensors)
    lay = memo.layout
    header = {
        "layout": {
            "regime": lay.regime,
            "C": lay.C,
            "D": lay.D,
            "m": lay.m,
            "cores": list(lay.cores),
            "context": lay.context,
            "value_range": lay.value_range,
        },
        "V": memo.V,
        "C": memo.C,
        "seed": memo.seed,
        **circuit_header(memo.circuit),
        "facts": memo.facts,
        "encoding": enc.to_json(),
        "unknown_words": "error",
        "uatlab_version": __version__,
        **(extra or {}),
    }
    return write_model_file(path, tensors, FORMAT_TAG, HEADER_KEY, header)


def _array(path: Path, tensors: dict[str, torch.Tensor], name: str, shape: tuple[int, ...]) -> np.ndarray:
    t = tensors[name]
    if t.dtype != torch.int64 or tuple(t.shape) != shape:
        raise ModelFileError(f"{path}: tensor {name} is {t.dtype} {tuple(t.shape)}, the header needs int64 {shape}")
    return t.numpy().copy()


def memo_from(path: Path, meta: dict[str, str], tensors: dict[str, torch.Tensor]) -> tuple[Seq2SeqMemorizer, dict]:
    """The memorizer and header from a file's metadata and tensors (already read once); errors name the file."""
    if meta.get("uatlab_format") != FORMAT_TAG:
        raise ModelFileError(f"{path} is not a uatlab seq2seq deep model (no '{FORMAT_TAG}' tag)")
    try:
        h = json.loads(meta[HEADER_KEY])
        lay = h["layout"]
        layout = DeepLayout(
            regime=str(lay["regime"]),
            C=int(lay["C"]),
            D=int(lay["D"]),
            m=int(lay["m"]),
            cores=tuple(int(c) for c in lay["cores"]),  # type: ignore[arg-type]
            context=int(lay["context"]),
            value_range=int(lay["value_range"]),
        )
        V, C, n = int(h["V"]), int(h["C"]), layout.context
        if layout.regime not in REGIME_DTYPES or len(layout.cores) != 3 or layout.C != C + 1:
            raise ModelFileError(f"{path}: the layout is invalid (regime {layout.regime!r}, C' {layout.C}, C {C})")
        if n < 1 or n & (n - 1) or V < 1 or min(layout.D, layout.m, *layout.cores) < 1:
            raise ModelFileError(f"{path}: the layout is invalid (context {n}, V {V}, D {layout.D}, m {layout.m})")
        nu = _array(path, tensors, "nu", (n, V + 1))
        mu = _array(path, tensors, "mu", (n,))
        v = _array(path, tensors, "v", (V + 1,))
        check_token_table(path, nu, layout.value_range, V)
        if v.min() < 0 or v.max() > C or v[V] != 0 or mu.min() < 1:
            raise ModelFileError(f"{path}: word values v outside [0, C] (pad 0) or positional values μ < 1")
        circuit = circuit_from_tensors(path, tensors, int(h["n_inputs"]), int(h["depth"]), h.get("notes", {}))
        if circuit.n_inputs != 2 or circuit.width != 1:
            raise ModelFileError(f"{path}: the circuit reads {circuit.n_inputs} inputs and writes {circuit.width}")
        memo = Seq2SeqMemorizer(layout, n, nu, mu, v, V, C, circuit, int(h["seed"]), dict(h.get("facts", {})))
    except KeyError as exc:
        raise ModelFileError(f"{path}: missing entry {exc} in the seq2seq deep model file") from None
    except (ValueError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise ModelFileError(f"{path}: the seq2seq deep model header is invalid: {exc}") from None
    return memo, h


def model_from(path: Path, meta: dict[str, str], tensors: dict[str, torch.Tensor]) -> torch.nn.Module:
    """The torch module (`uatlab.constructions.paper_c.seq2seq_model.Seq2SeqDeepModel`) of a read file,
    with ``memo``, ``encoding`` and ``saved_extra`` (the header) set."""
    from uatlab.constructions.paper_c.seq2seq_model import Seq2SeqDeepModel

    memo, header = memo_from(path, meta, tensors)
    try:
        enc = _checked_encoding(header.get("encoding") or Encoding.of_ids(memo.V, memo.C), memo.V, memo.C, str(path))
        model = Seq2SeqDeepModel(memo, REGIME_DTYPES[memo.layout.regime])
    except (InputError, PrecisionError, KeyError, TypeError) as exc:
        raise ModelFileError(f"{path}: {exc}") from None
    model.encoding = enc
    model.saved_extra = header
    return model
