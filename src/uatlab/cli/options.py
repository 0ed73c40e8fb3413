"""Parse-time checks for command-line options: finiteness, ranges and fixed spellings.

Integer ranges use typer's ``min=``/``max=``; the callbacks here add what click does not check (NaN and
infinity pass its float ranges) and turn a misspelt choice into an error instead of a silent default.
Every check raises ``typer.BadParameter``, which the CLI prints as one ``error:`` line (exit 2).
`no_data_error` is the one message of a command whose data file holds nothing to work on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import typer

from uatlab.errors import InputError
from uatlab.training.limits import RANGES, SEED_MAX  # noqa: F401  (SEED_MAX: imported from here by the commands)


def int_range(name: str) -> dict[str, int]:
    """typer's ``min=``/``max=`` of the integer training field ``name`` (`uatlab.training.limits.RANGES`)."""
    r = RANGES[name]
    return {"min": int(r.lo), "max": int(r.hi)}


def real_range(name: str) -> Callable[[Any], Any]:
    """The `finite` callback of the real training field ``name`` (`uatlab.training.limits.RANGES`)."""
    r = RANGES[name]
    return finite(r.lo, r.hi, lo_open=r.lo_open, hi_open=r.hi_open)


def finite(
    lo: float | None = None, hi: float | None = None, lo_open: bool = False, hi_open: bool = False
) -> Callable[[Any], Any]:
    """Callback: a finite float in [lo, hi] (open ends with ``lo_open``/``hi_open``); None passes."""

    def check(value: float | None) -> float | None:
        if value is None:
            return value
        if not math.isfinite(value):
            raise typer.BadParameter(f"must be a finite number, got {value}")
        if lo is not None and (value < lo or (lo_open and value == lo)):
            raise typer.BadParameter(f"must be {'>' if lo_open else '≥'} {lo:g}, got {value:g}")
        if hi is not None and (value > hi or (hi_open and value == hi)):
            raise typer.BadParameter(f"must be {'<' if hi_open else '≤'} {hi:g}, got {value:g}")
        return value

    return check


def one_of(*choices: str) -> Callable[[Any], Any]:
    """Callback: one of ``choices`` (case-insensitive; returned in the spelling given here)."""
    lookup = {c.lower(): c for c in choices}

    def check(value: str | None) -> str | None:
        if value is None:
            return value
        if value.lower() not in lookup:
            names = ", ".join(choices[:-1]) + f" or {choices[-1]}" if len(choices) > 1 else choices[0]
            raise typer.BadParameter(f"{value!r} is not {names}")
        return lookup[value.lower()]

    return check


def list_items(text: str, option: str, parse: Callable[[str], Any] = str, kind: str = "items") -> list[Any]:
    """The items of the comma-separated list ``text`` given to ``option``, stripped and passed through ``parse``.
    An item ``parse`` refuses (its own InputError, or a ValueError: ``"{option} must be a comma-separated list
    of {kind}"``), an empty
    item ("a,,b", a comma at either end, a blank list) and an item given twice (equal after ``parse``: "1,01"
    as integers) are refused with an InputError naming the option."""
    items = [part.strip() for part in text.split(",")]
    if not any(items):
        raise InputError(f"{option} {text!r}: the list is empty; give comma-separated items")
    if "" in items:
        k = items.index("")
        raise InputError(f"{option} {text!r}: item {k + 1} of {len(items)} is empty (a comma too many)")
    try:
        values = [parse(item) for item in items]
    except InputError:  # the parser's own message (it names the item): kept
        raise
    except ValueError:
        raise InputError(f"{option} must be a comma-separated list of {kind}, got {text!r}") from None
    seen: dict[Any, str] = {}
    for item, value in zip(items, values, strict=True):
        if value in seen:
            again = f"{item!r}" if item == seen[value] else f"{item!r} (the same as {seen[value]!r})"
            raise InputError(f"{option} {text!r}: {again} is given twice")
        seen[value] = item
    return values


def _number_list(
    parse: Callable[[str], Any], kind: str, name: str, check_one: Callable[[Any], None]
) -> Callable[[Any], Any]:
    """Callback: a comma-separated list of ``parse``-able values, at least one, each passing ``check_one``, none
    empty or given twice (`list_items`). An empty list is refused, unless the option's default is empty (there
    an empty list means the default)."""

    def check(param: typer.CallbackParam, text: str | None) -> str | None:
        if text is None or (text.strip() == "" and param.default in (None, "")):
            return text if text is None else ""  # white space only: the default, as an empty list
        values = list_items(text, max(param.opts, key=len), parse, kind)
        for v in values:
            check_one(v)
        return text  # the text is kept

    return check


