"""One standard attention layer whose keys read the data, trained at growing head counts (Hu et al. 2025, Sec. 3.3).

    python benchmarks/one_layer_heads.py --out heads.json                 # 32, 128, 256 heads, 1,500 steps
    python benchmarks/one_layer_heads.py --quick --out heads.json         # 4 and 8 heads, 100 steps

Benchmark net 0 (n = 20, d = 5, 10 hidden units, N(0, 1) weights, X in [0, 1]). For each head count: Adam
with a one-cycle schedule on fresh uniform batches (`train_standard_attention`), then sup / RMS error on
2,000 uniform test inputs relative to their range, and the largest error on the faces of the witness
slice of the certified lower bound (`data_key_error_lower_bound`: every one-layer standard form is at
least that far off somewhere on the box). CPU seconds per row (``time.process_time``). The JSON at
``--out`` is rewritten atomically after every row; a rerun with the same settings resumes from it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _heads(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise SystemExit(_fail(f"--heads: not a comma-separated list of integers: {text!r}")) from None
    if not values or any(v < 1 or v > 4096 for v in values):
        raise SystemExit(_fail(f"--heads: every value must be in 1..4096, got {text!r}"))
    return values


def _fail(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--heads", default="32,128,256")
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    heads = [4, 8] if args.quick else _heads(args.heads)
    steps = 100 if args.quick else args.steps
    if steps < 1:
        return _fail(f"--steps must be ≥ 1, got {steps}")
    config = {"heads": heads, "steps": steps, "seed": args.seed, "net": "benchmark net, n=20 d=5 hidden=10"}
    done: dict[int, dict] = {}
    if args.out.exists():
        try:
            old = json.loads(args.out.read_text())
            same = isinstance(old, dict) and old.get("config") == config
        except (OSError, ValueError):
            same = False
        if not same:
            return _fail(f"{args.out}: exists and is not a run of this benchmark with the same settings (not touched)")
        done = {r["heads"]: r for r in old["rows"]}
    if not args.out.parent.is_dir():
        return _fail(f"{args.out.parent}: no such directory")

    import torch

    from uatlab.constructions.paper_b.lem3_11_relu_network import random_relu_network
    from uatlab.experiments.paper_b.one_layer_data_keys import data_key_error_lower_bound, trained_heads_sweep
    from uatlab.io_safety import write_text_atomic

    torch.set_num_threads(1)
    net = random_relu_network(20, 5, 10, seed=args.seed)
    low = data_key_error_lower_bound(net, starts=4 if args.quick else 16, steps=1500 if args.quick else 10000)
    rows: list[dict] = list(done.values())

    def write() -> None:
        doc = {"config": config, "lower_bound_any_one_layer": low["lower_bound"], "rows": rows}
        write_text_atomic(args.out, json.dumps(doc, indent=2))

    def save(row: dict) -> None:
        rows.append(row)
        write()
        print(
            f"heads {row['heads']:5d}  params {row['params']:8d}  sup {100 * row['relative_sup_error']:.2f}% "
            f"of range  RMS {row['rms_error']:.3f}  max on witness faces {row['max_error_on_witness_faces']:.2f} "
            f"(bound {low['lower_bound']:.2f})  {row['cpu_seconds']:.0f} s CPU",
            flush=True,
        )

    print(f"certified: every one-layer standard form is ≥ {low['lower_bound']:.4g} off (any size)", flush=True)
    trained_heads_sweep(net, heads, steps=steps, seed=args.seed, witness=low["witness"], done=done, on_row=save)
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
