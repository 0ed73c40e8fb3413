"""Exact integers and integer ReLU circuits as safetensors tensors (the memorizers' model files).

The memorizers of Kajitsuka & Sato, ICLR 2025 (`uatlab.constructions.paper_c.next_token_memorizer`,
`uatlab.constructions.paper_c.seq2seq_memorizer`) hold their labels in integer weights that may exceed
float64's 53-bit exact range (and, in the exact regime, int64). They are stored exactly:

* a list whose entries all fit 62 bits is one int64 tensor ``name``;
* otherwise it is a sign tensor ``name.sign`` (int8, 1 = negative) and a (k, L) int64 tensor ``name.limbs`` of
  62-bit limbs, |v| = Σ_i limbs[:, i]·2^(62 i).

A circuit layer i (compressed sparse rows, `uatlab.constructions.paper_c.relu_circuit.Layer`) is
``layer{i}.ptr`` and ``layer{i}.cols`` (int64) and the exact integers ``layer{i}.weights``, ``layer{i}.bias``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from uatlab.constructions.paper_c.relu_circuit import Circuit, Layer
from uatlab.errors import ModelFileError

LIMB_BITS = 62


def pack_ints(name: str, values: list[int], out: dict[str, torch.Tensor]) -> None:
    """Exact integers → ``out[name]`` (int64) or ``out[name + '.sign']`` (int8) + ``out[name + '.limbs']`` (k, L)."""
    bits = max((abs(int(v)).bit_length() for v in values), default=0)
    if bits <= LIMB_BITS:
        out[name] = torch.tensor([int(v) for v in values], dtype=torch.int64)
        return
    L = -(-bits // LIMB_BITS)
    mask = (1 << LIMB_BITS) - 1
    limbs = np.zeros((len(values), L), dtype=np.int64)  # (k, L)
    for i, v in enumerate(values):
        a = abs(int(v))
        for j in range(L):
            limbs[i, j] = (a >> (LIMB_BITS * j)) & mask
    out[name + ".sign"] = torch.tensor([1 if v < 0 else 0 for v in values], dtype=torch.int8)
    out[name + ".limbs"] = torch.from_numpy(limbs)


def unpack_ints(name: str, tensors: dict[str, torch.Tensor]) -> list[int]:
    """The exact integers written by `pack_ints` (KeyError when the tensors are missing)."""
    if name in tensors:
        return [int(v) for v in tensors[name].tolist()]
    sign, limbs = tensors[name + ".sign"].tolist(), tensors[name + ".limbs"].tolist()
    out = []
    for s, row in zip(sign, limbs, strict=True):
        a = sum(int(x) << (LIMB_BITS * j) for j, x in enumerate(row))
        out.append(-a if s else a)
    return out


def circuit_tensors(circuit: Circuit, out: dict[str, torch.Tensor]) -> None:
    """Every layer of ``circuit`` into ``out`` (sparse rows int64, weights and bias exact)."""
    for i, layer in enumerate(circuit.layers):
        out[f"layer{i}.ptr"] = torch.from_numpy(np.asarray(layer.ptr, dtype=np.int64).copy())
        out[f"layer{i}.cols"] = torch.from_numpy(np.asarray(layer.cols, dtype=np.int64).copy())
        pack_ints(f"layer{i}.weights", layer.weights, out)
        pack_ints(f"layer{i}.bias", layer.bias, out)


def circuit_from_tensors(
    path: Path, tensors: dict[str, torch.Tensor], n_inputs: int, depth: int, notes: dict[str, int]
) -> Circuit:
    """The circuit of `circuit_tensors`, every layer checked against the previous one's width.

    Raises ModelFileError naming ``path`` and the layer when the rows, columns, weights and bias disagree;
    KeyError when a tensor is missing (the caller names the file)."""
    circuit = Circuit(n_inputs=n_inputs, notes=dict(notes))
    width = n_inputs
    for i in range(depth):
        ptr = tensors[f"layer{i}.ptr"].numpy().astype(np.int64)
        cols = tensors[f"layer{i}.cols"].numpy().astype(np.int64)
        weights, bias = unpack_ints(f"layer{i}.weights", tensors), unpack_ints(f"layer{i}.bias", tensors)
        if len(ptr) != len(bias) + 1 or ptr[-1] != len(cols) or len(cols) != len(weights):
            raise ModelFileError(f"{path}: layer {i} is inconsistent (ptr, cols, weights and bias disagree)")
        if len(ptr) and (ptr[0] != 0 or (np.diff(ptr) < 0).any()):
            raise ModelFileError(f"{path}: layer {i} has row pointers that are not non-decreasing from 0")
        if len(cols) and (cols.min() < 0 or cols.max() >= width):
            raise ModelFileError(f"{path}: layer {i} reads an input outside the previous layer's {width} units")
        circuit.layers.append(Layer(ptr, cols, weights, bias))
        width = len(bias)
    return circuit


def token_table_problem(nu: Any, pad: int, value_range: int | None = None, rows: int | None = None) -> str | None:
    """What makes a token-position table ν (n' × (V+1), V = ``pad``) one the memorizers' certificates cannot
    rely on, or None.

    Both memorizers of Kajitsuka & Sato, ICLR 2025 write the sequence id h = Σ_j ν[j, t_j] with one
    averaging attention head over all n' positions, pads included. Their certificates prove the
    floating-point sum exact by bounding every partial sum by h, which needs ν ≥ 0; they skip the pad
    positions, which needs ν[j, pad] = 0; the table needs V + 1 columns (and ``rows`` = n' rows, if given);
    and with ``value_range`` R, the range [0, R) the compiler draws ν from (which bounds h), is checked too.
    The answer names the entry and its value (``nu`` may hold Python ints past int64)."""
    n_rows = "n'" if rows is None else str(rows)
    need = f"({n_rows}, {pad + 1}) (n' × (V + 1))"
    try:
        arr = np.asarray(nu)  # (n', V+1), int64 or object
    except ValueError:  # rows of different lengths
        return f"table nu has rows of different lengths, needs {need}"
    if arr.ndim != 2 or arr.shape[1] != pad + 1 or arr.size == 0 or (rows is not None and arr.shape[0] != rows):
        return f"table nu has shape {arr.shape}, needs {need}"
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or (value_range is not None and hi >= value_range):
        j, t = (int(i) for i in np.argwhere(arr == (lo if lo < 0 else hi))[0])
        if value_range is None:
            return f"table nu[{j}, {t}] = {int(arr[j, t])} is negative (the proof needs ν ≥ 0)"
        return f"table nu[{j}, {t}] = {int(arr[j, t])} is outside [0, value_range = {value_range})"
    nonzero = np.flatnonzero(arr[:, pad] != 0)
    if len(nonzero):
        j = int(nonzero[0])
        return f"table nu[{j}, {pad}] = {int(arr[j, pad])}: the pad token's column must be 0"
    return None


def check_token_table(path: Path, nu: Any, value_range: int, pad: int) -> None:
    """Refuse a token-position table ν read from the model file ``path`` (`token_table_problem`, entries in
    [0, ``value_range``)): ModelFileError naming the file, the entry and its value."""
    problem = token_table_problem(nu, pad, value_range)
    if problem is not None:
        raise ModelFileError(f"{path}: {problem}")


def jsonable(v: Any) -> Any:
    """``json.dumps(default=...)`` for NumPy scalars and arrays (anything else as its string)."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    return str(v)


def circuit_header(circuit: Circuit) -> dict[str, Any]:
    """The header entries `circuit_from_tensors` needs beside the tensors: inputs, depth and the circuit's notes."""
    return {"n_inputs": circuit.n_inputs, "depth": circuit.depth, "notes": dict(circuit.notes)}


def write_model_file(
    path: str | os.PathLike, tensors: dict[str, torch.Tensor], tag: str, header_key: str, header: dict[str, Any]
) -> Path:
    """Write ``tensors`` with the format ``tag`` and ``header`` (as JSON under ``header_key``) to ``path``
    atomically: the file is replaced only once it is complete, and nothing is left on failure or interrupt."""
    from uatlab.models.safetensors_file import write_safetensors

    metadata = {"uatlab_format": tag, header_key: json.dumps(header, default=jsonable)}
    return write_safetensors(tensors, path, metadata)
