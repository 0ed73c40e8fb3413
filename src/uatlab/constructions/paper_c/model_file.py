"""The next-token memorizer in uatlab's one model file format: safetensors tensors + JSON metadata.

A saved memorizer (Kajitsuka & Sato, ICLR 2025, next-token construction; see
`uatlab.constructions.paper_c.next_token_memorizer`) holds exactly what the certificate needs: the
token-position table ν (n' × (V+1)), every layer of the integer ReLU circuit in compressed sparse rows
(``ptr``, ``cols``, integer ``weights`` and ``bias``), the layout (C, D, m, table sizes, n', value range,
regime) and the token and label vocabularies. The attention and readout weights are functions of the layout
(`NextTokenMemorizer.attention_weights`, logit_c = 2c·y − c²) and are rebuilt, not stored.

Integers are stored exactly: a tensor whose entries all fit 62 bits is one int64 tensor; otherwise (the
exact regime's words, Θ(√N·log C) bits) it is a sign tensor (int8) and a (k, L) int64 tensor of 62-bit
limbs, |v| = Σ_i limbs[:, i]·2^(62 i). The header carries ``uatlab_format = "uatlab-next-token-v1"``;
`uatlab.models.io.load` dispatches on it.
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
    pack_ints,
    unpack_ints,
    write_model_file,
)
from uatlab.constructions.paper_c.layout import REGIMES, Layout
from uatlab.constructions.paper_c.next_token_memorizer import NextTokenMemorizer
from uatlab.data.dataset import first_repeated
from uatlab.errors import InputError, ModelFileError
from uatlab.models.finite import check_finite

FORMAT_TAG = "uatlab-next-token-v1"
_pack, _unpack = pack_ints, unpack_ints  # the names the next-token tests and callers use


def save_next_token(
    memo: NextTokenMemorizer,
    path: str | os.PathLike,
    token_vocab: list[str] | None = None,
    label_vocab: list[str] | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write ``memo`` (and the vocabularies that map strings to its ids) to ``path`` atomically."""
    from uatlab import __version__

    if token_vocab is not None and len(token_vocab) != memo.V:
        raise InputError(f"token_vocab lists {len(token_vocab)} tokens, the memorizer reads V = {memo.V}")
    if label_vocab is not None and len(label_vocab) > memo.C:
        raise InputError(f"label_vocab lists {len(label_vocab)} labels, the memorizer has C = {memo.C}")
    for name, vocab in (("token_vocab", token_vocab), ("label_vocab", label_vocab)):
        repeated = first_repeated(vocab or ())
        if repeated is not None:  # two ids with one name: one of them could never be read or written
            raise InputError(f"{name} lists {repeated!r} twice")
    tensors: dict[str, torch.Tensor] = {}
    pack_ints("nu", [v for row in memo.nu for v in row], tensors)
    circuit_tensors(memo.circuit, tensors)
    lay = memo.layout
    header = {
        "layout": {
            "regime": lay.regime,
            "C": lay.C,
            "D": lay.D,
            "m": lay.m,
            "sizes": list(lay.sizes),
            "n_pad": lay.n_pad,
            "value_range": lay.value_range,
        },
        "n": memo.n,
        "V": memo.V,
        "seed": memo.seed,
        **circuit_header(memo.circuit),
        "facts": memo.facts,
        "token_vocab": token_vocab,
        "label_vocab": label_vocab,
        "uatlab_version": __version__,
        **(extra or {}),
    }
    return write_model_file(path, tensors, FORMAT_TAG, "uatlab_next_token", header)


def load_next_token(path: str | os.PathLike) -> tuple[NextTokenMemorizer, dict[str, Any]]:
    """Read a file written by `save_next_token`: (memorizer, header). Errors name the file."""
    from safetensors import safe_open

    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as exc:
        raise ModelFileError(f"{path} is not a readable safetensors file (truncated or corrupt?): {exc}") from None
    check_finite(path, tensors)
    return memo_from(path, meta, tensors)


