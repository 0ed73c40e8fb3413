"""Benchmark of ``uatlab compile``: every must-show figure of issue 3, measured.

    python benchmarks/compile.py            # CoNLL-2003 train (float64, float32), valid, causal train,
                                            # train x8 out of core, synthetic N=20,000 n=32 V=5,000 C=10
    python benchmarks/compile.py --quick    # CI size: a small synthetic set and the first 1,000 CoNLL sentences

Each case runs in a fresh subprocess (peak RSS and CPU time per case are then its own) through the
real CLI (``uatlab compile ... --json``), and the figures are printed as one table and written to
``--out`` as JSON. The machine is shared: wall time is reported next to CPU time (user + system).
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

# the CoNLL-2003 files (never in this repository): ../shared/data/conll2003 beside the checkout, or $UATLAB_CONLL_DIR
CONLL = Path(os.environ.get("UATLAB_CONLL_DIR", Path(__file__).resolve().parents[2] / "shared/data/conll2003"))
UATLAB = [sys.executable, "-c", "import sys; from uatlab.cli import main; sys.exit(main(sys.argv[1:]))"]
# the same, reporting the process's own peak RSS (kB) on stderr as 'MAXRSS <kB>'
UATLAB_RSS = [
    sys.executable,
    "-c",
    "import sys, resource; from uatlab.cli import main; c = main(sys.argv[1:]); "
    "sys.stderr.write('MAXRSS %d\\n' % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss); sys.exit(c)",
]


def run_case(name: str, args: list[str], workdir: Path) -> dict:
    out = workdir / f"{name}.safetensors"
    cmd = [*UATLAB_RSS, "compile", *args, "--out", str(out), "--json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        return {"case": name, "error": proc.stderr.strip()[-2000:]}
    fig = json.loads(proc.stdout)
    fig.update(
        case=name,
        wall_seconds=wall,
        cpu_seconds=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        peak_rss_mb=next(
            (int(line.split()[1]) / 1024 for line in proc.stderr.splitlines() if line.startswith("MAXRSS ")), None
        ),
    )
    return fig


COLUMNS = [
    ("case", "case"), ("sequences", "seqs"), ("tokens", "tokens"), ("ceiling_tokens", "ceiling"),
    ("conflict_tokens", "conflicts"), ("correct_tokens", "correct"), ("certified", "certified"),
    ("certified_fraction", "cert.frac"), ("min_certified_margin", "min margin"), ("params_non_embedding", "params(non-emb)"),
    ("paper_a_param_count", "paper A"), ("non_embedding_vs_paper_a", "ratio"), ("ff_width", "ff width"),
    ("d_model", "d"), ("max_abs_weight", "max|w|"), ("bits_of_precision_relied_on", "bits"),
    ("bits_per_param_non_embedding", "label bits/param"), ("model_file_bytes", "file bytes"),
    ("buckets", "buckets"), ("wall_seconds", "wall s"), ("cpu_seconds", "cpu s"), ("peak_rss_mb", "RSS MB"),
]  # fmt: skip


def fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CI-sized cases only.")
    ap.add_argument("--out", type=Path, default=Path("benchmark-compile.json"), help="Where to write the figures.")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="uatlab-bench-"))
    cases: list[tuple[str, list[str]]] = []
    syn = work / ("syn-quick.jsonl" if args.quick else "syn-20k.jsonl")
    N, n, V, C = (2000, 16, 500, 10) if args.quick else (20_000, 32, 5_000, 10)
    subprocess.run([*UATLAB, "synth", str(syn), "-N", str(N), "-n", str(n), "-V", str(V),
                    "-C", str(C), "--json"], check=True, capture_output=True)  # fmt: skip
    have_conll = (CONLL / "train.txt").is_file()
    if args.quick:
        if have_conll:
            head = work / "conll-head.txt"
            lines, blanks = [], 0
            with (CONLL / "train.txt").open() as fh:  # first 1,000 sentences (kept in the temp dir only)
                for line in fh:
                    lines.append(line)
                    blanks += not line.strip()
                    if blanks > 1000:
                        break
            head.write_text("".join(lines))
            cases.append(("conll-head-1000-f64", [str(head)]))
        cases.append((f"synthetic-N{N}-f64", [str(syn)]))
        # out of core: the same data in 8 on-disk chunks and buckets (must give the same model)
        cases.append((f"synthetic-N{N}-f64-chunked", [str(syn), "--chunk-tokens", str(N * n // 8)]))
    else:
        if have_conll:
            cases += [
                ("conll-valid-f64", [str(CONLL / "valid.txt")]),
                ("conll-valid-f32", [str(CONLL / "valid.txt"), "--dtype", "float32"]),
                ("conll-train-f64", [str(CONLL / "train.txt")]),
                ("conll-train-f32", [str(CONLL / "train.txt"), "--dtype", "float32"]),
                ("conll-train-causal-f64", [str(CONLL / "train.txt"), "--causal"]),
            ]
            # out of core: train repeated 8 times (1.6M tokens) in 200k-token chunks; peak RSS should match 1x
            x8 = work / "conll-train-x8.txt"
            with x8.open("w") as fh:
                text = (CONLL / "train.txt").read_text()
                for _ in range(8):
                    fh.write(text + "\n")
            cases.append(("conll-train-x8-chunked-f64", [str(x8), "--chunk-tokens", "200000"]))
        cases.append(("synthetic-N20000-n32-V5000-C10-f64", [str(syn)]))
    rows = []
    for name, cargs in cases:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        rows.append(run_case(name, cargs, work))
    args.out.write_text(json.dumps(rows, indent=2, default=str))
    for r in rows:
        if "error" in r:
            print(f"{r['case']}: ERROR {r['error']}")
            continue
        print(f"\n== {r['case']}")
        for key, label in COLUMNS:
            print(f"  {label:>18}: {fmt(r.get(key))}")
        if r.get("conflicts"):
            for c in r["conflicts"]:
                print(
                    f"  conflict: {c['token']!r} pos {c['position']} lines {c['lines']} {c['label_counts']} -> {c['majority']}"
                )
        if r.get("min_margin_at"):
            print(f"  smallest certified margin at {r['min_margin_at']}")
        print(f"  stage seconds: {json.dumps({k: round(v, 2) for k, v in r['stage_seconds'].items()})}")
    print(f"\nload average at end: {Path('/proc/loadavg').read_text().split()[:3]} (shared machine)")
    print(f"figures written to {args.out}")
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
