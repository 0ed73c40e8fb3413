"""Commands for paper A's one-layer theory: ``hardmax-counterexample`` and ``contextual-mapping literal``."""

from __future__ import annotations

import typer
from rich.table import Table

from uatlab.cli.app import app, command_group, console, err_console, format_value, key_value_table, print_json
from uatlab.cli.options import SEED_MAX, finite, list_items, refuse_given, with_exit_codes
from uatlab.errors import InputError
from uatlab.memory_guard import check_memory

contextual_app = command_group(
    "contextual-mapping", "Theorem 2 of paper A: rank-1 softmax attention as a contextual mapping, checked exactly."
)


def _parse_heads(text: str) -> list[int]:
    heads = list_items(text, "--heads", int, "positive integers")
    if any(h < 1 for h in heads):
        raise InputError(f"--heads must be a comma-separated list of positive integers, got {text!r}")
    return heads


@app.command("hardmax-counterexample")
@with_exit_codes()
def hardmax_counterexample(
    heads: str = typer.Option("1,2,4,8", "--heads", help="Comma-separated head counts to test."),
    trials: int = typer.Option(1000, "--trials", min=1, max=10**6, help="Random weight draws per head count."),
    seed: int = typer.Option(0, "--seed", min=0, max=SEED_MAX, help="Seed of the weight draws."),
    dim: int = typer.Option(4, "--dim", min=1, max=4096, help="Token dimension d."),
    head_dim: int = typer.Option(4, "--head-dim", min=1, max=4096, help="Head size s (weights are full rank)."),
    length: int = typer.Option(4, "--length", max=100_000, help="Sequence length n (≥ 4)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
) -> None:
    """Theorem 1: one input pair collides under every random hardmax layer; softmax separates it."""
    import torch

    from uatlab.constructions.paper_a.thm1_hardmax_counterexample import hardmax_collision_trials

    if length < 4:
        raise InputError(
            f"--length {length}: the ray construction needs a sequence length n ≥ 4 (3 or fewer distinct "
            "positive values are determined by their min, max and mean)"
        )
    torch.set_num_threads(1)  # shared machine; the batched trials are small
    head_list = _parse_heads(heads)
    if max(head_list) > 4096:
        raise InputError(f"--heads: at most 4096 heads, got {max(head_list)}")
    h = max(head_list)
    need = 8 * (6 * h * length * length + 4 * h * head_dim * dim + 4 * length * dim)  # one trial's tensors
    check_memory(need, "hardmax-counterexample", f"attention of {h} heads over n={length} tokens, d={dim}")
    if not json_out:
        err_console.print(f"drawing {trials} random layers for each of {head_list} heads …", highlight=False)
    res = hardmax_collision_trials(head_list, trials=trials, seed=seed, d=dim, head_dim=head_dim, n=length)
    if json_out:
        print_json(res)
        return
    t1, t2 = res["tokens"]
    console.print(f"inputs on the ray t·e: X1 = {format_value(t1)}, X2 = {format_value(t2)} (d = {dim})")
    table = Table(title=f"hardmax vs softmax, {trials} random layers per head count", show_header=True)
    for col in (
        "heads",
        "hardmax collisions",
        "max collision dist.",
        "softmax separated",
        "softmax δ (min)",
        "softmax δ (median)",
    ):
        table.add_column(col, justify="right")
    for h in res["heads"]:
        k = str(h)
        table.add_row(
            k,
            f"{res['collisions'][k]}/{trials}",
            format_value(res["max_collision_distance"][k]),
            f"{res['softmax_separated'][k]}/{trials}",
            format_value(res["softmax_delta"][k]),
            format_value(res["softmax_delta_median"][k]),
        )
    console.print(table)
    verdict = "every hardmax layer collides" if res["all_collide"] else "NOT every hardmax layer collided"
    console.print(
        f"{verdict}; softmax separates {'all' if res['softmax_separates'] else 'not all'} ({res['seconds']} s)"
    )
    if not res["softmax_separates"]:
        unseparated = sum(trials - res["softmax_separated"][str(h)] for h in res["heads"])
        err_console.print(
            f"note: for {unseparated} layers softmax's outputs on X1 and X2 are identical in float64 (δ = 0): at "
            f"n = {length} their difference is below float64's resolution (random weights separate the pair in "
            "exact arithmetic with probability 1); a shorter --length keeps it visible",
            highlight=False,
            soft_wrap=True,
        )


@contextual_app.command("literal")
@with_exit_codes()
def contextual_mapping_literal(
    ctx: typer.Context,
    vocab_size: int = typer.Option(4, "--vocab-size", min=1, help="|V|: number of random vocabulary tokens."),
    dim: int = typer.Option(2, "--dim", min=1, help="Token dimension d."),
    length: int = typer.Option(3, "--length", min=2, help="Sequence length n (2 ≤ n ≤ |V|)."),
    seed: int = typer.Option(
        0, "--seed", min=0, max=SEED_MAX, help="Seed of the vocabulary and of the projection direction."
    ),
    eps: float = typer.Option(
        0.5, "--eps", help="Separation ε between distinct tokens.", callback=finite(0, lo_open=True)
    ),
    r_min: float = typer.Option(1.0, "--r-min", help="Token norms are > r_min.", callback=finite(0, lo_open=True)),
    r_max: float = typer.Option(2.0, "--r-max", help="Token norms are ≤ r_max.", callback=finite(0, lo_open=True)),
    max_digits: int = typer.Option(100_000, "--max-digits", help="Cap on the decimal digits of the exact check."),
    sequences: str = typer.Option("all", "--sequences", help="'all' ordered sequences or one per 'sets'."),
    causal: bool = typer.Option(False, "--causal", help="Causal mask: every prefix of every ordered sequence."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
) -> None:
    """Theorem 2 literally: build the paper's rank-1 weights, certify them exactly, compare float64."""
    from uatlab.experiments.thm2_precision import theorem2_literal

    if sequences not in ("all", "sets"):
        raise InputError(f"--sequences must be 'all' or 'sets', got {sequences!r}")
    if causal:  # the causal certificate covers every prefix of every ordered sequence
        refuse_given(ctx, "--causal (every prefix of every ordered sequence is checked)", ("sequences",))
    if max_digits < 16:  # below float64's own precision the exact check cannot say more than float64
        raise InputError(f"--max-digits {max_digits} is below the minimum of 16 decimal digits")
    if length > vocab_size:
        raise InputError(
            f"--length {length} exceeds --vocab-size {vocab_size}: a sequence of {length} distinct tokens needs at "
            f"least {length} vocabulary tokens"
        )
    if not r_min < r_max:
        raise InputError(f"--r-min must be smaller than --r-max, got --r-min {r_min:g}, --r-max {r_max:g}")
    if causal:
        _literal_causal(vocab_size, dim, length, seed, eps, r_min, r_max, max_digits, json_out)
        return

    def progress(digits: int, passes: bool) -> None:
        err_console.print(f"  {digits:>7} digits: {'passes' if passes else 'not yet'}", highlight=False)

    err_console.print("certifying in arb ball arithmetic (doubling, then bisection on the precision) …")
    res = theorem2_literal(
        vocab_size=vocab_size,
        dim=dim,
        n=length,
        seed=seed,
        eps=eps,
        r_min=r_min,
        r_max=r_max,
        max_digits=max_digits,
        sequences=sequences,
        progress=progress,
    )
    if json_out:
        print_json(res)
        return
    rows = {
        "passes": res["passes"],
        "|V|, d, n": f"{res['vocab_size']}, {res['dim']}, {res['length']}",
        "ε, r_min, r_max": f"{eps}, {r_min}, {r_max}",
        "sequences checked": f"{res['n_sequences']} ({sequences})",
        "c (paper) / c used": f"{res['c']:.6g} / {res['c_used']:.10g}",
        "max logit": res["max_logit"],
        f"δ achieved ({res['delta_kind']})": res["delta_achieved"],
        "δ achieved, certified lower bound": res["delta_achieved_lower"],
        "δ of the theorem": res["delta_theorem"],
        "log10(δ achieved / δ theorem)": round(res["achieved_over_theorem_log10"], 2),
        "different tokens: certified distance ≥": res["different_token_lower"],
        "max ‖F(X)_k‖  (r = r_max + ε/4)": f"{res['max_norm']:.6g} ≤ {res['r']}",
        "decimal digits needed": res["digits"] if res["digits"] is not None else "— (certificate fails)",
        "context ids (exact)": res["exact_distinct_ids"],
        "context ids (float64)": res["float64_distinct_ids"],
        "ids collapsed in float64": res["float64_collapsed_ids"],
        "float64 δ": res["float64_delta"],
        "seconds": res["seconds"],
    }
    console.print(key_value_table("Theorem 2, literal construction, exact certificate", rows))
    if res["failures"]:
        console.print("[red]failures:[/] " + "; ".join(res["failures"]))


def _literal_causal(
    vocab_size: int,
    dim: int,
    length: int,
    seed: int,
    eps: float,
    r_min: float,
    r_max: float,
    max_digits: int,
    json_out: bool,
) -> None:
    from uatlab.experiments.thm2_precision import theorem2_causal

    err_console.print("certifying every prefix in arb ball arithmetic (doubling the precision) …")
    res = theorem2_causal(vocab_size, dim, length, seed, eps, r_min, r_max, max_digits)
    if json_out:
        print_json(res)
        return
    rows = {
        "passes (distinct contexts certified apart, max ‖F‖ ≤ r)": res["passes"],
        "|V|, d, n": f"{res['vocab_size']}, {res['dim']}, {res['length']}",
        "contexts (prefix set, last token)": res["contexts"],
        "pairs certified > 0": f"{res['pairs'] - res['uncertified_pairs']} of {res['pairs']}",
        "δ causal (smallest certified separation)": res["delta_causal"],
        "δ of the theorem at n (equal-size sets)": res["delta_theorem_n"],
        "closest contexts": res["closest_contexts"],
        "decimal digits used": res["digits"],
        "context ids (float64)": res["float64_distinct_ids"],
        "ids collapsed in float64": res["float64_collapsed_ids"],
        "seconds": res["seconds"],
    }
    console.print(key_value_table("Theorem 2 with a causal mask, exact certificate", rows))
