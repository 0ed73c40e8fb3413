"""``uatlab compile``, ``uatlab certify`` and ``uatlab synth``: memorizing Transformers, compiled and proven.

* ``compile DATA``: stream a CoNLL/JSONL file into a one-layer single-head rank-1 Transformer
  (`uatlab.constructions.memorizer`), certify it in its dtype, print the figures, save the model.
* ``certify MODEL DATA``: re-check any saved uatlab model (with a token encoding) on any data set.
* ``synth OUT``: write a random labelled data set as JSONL (`uatlab.data.synthetic`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from uatlab.cli.app import app, console, err_console, key_value_table, print_json, say_on_interrupt
from uatlab.cli.certificate_output import (
    REQUIRE_CERTIFIED_HELP,
    exit_unless_certified,
    print_certificate_assumptions,
    warn_exp_ulp_below_measured,
    warn_not_certified,
    warn_void_proof,
)
from uatlab.cli.options import (
    AUTO_FORMAT_HELP,
    SEED_MAX,
    check_workers,
    file_path,
    long_outlier_hint,
    model_encoding,
    no_data_error,
    note_leftover_temps,
    one_of,
    path_value,
    refuse_given,
    refuse_prose,
    say_reading,
    thread_count,
)
from uatlab.errors import DimensionTooSmallError, InputError, UatlabError
from uatlab.io_safety import (
    DISK_FULL_ADVICE,
    OutputLock,
    check_input_file,
    check_no_link_loop,
    check_output_file,
    is_disk_full,
    owns,
    same_file,
)
from uatlab.memory_guard import MAX_MEMORY_HELP, set_memory_limit
from uatlab.numerics.float_bounds import DEFAULT_EXP_ULPS, check_exp_ulps

EXP_ULP_HELP = (
    "Assumed error of the evaluator's exp in ulps (normal range), recorded in the certificate. The default 5 "
    "covers torch.exp (0.52 measured), torch.softmax (0.96), numpy float32 exp (2.43–2.54), CUDA expf (2). Checked in "
    "this process on samples of torch.exp and torch.softmax: a value below their measured error voids the proof."
)


def _check_exp_ulp(value: float) -> None:
    try:
        check_exp_ulps(value)
    except ValueError as e:
        raise InputError(f"--exp-ulp: {e}") from None


# --threads and --workers of compile and certify (the same options: one declaration)
THREADS_OPTION = typer.Option(
    "auto",
    "--threads",
    help="Threads per process for numpy's BLAS and torch (auto: see uatlab.threads); at most 4 per available core.",
    callback=thread_count(),
)
WORKERS_OPTION = typer.Option(
    1,
    "--workers",
    min=1,
    max=4096,
    help="Worker processes (local: 1 = this process, at most 4 per core; ray: CPUs of a local Ray instance).",
)


def _records(path: Path, reading: str, fmt: str = "auto"):
    """The records of ``path`` for ``reading``, the format the command decided once, before anything is made
    (``'conll'`` or ``'jsonl'``: `uatlab.data.jsonl.sequence_format`, which refuses under ``--format auto`` a
    file of prose; once the file is read the command calls `say_reading`): taken as decided, never decided
    again. ``fmt``: the --format given; CoNLL given by name is read as the columns it asks for (a file of one
    untagged sentence too, which ``auto`` refuses as plain text)."""
    from uatlab.data.conll import iter_conll
    from uatlab.data.jsonl import iter_jsonl

    if reading not in ("conll", "jsonl"):
        raise ValueError(f"_records: reading must be 'conll' or 'jsonl' (decided by sequence_format), got {reading!r}")
    return iter_jsonl(path) if reading == "jsonl" else iter_conll(path, plain_text_check=fmt != "conll")


def _threads(option: str) -> dict[str, Any]:
    """Apply --threads (a positive integer or 'auto', `uatlab.threads.thread_request`) to numpy's BLAS and torch;
    the settings as JSON."""
    from uatlab.threads import apply_threads

    try:
        return apply_threads(option).to_json()
    except ValueError as exc:  # a request or UATLAB_THREADS that is not a usable thread count
        raise InputError(str(exc)) from None


def _mapper(executor: str, workers: int, threads: int):
    """--executor/--workers as an ordered map (None: in this process)."""
    import functools

    if executor not in ("local", "ray"):
        raise InputError(f"--executor must be local or ray, got {executor!r}")
    check_workers(executor, workers)
    if executor == "local" and workers == 1:
        return None
    if executor == "ray":
        try:
            import ray  # noqa: F401
        except ImportError:
            raise InputError("--executor ray needs Ray: pip install 'uatlab[ray]'") from None
    from uatlab.experiments.executor import map_ordered  # imports tqdm: only when a pool or Ray is used

    return functools.partial(map_ordered, executor=executor, workers=workers, threads=threads)


def _fingerprint(path: Path) -> tuple[int, str, int, int] | None:
    """(size, BLAKE2b of the bytes, modification time in ns, inode) of an input file: the passes that read it again
    check it is unchanged. The time is taken before the bytes are hashed, so a write during the hashing shows."""
    import hashlib

    if not path.is_file():
        return None  # the reader names the problem
    st = path.stat()
    h = hashlib.blake2b(digest_size=16)
    with path.open("rb") as fh:
        while block := fh.read(1 << 22):
            h.update(block)
    return path.stat().st_size, h.hexdigest(), st.st_mtime_ns, st.st_ino


def _change(path: Path, fingerprint: tuple[int, str, int, int] | None) -> str | None:
    """How ``path`` differs from its ``fingerprint`` (`_fingerprint`), or None. A file written to while the job ran
    is changed even when its bytes are the same again at the end (truncated, then refilled): a pass may have read
    it halfway through the change (e.g. stopped at the truncation), so what the job read is not known to be the
    file."""
    if fingerprint is None:
        return None
    now = _fingerprint(path)
    if now is None:
        return f"{path} disappeared while it was being compiled"
    if now[:2] != fingerprint[:2]:
        what = "size" if now[0] != fingerprint[0] else "content (BLAKE2b)"
        return (
            f"{path} changed while it was being compiled ({what} differs from the first pass: "
            f"{fingerprint[0]} → {now[0]} bytes)"
        )
    if now[2:] != fingerprint[2:]:
        what = "it was replaced by another file" if now[3] != fingerprint[3] else "its modification time changed"
        return (
            f"{path} was written to while it was being compiled ({what}; its bytes are the same as at the start "
            "again, but a pass may have read it halfway through the change)"
        )
    return None


def _check_unchanged(path: Path, fingerprint: tuple[int, str, int, int] | None, out: Path) -> None:
    change = _change(path, fingerprint)
    if change is not None:
        raise InputError(f"{change}; nothing was written to {out}; re-run on a file that does not change")


def _print_figures(title: str, fig: dict[str, Any]) -> None:
    rows = {
        k: v
        for k, v in fig.items()
        if k
        not in (
            "conflicts",
            "stage_seconds",
            "stage_cpu_seconds",
            "min_margin_at",
            "uncertified_examples",
            "assumptions",
            "environment",
            "threads",
        )
    }
    console.print(key_value_table(title, rows))
    print_certificate_assumptions(fig)
    if fig.get("min_margin_at"):
        m = fig["min_margin_at"]
        console.print(
            f"smallest certified margin {fig['min_certified_margin']:.6g} at sequence {m['sequence']} "
            f"(line {m['line']}), position {m['position']}, token {m['token']!r}",
            highlight=False,
        )
    for c in fig.get("conflicts") or []:
        console.print(
            f"conflict: token {c['token']!r} at position {c['position']} of identical sequences {c['sequences']} "
            f"(lines {c['lines']}): labels {c['label_counts']} → majority {c['majority']}",
            highlight=False,
        )
    for ex in (fig.get("uncertified_examples") or [])[:10]:
        console.print(f"not certified: {ex}", highlight=False)
    if fig.get("stage_seconds"):
        console.print(key_value_table("time per stage (s)", fig["stage_seconds"]))
    if fig.get("stage_cpu_seconds"):
        console.print(key_value_table("CPU time per stage (s)", fig["stage_cpu_seconds"]))


@app.command("compile")
def compile_cmd(
    ctx: typer.Context,
    data: Path = typer.Argument(..., help="Labelled sequences: CoNLL columns or JSONL."),
    fmt: str = typer.Option(
        "auto",
        "--format",
        help="conll, jsonl, text (--task next-token: plain text cut into --window windows) or auto. With --task token, "
        + AUTO_FORMAT_HELP
        + " --task next-token: auto is JSONL for .jsonl/.json, else text, and refuses a file shaped like CoNLL "
        "columns: give text to read it as text.",
        callback=one_of("auto", "conll", "jsonl", "text"),
    ),
    dtype: str = typer.Option("float64", "--dtype", help="float64 or float32 (next-token: also exact)."),
    dim: int = typer.Option(0, "--dim", min=0, max=65536, help="Model dimension d (0 = the smallest that works)."),
    out: Path = typer.Option(
        Path("model.safetensors"),
        "--out",
        parser=file_path("model file"),
        metavar="<path>",
        help="Where to save the compiled model. An existing file here is replaced (atomically, once the new model "
        "is complete) only if it is a uatlab model file (safetensors, its header says uatlab wrote it) or empty "
        "(0 bytes, e.g. from mktemp); any other file (the input too, or a symbolic link, which the model would "
        "replace rather than write through) is refused before the data is read and kept, "
        "and so is one put there while the job runs (checked again as the model is renamed into place). "
        "An existing model.safetensors is never replaced unless --out names it.",
    ),
    causal: bool = typer.Option(False, "--causal", help="Causal attention: labels may depend on the prefix only."),
    beta: str = typer.Option("auto", "--beta", help="Query inverse temperature (power of two) or 'auto'."),
    seed: int = typer.Option(0, "--seed", min=0, max=SEED_MAX, help="Seed of the random key codes."),
    code: str = typer.Option("auto", "--code", help="Word codes of the FF gate: binary, M-hot (e.g. 3-hot) or auto."),
    group: str = typer.Option(
        "auto", "--group", help="FF units per word or per (word, position): word, word-pos or auto (float32: word-pos)."
    ),
    ff: str = typer.Option(
        "knots",
        "--ff",
        help="FF rule: knots (one ReLU per slope change, no biases), ramps (two per label change), or deep (one "
        "averaging rank-1 attention layer and a deep integer ReLU network, Kajitsuka & Sato 2025). deep runs in "
        "memory with a progress display on stderr and no work directory or checkpoints (CoNLL-2003 train takes "
        "6–10 CPU s and 0.5 GB: a failed run is simply re-run); it refuses, before building, data whose "
        "padded arrays exceed --max-memory (one long sequence sets the context of all); besides --out and "
        "--json it takes --dtype, --seed, --no-certify, --require-certified, --threads, --max-memory and --format "
        "only.",
    ),
    labels: str = typer.Option(
        "auto",
        "--labels",
        help="Label code: ordinal (1 coordinate), one-hot, or auto (float64 ordinal, float32 one-hot).",
    ),
    no_certify: bool = typer.Option(False, "--no-certify", help="Skip the floating-point certificate."),
    require_certified: bool = typer.Option(
        False, "--require-certified", help=REQUIRE_CERTIFIED_HELP + " Refused with --no-certify."
    ),
    max_memory: str | None = typer.Option(None, "--max-memory", help=MAX_MEMORY_HELP),
    exp_ulp: float = typer.Option(DEFAULT_EXP_ULPS, "--exp-ulp", help=EXP_ULP_HELP + " Refused with --no-certify."),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="Continue from the work directory an earlier run left (an error, Ctrl-C, --keep-work); without "
        "--resume such a directory is refused, never cleared.",
    ),
    chunk_tokens: int = typer.Option(
        1_000_000,
        "--chunk-tokens",
        min=1,
        help="Tokens per on-disk chunk and bucket: bounds the memory of large data sets.",
    ),
    work_dir: Path | None = typer.Option(
        None, "--work-dir", parser=path_value, help="On-disk work directory (default: OUT.work)."
    ),
    keep_work: bool = typer.Option(False, "--keep-work", help="Keep the work directory after success."),
    threads: str = THREADS_OPTION,
    executor: str = typer.Option(
        "local",
        "--executor",
        help="Where the passes over chunks and buckets run: local (process pool) or ray.",
        callback=one_of("local", "ray"),
    ),
    workers: int = WORKERS_OPTION,
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
    task: str = typer.Option(
        "token",
        "--task",
        help="'token' (a label per token) or 'next-token' (one label per sequence, Kajitsuka & "
        "Sato 2025: JSONL {tokens, label} or a text file cut by --window; --dtype float64, float32 or exact).",
    ),
    window: int | None = typer.Option(None, "--window", help="next-token, text files: tokens per window."),
    tokenizer: str = typer.Option("whitespace", "--tokenizer", help="next-token, text files: whitespace or python."),
) -> None:
    """Compile a labelled data set into a certified one-layer rank-1 Transformer (out of core).

    Exit status 0 when the model is saved, also when its certificate does not prove every token that can be
    right ("certified": false, as `uatlab certify` reports it with exit 0): then the model is still written
    and one line "warning: the model is not certified: ..." goes to stderr, in every output mode; with
    --require-certified that run exits 1 (the model saved, every figure printed). Exit 2 with
    one "error: ..." line on bad input or options: nothing is written, except that the work directory is kept
    with --keep-work or --resume, or when bad data (or a full disk) stops the reading after some sequences were
    stored, for --resume; the error says where. Exit 130 on Ctrl-C or SIGTERM, with one line saying what was kept:
    before the model file is in place, --out is as it was and the sequences read so far stay in the work
    directory for --resume (none before the first is read; --ff deep and --task next-token keep none); once it
    is in place, the line says the model was saved to OUT, complete (and whether the run had ended, its figures
    printed). A work directory an earlier run kept is refused without --resume, never cleared.
    Options that do not apply to the chosen --task or --ff are refused, not ignored.
    """
    if task not in ("token", "next-token"):
        raise InputError(f"--task {task!r}: use 'token' or 'next-token'")
    if no_certify and require_certified:
        raise InputError("--require-certified needs the certificate that --no-certify skips: give one of them")
    if task == "next-token":
        refuse_given(ctx, "--task next-token", NEXT_TOKEN_REFUSES)
        from uatlab.cli.next_token import compile_next_token_file, print_next_token_compile

        check_input_file(data)
        check_output_file(out, [data])
        _check_existing_out(ctx, out)
        with OutputLock(out, replace_check=_out_check_at_save(ctx, out)), _say_what_is_kept(out):
            note_leftover_temps(out)
            thread_settings = _threads(threads)
            fig = compile_next_token_file(data, fmt, window, tokenizer, dtype, out, seed, not no_certify)
            print_next_token_compile(fig, json_out, thread_settings)
        return exit_unless_certified(require_certified, fig)
    refuse_given(ctx, "--task token", ("window", "tokenizer"))
    if fmt == "text":
        raise InputError("--format text: only --task next-token reads text files; --task token reads conll or jsonl")
    if ff == "deep":
        refuse_given(ctx, "--ff deep", DEEP_REFUSES)
    if no_certify:  # the exp error is an assumption of the certificate, and there is none
        refuse_given(ctx, "--no-certify (it is an assumption of the certificate)", ("exp_ulp",))
    set_memory_limit(max_memory)
    if dtype not in ("float64", "float32"):
        raise InputError(f"--dtype must be float64 or float32 for --task token, got {dtype!r}")
    _check_exp_ulp(exp_ulp)
    if ff not in ("knots", "ramps", "deep"):
        raise InputError(f"--ff must be knots, ramps or deep, got {ff!r}")
    if ff == "deep":
        if causal:
            raise InputError("--ff deep: --causal is not supported (the deep construction reads whole sentences)")
        check_input_file(data)
        check_output_file(out, [data])
        _check_existing_out(ctx, out)
        with OutputLock(out, replace_check=_out_check_at_save(ctx, out)), _say_what_is_kept(out):
            note_leftover_temps(out)
            fig = _compile_deep(data, fmt, dtype, out, seed, no_certify, json_out, threads)
        return exit_unless_certified(require_certified, fig)
    if labels not in ("auto", "ordinal", "one-hot") or (ff == "ramps" and labels == "ordinal"):
        raise InputError(f"--labels must be ordinal, one-hot or auto (--ff ramps: one-hot), got {labels!r}")
    beta_value = _parse_beta(beta, dtype)
    _check_group(group)
    _check_code(code)
    if dim:  # the smallest d any data set needs with these options (the exact minimum is checked after reading)
        check_dim(
            dim,
            dim_floor(ff, dtype, code, labels, group, vocab=1, classes=1, max_len=1, exact=False),
            "these options",
            "; the data may need more (its vocabulary, labels and groups widen the code and label coordinates): "
            "its smallest d is known once it is read, and leaving --dim out uses it",
        )
    check_input_file(data)
    check_output_file(out, [data])
    work = work_dir or out.with_name(out.name + ".work")
    check_no_link_loop(work, "--work-dir")
    _check_out_and_work(out, work)
    if work.exists() and same_file(work, data):
        raise InputError(f"--work-dir {work} is the input file {data}")
    _check_existing_out(ctx, out)
    if not no_certify:
        warn_exp_ulp_below_measured(exp_ulp, dtype)
    with (
        OutputLock(out, replace_check=_out_check_at_save(ctx, out)),
        OutputLock(work, hint="choose another --work-dir"),
    ):
        run: dict[str, Any] = {}  # the run's TokenStore, once it exists
        note_leftover_temps(out)
        with _say_what_is_kept(out, run, keep_work):
            fig = _compile(
                data,
                fmt,
                dtype,
                dim,
                out,
                causal,
                beta_value,
                seed,
                code,
                group,
                ff,
                labels,
                no_certify,
                exp_ulp,
                resume,
                chunk_tokens,
                work,
                keep_work,
                json_out,
                threads,
                executor,
                workers,
                run,
            )
    exit_unless_certified(require_certified, fig)


# why a float32 model can leave tokens unproven, and what to try (after the not-certified warning)
FLOAT32_UNPROVEN_NOTE = (
    "note: float32 rounding exceeds the logit margin of some tokens, most often those of a frequent word, whose many "
    "contexts lie close together (uncertified_examples lists some); --dtype float64 (29 more bits) usually proves "
    "every token"
)
# options of the token task that the next-token compiler and the deep FF have no use for: refused, not ignored
DEEP_REFUSES = (
    "code",
    "group",
    "labels",
    "beta",
    "dim",
    "work_dir",
    "keep_work",
    "chunk_tokens",
    "resume",
    "exp_ulp",
    "executor",
    "workers",
)
NEXT_TOKEN_REFUSES = ("ff", "causal", "max_memory", *DEEP_REFUSES)
MAX_CODE_ONES = 65536  # M of --code M-hot: the model has ≥ M code coordinates, and --dim is at most 65536


def _check_group(group: str) -> None:
    if group not in ("auto", "word", "word-pos"):
        raise InputError(f"--group must be word, word-pos or auto, got {group!r}")


def _code_ones(code: str) -> int | None:
    """M of an M-hot code, None for binary/auto; refuses any other spelling and M outside [1, 65536]."""
    if code in ("auto", "binary"):
        return None
    m = code[:-4] if code.endswith("-hot") else ""
    if not (m.isdigit() and 1 <= int(m) <= MAX_CODE_ONES):
        raise InputError(
            f"--code {code!r}: use binary, auto or M-hot with 1 ≤ M ≤ {MAX_CODE_ONES} (e.g. 3-hot; the model "
            "needs at least M code coordinates)"
        )
    return int(m)


def _check_code(code: str) -> None:
    _code_ones(code)


def dim_floor(
    ff: str, dtype: str, code: str, labels: str, group: str, vocab: int, classes: int, max_len: int, exact: bool
) -> tuple[int, str]:
    """The smallest model dimension d the token memorizer can have, and how it is made up.

    ``ff="ramps"``: exactly the layout's k + 3 + C (+ position code); ``ff="knots"``: a lower bound (its
    code covers only the words whose label changes, known after the grouping pass), k ≥ 1 (binary) or M.
    With ``exact=False`` the counts are the smallest any data set can have (checked before reading).
    """
    from uatlab.constructions.paper_a.cor1_memorizer.knots import KnotLayout
    from uatlab.constructions.paper_a.cor1_memorizer.layout import POSITION_CODE, Layout, code_width, resolve_auto

    code, labels, group = resolve_auto(dtype, code, labels, group)
    kp = code_width(max_len, POSITION_CODE) if group == "word-pos" else 0
    if ff == "ramps":
        k, label_dims, what = code_width(vocab, code), classes, "attention"
        floor = Layout(k, label_dims, kp).d_model
    else:
        k, label_dims, what = code_width(1, code), (1 if labels == "ordinal" else classes), "attention/constant"
        floor = KnotLayout(k, label_dims, kp).d_model
    fixed = floor - k - label_dims - kp  # the layout's attention (and constant) coordinates
    detail = (
        f"{'' if exact and ff == 'ramps' else 'at least '}{k} code coordinates + {fixed} {what} coordinates + "
        f"{label_dims} label coordinates" + (f" + {kp} position code coordinates" if kp else "")
    )
    return floor, detail


def check_dim(dim: int, floor: tuple[int, str], where: str = "these options", more: str = "") -> None:
    """InputError when ``dim`` is below ``floor`` (`dim_floor`: the smallest d and how it is made up) for
    ``where``; ``more`` is added to the message (what else may raise the floor)."""
    if dim < floor[0]:
        raise InputError(f"--dim {dim} is too small: {where} need d ≥ {floor[0]} ({floor[1]}){more}")


def _check_after_read(store, data: Path, dim: int, ff: str, dtype: str, code: str, labels: str, group: str) -> None:
    """Checks that need the vocabulary, the labels and the longest sequence: before the attention passes."""
    V, C = len(store.token_to_id), len(store.label_to_id)
    m = _code_ones(code)
    if m is not None and m > V:
        raise InputError(f"--code {code}: more ones than the {V} words of {data} (use M ≤ {V}, or binary)")
    if dim:
        check_dim(
            dim, dim_floor(ff, dtype, code, labels, group, V, C, store.max_len, exact=True), f"{data} and these options"
        )


def _check_out_and_work(out: Path, work: Path) -> None:
    """Refuse, before any file is touched, a model path and a work directory that overlap: the same path, the
    model inside the work directory (whose files the run creates and deletes) or the work directory inside the
    model's path (it would make a folder where the model file goes)."""
    o, w = out.resolve(), work.resolve()
    if o == w:
        why = "are the same path"
    elif w in o.parents:
        why = "overlap: the model file would lie inside the work directory, which compile creates and deletes"
    elif o in w.parents:
        why = "overlap: the work directory would lie inside the model file's path"
    else:
        return
    raise InputError(f"--out {out} and --work-dir {work} {why}; give --work-dir a folder apart from --out")


