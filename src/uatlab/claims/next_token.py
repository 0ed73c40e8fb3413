"""Claims: next-token memorization with Õ(√N) parameters, and its float64 bit floor (Kajitsuka & Sato 2025).

Kajitsuka & Sato, "On the Optimal Memorization Capacity of Transformers" (ICLR 2025): N next-token
examples are memorized by one self-attention layer and a feed-forward network with Õ(√N) parameters
(of Õ(√N) bits each). Both checks compile random-label data with
`uatlab.constructions.paper_c.next_token_memorizer`, certify every example
(`uatlab.verify.next_token`) and fit parameters against N on a log-log scale.
"""

from __future__ import annotations

import math
import time

from uatlab.claims.registry import ClaimContext, ClaimResult, register_claim
from uatlab.report.figures import plot_bars, plot_curve

PAPER = "Kajitsuka & Sato, ICLR 2025"
THEOREM = "next-token memorization with Õ(√N) parameters (one attention layer + feed-forward network)"
SQRT_SLOPE_MAX = 0.6  # Õ(√N): slope 1/2 plus logarithmic factors over the measured range
FLOOR_RATIO_MAX = 4.0


@register_claim(
    id="C.next-token.sqrt-n-exact",
    statement="In exact arithmetic a one-layer Transformer (rank-1 attention + deep feed-forward network) "
    "memorizes N random next-token labels with parameters growing like √N (log-log slope ≤ 0.6), every "
    "example certified.",
    paper=PAPER,
    theorem=THEOREM,
)
def check_sqrt_n(ctx: ClaimContext) -> ClaimResult:
    from uatlab.experiments.next_token import compiled_point, fit_loglog_slope

    Ns = (100, 400, 1600, 6400) if ctx.quick else (100, 1000, 10_000, 100_000)
    t0 = time.perf_counter()
    rows = [compiled_point(N, "exact", n=32, C=10, V=4, seed=ctx.seed) for N in Ns]
    slope = fit_loglog_slope([r["N"] for r in rows], [r["params"] for r in rows])
    certified = all(r["certified"] and r["certified_rows"] == r["ceiling"] == r["N"] for r in rows)
    ok = certified and slope <= SQRT_SLOPE_MAX
    return ClaimResult(
        verdict="pass" if ok else "fail",
        figures={
            "N": list(Ns),
            "params_non_embedding": [r["params"] for r in rows],
            "max_weight_bits": [r["max_weight_bits"] for r in rows],
            "loglog_slope": slope,
            "slope_target_max": SQRT_SLOPE_MAX,
            "all_certified": certified,
            "seconds": time.perf_counter() - t0,
        },
        figure_files=[
            str(
                plot_curve(
                    list(Ns),
                    {
                        f"compiled, exact (slope {slope:.2f})": [r["params"] for r in rows],
                        "∝ √N through the first point": [rows[0]["params"] * math.sqrt(N / Ns[0]) for N in Ns],
                    },
                    ctx.figure_path("C.next-token.sqrt-n-exact", "params_vs_n.png"),
                    xlabel="N (examples)",
                    ylabel="non-embedding parameters",
                    logx=True,
                    logy=True,
                    title="next-token memorization (Kajitsuka & Sato 2025)",
                )
            )
        ],
        key_figure="loglog_slope",
        note="n = 32, C = 10, V = 4 random tokens, uniformly random labels; parameters exclude the token-position "
        "table (n'·V values); exact integer evaluation of every weight",
    )


@register_claim(
    id="C.next-token.float64-bend",
    statement="In float64 (≤ 53 bits per weight) the same construction cannot follow √N past the bend: its "
    "parameter count exceeds the exact one there, and stays within 4× of the floor N·log2 C / 53, every "
    "example certified in float64.",
    paper=PAPER,
    theorem=THEOREM + "; bit complexity",
)
def check_float64_bend(ctx: ClaimContext) -> ClaimResult:
    from uatlab.experiments.next_token import bend_point, compiled_point

    # quick: a large label set moves the bend down to N ≈ 11,000; full: C = 10 as in the benchmark
    N, C, n, V = (20_000, 1000, 16, 8) if ctx.quick else (100_000, 10, 32, 4)
    t0 = time.perf_counter()
    f64 = compiled_point(N, "float64", n=n, C=C, V=V, seed=ctx.seed)
    exact = compiled_point(N, "exact", n=n, C=C, V=V, seed=ctx.seed, certify=False)
    bend = bend_point(C=C, n=n)
    floor = N * math.log2(C) / 53
    ratio = f64["params"] / floor
    ok = (
        f64["certified"]
        and f64["certified_rows"] == f64["ceiling"] == N
        and 0 < bend < N
        and f64["params"] > exact["params"]
        and f64["params"] >= floor
        and ratio <= FLOOR_RATIO_MAX
    )
    return ClaimResult(
        verdict="pass" if ok else "fail",
        figures={
            "N": N,
            "C": C,
            "n": n,
            "bend_N": bend,
            "params_float64": f64["params"],
            "params_exact": exact["params"],
            "float64_floor": floor,
            "ratio_to_floor": ratio,
            "ratio_target_max": FLOOR_RATIO_MAX,
            "float_bound_bits": f64["float_bound_bits"],
            "certified": f64["certified"],
            "seconds": time.perf_counter() - t0,
        },
        figure_files=[
            str(
                plot_bars(
                    {
                        "float64": f64["params"],
                        "exact arithmetic": exact["params"],
                        "float64 floor N·log2 C / 53": floor,
                    },
                    ctx.figure_path("C.next-token.float64-bend", "params.png"),
                    ylabel="non-embedding parameters",
                    logy=True,
                    title=f"past the bend: N = {N:,}, C = {C} (Kajitsuka & Sato 2025)",
                    threshold=(f"pass threshold: {FLOOR_RATIO_MAX}× the floor", FLOOR_RATIO_MAX * floor),
                )
            )
        ],
        key_figure="ratio_to_floor",
        note="bend = smallest N whose parameter-optimal exact layout packs more base-C digits per word than "
        "fit in 50 bits; float64 certificate: every partial sum an integer ≤ 2^53 in any order",
    )
