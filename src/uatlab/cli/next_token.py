"""The next-token task of ``uatlab compile`` and ``uatlab experiment capacity`` (Kajitsuka & Sato, ICLR 2025).

``uatlab compile DATA --task next-token`` reads JSONL (``{"tokens": [...], "label": ...}``) or a text file
cut into ``--window n`` windows (under ``--format auto`` a file shaped like CoNLL columns is refused: its
tags would become words; ``--format text`` reads it anyway), compiles the one-attention-layer memorizer,
certifies it and saves it in uatlab's model file format (safetensors + metadata, `uatlab.save`). Every option is validated before
anything is read or written.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from uatlab.cli.options import list_items
from uatlab.data.jsonl import is_jsonl_path
from uatlab.errors import InputError
from uatlab.io_safety import write_text_atomic

NEXT_TOKEN_REGIMES = ("float64", "float32", "exact")


def data_format(data: Path, fmt: str, plain: str = "text") -> str:
    """How DATA is read for ``--format fmt``: ``auto`` is JSONL for a .jsonl/.json file (`is_jsonl_path`) and
    plain text otherwise; plain text (``auto`` or ``text``) is read as ``plain``: ``text`` (windows cut from a
    text, to compile or certify) or ``lines`` (one sequence per line, to predict). Other formats are returned
    as given (each command checks the ones it reads)."""
    if fmt == "auto":
        fmt = "jsonl" if is_jsonl_path(data) else "text"
    return plain if fmt == "text" else fmt


def refuse_conll_columns(data: Path) -> None:
    """InputError naming ``data`` and its first token line when a file read as plain text (``--format auto``)
    has the shape of CoNLL columns (`uatlab.data.jsonl.conll_columns_at`): its POS, chunk and entity tags would
    become words of the sequences."""
    from uatlab.data.jsonl import conll_columns_at
    from uatlab.io_safety import check_input_file

    check_input_file(data)
    at = conll_columns_at(data)
    if at is not None:
        lineno, line = at
        raise InputError(
            f"{data}:{lineno}: {line[:80]!r} looks like CoNLL columns (word ... label, one token per line): read as "
            "text, the next-token task would take every column (tags too) for words; give text or JSONL, or "
            "--format text to read this file as text anyway"
        )


def compile_next_token_file(
    data: Path,
    fmt: str,
    window: int | None,
    tokenizer: str,
    dtype: str,
    out: Path,
    seed: int,
    certify: bool = True,
) -> dict[str, Any]:
    """Compile and certify (unless ``certify`` is False: then ``certified`` is None); returns the figures.
    Raises InputError/PrecisionError with one clear message."""
    from uatlab.constructions.paper_c.next_token_memorizer import compile_memorizer
    from uatlab.data.next_token import read_next_token_jsonl, read_text_windows
    from uatlab.verify.next_token import certify_next_token

    if dtype not in NEXT_TOKEN_REGIMES:
        raise InputError(f"--dtype {dtype!r}: the next-token task takes one of {', '.join(NEXT_TOKEN_REGIMES)}")
    given, fmt = fmt, data_format(data, fmt)
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
        if given == "auto":
            refuse_conll_columns(data)
        d = read_text_windows(data, window, tokenizer)  # type: ignore[arg-type]
    memo, report = compile_memorizer(
        d.tokens, d.labels, V=len(d.token_vocab), C=max(2, d.num_classes), regime=dtype, seed=seed
    )
    cert = certify_next_token(memo, d.tokens, d.labels) if certify else None
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
        "format": fmt,
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
        "ceiling_examples": cert.ceiling_rows if cert else None,
        "correct_examples": cert.correct_rows if cert else None,
        "certified_examples": cert.certified_rows if cert else None,
        "certified": cert.certified if cert else None,
        "certificate": cert.reason if cert else "not run (--no-certify)",
        **({"invalidated_by": cert.invalidated_by} if cert else {}),
        "seconds": time.perf_counter() - t0,
        "compile_seconds": report["seconds_total"],
        "out": str(out),
    }
    if cert is not None:
        fig |= {"assumptions": cert.assumptions, "environment": cert.environment}
    return fig


def print_next_token_compile(fig: dict[str, Any], json_out: bool, threads: dict[str, Any] | None = None) -> None:
    """Print the figures of `compile_next_token_file` (JSON or a table); a stderr warning if not certified."""
    from uatlab.cli.app import console, key_value_table, print_json
    from uatlab.cli.certificate_output import (
        print_certificate_assumptions,
        table_rows,
        warn_not_certified,
        warn_void_proof,
    )

    if threads is not None:
        fig["threads"] = threads
    warn_void_proof(fig.get("invalidated_by") or [], "examples")
    if fig["certified"] is False:
        warn_not_certified(
            fig["certified_examples"], fig["ceiling_examples"], fig["regime"], Path(fig["out"]), "examples"
        )
    if json_out:
        print_json(fig)
    else:
        console.print(key_value_table("next-token memorizer (Kajitsuka & Sato, ICLR 2025)", table_rows(fig)))
        print_certificate_assumptions(fig)


def capacity_next_token_command(
    ns: str,
    quick: bool,
    blocks: bool,
    out: Path,
    json_out: bool,
    steps: int | None = None,
    lr: float | None = None,
    dim: int | None = None,
    rank: str = "full",
    seed: int = 0,
    max_width: int = 4096,
    resolution: float = 0.25,
    widths: list[int] | None = None,
) -> dict[str, Any]:
    """Smallest trained one-layer model reaching 100 % vs the compiled memorizer, with fitted slopes.

    Writes ``OUT/next_token_capacity.json`` after every trial (a rerun with the same options resumes:
    finished trials are kept) and prints one progress line per trial; a trial checkpoints to
    ``OUT/checkpoints/N{N}_width{W}.pt`` every 1,000 steps and prints a progress line there (an
    interrupted trial resumes from its checkpoint, to the same numbers). ``--quick`` runs only the ICLR 2025
    paper's blocks experiment, scaled down (see `QUICK_BLOCKS`). ``widths`` (``--grid``): the search
    starts at min(widths) instead of `start_width` and doubles up to max(widths) instead of ``max_width``.
    """
    from uatlab.cli.app import console, err_console, print_json
    from uatlab.experiments import next_token as nt
    from uatlab.experiments import next_token_training as ntt
    from uatlab.experiments.executor import refuse_other_options

    n_list = sorted(list_items(ns, "--ns", int, "integers"))
    if not n_list or min(n_list) < 2:
        raise InputError("--ns: every N must be ≥ 2")
    if rank not in ("full", "1"):
        raise InputError(f"--rank {rank!r}: use 1 or full")
    shape = dict(QUICK_BLOCKS if quick else FULL_BLOCKS)
    base = ntt.Recipe()
    recipe = ntt.Recipe(
        d=dim or (shape["d"] if quick else base.d),
        rank=1 if rank == "1" else None,
        steps=steps or (shape["steps"] if quick else base.steps),
        lr=lr or (shape["lr"] if quick else base.lr),
        batch=shape["batch"] if quick else base.batch,
        seed=seed,
    )
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a folder")
    first_width = None
    if widths:
        first_width, max_width = min(widths), max(widths)
    out.mkdir(parents=True, exist_ok=True)
    state_path = out / "next_token_capacity.json"
    setup = {
        "recipe": recipe.to_json(),
        "n": SEQ_LEN,
        "C": CLASSES,
        "V": VOCAB,
        "quick": quick,
        "max_width": max_width,
        "resolution": resolution,
    }
    if first_width is not None:
        setup["start_width"] = first_width
    if state_path.is_file():
        try:
            state = json.loads(state_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise InputError(f"{state_path}: not valid JSON ({exc.msg}); move it away to start afresh") from None
        refuse_other_options(out, state.get("setup"), setup, what="a run")
    else:
        state = {"setup": setup, "sweep": {}, "compiled": {}}

    def save() -> None:
        write_text_atomic(state_path, json.dumps(state, indent=1, default=float))

    def say(text: str) -> None:
        if not json_out:
            err_console.print(text, highlight=False)

    if not quick:
        for N in n_list:
            key = str(N)
            if key not in state["compiled"]:
                state["compiled"][key] = nt.compiled_point(N, "exact", n=SEQ_LEN, C=CLASSES, V=VOCAB, seed=seed)
                save()
            entry = state["sweep"].setdefault(key, {"trials": {}})
            if "result" in entry:
                continue
            tokens, labels = nt.random_next_token(N, SEQ_LEN, VOCAB, CLASSES, seed)

            def on_trial(rec: dict[str, Any], N: int = N, entry: dict = entry) -> None:
                entry["trials"][str(rec["width"])] = rec
                save()
                say(
                    f"N = {N}: width {rec['width']} ({rec['params']} parameters): accuracy {rec['accuracy']:.4f} "
                    f"after {rec['steps']} steps ({rec['epochs']} epochs), {rec['cpu_seconds']:.1f} CPU s"
                )

            def on_check(w: int, e: dict[str, Any], N: int = N) -> None:
                if e["step"] % PROGRESS_EVERY == 0:
                    say(
                        f"N = {N}, width {w}: step {e['step']}/{recipe.steps}, accuracy {e['accuracy']:.4f} "
                        f"({e['wrong']} wrong), loss {e['loss']:.4f}, lr {e['lr']:.2e}, {e['cpu_seconds']:.0f} CPU s"
                    )

            res = ntt.smallest_width(
                tokens,
                labels,
                VOCAB,
                CLASSES,
                recipe,
                start=first_width if first_width is not None else min(start_width(N), max_width),
                max_width=max_width,
                resolution=resolution,
                done={int(w): r for w, r in entry["trials"].items()},
                on_trial=on_trial,
                checkpoint_for=lambda w, N=N: out / "checkpoints" / f"N{N}_width{w}.pt",
                on_check=on_check,
            )
            entry["result"] = {k: v for k, v in res.items() if k != "trials"}
            save()
    if quick or blocks:
        if "blocks" not in state:
            tokens, labels = nt.random_next_token(shape["N"], shape["n"], VOCAB, CLASSES, seed)
            rows: list[dict[str, Any]] = []

            def on_row(r: dict[str, Any]) -> None:
                rows.append(r)
                say(
                    f"blocks {r['blocks']}: loss {r['loss']:.4f}, accuracy {r['accuracy']:.4f}, {r['cpu_seconds']:.1f} CPU s"
                )

            ntt.blocks_experiment(
                tokens, labels, VOCAB, CLASSES, shape["blocks"], shape["width"], recipe, on_row=on_row
            )
            state["blocks"] = {"shape": shape, "rows": rows}
            save()
    state["table"] = capacity_table(state)
    pts_t = [(r["N"], r["trained_params"]) for r in state["table"] if r.get("trained_params")]
    pts_c = [(r["N"], r["compiled_params"]) for r in state["table"]]
    state["slope_trained"] = nt.fit_loglog_slope(*zip(*pts_t, strict=True)) if len(pts_t) > 1 else None
    state["slope_compiled"] = nt.fit_loglog_slope(*zip(*pts_c, strict=True)) if len(pts_c) > 1 else None
    save()
    if json_out:
        print_json(state)
    else:
        for r in state["table"]:
            console.print(
                f"N = {r['N']}: trained width {r['trained_width']}, {r['trained_params']} parameters; "
                f"compiled {r['compiled_params']} parameters (certified {r['compiled_certified']})",
                highlight=False,
            )
        console.print(
            f"log-log slope of parameters against N: trained {state['slope_trained']}, compiled "
            f"{state['slope_compiled']}; written {state_path}",
            highlight=False,
        )
    return state


PROGRESS_EVERY = 1000  # steps between progress lines of a trial (it checkpoints at the same steps)
SEQ_LEN, CLASSES, VOCAB = 32, 10, 4  # n, C and the token alphabet of the random next-token data
# The paper's experiment: #blocks = 1, 10, 20, 30, 40 on N = 3,000 sequences. FULL_BLOCKS keeps n = 32;
# QUICK_BLOCKS keeps the blocks and scales N (3,000 → 1,000), n (32 → 8), d, the width, the batch and the
# step budget down so that all five depths train in a few CPU minutes.
FULL_BLOCKS = {
    "N": 3000,
    "n": 32,
    "blocks": (1, 10, 20, 30, 40),
    "d": 16,
    "width": 32,
    "steps": 1000,
    "batch": 256,
    "lr": 5e-3,
}
QUICK_BLOCKS = {
    "N": 1000,
    "n": 8,
    "blocks": (1, 10, 20, 30, 40),
    "d": 8,
    "width": 16,
    "steps": 400,
    "batch": 128,
    "lr": 1e-2,
}


def start_width(N: int) -> int:
    """First width tried: a power of two near N·log2(C) / (2·16·4), i.e. ~4 bits per feed-forward weight at
    d = 16 (a trained network rarely stores more), so the doubling phase starts close to the answer."""
    w = max(4.0, N * 3.32 / 128)
    return 1 << max(2, int(w).bit_length() - 1)


def capacity_table(state: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per N: trained (smallest width reaching 100 %) against compiled, and bits per parameter
    (N·log2 C divided by the non-embedding parameter count)."""
    import math

    rows = []
    for key in sorted(state["compiled"], key=int):
        N = int(key)
        c = state["compiled"][key]
        res = state["sweep"].get(key, {}).get("result", {})
        trials = state["sweep"].get(key, {}).get("trials", {})
        best = trials.get(str(res.get("width"))) if res.get("width") else None
        bits = N * math.log2(c["C"])
        rows.append(
            {
                "N": N,
                "trained_width": res.get("width"),
                "trained_params": res.get("params"),
                "trained_steps": best["steps"] if best else None,
                "trained_epochs": best["epochs"] if best else None,
                "trials": len(trials),
                "trials_cpu_seconds": sum(t["cpu_seconds"] for t in trials.values()),
                "largest_failed_width": max((t["width"] for t in trials.values() if t["accuracy"] < 1), default=None),
                "compiled_params": c["params"],
                "compiled_certified": c.get("certified"),
                "trained_over_compiled": res["params"] / c["params"] if res.get("params") else None,
                "bits_per_param_trained": bits / res["params"] if res.get("params") else None,
                "bits_per_param_compiled": bits / c["params"],
            }
        )
    return rows