def int_list(lo: int = 1, hi: int | None = None, name: str = "value") -> Callable[[Any], Any]:
    """Callback: a comma-separated list of integers in [lo, hi], at least one (the text is kept)."""

    def in_range(v: int) -> None:
        if v < lo or (hi is not None and v > hi):
            rng = f"in [{lo}, {hi}]" if hi is not None else f"≥ {lo}"
            raise typer.BadParameter(f"each {name} must be {rng}, got {v}")

    return _number_list(int, "integers", name, in_range)


def float_list(lo: float | None = None, lo_open: bool = False, name: str = "value") -> Callable[[Any], Any]:
    """Callback: a comma-separated list of finite floats (> or ≥ lo), at least one (the text is kept)."""
    return _number_list(float, "numbers", name, finite(lo, lo_open=lo_open))


def file_path(what: str = "file") -> Callable[[Any], Path]:
    """Parser for an option or argument that names a file to write: the text as a Path, refusing a folder's
    spelling (`uatlab.io_safety.folder_spelling`: "out/", "out/.", "out/..": Path would silently drop "/" or
    "/." and write a file named "out"). ``what`` names the file in the message ("model file", "data file")."""
    from uatlab.io_safety import folder_spelling

    def parse(value: Any) -> Path:
        if isinstance(value, Path):  # a default, already a Path
            return value
        path = path_value(value)  # an empty text is refused there
        why = folder_spelling(str(value))
        if why is not None:
            raise typer.BadParameter(f"{why}: give a {what} path")
        return path

    return parse


def path_value(value: Any) -> Path:
    """Parser for an option that names a file or folder: the text as a Path, refusing an empty one (``--out ""``,
    an unset shell variable), which Path would read as "." and the command as the current folder."""
    if isinstance(value, Path):  # a default, already a Path
        return value
    if str(value) == "":
        raise typer.BadParameter("an empty path; give a name ('.' for the current folder)")
    return Path(str(value))


def reject_overridden(ctx: typer.Context, quick: bool, *names: str) -> None:
    """``--quick`` sets these options itself: giving one of them as well is an error, not silently ignored."""
    if not quick:
        return
    for name in names:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name == "COMMANDLINE":
            flag = "--" + name.replace("_", "-")
            raise typer.BadParameter(f"--quick sets {flag} itself; give --quick or {flag}, not both", ctx=ctx)


def thread_count(auto: bool = True) -> Callable[[Any], Any]:
    """Callback for ``--threads``: a positive integer (or ``'auto'`` if ``auto``) of at most
    `uatlab.threads.max_threads` (4 per available core); checked when the command line is parsed, so
    nothing is read or written before the error ``--threads N: at most M on this machine``."""

    def check(value: Any) -> Any:
        from uatlab.threads import thread_request

        if value is None:
            return value
        try:
            thread_request(value, "--threads", auto)
        except ValueError as exc:
            raise InputError(str(exc)) from None
        return value

    return check


def check_workers(executor: str, workers: int, threads_each: int = 1) -> None:
    """``--workers`` (× ``threads_each`` threads per worker) of the local process pool: at most
    `uatlab.threads.max_threads` (4 per available core) threads in all. More processes than that only slow
    the machine down and multiply the memory; Ray (``--executor ray``) places its workers itself. Raises
    InputError naming the numbers; call it before any file is touched."""
    from uatlab.threads import THREADS_PER_CORE_LIMIT, max_threads

    if workers < 1:
        raise InputError(f"--workers must be ≥ 1, got {workers}")
    if executor != "local" or workers * threads_each <= max_threads():
        return
    each = f" × {threads_each} threads each" if threads_each > 1 else ""
    raise InputError(
        f"--workers {workers}{each}: at most {max_threads()} local worker processes on this machine "
        f"({THREADS_PER_CORE_LIMIT} threads per available core in all); --executor ray runs more on a cluster"
    )


def refuse_given(ctx: typer.Context, what: str, names: tuple[str, ...]) -> None:
    """Refuse the options among ``names`` (parameter names) that the user gave although they have no effect with
    ``what``: InputError ``"--a, --b have no effect with WHAT"``."""

    given = given_options(ctx, *names)
    if given:
        verb = "has" if len(given) == 1 else "have"
        raise InputError(f"{', '.join(given)} {verb} no effect with {what}")


def given_options(ctx: typer.Context, *names: str) -> list[str]:
    """The options among ``names`` (parameter names) that the user gave (not left at their default), as flags."""
    flags = {p.name: max(p.opts, key=len) for p in ctx.command.params}
    given = []
    for name in names:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP"):
            given.append(flags.get(name, "--" + name.replace("_", "-")))
    return given