def memo_from(
    path: Path, meta: dict[str, str], tensors: dict[str, torch.Tensor]
) -> tuple[NextTokenMemorizer, dict[str, Any]]:
    """The memorizer and header from a file's metadata and tensors (already read once).

    Refuses (ModelFileError naming ``path`` and the field) anything the certificate
    (`uatlab.verify.next_token`) or the forward pass relies on: a regime other than exact / float64 /
    float32, window length n and context n' = 2^⌈log2 n⌉ that disagree, a token-position table ν outside
    [0, value_range) or with a nonzero pad column (`check_token_table`), more labels than the readout's C
    classes or token names other than V, and a circuit that does not read (ν_last, 1, h) and write y.
    """
    if meta.get("uatlab_format") != FORMAT_TAG:
        raise ModelFileError(f"{path} is not a uatlab next-token model (no '{FORMAT_TAG}' tag)")
    try:
        h = json.loads(meta["uatlab_next_token"])
        if not isinstance(h, dict):
            raise ModelFileError(
                f"{path}: header field uatlab_next_token must be a JSON object, got {type(h).__name__}"
            )
        lay = h["layout"]
        layout = Layout(
            regime=str(lay["regime"]),
            C=int(lay["C"]),
            D=int(lay["D"]),
            m=int(lay["m"]),
            sizes=tuple(int(s) for s in lay["sizes"]),  # type: ignore[arg-type]
            n_pad=int(lay["n_pad"]),
            value_range=int(lay["value_range"]),
        )
        V, n = int(h["V"]), int(h["n"])
        if layout.regime not in REGIMES:
            raise ModelFileError(f"{path}: layout.regime {layout.regime!r} is not one of {sorted(REGIMES)}")
        if n < 1 or layout.n_pad != 1 << (n - 1).bit_length():
            raise ModelFileError(
                f"{path}: n = {n} and layout.n_pad = {layout.n_pad} disagree (n' must be 2^⌈log2 n⌉, n ≥ 1)"
            )
        if V < 1 or layout.C < 2 or layout.value_range < 2 or len(layout.sizes) != 3:
            raise ModelFileError(
                f"{path}: the layout is invalid (V {V}, layout.C {layout.C}, layout.value_range "
                f"{layout.value_range}, layout.sizes {list(layout.sizes)})"
            )
        if min(layout.D, layout.m, *layout.sizes) < 1:
            raise ModelFileError(f"{path}: the layout is invalid (layout.D {layout.D}, layout.m {layout.m})")
        for name, vocab, ok in (
            ("token_vocab", h.get("token_vocab"), lambda k: k == V),
            ("label_vocab", h.get("label_vocab"), lambda k: 1 <= k <= layout.C),
        ):
            if vocab is not None and (not isinstance(vocab, list) or not ok(len(vocab))):
                size = len(vocab) if isinstance(vocab, list) else type(vocab).__name__
                raise ModelFileError(
                    f"{path}: {name} lists {size} entries, the model has V = {V} tokens and C = {layout.C} classes"
                )
        check_header_fields(path, h)
        flat = unpack_ints("nu", tensors)
        if len(flat) != layout.n_pad * (V + 1):
            raise ModelFileError(f"{path}: table nu has {len(flat)} entries, the layout needs {layout.n_pad * (V + 1)}")
        nu = [flat[j * (V + 1) : (j + 1) * (V + 1)] for j in range(layout.n_pad)]
        check_token_table(path, nu, layout.value_range, V)
        circuit = circuit_from_tensors(path, tensors, int(h["n_inputs"]), int(h["depth"]), h.get("notes", {}))
        if circuit.n_inputs != 3 or circuit.depth < 1 or circuit.width != 1:
            raise ModelFileError(f"{path}: the circuit reads {circuit.n_inputs} inputs and writes {circuit.width}")
        seed = int(h["seed"])
    except KeyError as exc:
        raise ModelFileError(f"{path}: missing entry {exc} in the next-token model file") from None
    except (ValueError, TypeError, AttributeError, json.JSONDecodeError) as exc:
        raise ModelFileError(f"{path}: the next-token model header is invalid: {exc}") from None
    memo = NextTokenMemorizer(layout=layout, nu=nu, n=n, V=V, circuit=circuit, seed=seed, facts=h.get("facts", {}))
    return memo, h


