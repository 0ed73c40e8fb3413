"""``uatlab compile DATA --ff deep``: one rank-1 attention layer and a deep feed-forward network.

Kajitsuka & Sato, ICLR 2025 (sequence-to-sequence memorization): the construction of
`uatlab.constructions.paper_c.seq2seq_memorizer`, certified by `uatlab.verify.seq2seq_deep`.
Reads CoNLL columns or JSONL, compiles, certifies in the dtype, reports bits per non-embedding parameter by
the one definition of `uatlab.data.information`, and saves the model in uatlab's one model file format
(`uatlab.constructions.paper_c.seq2seq_file`: exact integer weights, encoding, facts, the compile-time
certificate). ``uatlab certify`` re-runs the certificate on a saved model (`certify_deep_command`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from uatlab.cli.options import no_data_error, refuse_prose
from uatlab.errors import InputError

#: the stages `compile_deep_file` reports to its progress callback, in order, and what each counts
STAGE_UNITS = {"reading": "seq", "construct": "step", "certify gate": "point", "certify retrieval": "point"}
DEEP_BYTES_PER_CELL = 24  # peak bytes per cell of the padded (n' × (V + 1 + N)) arrays: 2.1 × 8 measured, rounded up


def check_deep_memory(context: int, vocab: int, sequences: int, where: str) -> None:
    """Refuse (before building) a compile whose padded arrays would not fit in memory.

    The construction holds the token-position table ν (n' × (V + 1) int64, also in the model, its tensors and
    the file) and every distinct sentence padded to the context n' (N × n' int64, and the ids the attention
    gives each position): both grow with n' = 2^⌈log2 n_max⌉, so one long sequence multiplies them. About
    2.1 copies of each were measured at the peak (V = 4,242, n' = 16,384: 1.15 GB above the 0.25 GB of the
    imports; N = 8,001: 2.14 GB)."""
    from uatlab.memory_guard import check_memory

    check_memory(
        DEEP_BYTES_PER_CELL * float(context) * (vocab + 1 + sequences),
        f"compiling --ff deep with the sequence at {where}",
        f"it sets the context to n' = {context} positions; the model's table is n' × (V + 1) = {context} × "
        f"{vocab + 1} and the {sequences} sequences are padded to n'",
    )


def compile_deep_file(
    records: Any,
    data: Path,
    dtype: str,
    out: Path,
    seed: int,
    certify: bool = True,
    progress: Callable[[str, int, int | None], None] | None = None,
) -> dict[str, Any]:
    """Compile (and certify) the records (tokens, labels, line); save the model to ``out``; return the figures.

    ``progress(stage, done, total)`` is told every sequence read and the construction's and certificate's
    steps (`STAGE_UNITS`). Errors name the file and line of the sequence they are about."""
    from uatlab.constructions.paper_c.seq2seq_api import compile_seq2seq_deep
    from uatlab.data.information import bits_per_parameter, label_information_of

    if dtype not in ("float64", "float32"):
        raise InputError(f"--dtype must be float64 or float32 for --ff deep, got {dtype!r}")
    t0, c0 = time.perf_counter(), time.process_time()
    tok_id: dict[str, int] = {}
    lab_id: dict[str, int] = {}
    sents, labs, strs, lines = [], [], [], []
    for toks, ys, line in records:
        sents.append(np.asarray([tok_id.setdefault(t, len(tok_id)) for t in toks], dtype=np.int64))
        labs.append(np.asarray([lab_id.setdefault(y, len(lab_id)) for y in ys], dtype=np.int64))
        strs.append((list(toks), list(ys)))
        lines.append(line)
        if progress is not None:
            progress("reading", len(sents), None)
    if not sents:
        raise no_data_error(data)
    t_read, c_read = time.perf_counter() - t0, time.process_time() - c0

    def where(i: int) -> str:
        return f"{data}:{lines[i]}"

    longest = max(range(len(sents)), key=lambda i: len(sents[i]))
    context = 1 << max(0, (len(sents[longest]) - 1).bit_length())  # n' of the construction
    check_deep_memory(context, len(tok_id), len(sents), where(longest))
    con = compile_seq2seq_deep(
        sents,
        labs,
        V=len(tok_id),
        C=max(2, len(lab_id)),
        regime=dtype,
        seed=seed,
        certify=certify,
        progress=progress,
        where=where,
    )
    memo, cert = con.detail, con.certificate
    info = label_information_of(strs)
    params = memo.parameters
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
            "conflict_tokens": cert.conflict_tokens,
            "certified_tokens": cert.certified_tokens,
            "certified": cert.certified,
            "certified_at_ceiling": cert.certified and cert.certified_tokens == cert.ceiling_tokens,
            "certificate": cert.reason,
            "float_bound_bits": cert.float_bound_bits,
            "invalidated_by": cert.invalidated_by,
            "assumptions": cert.assumptions,
            "environment": cert.environment,
        }
    from uatlab.constructions.paper_c.seq2seq_file import save_seq2seq_deep
    from uatlab.data.dataset import Encoding

    t, c_save = time.perf_counter(), time.process_time()
    encoding = Encoding.from_lists(list(tok_id), list(lab_id))
    con.model.encoding = encoding
    compiled = {k: fig[k] for k in ("sequences", "tokens", "vocabulary", "classes", "max_len")}
    save_seq2seq_deep(
        memo,
        out,
        encoding,
        {
            "source": {"data": data.name},
            "compiled_on": compiled,
            # without its time: the same model is the same bytes
            "compile_certificate": (
                {k: v for k, v in cert.to_dict().items() if k != "seconds"} if cert is not None else None
            ),
        },
    )
    fig["stage_seconds"] = {
        "read": t_read,
        "compile": con.facts["seconds_compile"],
        "certify": cert.seconds if cert else 0.0,
        "save": time.perf_counter() - t,
    }
    fig["stage_cpu_seconds"] = {  # CPU seconds of this process (all its threads), imports and start-up excluded
        "read": c_read,
        "compile": con.facts["cpu_seconds_compile"],  # the construction and its torch module
        "certify": con.facts["cpu_seconds_certify"],
        "save": time.process_time() - c_save,
    }
    fig["model_file"] = str(out)
    fig["model_file_bytes"] = out.stat().st_size
    fig["seconds"] = time.perf_counter() - t0
    return fig


def certify_deep_command(
    model_path: Path,
    data: Path,
    records: Any,
    json_out: bool,
    token_lines: bool = False,
    reading: str | None = None,
    given_format: str = "conll",
) -> dict[str, Any]:
    """``uatlab certify`` on a saved seq2seq deep memorizer: re-run its exact-integer certificate on DATA, with
    progress bars on stderr (none with ``json_out``); refused above the memory limit before any padding.
    ``token_lines``: DATA has one token per line (CoNLL), so errors name a token's own line; ``reading``: the
    format DATA was read in (``format`` of the figures); ``given_format``: the ``--format`` given (with ``auto``, a few
    lines of prose read as columns are refused, `uatlab.cli.options.refuse_prose`)."""
    from uatlab.cli.app import console, key_value_table, print_json
    from uatlab.cli.certificate_output import print_certificate_assumptions, table_rows, warn_void_proof
    from uatlab.cli.progress import StageBars
    from uatlab.data.dataset import SequenceDataset
    from uatlab.memory_guard import check_memory
    from uatlab.models.io import load
    from uatlab.verify.seq2seq_deep import certify_seq2seq_dataset

    t0 = time.perf_counter()
    model = load(model_path)
    if reading is not None and model.encoding is not None:  # without one, labels are the ids "0", "1", …
        refuse_prose(data, given_format, reading, model.encoding.id_to_label)
    tokens, labels, lines = [], [], []
    with StageBars(not json_out, units=STAGE_UNITS) as bars:
        for toks, ys, line in records:
            tokens.append(list(toks))
            labels.append(list(ys))
            lines.append(line)
            bars("reading", len(tokens), None)
        if not tokens:
            raise no_data_error(data, "no tokens to certify")
        n = model.memo.context
        check_memory(  # every sequence is padded to the model's context (`check_deep_memory`)
            DEEP_BYTES_PER_CELL * float(n) * len(tokens),
            f"certifying {data} on {model_path}",
            f"its {len(tokens)} sequences are padded to the model's context n' = {n} positions",
        )
        dataset = SequenceDataset(tokens, labels, source=str(data), lines=lines, token_lines=token_lines)
        cert = certify_seq2seq_dataset(model, dataset, progress=bars)
    warn_void_proof(cert.invalidated_by)
    fig: dict[str, Any] = {
        "task": "token",
        "ff": "deep",
        "model": str(model_path),
        "data": str(data),
        "sequences": len(dataset),
        **cert.to_dict(),
        "conflict_tokens": cert.conflict_tokens,  # as the knots model's certificate gives them
        "certified_at_ceiling": cert.certified_at_ceiling,
        "params_non_embedding": model.memo.parameters["non_embedding"],
        "seconds": time.perf_counter() - t0,
    }
    if reading is not None:
        fig["format"] = reading
    if json_out:
        print_json(fig)
        return fig
    console.print(key_value_table(f"uatlab certify {model_path.name} on {data.name}", table_rows(fig)))
    print_certificate_assumptions(fig)
    console.print(
        f"proved {cert.certified_tokens} of {cert.tokens} tokens correct in {cert.regime} "
        f"({cert.ceiling_tokens} can be right at all; {cert.correct_tokens} correct in exact arithmetic)",
        highlight=False,
    )
    return fig
