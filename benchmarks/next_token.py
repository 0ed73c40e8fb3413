"""Next-token memorization benchmark: parameters against N (exact, float64, per-token, trained), the corpus.

    python benchmarks/next_token.py --quick                 # N = 10², 10³, compiled only (seconds)
    python benchmarks/next_token.py --out /tmp/nt.json      # N = 10², 10³, 10⁴, 10⁵ compiled + certified
    python benchmarks/next_token.py --corpus                # + Python stdlib windows (≥ 200,000), certified
    python benchmarks/next_token.py --trained DIR[,DIR]     # + the trained points of `uatlab experiment capacity
                                                            #   --task next-token --out DIR` runs in the figure
    python benchmarks/next_token.py --figure docs/figures/next_token_params.png

Writes one JSON (rows, fitted log-log slopes, bend, corpus figures); rows are appended as they finish
(rerun with the same --out to resume: finished rows are kept).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np


def _save(path: Path, state: dict) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(state, indent=1, default=float))
    tmp.replace(path)


def corpus(window: int, min_windows: int) -> dict:
    import torch

    from uatlab.constructions.paper_c.model import NextTokenModel
    from uatlab.constructions.paper_c.next_token_memorizer import compile_memorizer
    from uatlab.data.next_token import python_stdlib_windows
    from uatlab.experiments.next_token import cpu_seconds
    from uatlab.verify.next_token import certify_next_token

    t0, c0 = time.perf_counter(), cpu_seconds()
    data = python_stdlib_windows(window, min_windows)
    t_read = time.perf_counter() - t0
    memo, _ = compile_memorizer(data.tokens, data.labels, V=len(data.token_vocab), C=data.num_classes, regime="float64")
    t_compile = time.perf_counter() - t0 - t_read
    cert = certify_next_token(memo, data.tokens, data.labels)
    t_cert = time.perf_counter() - t0 - t_read - t_compile
    model = NextTokenModel(memo)
    pred = []
    with torch.no_grad():
        for i in range(0, len(data), 4096):
            pred.append(model(torch.tensor(data.tokens[i : i + 4096])).argmax(dim=1).numpy())
    pred = np.concatenate(pred)
    gen_ok = int((pred == data.labels).sum())
    return {
        "windows": len(data),
        "window": window,
        "files": data.source,
        "vocabulary": len(data.token_vocab),
        "classes": data.num_classes,
        "distinct_windows": memo.facts["N_distinct"],
        "ceiling": cert.ceiling_rows,
        "params": memo.parameters,
        "D": memo.layout.D,
        "m": memo.layout.m,
        "banks": list(memo.layout.banks),
        "depth": memo.circuit.depth,
        "certified": cert.certified,
        "correct": cert.correct_rows,
        "certified_rows": cert.certified_rows,
        "float_bound_bits": cert.float_bound_bits,
        "generation_correct_float64": gen_ok,
        "ratio_to_float64_floor": memo.facts["ratio_to_float64_floor"],
        "seconds": {
            "read": t_read,
            "compile": t_compile,
            "certify": t_cert,
            "generate": time.perf_counter() - t0 - t_read - t_compile - t_cert,
        },
        "cpu_seconds": cpu_seconds() - c0,
    }


def trained_points(folders: list[Path]) -> list[dict]:
    """One point per N: the fewest parameters of a trained model that reached 100 % in any of the capacity
    runs in ``folders`` (each `uatlab experiment capacity --task next-token --out DIR`, possibly with its own
    step budget), with the folder and budget it came from. Finished trials count too (a run stopped after its
    first width has no table yet, but its trial at 100 % is a trained model of that size)."""
    best: dict[int, dict] = {}

    def offer(N: int, params: int, width: int, steps: int, budget: int, folder: Path) -> None:
        if N not in best or params < best[N]["params"]:
            best[N] = {"N": N, "params": params, "width": width, "steps": steps, "budget_steps": budget}
            best[N]["folder"] = str(folder)

    for d in folders:
        cap = json.loads((d / "next_token_capacity.json").read_text())
        budget = cap["setup"]["recipe"]["steps"]
        for r in cap.get("table") or []:
            if r.get("trained_params"):
                offer(r["N"], r["trained_params"], r["trained_width"], r["trained_steps"], budget, d)
        for key, entry in cap.get("sweep", {}).items():
            for t in entry.get("trials", {}).values():
                if t["accuracy"] >= 1.0:
                    offer(int(key), t["params"], t["width"], t["steps"], budget, d)
    return [best[N] for N in sorted(best)]


def trained_failures(folders: list[Path]) -> list[dict]:
    """Per N with no trained model at 100 % in any of ``folders``: the most parameters of a finished trial
    that stayed below 100 % (a width that was not enough within its budget), with its accuracy."""
    done = {p["N"] for p in trained_points(folders)}
    worst: dict[int, dict] = {}
    for d in folders:
        cap = json.loads((d / "next_token_capacity.json").read_text())
        for key, entry in cap.get("sweep", {}).items():
            N = int(key)
            for t in entry.get("trials", {}).values():
                if N not in done and t["accuracy"] < 1.0 and (N not in worst or t["params"] > worst[N]["params"]):
                    worst[N] = {
                        "N": N,
                        "params": t["params"],
                        "width": t["width"],
                        "accuracy": t["accuracy"],
                        "budget_steps": cap["setup"]["recipe"]["steps"],
                        "folder": str(d),
                    }
    return [worst[N] for N in sorted(worst)]


def figure(state: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    styles = {
        "exact": ("o-", "compiled, exact arithmetic"),
        "float64": ("s-", "compiled, float64"),
        "per-token (paper A)": ("^--", "per-token (paper A, Cor. 1)"),
    }
    rows = state["rows"]
    for regime, (st, label) in styles.items():
        pts = sorted((r["N"], r["params"]) for r in rows if r["regime"] == regime)
        if pts:
            s = state["slopes"].get(regime, float("nan"))
            ax.loglog(*zip(*pts, strict=True), st, label=f"{label} (slope {s:.2f})")
    tr = sorted((r["N"], r["params"]) for r in state.get("trained", []) if r.get("params"))
    if tr:
        s = state["slopes"].get("trained", float("nan"))
        ax.loglog(*zip(*tr, strict=True), "d:", label=f"trained 1-layer reaching 100 % (slope {s:.2f})")
    fails = state.get("trained_failures", [])
    if fails:
        ax.loglog(
            [f["N"] for f in fails],
            [f["params"] for f in fails],
            "^",
            mfc="none",
            color="tab:red",
            label="trained, largest finished trial < 100 %",
        )
        for f in fails:
            ax.annotate(f" {100 * f['accuracy']:.2f} %", (f["N"], f["params"]), fontsize=7)
    Ns = np.logspace(2, math.log10(max(r["N"] for r in rows)), 20)
    C = rows[0]["C"]
    ax.loglog(Ns, Ns * math.log2(C) / 53, "k:", label="float64 floor N·log2C/53")
    if state.get("bend_N", -1) > 0:
        ax.axvline(state["bend_N"], color="grey", lw=0.8)
        # at the top of the axes: the legend takes the lower right
        ax.text(state["bend_N"], ax.get_ylim()[1] / 1.5, f" bend N≈{state['bend_N']:,}", fontsize=8, va="top")
    ax.set_xlabel("N (sequences, n = 32, C = 10 random labels)")
    ax.set_ylabel("parameters (non-embedding)")
    ax.legend(fontsize=7)
    ax.set_title("Next-token memorization: parameters vs N")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    from uatlab.io_safety import save_figure

    save_figure(fig, path, dpi=130)  # atomic: an interrupted run keeps the old figure


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default="/tmp/uatlab_next_token.json")
    p.add_argument("--Ns", default=None, help="comma-separated N (default 100,1000,10000,100000)")
    p.add_argument("--certify-max", type=int, default=100_000, help="certify float64 up to this N")
    p.add_argument("--certify-max-exact", type=int, default=100_000, help="certify exact up to this N")
    p.add_argument("--per-token-max", type=int, default=10_000)
    p.add_argument("--float64-extra", default="", help="further N compiled in float64 only (e.g. 30000,300000)")
    p.add_argument("--corpus", action="store_true")
    p.add_argument("--corpus-windows", type=int, default=200_000)
    p.add_argument(
        "--trained",
        default=None,
        help="comma-separated folders of `uatlab experiment capacity --task next-token` runs (per N the fewest"
        " parameters reaching 100 % in any of them)",
    )
    p.add_argument("--figure", default=None)
    a = p.parse_args(argv)
    from uatlab.experiments import next_token as nt

    Ns = [int(x) for x in (a.Ns or ("100,1000" if a.quick else "100,1000,10000,100000")).split(",")]
    if any(N < 2 for N in Ns):
        print("error: --Ns: every N must be ≥ 2", file=sys.stderr)
        return 2
    out = Path(a.out)
    state = json.loads(out.read_text()) if out.is_file() else {"rows": []}
    done = {(r["N"], r["regime"]) for r in state["rows"]}
    for N in Ns:
        for regime in ("exact", "float64"):
            if (N, regime) not in done:
                cmax = a.certify_max_exact if regime == "exact" else a.certify_max
                row = nt.compiled_point(N, regime, certify=N <= cmax)
                state["rows"].append(row)
                print(
                    json.dumps(
                        {k: row[k] for k in ("N", "regime", "params", "ratio_to_floor")}
                        | {"certified": row.get("certified")}
                    ),
                    flush=True,
                )
                _save(out, state)
        if N <= a.per_token_max and (N, "per-token (paper A)") not in done:
            state["rows"].append(nt.per_token_point(N))
            _save(out, state)
    for N in [int(x) for x in a.float64_extra.split(",") if x]:
        if (N, "float64") not in done:
            state["rows"].append(nt.compiled_point(N, "float64", certify=N <= a.certify_max))
            _save(out, state)
    fit = [r for r in state["rows"] if r["N"] in Ns or r["regime"] != "float64"]
    state["slopes"] = nt.slopes(fit)
    state["slopes_float64_from_bend"] = nt.slopes(
        [r for r in state["rows"] if r["regime"] == "float64" and r["N"] >= nt.bend_point()]
    ).get("float64")
    state["bend_N"] = nt.bend_point()
    if a.corpus and "corpus" not in state:
        state["corpus"] = corpus(32, a.corpus_windows)
        print(json.dumps(state["corpus"]), flush=True)
    if a.trained:
        state["trained"] = trained_points([Path(d) for d in a.trained.split(",") if d])
        state["trained_failures"] = trained_failures([Path(d) for d in a.trained.split(",") if d])
        pts = [(r["N"], r["params"]) for r in state["trained"]]
        state["slopes"]["trained"] = nt.fit_loglog_slope(*zip(*pts, strict=True)) if len(pts) > 1 else None
    state["machine"] = nt.threads_note()
    _save(out, state)
    print(json.dumps({"slopes": state["slopes"], "bend_N": state["bend_N"]}))
    if a.figure:
        figure(state, Path(a.figure))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
