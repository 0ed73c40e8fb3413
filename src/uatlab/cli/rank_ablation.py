"""``uatlab experiment rank-ablation``: paper A's one-layer model with attention rank 1, 2, 4 and full."""

from __future__ import annotations

from pathlib import Path

import typer

from uatlab.cli.app import console, print_json, rows_table
from uatlab.cli.experiment import exit_if_all_failed, experiment, out_lock, with_experiment_exit_codes
from uatlab.cli.options import SEED_MAX, finite, list_items, path_value, reject_overridden, thread_count
from uatlab.errors import InputError
from uatlab.io_safety import check_input_file, check_output_dir


def parse_ranks(text: str) -> tuple[int | None, ...]:
    """'1,2,4,full' → (1, 2, 4, None)."""

    def rank(part: str) -> int | None:
        if part.lower() == "full":
            return None
        try:
            r = int(part)
        except ValueError:
            raise InputError(f"--ranks: {part!r} is neither a positive integer nor 'full'") from None
        if r < 1:
            raise InputError(f"--ranks: {r} is not a positive integer")
        return r

    return tuple(list_items(text, "--ranks", rank))


@experiment.command("rank-ablation")
@with_experiment_exit_codes
def rank_ablation_command(
    ctx: typer.Context,
    data: Path = typer.Argument(..., help="Training data (CoNLL or JSONL), e.g. CoNLL-2003 train.txt."),
    out: Path = typer.Option(
        Path("uatlab-runs/rank-ablation"), "--out", parser=path_value, help="Output folder (resumable)."
    ),
    ranks: str = typer.Option("1,2,4,full", "--ranks", help="Attention ranks, comma-separated ('full' = head size d)."),
    epochs: int = typer.Option(800, "--epochs", min=1, max=10**6, help="Epoch cap per rank (stops at the ceiling)."),
    sentences: int | None = typer.Option(None, "--sentences", min=1, help="Use only the first N sentences."),
    dim: int = typer.Option(128, "--dim", min=1, max=65536, help="Token dimension d."),
    lr: float = typer.Option(
        3e-3, "--lr", help="Peak AdamW learning rate (warmup + cosine).", callback=finite(0, 1e3, lo_open=True)
    ),
    batch_size: int = typer.Option(32, "--batch-size", min=1, max=10**6, help="Sentences per batch."),
    seed: int = typer.Option(0, "--seed", min=0, max=SEED_MAX, help="Seed."),
    threads: int = typer.Option(1, "--threads", min=1, callback=thread_count(auto=False), help="torch threads."),
    quick: bool = typer.Option(
        False,
        "--quick",
        help="40 sentences (unless --sentences), d=32, batch 8, lr 1e-2, 80 epochs (a minute); it sets --dim, "
        "--batch-size, --lr and --epochs itself.",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """Paper A: rank 1 suffices. Epochs to 0.9872, 0.9995 and the ceiling for each attention rank."""
    from uatlab.experiments.rank_ablation import run_rank_ablation

    reject_overridden(ctx, quick, "dim", "epochs", "batch_size", "lr")
    rank_list = parse_ranks(ranks)
    check_input_file(data)
    check_output_dir(out, [data])
    exact = sentences is not None  # --quick's own 40 is an upper bound: a smaller file is used whole
    if quick:
        sentences, dim, epochs, batch_size, lr = sentences or 40, 32, 80, 8, 1e-2
    cfg = {"dim": dim, "ff_mult": 4, "lr": lr, "batch_size": batch_size, "embed_std": 0.1, "epochs": epochs}
    cfg |= {"seed": seed, "warmup_steps": 10 if quick else 100}
    with out_lock(out, "rank-ablation", ("rank_table.csv", "rank_ablation.png"), [data], folders=("runs",)):
        summary = run_rank_ablation(
            data, out, rank_list, sentences, cfg, threads=threads, progress=not json_out, exact_sentences=exact
        )
    if json_out:
        print_json(summary)
        exit_if_all_failed(summary["failed"], len(summary["table"]))
        return
    cols = list(summary["table"][0]) if summary["table"] else []
    table = rows_table(
        f"rank ablation on {summary['sentences']} sentences (ceiling {summary['baselines']['ceiling']:.5f})",
        cols,
        summary["table"],
    )
    console.print(table)
    console.print("files: " + ", ".join(f for f in summary["files"] if f))
    exit_if_all_failed(summary["failed"], len(summary["table"]))
