"""Memorization benchmark: compiled parameters against paper A's count and against the label information.

    python benchmarks/memorization.py                 # full sizes (adversarial families, synthetic 20k, CoNLL train)
    python benchmarks/memorization.py --quick         # CI sizes (seconds)
    python benchmarks/memorization.py --compile-args "--ff ramps" --out before.json   # another construction
    python benchmarks/memorization.py --compare before.json                         # before → after table
    python benchmarks/memorization.py --ff ramps,knots,deep  # side by side: CPU s and CPU(x) / CPU(ramps)

Families (generated here, deterministic in ``--seed``):

* ``perm-parity``: N permutations of ONE multiset of n tokens, label = parity of the position (every
  sequence has the same vocabulary set, so only the order tells positions apart);
* ``v5-count-mod3``: a 5-word vocabulary, length 40, label = (earlier occurrences of the same word in the
  sequence) mod 3 (heavy duplicates inside a sequence);
* ``long-random``: n = 256, C = 50 uniformly random labels;
* ``synthetic-20k``: N = 20,000, n = 32, V = 5,000, C = 10 (``uatlab synth``; random labels);
* ``conll-train`` (float64 and float32): CoNLL-2003 train from ``../shared/data/conll2003`` beside the
  repository (or ``$UATLAB_CONLL_DIR``), skipped if absent (never copied into the repository).

Each case runs ``uatlab compile ... --json`` in a fresh subprocess (CPU seconds are its own; the machine may be
shared, so CPU time is reported beside wall time). Reported per case: non-embedding parameters (dense and
non-zero), paper A's count 4(s+d) + d(2nN+d) for the model's own d, n = max_len and N, their ratio, whether the
certificate covers every ceiling token, seconds, and the label information of
`uatlab.data.information` with bits per non-embedding parameter = Σ_tokens H(label | word) / parameters.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CONLL = Path(os.environ.get("UATLAB_CONLL_DIR", Path(__file__).resolve().parents[2] / "shared/data/conll2003"))
UATLAB = [sys.executable, "-c", "import sys; from uatlab.cli import main; sys.exit(main(sys.argv[1:]))"]


def write_sequences(path: Path, seqs: list[tuple[list[str], list[str]]]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for toks, labs in seqs:
            fh.writelines(f"{t} {y}\n" for t, y in zip(toks, labs, strict=True))
            fh.write("\n")


def perm_parity(N: int, n: int, V: int, rng: np.random.Generator):
    """N permutations of one multiset of n tokens drawn from V words; label = position parity."""
    multiset = rng.integers(0, V, size=n)
    return [([f"w{w}" for w in rng.permutation(multiset)], [f"p{k % 2}" for k in range(n)]) for _ in range(N)]


def count_mod3(N: int, n: int, V: int, rng: np.random.Generator):
    """Random sequences over V words; label = (earlier occurrences of the token in the sequence) mod 3."""
    out = []
    for _ in range(N):
        ws = rng.integers(0, V, size=n)
        seen: dict[int, int] = {}
        labs = []
        for w in ws.tolist():
            labs.append(f"c{seen.get(w, 0) % 3}")
            seen[w] = seen.get(w, 0) + 1
        out.append(([f"w{w}" for w in ws], labs))
    return out


def random_labels(N: int, n: int, V: int, C: int, rng: np.random.Generator):
    return [
        ([f"w{w}" for w in rng.integers(0, V, size=n)], [f"y{c}" for c in rng.integers(0, C, size=n)]) for _ in range(N)
    ]


def information(path: Path) -> dict:
    from uatlab.data.conll import iter_conll
    from uatlab.data.information import label_information_of

    return label_information_of(iter_conll(path)).to_json()


def paper_a_param_count(d: int, n: int, N: int, s: int = 1) -> int:
    """Paper A's count 4(s + d) + d(2nN + d) (Kajitsuka & Sato, ICLR 2024, Corollary 1)."""
    return 4 * (s + d) + d * (2 * n * N + d)


def ff_of(extra: list[str]) -> str:
    return extra[extra.index("--ff") + 1] if "--ff" in extra else "knots"


