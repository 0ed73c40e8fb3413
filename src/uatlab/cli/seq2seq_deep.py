"""``uatlab compile DATA --ff deep``: one rank-1 attention layer and a deep feed-forward network.

Kajitsuka & Sato, ICLR 2025 (sequence-to-sequence memorization): the construction of
`uatlab.constructions.paper_c.seq2seq_memorizer`, certified by `uatlab.verify.seq2seq_deep`.
Reads CoNLL columns or JSONL, compiles, certifies in the dtype, reports bits per non-embedding parameter by
the one definition of `uatlab.data.information`, and saves the exact weights as a NumPy archive.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from uatlab.errors import InputError
from uatlab.io_safety import atomic_write


def compile_deep_file(
    records: Any, data: Path, dtype: str, out: Path, seed: int, certify: bool = True
) -> dict[str, Any]:
    """Compile (and certify) the records (tokens, labels, line); save the model to ``out``; return the figures."""
    from uatlab.constructions.paper_c.seq2seq_api import compile_seq2seq_deep
    from uatlab.data.information import bits_per_parameter, label_information_of

    if dtype not in ("float64", "float32"):
        raise InputError(f"--dtype must be float64 or float32 for --ff deep, got {dtype!r}")
    t0 = time.perf_counter()
    tok_id: dict[str, int] = {}
    lab_id: dict[str, int] = {}
    sents, labs, strs = [], [], []
    for toks, ys, _line in records:
        sents.append(np.asarray([tok_id.setdefault(t, len(tok_id)) for t in toks], dtype=np.int64))
        labs.append(np.asarray([lab_id.setdefault(y, len(lab_id)) for y in ys], dtype=np.int64))
        strs.append((list(toks), list(ys)))
    if not sents:
        raise InputError(f"{data}: no sequences found (the file is empty, blank or holds only -DOCSTART- lines)")
    t_read = time.perf_counter() - t0
    con = compile_seq2seq_deep(
        sents, labs, V=len(tok_id), C=max(2, len(lab_id)), regime=dtype, seed=seed, certify=certify
    )
    memo, cert = con.detail, con.certificate
    info = label_information_of(strs)
    params = memo.parameters
    t = time.perf_counter()
    with atomic_write(out, "wb") as fh:
        np.savez_compressed(
            fh,
            format=np.asarray("uatlab-seq2seq-deep-v1"),
            regime=np.asarray(dtype),
            nu=memo.nu,
            mu=memo.mu,
            v=memo.v,
            token_vocab=np.asarray(json.dumps(list(tok_id))),
            label_vocab=np.asarray(json.dumps(list(lab_id))),
            layers=np.asarray(
                json.dumps(
                    [
                        {"ptr": L.ptr.tolist(), "cols": L.cols.tolist(), "weights": L.weights, "bias": L.bias}
                        for L in memo.circuit.layers
                    ]
                )
            ),
        )
    fig: dict[str, Any] = {
        "ff": "deep",
        "dtype": dtype,
        "paper": con.paper,
        "theorem": con.theorem,
        "sequences": len(sents),
        "tokens": int(info.tokens),
        "vocabulary": len(tok_id),
        "classes": len(lab_id),
        "max_len": max(len(x) for x in sents),
        "context": memo.context,
        "ffn_depth": memo.circuit.depth,
        **{f"params_{k}": v for k, v in params.items()},
        "label_bits_given_word": info.word_bits,
        "bits_per_param_non_embedding": bits_per_parameter(info, params["non_embedding"]),
        "bits_per_param_non_embedding_nonzero": bits_per_parameter(info, params["non_embedding_nonzero"]),
        "bits_per_param_definition": (
            "Σ_tokens H(label | word), conflicts excluded, / dense non-embedding parameters (attention + every "
            "feed-forward layer at its full width × (inputs + 1) + readout); _nonzero: / the stored nonzero ones"
        ),
        "float_floor_parameters": info.word_bits / (64 if dtype == "float64" else 32),
        "keys": memo.facts["keys"],
        "table_sizes": memo.facts["table_sizes"],
        "digits_per_word": memo.facts["D"],
        "words_per_bank": memo.facts["m"],
        "max_weight_bits": memo.facts["max_weight_bits"],
    }
    if cert is not None:
        fig |= {
            "ceiling_tokens": cert.ceiling_tokens,
            "certified_tokens": cert.certified_tokens,
            "certified": cert.certified,
            "certified_at_ceiling": cert.certified and cert.certified_tokens == cert.ceiling_tokens,
            "certificate": cert.reason,
            "float_bound_bits": cert.float_bound_bits,
        }
    fig["stage_seconds"] = {
        "read": t_read,
        "compile": con.facts["seconds_compile"],
        "certify": cert.seconds if cert else 0.0,
        "save": time.perf_counter() - t,
    }
    fig["model_file"] = str(out)
    fig["seconds"] = time.perf_counter() - t0
    return fig