NEXT_TOKEN_FORMAT = "uatlab-next-token-v1"


def is_next_token_model(path: Path) -> bool:
    """True if ``path`` is a saved next-token memorizer (checked by its header tag, nothing else read)."""
    from uatlab.models.io import file_format

    return file_format(path) == NEXT_TOKEN_FORMAT


def read_model_sequences(
    model: Any, data: Path, fmt: str, plain: str = "text", model_path: Path | None = None
) -> tuple[list[list[str]], list[str | None], list[str]]:
    """Sequences of token strings, their labels (None when the input has none) and where each comes from.

    ``jsonl``: ``{"tokens": [...], "label": ...}`` lines (the label may be missing for prediction);
    plain text (`data_format`; ``plain``): ``text`` (certify) cuts windows of the model's length from the
    text with the tokenizer the model was compiled with, each labelled by the next token; ``lines`` (predict)
    reads one sequence per non-empty line, split by that same tokenizer
    (`uatlab.data.next_token.tokenize_line`).
    """
    from uatlab.data.next_token import iter_example_objects, read_sequence_lines

    tokenizer = ((model.saved_extra or {}).get("source") or {}).get("tokenizer") or "whitespace"
    given, fmt = fmt, data_format(data, fmt, plain)
    if given == "auto" and fmt in ("lines", "text"):
        refuse_conll_columns(data)
    if fmt == "jsonl":
        seqs, labels, where = [], [], []
        for _, at, obj in iter_example_objects(data):
            if not isinstance(obj.get("tokens"), list):
                raise InputError(f'{at}: expected an object {{"tokens": [...], "label": ...}}')
            seqs.append([str(t) for t in obj["tokens"]])
            labels.append(None if obj.get("label") is None else str(obj["label"]))
            where.append(at)
        if not seqs:
            raise InputError(f"{data}: no examples found")
        return seqs, labels, where
    if fmt == "lines":
        rows = read_sequence_lines(data, tokenizer)
        return [r for _, r in rows], [None] * len(rows), [f"{data}:{i}" for i, _ in rows]
    if fmt == "text":
        from uatlab.data.next_token import read_text_windows

        d = read_text_windows(data, model.memo.n, tokenizer, window_from=f"the model {model_path or ''}".rstrip())
        pad = d.pad_id
        seqs = [[d.token_vocab[t] for t in row if t != pad] for row in d.tokens.tolist()]
        labels = [d.label_vocab[y] for y in d.labels.tolist()]
        return seqs, labels, [f"{data}: window at token {k}" for k in d.lines]
    raise InputError(f"--format {fmt!r}: a next-token model reads jsonl or text")