def run_case(name: str, data: Path, extra: list[str], work: Path) -> dict:
    out = work / f"{name}.safetensors"
    cmd = [*UATLAB, "compile", str(data), *extra, "--out", str(out), "--json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        err = proc.stderr.strip()[-2000:] or f"exit status {proc.returncode}"
        return {"case": name, "ff": ff_of(extra), "error": err, "cpu_seconds": cpu}
    fig = json.loads(proc.stdout)
    info = information(data)
    p = fig["params_non_embedding"]
    deep = fig.get("ff") == "deep"
    d_model = 4 if deep else fig["d_model"]  # the deep model's stream: (ν, 1, token id, v)
    paper_a = paper_a_param_count(d_model, fig["max_len"], fig["sequences"])
    certified = fig.get("certified", False)
    row = {
        "case": name,
        "ff": ff_of(extra),
        "command": shlex.join(["uatlab", "compile", data.name, *extra]),
        "sequences": fig["sequences"],
        "tokens": fig["tokens"],
        "max_len": fig["max_len"],
        "d_model": d_model,
        "ff_width": fig.get("ff_width"),
        "ffn_depth": fig.get("ffn_depth", 1),
        "params_non_embedding": p,
        "params_non_embedding_nonzero": fig.get("params_non_embedding_nonzero"),
        "paper_a_param_count": paper_a,
        "ratio_to_paper_a": p / paper_a,
        "certified": certified,
        "certified_at_ceiling": bool(
            certified
            and fig["certified_tokens"] == fig["ceiling_tokens"]
            and fig.get("correct_tokens", fig["certified_tokens"]) == fig["ceiling_tokens"]
        ),
        "correct_tokens": fig.get("correct_tokens", fig.get("certified_tokens")),
        "ceiling_tokens": fig.get("ceiling_tokens"),
        "stage_seconds": fig.get("stage_seconds"),
        "dtype": fig["dtype"],
        "wall_seconds": wall,
        "cpu_seconds": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "label_bits_given_word": info["word_bits"],
        "bits_per_param": info["word_bits"] / max(p, 1),
        "information": info,
    }
    return row


def cases(quick: bool, work: Path, seed: int) -> list[tuple[str, Path, list[str]]]:
    rng = np.random.default_rng(seed)
    made: list[tuple[str, Path, list[str]]] = []

    def family(name: str, seqs) -> Path:
        path = work / f"{name}.txt"
        write_sequences(path, seqs)
        return path

    if quick:
        sizes = {"perm": (200, 16, 8), "mod3": (100, 40, 5), "long": (20, 256, 500, 50), "syn": (400, 12, 300, 5)}
    else:
        sizes = {
            "perm": (2000, 24, 12),
            "mod3": (1000, 40, 5),
            "long": (200, 256, 2000, 50),
            "syn": (20_000, 32, 5_000, 10),
        }
    N, n, V = sizes["perm"]
    made.append((f"perm-parity-N{N}-n{n}", family("perm", perm_parity(N, n, V, rng)), []))
    N, n, V = sizes["mod3"]
    made.append((f"v5-count-mod3-N{N}-n{n}", family("mod3", count_mod3(N, n, V, rng)), []))
    N, n, V, C = sizes["long"]
    made.append((f"long-random-N{N}-n{n}-C{C}", family("long", random_labels(N, n, V, C, rng)), []))
    N, n, V, C = sizes["syn"]
    made.append((f"synthetic-N{N}-n{n}-V{V}-C{C}", family("syn", random_labels(N, n, V, C, rng)), []))
    if (CONLL / "train.txt").is_file():
        src = CONLL / "train.txt"
        if quick:  # the first 1,000 sentences, in the temp dir only
            from uatlab.data.conll import read_conll, write_conll

            head = work / "conll-head.txt"
            write_conll(read_conll(src)[:1000], head)
            src = head
        tag = "conll-head-1000" if quick else "conll-train"
        made += [(f"{tag}-f64", src, ["--dtype", "float64"]), (f"{tag}-f32", src, ["--dtype", "float32"])]
    else:
        print(f"CoNLL-2003 not found under {CONLL}: skipped", file=sys.stderr)
    return made


def table(rows: list[dict], before: dict[str, dict] | None) -> str:
    head = "| case | params (dense) | non-zero | paper A | ratio | certified at ceiling | CPU s | bits/param |"
    if before:
        head = (
            "| case | ratio to paper A (before → after) | certified at ceiling (before → after) | "
            "CPU s (before → after) | bits/param (before → after) | params (before → after) |"
        )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        r = dict(r, case=r["case"] + (f" [--ff {r['ff']}]" if r.get("ff", "knots") != "knots" else ""))
        if "error" in r:
            lines.append(f"| {r['case']} | error: {(r['error'].splitlines() or ['?'])[-1]} |")
            continue
        if before:
            b = before.get(r["case"].split(" [")[0], {})
            if "error" in b or not b:
                b = {}

            def pair(key, f, b=b, r=r):
                return f"{f(b[key]) if key in b else '—'} → {f(r[key])}"

            lines.append(
                f"| {r['case']} | {pair('ratio_to_paper_a', lambda v: f'{100 * v:.1f} %')} | "
                f"{pair('certified_at_ceiling', str)} | {pair('cpu_seconds', lambda v: f'{v:.1f}')} | "
                f"{pair('bits_per_param', lambda v: f'{v:.4f}')} | {pair('params_non_embedding', lambda v: f'{v:,}')} |"
            )
        else:
            lines.append(
                f"| {r['case']} | {r['params_non_embedding']:,} | {r['params_non_embedding_nonzero'] or '—'} | "
                f"{r['paper_a_param_count']:,} | {100 * r['ratio_to_paper_a']:.1f} % | {r['certified_at_ceiling']} | "
                f"{r['cpu_seconds']:.1f} | {r['bits_per_param']:.4f} |"
            )
    return "\n".join(lines)


def side_by_side(rows: list[dict]) -> str:
    """Per family: ratio to paper A, certified, CPU seconds of every --ff, and CPU(new) / CPU(ramps)."""
    by: dict[str, dict[str, dict]] = {}
    for r in rows:
        by.setdefault(r["case"], {})[r.get("ff", "knots")] = r
    ffs = [f for f in ("ramps", "knots", "deep") if any(f in v for v in by.values())]
    head = "| case | " + " | ".join(f"{f}: ratio to paper A, certified, CPU s" for f in ffs)
    head += " | " + " | ".join(f"CPU {f} / ramps" for f in ffs if f != "ramps") + " |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for case, v in by.items():
        cells = []
        for f in ffs:
            r = v.get(f)
            if r is None:
                cells.append("—")
            elif "error" in r:
                cells.append(
                    f"error after {r.get('cpu_seconds', 0):.1f} s: {(r['error'].splitlines() or ['?'])[-1][:80]}"
                )
            else:
                cells.append(
                    f"{100 * r['ratio_to_paper_a']:.1f} %, {r['certified_at_ceiling']}, {r['cpu_seconds']:.1f}"
                )
        base = v.get("ramps")
        for f in ffs:
            if f == "ramps":
                continue
            r = v.get(f)
            ok = base and r and "error" not in base and "error" not in r
            cells.append(f"{r['cpu_seconds'] / base['cpu_seconds']:.2f}" if ok else "—")
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def figure(rows: list[dict], before: dict[str, dict] | None, path: Path) -> None:
    """Parameters against label bits (Σ H(label | word)) per data set: the compiled model (after, and before if
    given), paper A's count (Kajitsuka & Sato, ICLR 2024), the √N and √(nN) scales of the optimal-capacity
    bounds (Kajitsuka & Sato, ICLR 2025; up to logarithms), and the bit-complexity floor parameters ≥ bits / b
    (b = 64, 32).

    Data sets are numbered (1, 2, …) beside their compiled point and named in a numbered key under the
    legend, so no case name is drawn on the data; the numbers are stacked vertically when two points are
    closer than a label's height.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if "error" not in r and r["label_bits_given_word"] > 0]
    if not ok:
        raise ValueError("no successful rows with label bits > 0 to plot")
    fig, ax = plt.subplots(figsize=(12.5, 6))
    fig.subplots_adjust(left=0.07, right=0.62, bottom=0.1, top=0.93)  # the right 40 %: legend and key
    xs = np.array([r["label_bits_given_word"] for r in ok])
    numbered: list[tuple[str, float, float]] = []  # (case, x, y) of every compiled (knots) point, in row order
    for r in ok:
        x = r["label_bits_given_word"]
        N, n = r["sequences"], r["max_len"]
        if r.get("ff", "knots") == "knots":  # the references once per data set (paper A's count at knots' d)
            ax.scatter([x], [r["paper_a_param_count"]], marker="s", color="tab:red")
            ax.scatter([x], [math.sqrt(N)], marker="v", color="tab:gray")
            ax.scatter([x], [math.sqrt(n * N)], marker="^", color="tab:gray")
        if r.get("ff") == "deep":
            ax.scatter([x], [r["params_non_embedding"]], marker="D", color="tab:green")
            continue
        if r.get("ff") == "ramps":
            ax.scatter([x], [r["params_non_embedding"]], marker="o", facecolors="none", edgecolors="tab:blue")
            continue
        ax.scatter([x], [r["params_non_embedding"]], marker="o", color="tab:blue")
        b = (before or {}).get(r["case"])
        if b and "error" not in b:
            ax.scatter([x], [b["params_non_embedding"]], marker="o", facecolors="none", edgecolors="tab:blue")
            ax.plot([x, x], [b["params_non_embedding"], r["params_non_embedding"]], color="tab:blue", lw=0.8)
        if r["case"] not in [c for c, _, _ in numbered]:
            numbered.append((r["case"], x, r["params_non_embedding"]))
    grid = np.logspace(np.log10(xs.min() / 3), np.log10(xs.max() * 3), 50)
    for b, ls in ((64, "-"), (32, "--")):
        ax.plot(grid, grid / b, ls, color="k", lw=0.8, label=f"bit-complexity floor: params ≥ bits / {b}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(grid[0], grid[-1])
    _number_points(ax, numbered)
    handles = [
        plt.Line2D([], [], marker="o", ls="", color="tab:blue", label="compiled (--ff knots), non-embedding params"),
        plt.Line2D(
            [], [], marker="o", ls="", mfc="none", color="tab:blue", label="--ff ramps (two ramps per label change)"
        ),
        plt.Line2D(
            [],
            [],
            marker="D",
            ls="",
            color="tab:green",
            label="--ff deep (Kajitsuka & Sato, ICLR 2025), dense non-emb. params",
        ),
        plt.Line2D(
            [],
            [],
            marker="s",
            ls="",
            color="tab:red",
            label="paper A count 4(s+d) + d(2nN+d) (Kajitsuka & Sato, ICLR 2024)",
        ),
        plt.Line2D(
            [], [], marker="^", ls="", color="tab:gray", label="√(nN), seq2seq scale (Kajitsuka & Sato, ICLR 2025)"
        ),
        plt.Line2D(
            [], [], marker="v", ls="", color="tab:gray", label="√N, next-token scale (Kajitsuka & Sato, ICLR 2025)"
        ),
    ]
    key = [
        plt.Line2D([], [], marker=f"${i}$", ls="", color="black", ms=7, label=case)
        for i, (case, _, _) in enumerate(numbered, start=1)
    ]
    legend = ax.legend(
        handles=handles + ax.get_legend_handles_labels()[0],
        fontsize=7.5,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        title="series",
        title_fontsize=8,
    )
    ax.add_artist(legend)
    ax.legend(
        handles=key, fontsize=7.5, loc="lower left", bbox_to_anchor=(1.01, 0.0), title="data sets", title_fontsize=8
    )
    ax.set_xlabel("label bits the non-embedding weights must hold: Σ_tokens H(label | word), conflicts excluded")
    ax.set_ylabel("parameters")
    ax.set_title("Memorization: parameters against label information")
    from uatlab.io_safety import save_figure

    save_figure(fig, path, dpi=130)  # atomic: an interrupted run keeps the old figure
    plt.close(fig)


def _number_points(ax, points: list[tuple[str, float, float]]) -> None:
    """Write 1, 2, … beside each point: left, right, below or above, the first spot inside the axes that is
    clear of every marker and of the labels already placed (pixel boxes), else left of it with a leader line,
    moved down until clear."""
    fig = ax.figure
    fig.canvas.draw()  # fixes the transforms after the axis limits are set
    to_px = ax.transData.transform
    size = 11.0 * fig.dpi / 72  # one label's box (≈ 11 points) in pixels
    markers = [tuple(p) for c in ax.collections for p in to_px(c.get_offsets())]
    placed: list[tuple[float, float]] = []
    frame = ax.get_window_extent()

    def clear(lx: float, ly: float) -> bool:
        half = size / 2
        inside = frame.x0 + half <= lx <= frame.x1 - half and frame.y0 + half <= ly <= frame.y1 - half
        if not inside:
            return False
        near_marker = any(abs(lx - mx) < 0.9 * size and abs(ly - my) < 0.9 * size for mx, my in markers)
        return not near_marker and all(abs(lx - qx) >= size or abs(ly - qy) >= size for qx, qy in placed)

    for i, (_, x, y) in enumerate(points, start=1):
        px, py = to_px((x, y))
        spots = [(px - size, py), (px + size, py), (px, py - size), (px, py + size)]
        lx, ly = next((s for s in spots if clear(*s)), spots[0])
        while not clear(lx, ly) and ly > frame.y0 + size:
            ly -= size  # stack below, joined to its point by a leader line
        placed.append((lx, ly))
        far = abs(lx - px) + abs(ly - py) > 1.5 * size
        ax.annotate(
            str(i),
            (x, y),
            xytext=((lx - px) * 72 / fig.dpi, (ly - py) * 72 / fig.dpi),
            textcoords="offset points",
            ha="center",
            va="center",
            fontsize=8,
            fontweight="bold",
            arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "0.4"} if far else None,
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CI-sized cases (seconds).")
    ap.add_argument("--out", type=Path, default=Path("benchmark-memorization.json"), help="Where to write the rows.")
    ap.add_argument("--compile-args", default="", help="Extra arguments for every 'uatlab compile' (quoted).")
    ap.add_argument("--compare", type=Path, help="A previous --out file: print before → after.")
    ap.add_argument(
        "--ff",
        default="",
        help="Comma-separated --ff values run side by side on every case (e.g. ramps,knots,deep); prints the "
        "CPU-time ratio of each to ramps. Default: the compiler's default only.",
    )
    ap.add_argument("--only", default="", help="Run only cases whose name contains this text.")
    ap.add_argument(
        "--skip",
        default="",
        help="Comma-separated TEXT:FF pairs not run: the --ff FF of every case whose name contains TEXT "
        "(e.g. synthetic:deep, whose exact certificate is out of reach on a shared 2-core machine).",
    )
    ap.add_argument("--seed", type=int, default=0, help="Seed of the generated families.")
    ap.add_argument("--figure", type=Path, help="Write the parameters-against-label-bits figure (PNG) here.")
    ap.add_argument("--replot", type=Path, help="Only redraw --figure from this --out file (no compiles).")
    args = ap.parse_args()
    from uatlab.io_safety import write_text_atomic

    skip: list[tuple[str, str]] = []
    for item in (v.strip() for v in args.skip.split(",")):
        if not item:
            continue
        text, sep, ff = item.rpartition(":")
        if not sep or not text or not ff:
            print(f"error: --skip {item!r}: expected TEXT:FF (e.g. synthetic:deep)", file=sys.stderr)
            return 2
        skip.append((text, ff))
    before = None
    if args.compare is not None:
        if not args.compare.is_file():
            print(f"error: --compare {args.compare}: no such file", file=sys.stderr)
            return 2
        before = {r["case"]: r for r in json.loads(args.compare.read_text())}
    if args.out.exists() and args.out.is_dir():
        print(f"error: --out {args.out} is a directory", file=sys.stderr)
        return 2
    if args.replot is not None:
        if args.figure is None or not args.replot.is_file():
            print("error: --replot needs an existing rows file and --figure", file=sys.stderr)
            return 2
        rows = json.loads(args.replot.read_text())
        print(table(rows, before))
        figure(rows, before, args.figure)
        print(f"figure written to {args.figure}")
        return 0
    work = Path(tempfile.mkdtemp(prefix="uatlab-mem-bench-"))
    extra = shlex.split(args.compile_args)
    rows = []
    ffs = [f for f in args.ff.split(",") if f] or [""]
    for name, path, cargs in cases(args.quick, work, args.seed):
        if args.only and args.only not in name:
            continue
        for ff in ffs:
            if any(text in name and ff == sff for text, sff in skip):
                print(f"skipped {name} --ff {ff} (--skip)", file=sys.stderr, flush=True)
                continue
            ff_args = ["--ff", ff] if ff else []
            print(f"running {name} {' '.join(ff_args)} ...", file=sys.stderr, flush=True)
            rows.append(run_case(name, path, [*cargs, *ff_args, *extra], work))
            # atomic, after every case (a long run keeps what it measured); a unique temporary name beside it
            write_text_atomic(args.out, json.dumps(rows, indent=2, default=str))
    if len(ffs) > 1:
        print(side_by_side(rows))
        print()
    print(table([r for r in rows if r.get("ff", "knots") != "ramps" or len(ffs) == 1], before))
    print(f"\nload average at end: {Path('/proc/loadavg').read_text().split()[:3]} (shared machine)")
    print(f"rows written to {args.out}")
    if args.figure is not None:
        figure(rows, before, args.figure)
        print(f"figure written to {args.figure}")
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