TOKENIZERS = ("whitespace", "python")  # `uatlab.data.next_token.tokenize_text`


def check_header_fields(path: Path, h: dict[str, Any]) -> None:
    """ModelFileError naming the file and the field unless the optional header fields that loading and the CLI
    read have their written types: ``source`` an object whose ``tokenizer`` is one of `TOKENIZERS` (or absent),
    ``facts`` and ``notes`` objects, ``token_vocab`` and ``label_vocab`` lists of names (strings or integers)."""

    def bad(field: str, want: str, value: Any) -> ModelFileError:
        got = repr(value) if isinstance(value, (str, int, float)) else type(value).__name__
        return ModelFileError(f"{path}: header field {field} must be {want}, got {got}")

    for field in ("source", "facts", "notes"):
        if h.get(field) is not None and not isinstance(h[field], dict):
            raise bad(field, "a JSON object", h[field])
    tokenizer = (h.get("source") or {}).get("tokenizer")
    if tokenizer is not None and tokenizer not in TOKENIZERS:
        raise bad("source.tokenizer", " or ".join(map(repr, TOKENIZERS)), tokenizer)
    for field in ("token_vocab", "label_vocab"):
        vocab = h.get(field)
        if vocab is not None and not (
            isinstance(vocab, list) and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in vocab)
        ):
            raise bad(field, "a list of names (strings or integers)", vocab)
        repeated = first_repeated(vocab or ())
        if repeated is not None:
            raise ModelFileError(f"{path}: header field {field} lists {repeated!r} twice")


def module_for(memo: NextTokenMemorizer) -> torch.nn.Module:
    """The torch module of ``memo`` in its regime: float64/float32 forward, or exact integer evaluation."""
    from uatlab.constructions.paper_c.model import REGIME_DTYPES, ExactNextTokenModule, NextTokenModel

    regime = memo.layout.regime
    if regime == "exact":
        return ExactNextTokenModule(memo)
    return NextTokenModel(memo, REGIME_DTYPES[regime])


def encode_sequences(
    memo: NextTokenMemorizer, token_vocab: list[str], sequences: list[list[str]], where: list[str] | None = None
) -> np.ndarray:
    """Token strings → ids (P, n), left-padded with the pad id V. Errors name the sequence and the token."""
    index = {t: i for i, t in enumerate(token_vocab)}
    out = np.full((len(sequences), memo.n), memo.V, dtype=np.int64)
    for i, seq in enumerate(sequences):
        at = where[i] if where else f"sequence {i}"
        if len(seq) == 0:
            raise InputError(f"{at}: empty sequence (the model predicts the token after a window of tokens)")
        if len(seq) > memo.n:
            raise InputError(f"{at}: {len(seq)} tokens, the model reads windows of at most {memo.n}")
        for k, t in enumerate(seq):
            if t not in index:
                raise InputError(f"{at}: token {t!r} (position {k}) is not in the model's vocabulary")
            out[i, memo.n - len(seq) + k] = index[t]
    return out


def predict_next(model: torch.nn.Module, sequences: list[list[str]], where: list[str] | None = None) -> list[str]:
    """The predicted label (next token) of every sequence of token strings, with a loaded next-token model."""
    memo: NextTokenMemorizer = model.memo  # type: ignore[assignment]
    ids = encode_sequences(memo, model.token_vocab, sequences, where)  # type: ignore[arg-type]
    labels = model.label_vocab  # type: ignore[attr-defined]
    out: list[str] = []
    with torch.no_grad():
        for i in range(0, len(ids), 8192):
            pred = model(torch.from_numpy(ids[i : i + 8192])).argmax(-1).tolist()
            out.extend(labels[p] if p < len(labels) else f"<class {p}>" for p in pred)
    return out
