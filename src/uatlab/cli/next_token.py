"""The next-token task of ``uatlab compile`` and ``uatlab experiment capacity`` (Kajitsuka & Sato, ICLR 2025).

``uatlab compile DATA --task next-token`` reads JSONL (``{"tokens": [...], "label": ...}``) or a text file
cut into ``--window n`` windows, compiles the one-attention-layer memorizer, certifies it and saves it in
uatlab's model file format (safetensors + metadata, `uatlab.save`). Every option is validated before
anything is read or written.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from uatlab.errors import InputError
from uatlab.io_safety import write_text_atomic

NEXT_TOKEN_REGIMES = ("float64", "float32", "exact")


def compile_next_token_file(
    data: Path, fmt: str, window: int | None, tokenizer: str, dtype: str, out: Path, seed: int
) -> dict[str, Any]:
    """Compile and certify; returns the figures. Raises InputError/PrecisionError with one clear message."""
    from uatlab.constructions.paper_c.next_token_memorizer import compile_memorizer
    from uatlab.data.next_token import read_next_token_jsonl, read_text_windows
    from uatlab.verify.next_token import certify_next_token

    if dtype not in NEXT_TOKEN_REGIMES:
        raise InputError(f"--dtype {dtype!r}: the next-token task takes one of {', '.join(NEXT_TOKEN_REGIMES)}")
    if fmt == "auto":
        fmt = "jsonl" if str(data).endswith((".jsonl", ".json")) else "text"
    if fmt not in ("jsonl", "text"):
        raise InputError(f"--format {fmt!r}: the next-token task reads 'jsonl' or 'text'")
    if fmt == "text" and window is None:
        raise InputError("--window is required to cut a text file into next-token windows")
    if fmt == "jsonl" and window is not None:
        raise InputError("--window applies to text files only; JSONL examples carry their own tokens")
    if tokenizer not in ("whitespace", "python"):
        raise InputError(f"--tokenizer {tokenizer!r}: use 'whitespace' or 'python'")
    if not out.parent.exists():
        raise InputError(f"--out {out}: folder {out.parent} does not exist")
    t0 = time.perf_counter()
    if fmt == "jsonl":
        d = read_next_token_jsonl(data, labels_are_tokens=True)
    else:
        d = read_text_windows(data, window, tokenizer)  # type: ignore[arg-type]
    memo, report = compile_memorizer(
        d.tokens, d.labels, V=len(d.token_vocab), C=max(2, d.num_classes), regime=dtype, seed=seed
    )
    cert = certify_next_token(memo, d.tokens, d.labels)
    from uatlab.constructions.paper_c.model_file import save_next_token

    save_next_token(
        memo,
        out,
        d.token_vocab,
        d.label_vocab,
        {"source": {"format": fmt, "window": window, "tokenizer": tokenizer if fmt == "text" else None}},
    )
    fig = {
        "task": "next-token",
        "data": str(data),
        "examples": len(d),
        "window": d.window,
        "vocabulary": len(d.token_vocab),
        "classes": d.num_classes,
        "regime": dtype,
        **{f"params_{k}": v for k, v in memo.parameters.items()},
        "digits_per_word": memo.layout.D,
        "words_per_bank": memo.layout.m,
        "depth": memo.circuit.depth,
        "max_weight_bits": memo.facts["max_weight_bits"],
        "ratio_to_float64_floor": memo.facts["ratio_to_float64_floor"],
        "ceiling_examples": cert.ceiling_rows,
        "correct_examples": cert.correct_rows,
        "certified": cert.certified,
        "certificate": cert.reason,
        "seconds": time.perf_counter() - t0,
        "compile_seconds": report["seconds_total"],
        "out": str(out),
    }
    return fig


def compile_next_token_command(
    data: Path, fmt: str, window: int | None, tokenizer: str, dtype: str, out: Path, seed: int, json_out: bool
) -> None:
    """Print the figures of `compile_next_token_file` (JSON or a table)."""
    from uatlab.cli.app import console, key_value_table, print_json

    fig = compile_next_token_file(data, fmt, window, tokenizer, dtype, out, seed)
    if json_out:
        print_json(fig)
    else:
        console.print(key_value_table("next-token memorizer (Kajitsuka & Sato, ICLR 2025)", fig))


def capacity_next_token_command(ns: str, quick: bool, blocks: bool, out: Path, json_out: bool) -> None:
    """Smallest trained one-layer model reaching 100 % vs the compiled memorizer, with fitted slopes."""
    from uatlab.cli.app import console, print_json
    from uatlab.experiments import next_token as nt

    try:
        n_list = [int(x) for x in ns.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--ns {ns!r}: expected comma-separated integers") from None
    if quick:
        n_list = [100, 300, 1000]
    if not n_list or min(n_list) < 2:
        raise InputError("--ns: every N must be ≥ 2")
    out.mkdir(parents=True, exist_ok=True)
    state_path = out / "next_token_capacity.json"
    state = json.loads(state_path.read_text()) if state_path.is_file() else {"trained": [], "compiled": []}
    have_t = {r["N"] for r in state["trained"]}
    have_c = {r["N"] for r in state["compiled"]}
    for N in n_list:
        if N not in have_c:
            state["compiled"].append(nt.compiled_point(N, "exact", certify=True))
        if N not in have_t:
            state["trained"].append(nt.trained_point(N, epochs=100 if quick else 300))
        write_text_atomic(state_path, json.dumps(state, default=float))
        if not json_out:
            t = next(r for r in state["trained"] if r["N"] == N)
            c = next(r for r in state["compiled"] if r["N"] == N)
            console.print(
                f"N = {N}: compiled {c['params']} parameters (certified {c['certified']}); trained "
                f"width {t['width']}, {t['params']} parameters, accuracy {t['accuracy']:.4f}"
            )
    if blocks and "blocks" not in state:
        state["blocks"] = nt.blocks_variant(
            N=600 if quick else 3000, blocks=(1, 2, 4) if quick else (1, 10, 20, 40), epochs=20 if quick else 60
        )
    pts = [(r["N"], r["params"]) for r in state["trained"] if r.get("params")]
    state["slope_trained"] = nt.fit_loglog_slope([a for a, _ in pts], [b for _, b in pts]) if len(pts) > 1 else None
    pts = [(r["N"], r["params"]) for r in state["compiled"]]
    state["slope_compiled"] = nt.fit_loglog_slope([a for a, _ in pts], [b for _, b in pts]) if len(pts) > 1 else None
    write_text_atomic(state_path, json.dumps(state, default=float))
    if json_out:
        print_json(state)
    else:
        console.print(
            f"log-log slope: compiled {state['slope_compiled']}, trained {state['slope_trained']}; written {state_path}"
        )


NEXT_TOKEN_FORMAT = "uatlab-next-token-v1"


def is_next_token_model(path: Path) -> bool:
    """True if ``path`` is a saved next-token memorizer (checked by its header tag, nothing else read)."""
    from uatlab.models.io import file_format

    return file_format(path) == NEXT_TOKEN_FORMAT


def read_model_sequences(model: Any, data: Path, fmt: str) -> tuple[list[list[str]], list[str | None], list[str]]:
    """Sequences of token strings, their labels (None when the input has none) and where each comes from.

    ``jsonl``: ``{"tokens": [...], "label": ...}`` lines (the label may be missing for prediction);
    ``text``: with ``--format text`` for certify, windows of the model's length cut from the text with the
    tokenizer the model was compiled with, each labelled by the next token; for predict, one sequence of
    whitespace tokens per non-empty line (``lines``).
    """
    if fmt == "auto":
        fmt = "jsonl" if str(data).endswith((".jsonl", ".json")) else "text"
    if fmt == "jsonl":
        seqs, labels, where = [], [], []
        with data.open(encoding="utf-8") as fh:
            for lineno, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                at = f"{data}:{lineno}"
                try:
                    obj = json.loads(raw)
                except json.JSONDecodeError as exc:
                    raise InputError(f"{at}: not valid JSON ({exc.msg})") from None
                if not isinstance(obj, dict) or not isinstance(obj.get("tokens"), list):
                    raise InputError(f'{at}: expected an object {{"tokens": [...], "label": ...}}')
                if "labels" in obj:
                    raise InputError(f'{at}: has "labels" (one per token); a next-token example has one "label"')
                seqs.append([str(t) for t in obj["tokens"]])
                labels.append(None if obj.get("label") is None else str(obj["label"]))
                where.append(at)
        if not seqs:
            raise InputError(f"{data}: no examples found")
        return seqs, labels, where
    if fmt == "lines":
        rows = [(i, ln.split()) for i, ln in enumerate(data.read_text(encoding="utf-8").splitlines(), 1) if ln.strip()]
        if not rows:
            raise InputError(f"{data}: no sequences found (the file is empty or blank)")
        return [r for _, r in rows], [None] * len(rows), [f"{data}:{i}" for i, _ in rows]
    if fmt == "text":
        from uatlab.data.next_token import read_text_windows

        src = (model.saved_extra or {}).get("source") or {}
        d = read_text_windows(data, model.memo.n, src.get("tokenizer") or "whitespace")
        pad = d.pad_id
        seqs = [[d.token_vocab[t] for t in row if t != pad] for row in d.tokens.tolist()]
        labels = [d.label_vocab[y] for y in d.labels.tolist()]
        return seqs, labels, [f"{data}: window at token {k}" for k in d.lines]
    raise InputError(f"--format {fmt!r}: a next-token model reads jsonl or text")


def certify_next_token_command(model_path: Path, data: Path, fmt: str, json_out: bool) -> None:
    """``uatlab certify`` on a saved next-token memorizer: re-prove every ceiling example of DATA."""
    import numpy as np

    from uatlab.cli.app import console, key_value_table, print_json
    from uatlab.constructions.paper_c.model_file import encode_sequences
    from uatlab.models.io import load
    from uatlab.verify.next_token import certify_next_token

    if fmt == "conll":
        raise InputError(f"--format conll: {model_path} is a next-token model; it certifies jsonl or text")
    t0 = time.perf_counter()
    model = load(model_path)
    seqs, labels, where = read_model_sequences(model, data, fmt)
    missing = [w for w, y in zip(where, labels, strict=True) if y is None]
    if missing:
        raise InputError(f'{missing[0]}: no "label" to certify against')
    ids = encode_sequences(model.memo, model.token_vocab, seqs, where)
    index = {y: i for i, y in enumerate(model.label_vocab)}
    known = np.asarray([y in index for y in labels], dtype=bool)
    y = np.asarray([index.get(lab, -1) for lab in labels], dtype=np.int64)
    cert = certify_next_token(model.memo, ids[known], y[known])
    unknown = int((~known).sum())
    fig = {
        "task": "next-token",
        "model": str(model_path),
        "data": str(data),
        "examples": len(seqs),
        "labels_the_model_cannot_output": unknown,
        **cert.to_json(),
        "certified": cert.certified and unknown == 0,
        "seconds": time.perf_counter() - t0,
    }
    if unknown:
        first = where[int(np.flatnonzero(~known)[0])]
        fig["reason"] = f"{unknown} examples have a label the model never outputs (first: {first}); " + cert.reason
    if json_out:
        print_json(fig)
    else:
        console.print(key_value_table(f"uatlab certify {model_path.name} on {data.name}", fig))


def predict_next_token_command(model_path: Path, data: Path, fmt: str, json_out: bool) -> None:
    """``uatlab predict`` with a next-token model: the next token of every sequence (line or JSONL object)."""
    import typer

    from uatlab.cli.app import print_json
    from uatlab.constructions.paper_c.model_file import predict_next
    from uatlab.models.io import load

    if fmt not in ("auto", "text", "jsonl"):
        raise InputError(f"--format {fmt!r}: a next-token model reads text (one sequence per line) or jsonl")
    if fmt == "auto":
        fmt = "jsonl" if data.suffix in (".jsonl", ".json") else "lines"
    elif fmt == "text":
        fmt = "lines"
    t0 = time.perf_counter()
    model = load(model_path)
    seqs, _, where = read_model_sequences(model, data, fmt)
    nxt = predict_next(model, seqs, where)
    if json_out:
        print_json(
            {
                "model": str(model_path),
                "input": str(data),
                "sequences": len(seqs),
                "seconds": time.perf_counter() - t0,
                "next": nxt,
            }
        )
        return
    typer.echo("".join(f"{' '.join(s)}\t{y}\n" for s, y in zip(seqs, nxt, strict=True)), nl=False)
