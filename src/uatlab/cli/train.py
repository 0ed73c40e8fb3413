"""``uatlab train`` and ``uatlab data-report``; the training experiments live in ``uatlab experiment``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from uatlab.cli.app import app, console, err_console, key_value_table, print_json, rows_table, say_on_interrupt
from uatlab.cli.options import (
    AUTO_FORMAT_HELP,
    SEED_MAX,
    check_workers,
    finite,
    given_options,
    int_list,
    int_range,
    list_items,
    long_outlier_hint,
    one_of,
    path_value,
    real_range,
    refuse_given,
    reject_overridden,
    say_reading,
    thread_count,
    with_exit_codes,
)
from uatlab.errors import InputError
from uatlab.io_safety import OutputLock, check_input_file, check_output_dir, file_identity
from uatlab.memory_guard import MAX_MEMORY_HELP, set_memory_limit
from uatlab.training.limits import CHOICES, RANGES

if TYPE_CHECKING:
    from uatlab.data.dataset import SequenceDataset


def load_data(path: Path, fmt: str = "auto", scheme: str = "keep") -> tuple[SequenceDataset, str]:
    """Read CoNLL/JSONL, and say how (``'conll'`` or ``'jsonl'``: `uatlab.data.jsonl.sequence_format`, ``auto``
    refuses a file of prose, `uatlab.data.jsonl.words_as_labels`; the caller then calls `say_reading`);
    ``scheme='iob2'`` converts IOB1 labels to IOB2. Warns about a sentence far longer than the rest of the file
    (the usual sign of lost blank lines between sentences)."""
    from uatlab.data import read_sequences
    from uatlab.data.conll import iob1_to_iob2
    from uatlab.data.dataset import SequenceDataset
    from uatlab.data.jsonl import sequence_format

    check_input_file(path)
    reading = sequence_format(path, fmt)
    data = read_sequences(path, reading, chosen=fmt)
    warn_long_outlier(data)
    if scheme == "iob2":
        from uatlab.data.conll import detect_scheme

        if detect_scheme(data.labels) == "none":  # nothing to convert: said, not done silently
            err_console.print(
                f"note: --scheme iob2: {path} has no B- or I- tags (scheme none); its labels are kept as they are",
                highlight=False,
                soft_wrap=True,
            )
        data = SequenceDataset(
            data.tokens,
            [iob1_to_iob2(y) for y in data.labels],
            source=data.source,
            lines=data.lines,
            token_lines=data.token_lines,
        )
    return data, reading


def warn_long_outlier(data: SequenceDataset, factor: float = 20.0, minimum: int = 1000) -> None:
    """Warn (stderr) when the longest sentence has ≥ ``minimum`` tokens and ≥ ``factor`` × the 99th percentile."""
    import numpy as np

    lengths = np.array([len(t) for t in data.tokens])
    if len(lengths) == 0:
        return
    i = int(lengths.argmax())
    others = np.delete(lengths, i)
    typical = float(np.percentile(others, 99)) if len(others) else 0.0
    if lengths[i] >= minimum and lengths[i] >= factor * max(typical, 1.0):
        where = f"{data.source}:{data.lines[i]}" if data.lines else data.source
        what = f"far longer than the rest (99% have ≤ {typical:.0f})" if len(others) else "the whole file"
        err_console.print(
            f"warning: {where}: a sentence of {lengths[i]} tokens, {what}; {long_outlier_hint(data.token_lines)}",
            highlight=False,
            soft_wrap=True,
        )


def _parse_rank(rank: str) -> int | None:
    if rank.lower() in ("full", "none"):
        return None
    try:
        value = int(rank)
    except ValueError:
        raise typer.BadParameter(
            f"expected a positive integer or 'full', got {rank!r}", param_hint="'--rank'"
        ) from None
    if value < 1:
        raise typer.BadParameter(f"must be ≥ 1 or 'full', got {value}", param_hint="'--rank'")
    return value


def _rank_option(value: str) -> str:
    _parse_rank(value)
    return value


# where an experiment's trials run (depth ablation, capacity sweep): one declaration of the three options
TRIAL_EXECUTOR_OPTION = typer.Option(
    "local", "--executor", help="'local' (process pool) or 'ray'.", callback=one_of("local", "ray")
)
TRIAL_WORKERS_OPTION = typer.Option(
    1,
    "--workers",
    min=1,
    max=1024,
    help="Parallel trials (local executor; workers × --threads at most 4 per available core).",
)
TRIAL_THREADS_OPTION = typer.Option(
    1, "--threads", min=1, callback=thread_count(auto=False), help="torch threads per trial."
)


def refuse_init_conflicts(ctx: typer.Context, init: Path, asked: dict[str, object]) -> tuple[int, int]:
    """With ``--init`` the model is the init model: refuse the given model options (``asked``: parameter name →
    parsed value) that would ask for another one, naming each option and the init model's value (an option
    given with the init model's own value is accepted). Returns the init model's (layers, heads)."""
    from uatlab.training.trainer import _load_init

    mc = _load_init(str(init))[0].config
    ff_width = list(mc.ff_width) if isinstance(mc.ff_width, tuple) else mc.ff_width
    have: dict[str, tuple[object, str]] = {  # parameter → (the init model's value, how to say it)
        "dim": (mc.d_model, f"d = {mc.d_model}"),
        "layers": (mc.n_layers, f"{mc.n_layers} layer{'s' if mc.n_layers != 1 else ''}"),
        "rank": (mc.rank, f"rank {mc.rank if mc.rank is not None else 'full'}"),
        "heads": (mc.n_heads, f"{mc.n_heads} head{'s' if mc.n_heads != 1 else ''}"),
        "head_dim": (mc.head_dim, f"head size {mc.head_dim}"),
        "ff_width": (ff_width, f"feed-forward width {ff_width}"),
        "ff_mult": (
            ff_width // mc.d_model if isinstance(ff_width, int) and ff_width % mc.d_model == 0 else None,
            f"feed-forward width {ff_width} at d = {mc.d_model}",
        ),
        "dtype": (mc.dtype, f"{mc.dtype} weights"),
    }
    conflicts = []
    for name in have:
        flag = given_options(ctx, name)
        if flag and asked[name] != have[name][0]:
            shown = "full" if name == "rank" and asked[name] is None else asked[name]
            conflicts.append((f"{flag[0]} {shown}", have[name][1]))
    if given_options(ctx, "embed_std"):
        conflicts.append(("--embed-std", "its own token embeddings"))
    if conflicts:
        raise InputError(
            f"{', '.join(c for c, _ in conflicts)} {'has' if len(conflicts) == 1 else 'have'} no effect with --init: "
            f"the init model {init} has {', '.join(h for _, h in conflicts)} (leave "
            f"{'it' if len(conflicts) == 1 else 'them'} out)"
        )
    return mc.n_layers, mc.n_heads


@app.command("train")
def train_command(
    ctx: typer.Context,
    data: Path = typer.Argument(..., help="Training data: CoNLL columns (word first, tag last) or JSONL."),
    valid: Path | None = typer.Option(
        None, "--valid", parser=path_value, help="Held-out data evaluated after every epoch."
    ),
    out: Path = typer.Option(
        Path("uatlab-runs/train"), "--out", parser=path_value, help="Folder for checkpoint, metrics, model."
    ),
    layers: int = typer.Option(1, "--layers", **int_range("layers"), help="Number of blocks L."),
    rank: str = typer.Option(
        "1", "--rank", help="Rank of W_Q, W_K, W_V, W_O ('full' for none).", callback=_rank_option
    ),
    dim: int = typer.Option(128, "--dim", **int_range("dim"), help="Token dimension d."),
    heads: int = typer.Option(1, "--heads", **int_range("heads"), help="Attention heads per layer."),
    head_dim: int = typer.Option(1, "--head-dim", **int_range("head_dim"), help="Head size s."),
    ff_width: int | None = typer.Option(
        None, "--ff-width", **int_range("ff_width"), help="Feed-forward width (default: ff-mult × dim)."
    ),
    ff_mult: int = typer.Option(
        4, "--ff-mult", **int_range("ff_mult"), help="Feed-forward width as a multiple of dim."
    ),
    embed_std: float = typer.Option(
        0.1, "--embed-std", help="Std of the initial token embeddings (0 = N(0,1)).", callback=real_range("embed_std")
    ),
    epochs: int = typer.Option(20, "--epochs", **int_range("epochs"), help="Epochs to train."),
    batch_size: int = typer.Option(
        32, "--batch-size", **int_range("batch_size"), help="Sentences per batch (length-bucketed)."
    ),
    optimizer: str = typer.Option(
        "adamw", "--optimizer", help="'adamw' or 'sgd'.", callback=one_of(*CHOICES["optimizer"])
    ),
    lr: float = typer.Option(3e-3, "--lr", help="Peak learning rate.", callback=real_range("lr")),
    schedule: str = typer.Option(
        "cosine", "--schedule", help="'cosine' (warmup + cosine) or 'constant'.", callback=one_of(*CHOICES["schedule"])
    ),
    warmup_steps: int = typer.Option(200, "--warmup-steps", **int_range("warmup_steps"), help="Linear warmup steps."),
    weight_decay: float = typer.Option(
        0.0, "--weight-decay", help="Weight decay (0 for memorization).", callback=real_range("weight_decay")
    ),
    clip: float = typer.Option(1.0, "--clip", help="Gradient-norm clipping (0 = off).", callback=real_range("clip")),
    seed: int = typer.Option(0, "--seed", **int_range("seed"), help="Seed of initialisation and batch order."),
    focus: float = typer.Option(
        0.0,
        "--focus",
        help="Weight of the margin loss on the batch's hard tokens (margin < --focus-margin), averaged over "
        "those tokens only (0 = off).",
        callback=real_range("focus"),
    ),
    focus_margin: float = typer.Option(
        1.0,
        "--focus-margin",
        help="Logit margin a token needs to stop being hard.",
        callback=real_range("focus_margin"),
    ),
    replay: int = typer.Option(
        0,
        "--replay",
        **int_range("replay"),
        help="Append this many of the sentences the last full pass got wrong to every batch (0 = off).",
    ),
    dtype: str = typer.Option(
        "float32", "--dtype", help="'float32' or 'float64' weights.", callback=one_of(*CHOICES["dtype"])
    ),
    stop_at_ceiling: bool = typer.Option(
        False, "--stop-at-ceiling", help="End after the first epoch with no errors beyond the inherent conflicts."
    ),
    init: Path | None = typer.Option(
        None,
        "--init",
        parser=path_value,
        help="Start from a uatlab model file (e.g. uatlab compile); the model options then come from it "
        "(leave them out, or give the model's values).",
    ),
    resume: bool = typer.Option(False, "--resume", help="Continue from OUT/checkpoint.pt."),
    max_minutes: float | None = typer.Option(
        None,
        "--max-minutes",
        help="Checkpoint and stop after this long (start-up included; at least one optimizer step per run).",
        callback=real_range("max_minutes"),
    ),
    threads: int = typer.Option(
        1, "--threads", min=1, callback=thread_count(auto=False), help="torch CPU threads (results depend on it)."
    ),
    scheme: str = typer.Option(
        "keep", "--scheme", help="'keep' labels or convert IOB1 to 'iob2'.", callback=one_of("keep", "iob2")
    ),
    fmt: str = typer.Option(
        "auto",
        "--format",
        help="'auto', 'conll' or 'jsonl'. " + AUTO_FORMAT_HELP,
        callback=one_of("auto", "conll", "jsonl"),
    ),
    max_memory: str | None = typer.Option(None, "--max-memory", help=MAX_MEMORY_HELP),
    no_f1: bool = typer.Option(False, "--no-f1", help="Skip the per-epoch entity F1 (faster)."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
) -> None:
    """Train a rank-r Transformer to memorize token labels; checkpoints, resumes, logs per-epoch metrics.

    \b
    Exit codes:
      0    the run completed (all --epochs, or the ceiling with --stop-at-ceiling)
      2    a user error, one 'error:' line: bad data or option, a checkpoint for
           another run or other data, a non-finite loss (last checkpoint kept)
      3    --max-minutes ran out: checkpoint saved, no model.safetensors yet;
           rerun with --resume
      130  interrupted (Ctrl-C, SIGTERM): checkpoint saved, rerun with --resume (its
           last line names the checkpoint, or says that none was written yet, or
           that the run had ended)
    """
    import torch

    from uatlab.training.checkpoint import CheckpointError
    from uatlab.training.trainer import (
        DEFAULT_TARGETS,
        TrainConfig,
        TrainingError,
        train,
        train_output_folder,
    )

    if ff_width is not None:  # the width is given: the multiple of dim would be recorded but never used
        refuse_given(ctx, "--ff-width (it sets the feed-forward width itself; leave one of them out)", ("ff_mult",))
    try:  # every field against its range, and rank against dim and head size, before any file is read
        cfg = TrainConfig(
            layers=layers,
            rank=_parse_rank(rank),
            dim=dim,
            heads=heads,
            head_dim=head_dim,
            ff_width=ff_width,
            ff_mult=ff_mult,
            embed_std=embed_std,
            epochs=epochs,
            batch_size=batch_size,
            optimizer=optimizer,
            lr=lr,
            schedule=schedule,
            warmup_steps=warmup_steps,
            weight_decay=weight_decay,
            clip=clip,
            seed=seed,
            init=str(init) if init is not None else None,
            focus=focus,
            focus_margin=focus_margin,
            replay=replay,
            dtype=dtype,
        )
    except InputError as e:  # "TrainConfig: head_dim must ..." → "--head-dim must ..."
        message = str(e).removeprefix("TrainConfig: ")
        field, _, rest = message.partition(" ")
        if field in RANGES or field in CHOICES or field == "init":
            message = f"--{field.replace('_', '-')} {rest}"
        raise InputError(message) from None
    if focus == 0 and given_options(ctx, "focus_margin"):  # the margin only shapes the focus loss
        raise InputError(
            "--focus-margin has no effect without --focus (the margin loss is off at --focus 0); give --focus > 0 "
            "or leave --focus-margin out"
        )
    set_memory_limit(max_memory)
    check_input_file(data)
    for extra, name in ((valid, "--valid file"), (init, "--init model file")):
        if extra is not None:
            check_input_file(extra, name)
    check_output_dir(out, [data, valid, init])
    train_output_folder(out, (data, valid, init)).check()  # a user's file of the run's names, or the init model
    if init is not None:  # the model's shape comes from the init model
        asked = {"dim": dim, "layers": layers, "rank": _parse_rank(rank), "heads": heads, "head_dim": head_dim}
        asked |= {"ff_width": ff_width, "ff_mult": ff_mult, "dtype": dtype}
        layers, heads = refuse_init_conflicts(ctx, init, asked)
    torch.set_num_threads(threads)
    train_data, reading = load_data(data, fmt, scheme)
    valid_data, valid_reading = load_data(valid, fmt, scheme) if valid is not None else (None, "")
    say_reading(data, fmt, reading)  # once both files are read: a refused one gives the error line alone
    if valid is not None:
        say_reading(valid, fmt, valid_reading)
    hashes = {"train": file_identity(data)["sha256"], "valid": file_identity(valid)["sha256"] if valid else None}
    try:
        with OutputLock(out):
            result = train(
                train_data,
                cfg,
                out,
                valid_data=valid_data,
                resume=resume,
                max_minutes=max_minutes,
                targets=DEFAULT_TARGETS,
                progress=True,
                with_f1=not no_f1,
                log=lambda m: err_console.print(in_flags(m), highlight=False, soft_wrap=True),
                stop_at_ceiling=stop_at_ceiling,
                data_sha256=hashes,
                label_scheme=scheme,
            )
    except (CheckpointError, TrainingError) as e:
        raise type(e)(in_flags(str(e))) from None
    except KeyboardInterrupt:  # before the training loop (which checkpoints and returns): say what there is
        say_on_interrupt(_interrupted_before_training(out))
        raise
    if result.status in ("completed", "ceiling"):  # its files are written: an interrupt from here on says so
        say_on_interrupt(RUN_ENDED)
    _print_training(data, result, valid_data is not None, json_out, reading)


#: the last line of a run interrupted once its files were written (while it prints its summary, or just after)
RUN_ENDED = "interrupted after the run had ended: its files are complete"


def _interrupted_before_training(out: Path) -> str:
    """The last line of a run interrupted before its training loop checkpointed: whether ``out`` holds a
    checkpoint to resume (an earlier run's). (A folder the run created and left empty is gone: `OutputFolder`.)"""
    if (out / "checkpoint.pt").is_file():
        return f"interrupted: {out}/checkpoint.pt (of an earlier run or epoch) is kept; rerun with --resume"
    return "interrupted before the first checkpoint: nothing was saved to resume"


def in_flags(message: str) -> str:
    """A trainer message with its advice (the trainer's ``ADVICE_*``, in the library's words) in ``uatlab train``'s
    options."""
    import re

    from uatlab.training.trainer import ADVICE_MOVE, ADVICE_NEW_RUN, ADVICE_NON_FINITE, ADVICE_RESUME

    for words, flags in (
        (ADVICE_RESUME, "pass --resume to continue it, or choose another --out"),
        (ADVICE_MOVE, "move it away, or choose another --out"),
        (ADVICE_NEW_RUN, "use another --out or drop --resume"),
        (ADVICE_NON_FINITE, "Lower --lr or keep --clip on."),
    ):
        message = message.replace(words, flags)
    return re.sub(r"call torch\.set_num_threads\((\d+)\)", r"pass --threads \1", message)


def _print_training(data: Path, result, has_valid: bool, json_out: bool, reading: str) -> None:
    """The run's summary (JSON or tables, with the ``format`` DATA was read in); exit 3 or 130 when it stopped
    before the end (checkpoint saved)."""
    summary = result.summary() | {"format": reading}
    if json_out:
        print_json(summary)
    else:
        rows = {k: v for k, v in summary.items() if k not in ("history", "config", "model_config", "files", "data")}
        rows["ceiling_accuracy"] = summary["data"]["ceiling_accuracy"]
        console.print(key_value_table(f"uatlab train {data}", rows))
        cols = ["epoch", "train_loss", "train_accuracy", "train_errors", "lr", "seconds_train"]
        if has_valid:
            cols.append("valid_accuracy")
        table = rows_table("per-epoch full-pass metrics", cols, summary["history"][-15:], header_style="bold")
        console.print(table)
        console.print(f"files: {', '.join(f'{k}={v}' for k, v in summary['files'].items())}")
    ckpt = summary["files"].get("checkpoint", "the checkpoint")
    if result.status == "interrupted":  # the process's last line (after the summary): what is kept
        say_on_interrupt(f"interrupted: {ckpt} is saved; continue with the same command plus --resume")
        raise typer.Exit(code=130)
    if result.status not in ("completed", "ceiling"):
        err_console.print(f"stopped ({result.status}): {ckpt} is saved; continue with the same command plus --resume")
        raise typer.Exit(code=3)
    # the run has ended and printed its files: an interrupt before the process exits says so
    say_on_interrupt(RUN_ENDED)


@app.command("data-report")
@with_exit_codes()
def data_report_command(
    data: Path = typer.Argument(..., help="CoNLL or JSONL file."),
    fmt: str = typer.Option(
        "auto",
        "--format",
        help="'auto', 'conll' or 'jsonl'. " + AUTO_FORMAT_HELP,
        callback=one_of("auto", "conll", "jsonl"),
    ),
    scheme: str = typer.Option(
        "keep", "--scheme", help="'keep' labels or convert IOB1 to 'iob2'.", callback=one_of("keep", "iob2")
    ),
    conflicts: int = typer.Option(10, "--conflicts", min=0, max=10**6, help="How many inherent conflicts to list."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
) -> None:
    """Duplicates, inherent conflicts, accuracy ceiling, baselines and bit budgets of a data file."""
    from uatlab.data.report import data_report

    dataset, reading = load_data(data, fmt, scheme)
    say_reading(data, fmt, reading)
    rep = data_report(dataset, max_conflicts=conflicts)
    rep["format"] = reading  # how the file was read, as compile, certify and train give it
    if json_out:
        print_json(rep)
        return
    rows = {k: v for k, v in rep.items() if k not in ("conflicts", "labels")}
    console.print(key_value_table(f"uatlab data-report {data}", rows))
    labels = Table(title="labels", header_style="bold")
    labels.add_column("label")
    labels.add_column("count")
    for k, v in rep["labels"].items():
        labels.add_row(k, str(v))
    console.print(labels)
    if rep["conflicts"]:
        shown, total = len(rep["conflicts"]), rep["conflict_inputs"]
        more = f"; {shown} of {total} shown, --conflicts N shows more" if shown < total else ""
        ct = Table(
            title=f"inherent conflicts (same sentence, same position, different labels{more})", header_style="bold"
        )
        for c in ("where", "position", "token", "label counts", "majority"):
            ct.add_column(c, overflow="fold")
        for c in rep["conflicts"]:
            ct.add_row(", ".join(c["where"]), str(c["position"]), c["token"], str(c["label_counts"]), c["majority"])
        console.print(ct)


# ---------------------------------------------------------------------------------------------- experiments
from uatlab.cli.experiment import exit_if_all_failed, experiment, out_lock, with_experiment_exit_codes  # noqa: E402


def _ints(text: str, option: str) -> tuple[int, ...]:
    if not text:  # an option left empty: no values
        return ()
    return tuple(list_items(text, option, int, "integers"))


@experiment.command("depth-ablation")
@with_experiment_exit_codes
def depth_ablation_command(
    ctx: typer.Context,
    data: Path = typer.Argument(..., help="Training data (CoNLL or JSONL), e.g. CoNLL-2003 train.txt."),
    out: Path = typer.Option(
        Path("uatlab-runs/depth-ablation"), "--out", parser=path_value, help="Output folder (resumable)."
    ),
    layers: str = typer.Option(
        "1,3,6", "--layers", help="Depths to train, comma-separated.", callback=int_list(1, 256, "depth")
    ),
    epochs: int = typer.Option(20, "--epochs", **int_range("epochs"), help="Epochs per depth."),
    sentences: int | None = typer.Option(None, "--sentences", min=1, help="Use only the first N sentences."),
    dim: int = typer.Option(128, "--dim", **int_range("dim"), help="Token dimension d."),
    ff_mult: int = typer.Option(4, "--ff-mult", **int_range("ff_mult"), help="Feed-forward width as a multiple of d."),
    lr: float = typer.Option(
        3e-3, "--lr", help="Peak AdamW learning rate (warmup + cosine).", callback=real_range("lr")
    ),
    batch_size: int = typer.Option(32, "--batch-size", **int_range("batch_size"), help="Sentences per batch."),
    embed_std: float = typer.Option(
        0.1, "--embed-std", help="Std of the initial token embeddings (0 = N(0,1)).", callback=real_range("embed_std")
    ),
    seed: int = typer.Option(0, "--seed", **int_range("seed"), help="Seed."),
    quick: bool = typer.Option(
        False,
        "--quick",
        help="200 sentences (unless --sentences), d=64, batch 8, lr 5e-3, 20 epochs (minutes); it sets --dim, "
        "--batch-size, --lr and --epochs itself.",
    ),
    executor: str = TRIAL_EXECUTOR_OPTION,
    workers: int = TRIAL_WORKERS_OPTION,
    threads: int = TRIAL_THREADS_OPTION,
    report_only: bool = typer.Option(
        False, "--report-only", help="Train nothing: figure and table from finished and partial runs."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
) -> None:
    """Paper A's depth ablation: 1/3/6-layer rank-1 models, accuracy vs epoch, epochs to 0.9872/0.999/ceiling."""
    from uatlab.experiments.depth_ablation import run_depth_ablation

    reject_overridden(ctx, quick, "dim", "epochs", "batch_size", "lr")
    if report_only:
        refuse_given(ctx, "--report-only (nothing is trained)", ("executor", "workers", "threads"))
    check_workers(executor, workers, threads)
    check_input_file(data)
    check_output_dir(out, [data])
    exact = sentences is not None  # --quick's own 200 is an upper bound: a smaller file is used whole
    if quick:
        sentences, dim, epochs, batch_size, lr = sentences or 200, 64, 20, 8, 5e-3
    cfg = {"dim": dim, "ff_mult": ff_mult, "lr": lr, "batch_size": batch_size, "embed_std": embed_std}
    cfg |= {"epochs": epochs, "seed": seed, "warmup_steps": 50 if quick else 200}
    with out_lock(
        out,
        "depth-ablation",
        ("depth_ablation.csv", "depth_table.csv", "depth_ablation.png", "depth_ablation.svg"),
        [data],
        folders=("runs",),
    ):
        summary = run_depth_ablation(
            data,
            out,
            _ints(layers, "--layers"),
            sentences,
            cfg,
            executor=executor,
            workers=workers,
            threads=threads,
            report_only=report_only,
            exact_sentences=exact,
        )
    if json_out:
        print_json(summary)
        exit_if_all_failed(summary["failed"], len(summary["table"]))
        return
    console.print(key_value_table("baselines and ceiling (train)", {k: v for k, v in summary["baselines"].items()}))
    cols = list(summary["table"][0]) if summary["table"] else []
    table = rows_table(
        f"depth ablation on {summary['sentences']} sentences", cols, summary["table"], header_style="bold"
    )
    console.print(table)
    if summary["failed"]:
        err_console.print(f"failed trials: {summary['failed']}")
    console.print("files: " + ", ".join(summary["files"]))
    exit_if_all_failed(summary["failed"], len(summary["table"]))


def _given(ctx: typer.Context, name: str) -> bool:
    """True when option ``name`` was given (a value equal to the default counts too)."""
    return bool(given_options(ctx, name))


# options (parameter names) of one capacity task that the other task does not read
_TOKEN_ONLY = (
    "kind",
    "data",
    "fmt",
    "axis",
    "fixed",
    "length",
    "vocab",
    "labels",
    "batch_size",
    "executor",
    "workers",
    "threads",
)
_NEXT_TOKEN_ONLY = ("blocks", "rank")


@experiment.command("capacity")
@with_experiment_exit_codes
def capacity_command(
    ctx: typer.Context,
    kind: str = typer.Option(
        "synthetic",
        "--kind",
        help="'synthetic' (random labels) or 'conll' (subsets of --data).",
        callback=one_of("synthetic", "conll"),
    ),
    data: Path | None = typer.Option(None, "--data", parser=path_value, help="CoNLL/JSONL file for --kind conll."),
    fmt: str = typer.Option(
        "auto",
        "--format",
        help="How --data is read: 'auto', 'conll' or 'jsonl'. " + AUTO_FORMAT_HELP,
        callback=one_of("auto", "conll", "jsonl"),
    ),
    out: Path = typer.Option(
        Path("uatlab-runs/capacity"), "--out", parser=path_value, help="Output folder (finished trials reused)."
    ),
    ns: str = typer.Option(
        "16,32,64,128,256",
        "--ns",
        help="Data sizes N (sequences), comma-separated.",
        callback=int_list(1, 10**7, "size"),
    ),
    axis: str = typer.Option(
        "dim", "--axis", help="Sweep 'dim' (FF width = fixed×d) or 'ff' (d = fixed).", callback=one_of("dim", "ff")
    ),
    grid: str = typer.Option(
        "",
        "--grid",
        help="Sizes to search (default: a geometric grid); next-token: the first and the largest FF width (one or two "
        "values, increasing; the search doubles from the first).",
        callback=int_list(1, 65536, "size"),
    ),
    fixed: int = typer.Option(4, "--fixed", min=1, max=65536, help="FF multiple (axis dim) or d (axis ff)."),
    length: int = typer.Option(8, "--length", min=1, max=10**5, help="Synthetic sequence length n."),
    vocab: int = typer.Option(16, "--vocab", min=1, max=10**7, help="Synthetic vocabulary size."),
    labels: int = typer.Option(2, "--labels", min=1, max=10**6, help="Synthetic label count."),
    max_steps: int = typer.Option(3000, "--max-steps", min=1, max=10**9, help="Optimizer steps allowed per trial."),
    lr: float = typer.Option(
        1e-2,
        "--lr",
        help="Peak AdamW learning rate [default: token 0.01 (--quick 0.02); next-token 0.005 (--quick 0.01)].",
        show_default=False,
        callback=finite(0, 1e3, lo_open=True),
    ),
    batch_size: int = typer.Option(32, "--batch-size", min=1, max=10**6, help="Sequences per batch."),
    seed: int = typer.Option(0, "--seed", min=0, max=SEED_MAX, help="Seed of data subsets and models."),
    quick: bool = typer.Option(
        False,
        "--quick",
        help="Synthetic, N = 8..64, d ≤ 32, 800 steps, lr 2e-2 (a few minutes); token task: it sets --kind, --ns, "
        "--max-steps and --lr itself.",
    ),
    executor: str = TRIAL_EXECUTOR_OPTION,
    workers: int = TRIAL_WORKERS_OPTION,
    threads: int = TRIAL_THREADS_OPTION,
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
    task: str = typer.Option(
        "token",
        "--task",
        help="'token', or 'next-token': random next-token labels (n = 32, C = 10), smallest "
        "trained 1-layer model at 100 % vs the compiled memorizer (Kajitsuka & Sato 2025); --ns default "
        "100,1000,10000; --quick: the paper's blocks experiment scaled down.",
    ),
    blocks: bool = typer.Option(
        False, "--blocks", help="next-token: also the paper's blocks 1, 10, …, 40 at N = 3,000 (n = 32)."
    ),
    rank: str = typer.Option(
        "full",
        "--rank",
        help="next-token: attention rank of the trained models, 1 or full.",
        callback=one_of("1", "full"),
    ),
) -> None:
    """Smallest 1-layer rank-1 model reaching the ceiling vs N: log-log slope with CI, bits per parameter."""
    if task not in ("token", "next-token"):
        raise InputError(f"--task {task!r}: use 'token' or 'next-token'")
    check_workers(executor, workers, threads)
    refuse_given(ctx, f"--task {task}", _TOKEN_ONLY if task == "next-token" else _NEXT_TOKEN_ONLY)
    if task == "next-token":
        from uatlab.cli.next_token import capacity_next_token_command

        if quick:  # the quick mode runs only the blocks experiment (no sweep over N and widths)
            refuse_given(ctx, "--task next-token --quick (it runs only the blocks experiment)", ("ns", "grid"))
        nt_ns = ns if _given(ctx, "ns") else "100,1000,10000"
        widths = list(_ints(grid, "--grid"))
        if len(widths) > 2 or widths != sorted(widths):  # a search that doubles from the first: no other values
            raise InputError(
                f"--grid {grid} with --task next-token: give the first and the largest FF width in increasing order "
                "(the search doubles the width from the first up to the largest, e.g. --grid 4,64)"
            )
        check_output_dir(out)
        with out_lock(
            out, "capacity-next-token", ("next_token_capacity.json", "checkpoints/N*_width*.pt"), trials=False
        ):
            capacity_next_token_command(
                nt_ns,
                quick,
                blocks,
                out,
                json_out,
                steps=max_steps if _given(ctx, "max_steps") else None,  # else the recipe's own (--quick: 400)
                lr=lr if _given(ctx, "lr") else None,
                rank=rank,
                seed=seed,
                widths=widths or None,
            )
        return
    from uatlab.experiments.capacity import run_capacity

    reject_overridden(ctx, quick, "kind", "ns", "max_steps", "lr")
    refuse_given(ctx, f"--kind {kind}", ("data", "fmt") if kind == "synthetic" else ("length", "vocab", "labels"))
    if kind == "conll":
        if data is None:
            raise InputError("--kind conll needs --data FILE")
        check_input_file(data)
    check_output_dir(out, [data])
    n_list, grid_t = _ints(ns, "--ns"), _ints(grid, "--grid") or None
    if quick:
        kind, n_list, grid_t = "synthetic", (8, 16, 32, 64), grid_t or (2, 4, 8, 16, 32)
        max_steps, lr = 800, 2e-2
    names = ("capacity.csv", "capacity_trials.csv", "capacity.png", "capacity.svg")
    with out_lock(out, "capacity", names, [data], folders=("runs",)):
        summary = run_capacity(
            out,
            kind=kind,
            ns=n_list,
            data=str(data) if data else None,
            axis=axis,
            grid=grid_t,
            fixed=fixed,
            length=length,
            vocab=vocab,
            labels=labels,
            max_steps=max_steps,
            lr=lr,
            batch_size=batch_size,
            seed=seed,
            executor=executor,
            workers=workers,
            threads=threads,
            fmt=fmt,
        )
    if data is not None and summary["format"]:
        say_reading(data, fmt, summary["format"])
    finished = summary["trials"] - len(summary["failed"])
    if json_out:
        print_json(summary)
        exit_if_all_failed(summary["failed"], finished)
        return
    cols = ["N", "reached", "d", "ff_width", "parameters_non_embedding", "parameters_total", "epochs", "bits"]
    cols += ["bits_per_parameter_non_embedding", "bits_per_parameter_total"]
    table = rows_table(f"capacity sweep ({kind}, axis {axis})", cols, summary["rows"], header_style="bold")
    console.print(table)
    for name, fit in summary["fits"].items():
        if fit:
            console.print(
                f"slope of log(params {name}) on log N: {fit['slope']:.3f} "
                f"(95% CI [{fit['ci_low']:.3f}, {fit['ci_high']:.3f}], {fit['points']} points)"
            )
        else:
            console.print(f"slope ({name}): fewer than 3 sizes reached the ceiling")
    if summary["failed"]:
        err_console.print(f"failed trials: {list(summary['failed'])}")
    console.print("files: " + ", ".join(summary["files"]))
    exit_if_all_failed(summary["failed"], finished)