def _check_existing_out(ctx: typer.Context, out: Path) -> None:
    """Before the data is read: an existing ``--out`` is replaced only if it is a model file uatlab wrote
    (`check_replaceable_model`) and ``--out`` names it: the default path is never written over (every task and
    ``--ff`` writes there, so one run's model would silently replace another's)."""
    from uatlab.models.io import check_replaceable_model

    check_replaceable_model(out)
    source = ctx.get_parameter_source("out")
    if source is not None and source.name != "COMMANDLINE" and out.exists():
        raise InputError(f"{out} exists (the default --out): pass --out {out} to replace it, or choose another path")


def _out_check_at_save(ctx: typer.Context, out: Path) -> Callable[[], None]:
    """`_check_existing_out` again at the moment the finished model is renamed over ``out``: a file another
    program put there while the job ran is refused like one found at the start (the new model is not written)."""

    def check() -> None:
        try:
            _check_existing_out(ctx, out)
        except InputError as exc:
            raise InputError(f"{exc} (it was put there while this job ran: the new model was not saved)") from None

    return check


def _compile_deep(
    data: Path, fmt: str, dtype: str, out: Path, seed: int, no_certify: bool, json_out: bool, threads: str
) -> dict[str, Any]:
    from uatlab.cli.progress import StageBars
    from uatlab.cli.seq2seq_deep import STAGE_UNITS, compile_deep_file
    from uatlab.data.jsonl import sequence_format

    thread_settings = _threads(threads)
    reading = sequence_format(data, fmt)
    with StageBars(not json_out, units=STAGE_UNITS) as bars:
        fig = compile_deep_file(
            _records(data, reading, fmt), data, dtype, out, seed, certify=not no_certify, progress=bars
        )
    say_reading(data, fmt, reading)
    fig["threads"] = thread_settings
    fig["format"] = reading
    warn_void_proof(fig.get("invalidated_by") or [])
    if fig.get("certified") is False:
        warn_not_certified(fig.get("certified_tokens"), fig["ceiling_tokens"], dtype, out)
    if json_out:
        print_json(fig)
        return fig
    _print_figures(f"uatlab compile {data.name} ({dtype}, --ff deep)", fig)
    console.print(
        f"saved {out} ({fig['model_file_bytes'] / 1e6:.1f} MB) in {fig['seconds']:.1f} s total", highlight=False
    )
    return fig


