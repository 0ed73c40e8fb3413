"""Largest measured error, in ulps, of the exp kernels the certificate's ``--exp-ulp`` assumption is about.

    python benchmarks/exp_ulps.py              # 2^20 sampled arguments per kernel and dtype
    python benchmarks/exp_ulps.py --quick      # 2^14

Kernels: ``torch.exp`` and the exp inside ``torch.softmax`` (uatlab's attention runs them; the certificate checks
them at run time on fewer samples, `uatlab.numerics.exp_accuracy`), and numpy's ``exp`` for comparison. Each
figure is a sample maximum (a lower bound on the kernel's worst case) against a reference exp in a wider format
(`uatlab.numerics.exp_accuracy.exp_error_ulps`); one thread, seeded. Output: a table and ``--out`` JSON, which
replaces an existing file only if this benchmark wrote it (checked before measuring), atomically.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import numpy as np
import torch

from uatlab.io_safety import write_text_atomic
from uatlab.numerics.exp_accuracy import _arguments, exp_error_ulps, measured_exp_ulps
from uatlab.numerics.float_bounds import DEFAULT_EXP_ULPS

KIND = "uatlab-benchmark-exp-ulps"  # the "benchmark" field of the JSON this script writes


def _check_out(path: Path) -> None:
    """Exit with a message unless ``path`` is free or a JSON document of this benchmark (never replace another file)."""
    if not (path.exists() or path.is_symlink()):
        return
    try:
        ours = path.is_file() and json.loads(path.read_text(encoding="utf-8")).get("benchmark") == KIND
    except (OSError, ValueError, AttributeError):
        ours = False
    if not ours:
        sys.exit(f"error: --out {path} exists and is not this benchmark's output; move it away or choose another --out")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2^14 samples per kernel instead of 2^20")
    ap.add_argument("--out", type=Path, default=Path("benchmark-exp-ulps.json"))
    args = ap.parse_args()
    _check_out(args.out)
    samples = 1 << (14 if args.quick else 20)
    torch.set_num_threads(1)
    rows = []
    for dtype in ("float32", "float64"):
        m = measured_exp_ulps(dtype, samples)
        t = _arguments(dtype, samples, 0.0, np.random.default_rng(1))
        m["numpy.exp"] = float(exp_error_ulps(np.exp(t), t, dtype).max())
        rows += [{"dtype": dtype, "kernel": k, "max_ulps": v, "samples": samples} for k, v in m.items()]
    print(f"{'kernel':<15} {'dtype':<8} {'max ulps':>9}   covered by the default {DEFAULT_EXP_ULPS:g}?")
    for r in rows:
        print(
            f"{r['kernel']:<15} {r['dtype']:<8} {r['max_ulps']:>9.3f}   {'yes' if r['max_ulps'] <= DEFAULT_EXP_ULPS else 'NO'}"
        )
    assert all(r["max_ulps"] <= DEFAULT_EXP_ULPS for r in rows if r["kernel"].startswith("torch")), rows
    meta = {"torch": torch.__version__, "numpy": np.__version__, "machine": platform.machine()}
    write_text_atomic(args.out, json.dumps({"benchmark": KIND, "meta": meta, "rows": rows}, indent=1))
    print(f"figures written to {args.out}")


if __name__ == "__main__":
    main()
