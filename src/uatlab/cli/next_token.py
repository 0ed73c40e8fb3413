"""The next-token task of ``uatlab compile`` and ``uatlab experiment capacity`` (Kajitsuka & Sato, ICLR 2025).

``uatlab compile DATA --task next-token`` reads JSONL (``{"tokens": [...], "label": ...}``) or a text file
cut into ``--window n`` windows, compiles the one-attention-layer memorizer, certifies it and saves it as
JSON. Every option is validated before anything is read or written.
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
    saved = {
        "format": "uatlab-next-token-v1",
        "regime": dtype,
        "seed": seed,
        "n": memo.n,
        "n_pad": memo.layout.n_pad,
        "C": memo.C,
        "D": memo.layout.D,
        "m": memo.layout.m,
        "sizes": list(memo.layout.sizes),
        "value_range": memo.layout.value_range,
        "nu": memo.nu,
        "token_vocab": d.token_vocab,
        "label_vocab": d.label_vocab,
        "layers": [
            {"ptr": L.ptr.tolist(), "cols": L.cols.tolist(), "weights": L.weights, "bias": L.bias}
            for L in memo.circuit.layers
        ],
    }
    write_text_atomic(out, json.dumps(saved))
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