def check_certify_memory(n: int, where: str) -> None:
    """Refuse to certify a sequence of ``n`` tokens whose all-pairs attention bounds would not fit in memory."""
    from uatlab.verify.certificate import check_certify_memory as check

    check(n, where, "--no-certify skips the certificate")


def _refuse_unk(unknown: str, model_path: Path, what: str) -> None:
    """``--unknown unk`` on a model without an unknown-word token: InputError naming the option and the model."""
    if unknown == "unk":
        raise InputError(
            f"--unknown unk: {model_path} is {what} with no unknown-word token (every word must be in its "
            "vocabulary; --unknown error is what it does)"
        )


def _length_checked(records, data: Path, max_len: int | None = None):
    """The records, refusing (file:line) a sequence longer than the model's ``max_len``, and a file holding none
    (`no_data_error`, naming it: the certificate's own refusal of no tokens cannot). A sequence too long to
    certify is refused by the certificate itself, chunk by chunk, naming its file:line."""
    empty = True
    for tokens, labels, line in records:
        empty = False
        if max_len is not None and len(tokens) > max_len:
            raise InputError(
                f"{data}:{line}: a sequence of {len(tokens)} tokens is longer than the model's max_len {max_len}"
            )
        yield tokens, labels, line
    if empty:
        raise no_data_error(data, "no tokens to certify")


