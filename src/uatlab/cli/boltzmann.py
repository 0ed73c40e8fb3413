"""``uatlab boltzmann``: the Boltzmann operator of given vectors, the gap between two, and Lemma 1's bound.

Paper A (Kajitsuka & Sato, ICLR 2024), Lemma 1: for vectors a, b ∈ R^n without duplicate components,
|components| ≤ r, distinct components more than 2 log n + 3 apart and different component sets,
|boltz(a) − boltz(b)| > (log n)^2 e^{−2r}, where boltz(a) = Σ_i a_i e^{a_i} / Σ_j e^{a_j}.
"""

from __future__ import annotations

import math

import typer

from uatlab.cli.app import app, console, key_value_table, print_json
from uatlab.cli.options import with_exit_codes
from uatlab.errors import InputError

#: default cap on the exact check's precision: 10^6 digits (|components| r ≤ 1.15e6), ~0.2 CPU s per component
DEFAULT_MAX_DIGITS = 1_000_000


def parse_vector(text: str, index: int) -> list[float]:
    """'1, 5.5, -3' → [1.0, 5.5, -3.0]; a bad component is an error naming the vector and the component."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(p == "" for p in parts):
        raise InputError(f"vector {index} ({text!r}) must be comma-separated numbers, e.g. '0,5,10'")
    out = []
    for k, p in enumerate(parts):
        try:
            v = float(p)
        except ValueError:
            raise InputError(f"vector {index}, component {k}: {p!r} is not a number") from None
        if not math.isfinite(v):
            raise InputError(f"vector {index}, component {k}: {p!r} is not finite")
        out.append(v)
    return out


@app.command("boltzmann")
@with_exit_codes()
def boltzmann_cmd(
    vectors: list[str] = typer.Argument(..., help="One or two vectors, each as comma-separated numbers."),
    r: float = typer.Option(None, "--r", help="Bound r on |components| (default: the vectors' own max)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
    max_digits: int = typer.Option(
        DEFAULT_MAX_DIGITS,
        "--max-digits",
        help="Largest precision (decimal digits) of the exact check; it needs about 2r/ln 10 + 30 digits, so "
        "larger |components| are reported in float64 without the exact certificate.",
    ),
) -> None:
    """Lemma 1 of paper A: boltz of each vector; for two vectors, the gap, the bound and an exact certificate."""
    from uatlab.theory.boltzmann import boltz, lemma1_bound, lemma1_hypotheses, lemma1_log10_bound

    if len(vectors) not in (1, 2):
        raise InputError(f"give one or two vectors, got {len(vectors)}")
    vecs = [parse_vector(v, i) for i, v in enumerate(vectors)]
    if len(vecs) == 2 and len(vecs[0]) != len(vecs[1]):
        raise InputError(f"vector 0 has {len(vecs[0])} components, vector 1 has {len(vecs[1])}: need equal lengths")
    if r is not None and not (math.isfinite(r) and r > 0):
        raise InputError(f"--r must be a positive number, got {r}")
    if max_digits < 30:
        raise InputError(f"--max-digits must be at least 30, got {max_digits}")
    res: dict = {"vectors": vecs, "boltz": [float(boltz(v)) for v in vecs]}
    h = lemma1_hypotheses(vecs, r)
    res.update(
        n=h.n,
        r=h.r,
        required_gap=h.required_gap,
        min_gap=h.min_gap,
        hypotheses_hold=h.holds,
        violations=h.violations,
    )
    if len(vecs) == 2:
        same_set = sorted(vecs[0]) == sorted(vecs[1])
        res.update(
            gap=abs(res["boltz"][0] - res["boltz"][1]),
            bound=lemma1_bound(h.n, h.r),
            log10_bound=lemma1_log10_bound(h.n, h.r),
            same_component_set=same_set,
        )
        # resolving a gap of size e^{-2r} between two numbers of size r needs ~2r/ln 10 digits
        digits = 2 * (h.r / math.log(10)) + 30  # r / ln 10 first: 2r overflows float64 near 1e308
        digits = int(digits) if math.isfinite(digits) else digits
        if digits > max_digits:
            res.update(
                log10_gap_exact=None,
                gap_exceeds_bound_certified=None,
                exact_check=(
                    f"skipped: |components| up to r = {h.r:g} need {digits:.3g} digits, above --max-digits "
                    f"{max_digits} (r ≤ {(max_digits - 30) * math.log(10) / 2:.3g}); the gap is the float64 one"
                ),
            )
            typer.echo(f"note: exact check {res['exact_check']}", err=True)
        else:
            res.update(_exact_gap(vecs, h.n, h.r, digits, show_progress=not json_out))
            res["exact_check"] = f"done at {digits} digits"
        res["lemma1_applies"] = h.holds and not same_set
    if json_out:
        print_json(res)
        return
    rows = {f"boltz(vector {i})": b for i, b in enumerate(res["boltz"])}
    rows.update({"n": h.n, "r": h.r, "2 log n + 3": h.required_gap, "smallest gap between components": h.min_gap})
    rows["Lemma 1 hypotheses"] = "hold" if h.holds else "fail: " + "; ".join(h.violations)
    if len(vecs) == 2:
        rows.update(
            {
                "|boltz(a) − boltz(b)| (float64)": res["gap"],
                "log10 |boltz(a) − boltz(b)| (exact, arb)": _or_skipped(res["log10_gap_exact"]),
                "exact check": res["exact_check"],
                "bound (log n)^2 e^{-2r}": res["bound"],
                "log10 bound": res["log10_bound"],
                "gap > bound (certified in arb)": _or_skipped(res["gap_exceeds_bound_certified"]),
                "Lemma 1 applies (hypotheses, different sets)": res["lemma1_applies"],
            }
        )
    console.print(key_value_table("Boltzmann operator (paper A, Lemma 1)", rows))


def _or_skipped(value: object) -> object:
    return "skipped (see exact check)" if value is None else value


def _exact_gap(vecs: list[list[float]], n: int, r: float, digits: int, show_progress: bool) -> dict:
    """|boltz(a) − boltz(b)| in arb at ``digits`` digits and whether it exceeds (log n)^2 e^{−2r} (certified)."""
    from flint import arb

    from uatlab.cli.progress import StageBars
    from uatlab.numerics.arb import arb_boltz, arb_log10, working_precision

    with working_precision(digits=digits), StageBars(show_progress, unit="exp") as bars:
        stage = f"exact check ({digits} digits)"
        step = bars.step(stage, total=2 * n)
        diff = abs(arb_boltz(vecs[0], progress=step) - arb_boltz(vecs[1], progress=step))
        bound = arb(n).log() ** 2 * (-2 * arb(r)).exp() if n > 1 else arb(0)
        return {
            "log10_gap_exact": arb_log10(diff) if diff > 0 else -math.inf,
            "gap_exceeds_bound_certified": bool(diff > bound),
        }