def certify_next_token_command(model_path: Path, data: Path, fmt: str, json_out: bool) -> dict[str, Any]:
    """``uatlab certify`` on a saved next-token memorizer: re-prove every ceiling example of DATA; returns the
    figures it printed."""
    import numpy as np

    from uatlab.cli.app import console, key_value_table, print_json
    from uatlab.cli.certificate_output import print_certificate_assumptions, table_rows, warn_void_proof
    from uatlab.constructions.paper_c.model_file import encode_sequences
    from uatlab.models.io import load
    from uatlab.verify.next_token import certify_next_token

    if fmt == "conll":
        raise InputError(f"--format conll: {model_path} is a next-token model; it certifies jsonl or text")
    t0 = time.perf_counter()
    model = load(model_path)
    seqs, labels, where = read_model_sequences(model, data, fmt, model_path=model_path)
    missing = [w for w, y in zip(where, labels, strict=True) if y is None]
    if missing:
        raise InputError(f'{missing[0]}: no "label" to certify against')
    ids = encode_sequences(model.memo, model.token_vocab, seqs, where)
    index = {y: i for i, y in enumerate(model.label_vocab)}
    known = np.asarray([y in index for y in labels], dtype=bool)
    y = np.asarray([index.get(lab, -1) for lab in labels], dtype=np.int64)
    if not known.any():
        raise InputError(f"{where[0]}: label {labels[0]!r} is not one the model outputs, nor is any other example's")
    cert = certify_next_token(model.memo, ids[known], y[known])
    warn_void_proof(cert.invalidated_by, "examples")
    unknown = int((~known).sum())
    fig = {
        "task": "next-token",
        "model": str(model_path),
        "data": str(data),
        "format": data_format(data, fmt, "text"),  # as read_model_sequences read it
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
        console.print(key_value_table(f"uatlab certify {model_path.name} on {data.name}", table_rows(fig)))
        print_certificate_assumptions(fig)
    return fig


def predict_next_token_command(model_path: Path, data: Path, fmt: str, json_out: bool, unknown: str = "") -> None:
    """``uatlab predict`` with a next-token model: the next token of every sequence (line or JSONL object).
    ``unknown``: ``--unknown``; the model has no unknown-word token, so ``unk`` is refused."""
    import typer

    from uatlab.cli.app import print_json
    from uatlab.constructions.paper_c.model_file import predict_next
    from uatlab.models.io import load

    if fmt not in ("auto", "text", "jsonl"):
        raise InputError(f"--format {fmt!r}: a next-token model reads text (one sequence per line) or jsonl")
    if unknown == "unk":
        raise InputError(
            f"--unknown unk: {model_path} is a next-token model, which has no unknown-word token "
            "(every token must be in its vocabulary)"
        )
    t0 = time.perf_counter()
    model = load(model_path)
    seqs, _, where = read_model_sequences(model, data, fmt, plain="lines", model_path=model_path)
    nxt = predict_next(model, seqs, where)
    reading = data_format(data, fmt, plain="lines")
    if fmt == "auto":  # how the file was read (once it was read and predicted)
        from uatlab.cli.app import err_console
        from uatlab.data.jsonl import format_note

        err_console.print(format_note(data, reading), highlight=False, soft_wrap=True)
    if json_out:
        print_json(
            {
                "model": str(model_path),
                "input": str(data),
                "sequences": len(seqs),
                "seconds": time.perf_counter() - t0,
                "next": nxt,
                "format": "text" if reading == "lines" else reading,
            }
        )
        return
    typer.echo("".join(f"{' '.join(s)}\t{y}\n" for s, y in zip(seqs, nxt, strict=True)), nl=False)