def warn_long_outlier_store(store, data: Path, factor: float = 20.0, minimum: int = 1000) -> None:
    """Warn when the longest stored sequence is ≥ ``minimum`` tokens and ≥ ``factor`` × the mean of the rest (with
    the likely cause in the reading's terms: `long_outlier_hint`)."""
    n, count, total = store.max_len, store.sequences, store.tokens
    rest = (total - n) / (count - 1) if count > 1 else 0.0
    if n >= minimum and n >= factor * max(rest, 1.0):
        what = f"far longer than the rest (mean {rest:.0f})" if count > 1 else "the whole file"
        err_console.print(
            f"warning: {data}:{store.m.get('max_len_line', '?')}: a sequence of {n} tokens, {what}; "
            + long_outlier_hint(store.token_lines),
            highlight=False,
            soft_wrap=True,
        )


def _parse_beta(beta: str, dtype: str) -> float | str:
    """--beta as a number, refused before any file is touched unless it is a power of two (the query codes are
    exact) whose query scale stays finite and non-zero in ``dtype``: 2^-1074 ≤ β ≤ 2^1022 in float64,
    2^-149 ≤ β ≤ 2^126 in float32 (the query of a position is below 2β)."""
    import math

    if beta == "auto":
        return beta
    try:
        value = float(beta)
    except ValueError:
        raise InputError(f"--beta must be 'auto' or a positive power of two, got {beta!r}") from None
    if not (value > 0 and value < float("inf") and math.frexp(value)[0] == 0.5):
        raise InputError(f"--beta must be 'auto' or a positive power of two (exact query codes), got {beta!r}")
    from uatlab.constructions.paper_a.cor1_memorizer.select import BETA_EXPONENTS

    low, high = BETA_EXPONENTS.get(dtype, BETA_EXPONENTS["float64"])  # (a bad dtype is refused by its own check)
    if not (2.0**low <= value <= 2.0**high):
        raise InputError(
            f"--beta {beta}: out of range for {dtype} (2^{math.frexp(value)[1] - 1}; use a power of two from "
            f"2^{low} to 2^{high}, so that the query scale 2β is finite and non-zero)"
        )
    return value


