"""Why the trained depth-1 rank-1 model stops short of the CoNLL ceiling: train on a subset, then analyse.

    python benchmarks/conll_ceiling.py --data PATH/train.txt --quick      # 200 sentences, d = 32, 30 epochs
    python benchmarks/conll_ceiling.py --data PATH/train.txt --sentences 1000 --epochs 40 --out /tmp/c.json
    python benchmarks/conll_ceiling.py --data PATH/train.txt --model RUN/model.safetensors   # analyse only

Prints and writes one JSON: the error history, the errors at the end, and for tokens that have a twin (same
word and position, other gold label) the distance of their attention scalar h to the twin's
(see `uatlab.experiments.conll_ceiling`). Training uses one thread.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--sentences", type=int, default=1000)
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--ff", type=int, default=512)
    p.add_argument("--rank", default="1", help="1 or 'full'")
    p.add_argument("--max-minutes", type=float, default=30.0)
    p.add_argument("--beta", type=float, default=1.0, help="inverse temperature of the attention scores")
    p.add_argument("--hinge", type=float, default=0.0, help="weight of the margin loss on the hardest tokens")
    p.add_argument("--margin", type=float, default=1.0, help="margin of the hinge term")
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("--out", default=None)
    p.add_argument("--model", default=None, help="analyse this `uatlab train` model instead of training one")
    a = p.parse_args(argv)
    if not Path(a.data).is_file():
        print(f"error: --data {a.data}: no such file", file=sys.stderr)
        return 2
    if a.rank not in ("1", "full"):
        print(f"error: --rank {a.rank!r}: use 1 or full", file=sys.stderr)
        return 2
    from uatlab.experiments.conll_ceiling import analyse_trained, diagnose

    if a.out and not Path(a.out).parent.is_dir():
        print(f"error: --out {a.out}: folder does not exist", file=sys.stderr)
        return 2
    if a.model is not None:
        if not Path(a.model).is_file():
            print(f"error: --model {a.model}: no such file", file=sys.stderr)
            return 2
        sentences = a.sentences if "--sentences" in (argv if argv is not None else sys.argv) else None
        res = analyse_trained(a.model, a.data, sentences=sentences)
        text = json.dumps(res, indent=1)
        if a.out:
            from uatlab.io_safety import write_text_atomic

            write_text_atomic(a.out, text)
        print(text)
        return 0
    if a.quick:
        a.sentences, a.epochs, a.dim, a.ff = 200, 30, 32, 128
    res = diagnose(
        a.data,
        sentences=a.sentences,
        epochs=a.epochs,
        dim=a.dim,
        ff=a.ff,
        rank=1 if a.rank == "1" else None,
        max_minutes=a.max_minutes,
        beta=a.beta,
        hinge=a.hinge,
        margin=a.margin,
        dtype=a.dtype,
        progress=lambda r: print(json.dumps(r), file=sys.stderr, flush=True),
    )
    text = json.dumps(res, indent=1)
    if a.out:
        from uatlab.io_safety import write_text_atomic

        write_text_atomic(a.out, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