def no_data_error(data: object, what: str = "no sequences found") -> InputError:
    """The error of a command whose data file ``data`` holds no sequence (``what``: what it then lacks)."""
    return InputError(f"{data}: {what} (the file is empty, blank or holds only -DOCSTART- lines)")


AUTO_FORMAT_HELP = (
    "auto: JSONL for .jsonl/.json, else CoNLL columns (a note on stderr says so); a file of 3 or more columns "
    "whose last column is words, not tags (4 or more distinct labels, most of them seen once and words, more "
    "than a quarter of the first 1000 lines), and whose middle columns are words too (plain text), is refused: "
    "give conll to read it as columns anyway. 2 columns are never refused."
)


def model_encoding(model: Any, model_path: Path, data: Path) -> Any:
    """The token encoding ``model`` (loaded from ``model_path``) stores, or an InputError naming the model file
    that lacks it (it cannot map the words of ``data`` to ids)."""
    encoding = getattr(model, "encoding", None)
    if encoding is None:
        raise InputError(
            f"{model_path} stores no token encoding (metadata 'encoding'); it cannot map the words of {data} to ids"
        )
    return encoding


# the exit codes of a command that computes and prints figures (and may write files atomically), for its --help
SIMPLE_EXIT_CODES = """

\b
Exit codes:
  0    done: every figure printed (a check that fails is a figure, not an error)
  2    a user error, one 'error:' line
  130  interrupted (Ctrl-C, SIGTERM): files are written whole or not at all
"""


def with_exit_codes(text: str = SIMPLE_EXIT_CODES) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator appending ``text`` (an "Exit codes" block) to a command's docstring, its --help; apply it below
    the ``@app.command(...)`` line."""

    def add(command: Callable[..., Any]) -> Callable[..., Any]:
        command.__doc__ = (command.__doc__ or "").rstrip() + text
        return command

    return add


def refuse_prose(path: Path, fmt: str, reading: str, labels: Collection[str]) -> None:
    """InputError when ``--format auto`` read ``path`` as CoNLL columns but it is a few lines of prose for a model
    with these ``labels`` (`uatlab.data.jsonl.prose_by_labels`: all words, no last column a label of the model),
    which ``predict`` reads as text: the certificate needs labels, and reading the lines as columns would only
    fail on the first line's last word, "not in the label set"."""
    from uatlab.data.jsonl import prose_by_labels

    if fmt == "auto" and reading == "conll" and prose_by_labels(path, labels):
        named = sorted(labels)
        shown = ", ".join(named[:10]) + (f", … ({len(named)} in all)" if len(named) > 10 else "")
        raise InputError(
            f"{path} looks like plain text, not labelled columns: every line is words and no line ends in one of "
            f"the model's labels ({shown}); certify needs labelled data (CoNLL columns word ... label, or "
            "JSONL with tokens and labels)"
        )


def say_reading(path: Path, fmt: str, reading: str) -> None:
    """When ``--format auto`` chose CoNLL, one note on stderr says how the columns were read
    (`uatlab.data.jsonl.format_note`, as ``predict`` says it, after the file was read): a small file of
    prose can still pass for CoNLL (`uatlab.data.jsonl.words_as_labels` cannot tell with few lines)."""
    if fmt == "auto" and reading == "conll":
        from uatlab.cli.app import err_console
        from uatlab.data.jsonl import format_note

        err_console.print(format_note(path, "conll-columns"), highlight=False, soft_wrap=True)


def note_leftover_temps(path: Path) -> None:
    """One note on stderr naming the temporary files a killed earlier run left beside ``path``
    (`uatlab.io_safety.leftover_temps`; call it holding ``path``'s `OutputLock`), with their size: they are never
    deleted by uatlab, and a large output leaves large ones."""
    from uatlab.cli.app import err_console
    from uatlab.io_safety import leftover_temps
    from uatlab.memory_guard import human

    left = leftover_temps(path)
    if left:
        size = sum(p.stat().st_size for p in left)
        names = ", ".join(p.name for p in left[:3]) + (f" and {len(left) - 3} more" if len(left) > 3 else "")
        err_console.print(
            f"note: {len(left)} temporary file(s) of an earlier run killed before it could clean up are beside "
            f"{path}: {names} ({human(size)}); uatlab does not delete them: remove them to free the space",
            highlight=False,
            soft_wrap=True,
        )


def long_outlier_hint(token_lines: bool) -> str:
    """The likely cause of one sequence far longer than the rest: lost blank lines in a one-token-per-line (CoNLL)
    file, several sentences in one record otherwise (JSONL, one sequence per line)."""
    if token_lines:
        return "were blank lines between sentences lost?"
    return "does that line hold several sentences (one sequence per line is read as one input)?"