def _file_id(path: Path) -> tuple[int, ...] | None:
    """Which file is at ``path`` now (device, inode, size, modification time), None if none."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


@contextlib.contextmanager
def _say_what_is_kept(out: Path, run: dict[str, Any] | None = None, keep_work: bool = False):
    """Around a compile run: if Ctrl-C or SIGTERM ends it, its last line says what was saved and kept (exit 130).
    ``run`` (a run with a work directory) receives its TokenStore as ``run["store"]``; None: a run without one."""
    before = _file_id(out)
    try:
        yield
    except KeyboardInterrupt:
        say_on_interrupt(_what_was_kept(out, before, run, keep_work))
        raise
    except OSError as exc:  # disk full: the error line says where the data read so far is kept
        store = run.get("store") if run is not None else None
        said = any(str(store.dir) in note for note in getattr(exc, "__notes__", ())) if store is not None else True
        if is_disk_full(exc) and not said and owns(store.dir, store.m.get("work_id")):
            exc.add_note(
                f"the data read so far is kept in {store.dir}: {DISK_FULL_ADVICE}, then run again with --resume"
            )
        raise
    else:  # the run has ended and printed its figures: an interrupt before the process exits says so
        say_on_interrupt(
            f"interrupted after the run had ended: {out} is saved and complete, and its figures were printed"
        )


def _what_was_kept(out: Path, before: tuple[int, ...] | None, run: dict[str, Any] | None, keep_work: bool) -> str:
    """The line that ends a compile run stopped by Ctrl-C or SIGTERM: the model saved (a new file is at ``out``:
    `uatlab.models.io.save` renames it into place whole), or the work directory kept for --resume, or neither."""
    store = run.get("store") if run is not None else None
    stored = store is not None and owns(store.dir, store.m.get("work_id"))
    if _file_id(out) not in (None, before):
        if stored and not keep_work:
            store.remove()  # as after a run that was not interrupted: the model is complete, the work is done
            stored = False
        kept = f"; the work directory {store.dir} is kept" if stored else ""
        return (
            f"interrupted after the model was saved: {out} is complete{kept} (its figures may not have been printed "
            f"in full; uatlab certify {out} DATA prints its certificate)"
        )
    if stored:
        return (
            f"interrupted: no model was saved ({out} is as it was); the data read so far is kept in {store.dir}: "
            "run again with --resume to continue from it"
        )
    if run is None:
        return f"interrupted: no model was saved ({out} is as it was); this kind of run keeps no work to resume"
    if store is None:  # before the data was read (a --resume work directory is as it was)
        return f"interrupted before the data was read: no model was saved ({out} is as it was)"
    return f"interrupted: no model was saved ({out} is as it was) and no work was kept"


def _refused_after_read(exc: UatlabError, store, resume: bool, keep_work: bool) -> UatlabError:
    """The error that ends a run refused after the data was stored (an option the data does not allow, a limit
    it exceeds, the input changed): the work directory is removed as the refused run leaves nothing written
    (`TokenStore.remove`: only the files this store wrote, and the folder if it created it), unless the user
    asked to keep it (--keep-work) or it came from an earlier run (--resume); then the error says where it is."""
    if not (resume or keep_work):
        store.remove()
        return exc
    exc.add_note(f"the data read is kept in the work directory {store.dir} ({'--resume' if resume else '--keep-work'})")
    return exc


def _compile(
    data: Path,
    fmt: str,
    dtype: str,
    dim: int,
    out: Path,
    causal: bool,
    beta_value: float | str,
    seed: int,
    code: str,
    group: str,
    ff: str,
    labels: str,
    no_certify: bool,
    exp_ulp: float,
    resume: bool,
    chunk_tokens: int,
    work: Path,
    keep_work: bool,
    json_out: bool,
    threads: str,
    executor: str = "local",
    workers: int = 1,
    run: dict[str, Any] | None = None,
) -> dict[str, Any]:
    from uatlab.cli.progress import StageBars
    from uatlab.constructions.paper_a.cor1_memorizer import compile_memorizer, save_compiled
    from uatlab.data.jsonl import sequence_format
    from uatlab.data.keys import input_keys
    from uatlab.data.token_store import TokenStore

    thread_settings = _threads(threads)
    mapper = _mapper(executor, workers, thread_settings["threads"])
    fingerprint = _fingerprint(data)

    t0 = time.perf_counter()
    reading = sequence_format(data, fmt)  # before the work directory is made: a refused format touches nothing
    records = _records(data, reading, fmt)
    store = TokenStore(
        work,
        str(data),
        "prefix" if causal else "sequence",
        chunk_tokens,
        resume=resume,
        token_lines=reading == "conll",
    )
    if run is not None:
        run["store"] = store
    if resume:
        err_console.print(f"resuming after {store.sequences} sequences stored in {work}")
    with StageBars(not json_out) as bars:
        try:
            store.read(records, input_keys, progress=bars.step("reading"))
        except InputError as exc:  # a line cut off by a change to the file is not an error in the data
            change = _change(data, fingerprint)
            if change is None:
                raise
            bars.close()
            raise InputError(f"{change}, so this error may come from the change rather than the data: {exc}") from None
        t_read = time.perf_counter() - t0
        if store.sequences == 0:  # nothing was computed: leave no work directory behind
            store.remove()
            raise no_data_error(data)
        try:
            warn_long_outlier_store(store, data)
            _check_after_read(store, data, dim, ff, dtype, code, labels, group)
            if not no_certify:  # refuse now, before compiling, rather than after
                check_certify_memory(store.max_len, f"{data}:{store.m.get('max_len_line', '?')}")
            con = compile_memorizer(
                store,
                dtype=dtype,
                causal=causal,
                beta=beta_value,
                seed=seed,
                d_model=dim or None,
                code=code,
                group=group,
                ff=ff,
                labels=labels,
                certify=not no_certify,
                progress=bars,
                exp_ulps=exp_ulp,
                mapper=mapper,
            )
            _check_unchanged(data, fingerprint, out)
        except UatlabError as exc:
            bars.close()  # the error line starts a line of its own
            if isinstance(exc, DimensionTooSmallError):  # the library names its parameter d_model
                exc = exc.named("--dim")
            raise _refused_after_read(exc, store, resume, keep_work) from None
    say_reading(data, fmt, reading)
    cert = con.certificate
    t = time.perf_counter()
    fig = dict(con.facts)
    fig["stage_seconds"] = {"read + encode": t_read, **fig["stage_seconds"]}
    fig["chunk_tokens"] = chunk_tokens
    try:
        save_compiled(con.model, out, fig)
    except (UatlabError, OSError) as exc:  # --out changed while the job ran, a full disk: what was read stays
        if isinstance(exc, OSError):
            fix = f"{DISK_FULL_ADVICE}, then" if is_disk_full(exc) else f"once {out} can be written,"
        else:
            fix = f"move {out} away (or give another --out) and"
        exc.add_note(
            f"the data read is kept in the work directory {store.dir}: {fix} add --resume --work-dir {store.dir}"
        )
        raise
    fig["stage_seconds"]["save"] = time.perf_counter() - t
    if not keep_work:
        store.remove()
    fig["model_file"] = str(out)
    fig["model_file_bytes"] = out.stat().st_size
    fig["seconds"] = time.perf_counter() - t0
    fig["threads"] = thread_settings
    fig["executor"] = {"executor": executor, "workers": workers}
    fig["format"] = reading
    if cert is not None and not cert.certified:
        fig["uncertified_examples"] = cert.uncertified_examples
        fig["note"] = (
            f"{dtype}: {cert.certified_tokens} of {cert.ceiling_tokens} winnable tokens certified "
            f"({100 * cert.certified_fraction:.2f}%); the rest are not proven (see uncertified_examples)"
        )
    if cert is not None and not cert.certified:
        warn_not_certified(cert.certified_tokens, cert.ceiling_tokens, dtype, out)
        warn_void_proof(cert.invalidated_by, bound=cert.bound_certified_tokens)
        if dtype == "float32" and not cert.invalidated_by:
            err_console.print(FLOAT32_UNPROVEN_NOTE, highlight=False, soft_wrap=True)
    if json_out:
        print_json(fig)
        return fig
    _print_figures(f"uatlab compile {data.name} ({dtype}{', causal' if causal else ''})", fig)
    if fig.get("note"):
        console.print(fig["note"], highlight=False)
    console.print(f"saved {out} ({fig['model_file_bytes'] / 1e6:.1f} MB) in {fig['seconds']:.1f} s total")
    return fig


@app.command("certify")
def certify_cmd(
    ctx: typer.Context,
    model_path: Path = typer.Argument(..., help="A uatlab model file (compiled or trained) that stores its encoding."),
    data: Path = typer.Argument(..., help="Labelled sequences: CoNLL columns or JSONL (next-token: also text)."),
    fmt: str = typer.Option(
        "auto",
        "--format",
        help="conll, jsonl, text (next-token models: windows of the model's length) or auto. " + AUTO_FORMAT_HELP,
        callback=one_of("auto", "conll", "jsonl", "text"),
    ),
    exp_ulp: float = typer.Option(DEFAULT_EXP_ULPS, "--exp-ulp", help=EXP_ULP_HELP),
    threads: str = THREADS_OPTION,
    max_memory: str | None = typer.Option(None, "--max-memory", help=MAX_MEMORY_HELP),
    executor: str = typer.Option(
        "local",
        "--executor",
        help="Where the passes over chunks run: local (process pool) or ray.",
        callback=one_of("local", "ray"),
    ),
    workers: int = WORKERS_OPTION,
    unknown: str = typer.Option(
        "",
        "--unknown",
        help="Words outside the model's vocabulary: error or unk (read as the model's <unk>: the certificate is "
        "then about the model's output on that input; --json counts them as unknown_tokens). Default: unk if "
        "the model has an <unk> token (a trained model), else error. Next-token and --ff deep models have none.",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
    require_certified: bool = typer.Option(False, "--require-certified", help=REQUIRE_CERTIFIED_HELP),
) -> None:
    """Prove in floating point which tokens of DATA a saved model classifies correctly.

    certified_tokens are proved right in any evaluation of the model in its dtype. correct_tokens counts the
    tokens whose label is the top logit of the float64 reference evaluation; for a float32 model it can differ
    from what `uatlab predict` (a float32 run) gets right on tokens the certificate does not cover.

    Exit status 0 whatever the certificate proves ("certified" says whether it proves every token that can be
    right); with --require-certified, 1 when it does not. Exit 2 with one "error: ..." line on bad input, 130 when
    interrupted (Ctrl-C, SIGTERM; nothing is written).
    """

    from uatlab.cli.progress import StageBars
    from uatlab.constructions.paper_a.cor1_memorizer import certify_chunks_with_progress
    from uatlab.data.jsonl import sequence_format
    from uatlab.models.io import load

    if unknown not in ("", "error", "unk"):
        raise InputError(f"--unknown must be error or unk, got {unknown!r}")
    _check_exp_ulp(exp_ulp)
    set_memory_limit(max_memory)
    thread_settings = _threads(threads)
    check_input_file(model_path, "model file")
    check_input_file(data)
    from uatlab.cli.next_token import certify_next_token_command, is_next_token_model

    # exact certificates in this process: the float exp error and the chunk executor do not apply to them
    in_process_only = ("exp_ulp", "max_memory", "executor", "workers")
    if is_next_token_model(model_path):
        refuse_given(ctx, f"a next-token model ({model_path})", in_process_only)
        _refuse_unk(unknown, model_path, "a next-token model")
        return exit_unless_certified(require_certified, certify_next_token_command(model_path, data, fmt, json_out))
    if fmt == "text":
        raise InputError(f"--format text: only next-token models certify text; {model_path} labels every token")
    from uatlab.models.io import SEQ2SEQ_DEEP_TAG, file_format

    if file_format(model_path) == SEQ2SEQ_DEEP_TAG:
        from uatlab.cli.seq2seq_deep import certify_deep_command

        deep_refuses = tuple(o for o in in_process_only if o != "max_memory")  # it pads to n': a memory check
        refuse_given(ctx, f"a --ff deep model ({model_path})", deep_refuses)
        _refuse_unk(unknown, model_path, "a --ff deep model")
        reading = sequence_format(data, fmt)
        fig = certify_deep_command(
            model_path, data, _records(data, reading, fmt), json_out, reading == "conll", reading, fmt
        )
        say_reading(data, fmt, reading)
        return exit_unless_certified(require_certified, fig)
    mapper = _mapper(executor, workers, thread_settings["threads"])
    t0 = time.perf_counter()
    model = load(model_path)
    encoding = model_encoding(model, model_path, data)
    unk = encoding.unknown_token
    if unk is None:
        _refuse_unk(unknown, model_path, "a model")
    from uatlab.verify.certificate import parameter_dtype

    warn_exp_ulp_below_measured(exp_ulp, parameter_dtype(model))
    reading = sequence_format(data, fmt)
    refuse_prose(data, fmt, reading, encoding.id_to_label)
    records = _length_checked(_records(data, reading, fmt), data, getattr(model.config, "max_len", None))
    with StageBars(not json_out) as bars:
        cert = certify_chunks_with_progress(
            model,
            records,
            str(data),
            None,
            bars,
            exp_ulps=exp_ulp,
            mapper=mapper,
            token_lines=reading == "conll",
            unknown="unk" if unk is not None and unknown != "error" else "error",
        )
    say_reading(data, fmt, reading)
    if cert.unknown_tokens:
        err_console.print(
            f"warning: {data}: {cert.unknown_tokens} of {cert.tokens} tokens are not in the model's vocabulary and "
            f"were read as {unk!r}; the certificate is about the model's output on that input, and its ceiling "
            "counts the words as written (inputs that only those words tell apart stay apart)",
            highlight=False,
            soft_wrap=True,
        )
    if cert.reference_lost_tokens:
        err_console.print(
            f"warning: {data}: at {cert.reference_lost_tokens} of {cert.tokens} tokens the model's float64 reference "
            "logits are not finite (an overflow in the model itself, e.g. a query scale beyond the dtype's range): "
            "they are neither correct nor certified, and no finite logit error bound holds there",
            highlight=False,
            soft_wrap=True,
        )
    fig = cert.to_dict()
    fig["format"] = reading
    fig["params_total"] = model.num_parameters()
    fig["params_non_embedding"] = model.num_parameters(non_embedding=True)
    fig["seconds"] = time.perf_counter() - t0
    fig["threads"] = thread_settings
    fig["executor"] = {"executor": executor, "workers": workers}
    warn_void_proof(cert.invalidated_by, bound=cert.bound_certified_tokens)
    if json_out:
        print_json(fig)
    else:
        _print_figures(f"uatlab certify {model_path.name} on {data.name}", fig)
        console.print(
            f"proved {cert.certified_tokens} of {cert.tokens} tokens correct in {cert.dtype} "
            f"({cert.ceiling_tokens} can be right at all; {cert.correct_tokens} correct in the float64 reference)",
            highlight=False,
        )
    exit_unless_certified(require_certified, fig)


@app.command("synth")
def synth_cmd(
    out: Path = typer.Argument(
        ...,
        parser=file_path("data file"),
        help="JSONL file to write. An existing file is replaced (atomically, at the end) only if it is empty or byte "
        "for byte synth's output for the options its line 1 records; any other file (edited synthetic data too) is "
        "refused and kept.",
    ),
    sequences: int = typer.Option(1000, "-N", "--sequences", min=1, max=10**12, help="Number of sequences N."),
    length: int = typer.Option(32, "-n", "--length", min=1, max=10**6, help="Tokens per sequence n."),
    vocab: int = typer.Option(5000, "-V", "--vocab", min=1, max=2**62, help="Vocabulary size V."),
    classes: int = typer.Option(10, "-C", "--classes", min=1, max=2**62, help="Number of labels C."),
    no_repeats: bool = typer.Option(False, "--no-repeats", help="No token twice in a sequence (needs n ≤ V)."),
    seed: int = typer.Option(0, "--seed", min=0, max=SEED_MAX, help="Random seed."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
) -> None:
    """Write N random labelled sequences (uniform tokens and labels) as JSONL.

    \b
    Exit codes:
      0    written
      2    a user error, one 'error:' line (OUT is another file of yours: kept)
      130  interrupted (Ctrl-C, SIGTERM): OUT is as it was (written atomically, at the end)
    """
    from uatlab.data.synthetic import write_synthetic

    if no_repeats and length > vocab:
        raise InputError(
            f"--no-repeats: sequences of n={length} distinct tokens need a vocabulary V ≥ n, got V={vocab}"
        )
    check_output_file(out, option="OUT")  # synth names its file as an argument, not with --out
    t0 = time.perf_counter()
    with OutputLock(out):
        note_leftover_temps(out)
        say_on_interrupt(f"interrupted: {out} is as it was (synth writes it whole, at the end)")
        # refuses an existing file unless it is synth's output unedited (or empty): check_synthetic_target
        write_synthetic(out, sequences, length, vocab, classes, repeats=not no_repeats, seed=seed)
        say_on_interrupt(f"interrupted after {out} was written whole")
    fig = {
        "out": str(out),
        "sequences": sequences,
        "length": length,
        "vocab": vocab,
        "classes": classes,
        "repeats": not no_repeats,
        "seed": seed,
        "tokens": sequences * length,
        "bytes": out.stat().st_size,
        "seconds": time.perf_counter() - t0,
    }
    if json_out:
        print_json(fig)
        return
    console.print(key_value_table(f"uatlab synth {out.name}", fig))
