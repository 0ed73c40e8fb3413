"""The ``--ff deep`` memorizer's model file: compile, save, reload, predict and certify agree with compile time.

    python benchmarks/seq2seq_deep_file.py --quick            # the first 1,000 CoNLL-2003 train sentences
    python benchmarks/seq2seq_deep_file.py --out /tmp/d.json  # the whole CoNLL-2003 train file
    python benchmarks/seq2seq_deep_file.py --data FILE        # any CoNLL or JSONL file

Steps (every CLI step a fresh ``uatlab ... --json`` process; CPU s = user + system of that process):

1. ``uatlab compile DATA --ff deep --out M.safetensors --json``: the compile-time figures and certificate;
2. in this process, the same compile through the library (``compile_seq2seq_deep``, same seed, the encoding
   in first-seen order as the CLI builds it): the in-memory model and its predictions on every sentence;
3. ``uatlab.load(M)``: its exact weights equal the in-memory ones (ν, μ, v, every layer's rows, columns,
   weights and biases), its forward pass on every sentence is bit-identical;
4. ``uatlab predict M DATA --json``: the labels equal the in-memory predictions, sentence by sentence;
5. ``uatlab certify M DATA --json``: tokens, ceiling, certified tokens, verdict and float bound equal the
   compile-time ones.

Writes one JSON document (``--out``) and prints it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONLL = Path(os.environ.get("UATLAB_CONLL_DIR", Path(__file__).resolve().parents[2] / "shared/data/conll2003"))
UATLAB = [sys.executable, "-m", "uatlab"]
CERT_FIELDS = ("tokens", "ceiling_tokens", "certified_tokens", "certified", "certified_at_ceiling", "float_bound_bits")


def run(cmd: list[str]) -> tuple[dict, float, float]:
    """(JSON output, wall s, CPU s of the child) of one CLI call; exits on failure."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {proc.stderr.strip()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(proc.stdout), wall, cpu


def same_memo(a, b) -> bool:
    import numpy as np

    if a.layout != b.layout or a.circuit.notes != b.circuit.notes or len(a.circuit.layers) != len(b.circuit.layers):
        return False
    if not all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("nu", "mu", "v")):
        return False
    return all(
        x.weights == y.weights and x.bias == y.bias and np.array_equal(x.ptr, y.ptr) and np.array_equal(x.cols, y.cols)
        for x, y in zip(a.circuit.layers, b.circuit.layers, strict=True)
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="The first 1,000 sentences of CoNLL-2003 train.")
    ap.add_argument("--data", type=Path, default=None, help="A CoNLL or JSONL file (default: CoNLL-2003 train).")
    ap.add_argument("--out", type=Path, default=None, help="Write the figures here (JSON).")
    args = ap.parse_args()

    import numpy as np
    import torch

    import uatlab
    from uatlab.data.conll import write_conll
    from uatlab.data.dataset import Encoding
    from uatlab.experiments.next_token import cpu_seconds
    from uatlab.threads import apply_threads

    threads = apply_threads("auto").to_json()  # as the CLI does: 1 thread per process on a 2-core machine

    data_path = args.data or CONLL / "train.txt"
    if not data_path.is_file():
        sys.exit(f"{data_path}: no such file (set --data or UATLAB_CONLL_DIR)")
    with tempfile.TemporaryDirectory(prefix="uatlab-deep-file-") as tmp:
        work = Path(tmp)
        if args.quick:
            head = uatlab.read_conll(data_path)[:1000]
            data_path = work / "head-1000.txt"
            write_conll(head, data_path)
        model_path = work / "model.safetensors"
        compiled, wall_compile, cpu_compile = run(
            [*UATLAB, "compile", str(data_path), "--ff", "deep", "--out", str(model_path), "--json"]
        )
        # the same compile in this process: the compile-time model and its predictions
        fmt = "jsonl" if data_path.suffix.lower() in (".jsonl", ".json") else "conll"
        data = uatlab.read_jsonl(data_path) if fmt == "jsonl" else uatlab.read_conll(data_path)
        enc = Encoding.fit(data)
        c0 = cpu_seconds()
        con = uatlab.compile_seq2seq_deep(
            enc.encode_tokens(data), enc.encode_labels(data), len(enc.token_to_id), max(2, len(enc.label_to_id))
        )
        con.model.encoding = enc
        cpu_memory_compile = cpu_seconds() - c0
        c0 = cpu_seconds()
        before = con.model.predict(data.tokens)
        cpu_predict_memory = cpu_seconds() - c0
        c0, t0 = cpu_seconds(), time.perf_counter()
        loaded = uatlab.load(model_path)
        cpu_load, wall_load = cpu_seconds() - c0, time.perf_counter() - t0
        exact = same_memo(loaded.memo, con.detail) and loaded.encoding == enc
        # the forward pass of the loaded and the in-memory model, sentences of one length per batch (no padding)
        c0 = cpu_seconds()
        by_len: dict[int, list] = {}
        for row in enc.encode_tokens(data):
            by_len.setdefault(len(row), []).append(row)
        forward_equal = True
        with torch.no_grad():
            for rows in by_len.values():
                for i in range(0, len(rows), 512):
                    x = torch.from_numpy(np.stack(rows[i : i + 512]))  # (B, n)
                    forward_equal &= torch.equal(loaded(x), con.model(x))
        cpu_forward = cpu_seconds() - c0
        predicted, wall_predict, cpu_predict = run([*UATLAB, "predict", str(model_path), str(data_path), "--json"])
        certified, wall_certify, cpu_certify = run([*UATLAB, "certify", str(model_path), str(data_path), "--json"])
        doc = {
            "data": data_path.name if not args.quick else "CoNLL-2003 train, first 1,000 sentences",
            "sentences": len(data),
            "tokens": data.num_tokens,
            "model_file_bytes": model_path.stat().st_size,
            "threads_in_process": threads["threads"],
            "compile_figures": {k: compiled[k] for k in (*CERT_FIELDS, "params_non_embedding", "ffn_depth")},
            "file_equals_in_memory_model": exact,
            "forward_bit_identical": forward_equal,
            "predict_equals_compile_time": predicted["labels"] == before,
            "predicted_tokens_equal_labels": sum(
                p == y for ps, ys in zip(before, data.labels, strict=True) for p, y in zip(ps, ys, strict=True)
            ),
            "certify_figures": {k: certified[k] for k in CERT_FIELDS},
            "certify_equals_compile_time": all(certified[k] == compiled[k] for k in CERT_FIELDS),
            "seconds": {
                "compile_cli_wall": wall_compile,
                "compile_cli_cpu": cpu_compile,
                "compile_stages_wall": compiled["stage_seconds"],
                "compile_in_memory_cpu": cpu_memory_compile,
                "predict_in_memory_cpu": cpu_predict_memory,
                "load_wall": wall_load,
                "load_cpu": cpu_load,
                "forward_both_models_cpu": cpu_forward,
                "predict_cli_wall": wall_predict,
                "predict_cli_cpu": cpu_predict,
                "certify_cli_wall": wall_certify,
                "certify_cli_cpu": cpu_certify,
            },
        }
    text = json.dumps(doc, indent=1)
    print(text)
    if args.out:
        from uatlab.io_safety import write_text_atomic

        write_text_atomic(args.out, text + "\n")
    ok = doc["file_equals_in_memory_model"] and doc["forward_bit_identical"]
    ok = ok and doc["predict_equals_compile_time"] and doc["certify_equals_compile_time"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
