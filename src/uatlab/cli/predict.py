"""``uatlab predict MODEL INPUT``: label every token of INPUT with a saved model (compiled or trained).

INPUT is plain text (one sentence per line, tokens separated by whitespace), CoNLL columns or JSONL (their
labels are ignored). Output: one ``token<TAB>label`` line per token, a blank line between sentences, or one
JSON object with ``--json``. Unknown words follow the model's policy (see `uatlab.models.Transformer.predict`).
With a next-token model (Kajitsuka & Sato, ICLR 2025) every line (or JSONL object) is one sequence, split by
the tokenizer the model was compiled with (``--tokenizer``), and the output is the sequence, a tab and its
predicted next token. With ``--format auto`` one note on stderr says how INPUT was read (CoNLL columns and
plain text can look alike), in every output mode.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from pathlib import Path

import typer

from uatlab.cli.app import app, print_json
from uatlab.cli.options import model_encoding, no_data_error
from uatlab.errors import InputError, SentenceTooLongError, UnknownTokenError
from uatlab.io_safety import check_input_file


def read_sentences(path: Path, fmt: str) -> list[list[str]]:
    """Token lists of ``path``: ``text`` (whitespace tokens, one sentence per non-empty line), CoNLL or JSONL;
    ``auto`` decides as every other command does (`uatlab.data.jsonl.sequence_format`)."""
    return read_input(check_input_file(path, "input file"), fmt)[0]


def read_input(path: Path, fmt: str, labels: Collection[str] | None = None) -> tuple[list[list[str]], list[int], str]:
    """(sentences, the line each starts on, how the file was read) for ``--format fmt``: the reading is
    ``'text'``, ``'conll'``, ``'conll-tokens'`` (unlabelled CoNLL, one token per line) or ``'jsonl'``
    (`uatlab.data.jsonl.format_note` words it); ``path`` is a readable file (`check_input_file`).

    ``labels``: the labels of the model that will read the file. With ``auto``, a few lines CoNLL by their shape
    whose columns are all words and whose last columns are none of these labels (`uatlab.data.jsonl.prose_by_labels`) are plain
    text: lines of prose ("EU rejects German") have the shape of CoNLL columns, and read so they would lose every
    word but the first of each line."""
    if fmt not in ("auto", "text", "conll", "jsonl"):
        raise InputError(f"--format {fmt!r}: use text, conll, jsonl or auto")
    from uatlab.data.jsonl import prose_by_labels, read_sequences, sequence_format

    given = fmt
    fmt = sequence_format(path, fmt, text=True)  # auto tells unlabelled CoNLL apart ('conll-tokens')
    if given == "auto" and fmt == "conll" and labels is not None and prose_by_labels(path, labels):
        fmt = "text"
    if given == "conll" and _one_column(path):  # --format conll: labelled or one token per line
        fmt = "conll-tokens"
    if fmt == "text":
        from uatlab.data.text_file import read_token_lines

        rows = read_token_lines(path, "sentences")
        return [tokens for _, tokens in rows], [line for line, _ in rows], "text"
    if fmt == "conll-tokens":  # unlabelled CoNLL: one token per line, sentences between blank lines
        from uatlab.data.text_file import read_token_blocks

        rows = read_token_blocks(path)
        return [tokens for _, tokens in rows], [line for line, _ in rows], "conll-tokens"
    if fmt == "jsonl":  # labels are not needed to predict: {"tokens": [...]} objects are read too
        from uatlab.data.jsonl import iter_jsonl

        rows3 = list(iter_jsonl(path, need_labels=False))
        if not rows3:
            raise no_data_error(path, "no sentences found")
        return [tokens for tokens, _, _ in rows3], [line for _, _, line in rows3], "jsonl"
    data = read_sequences(path, fmt)
    return data.tokens, data.lines, "conll"


def _one_column(path: Path) -> bool:
    """True when more lines with a token (``-DOCSTART-`` aside) have one column than have more: unlabelled
    CoNLL, whose reader names the first line of several columns; otherwise the file is labelled CoNLL, whose
    reader names the first line of one column (a label missing)."""
    from uatlab.data.text_file import iter_lines

    balance = 0  # lines of one column minus lines of more
    for _, line in iter_lines(path):
        cols = line.split()
        if cols and not cols[0].startswith("-DOCSTART-"):
            balance += 1 if len(cols) == 1 else -1
    return balance > 0


@app.command("predict")
def predict_cmd(
    model_path: Path = typer.Argument(..., help="A uatlab model file (compiled or trained)."),
    input_path: Path = typer.Argument(
        ..., help="Sentences: text (one per line), CoNLL (labelled or one token per line) or JSONL."
    ),
    fmt: str = typer.Option(
        "auto",
        "--format",
        help="text, conll, jsonl or auto. conll also reads unlabelled CoNLL (one token per line, a blank line "
        "between sentences). auto: JSONL for .jsonl/.json; CoNLL (as certify, compile and "
        "data-report read it) when the lines have one width of >= 2 columns over two blank-line-separated "
        "sentences, or one sentence of several lines each ending in an IOB tag; unlabelled CoNLL when every line has one "
        "word and blank lines separate two or more sentences, one of several lines; plain text when the widths "
        "differ, every line has one word otherwise, one block of >= 3 columns not all tagged, a single line, or "
        "when every column of >= 3 is words rather than tags (as compile refuses it), also in a few lines whose "
        "last columns are none of the model's labels; "
        "several 2-column lines in one block not all tagged are refused: give --format. A file CoNLL but for fewer "
        "lines of one word (a label missing) is refused naming the first. With auto a note on stderr says how the "
        "file was read.",
    ),
    unknown: str = typer.Option(
        "",
        "--unknown",
        help="Unknown words: error or unk (default: the model's <unk> if it has one, else error; a next-token "
        "model has none).",
    ),
    json_out: bool = typer.Option(
        False,
        "--json",
        help="Print one JSON object instead of token/label lines (with the words read, "
        "'words', and the format used, 'format').",
    ),
) -> None:
    """Label every token of INPUT with a saved model.

    \b
    Exit codes:
      0    every sentence labelled
      1    stdout was closed before the end (a pipe such as | head)
      2    a user error, one 'error:' line (bad input, a word the model does not know,
           a model file)
      130  interrupted (Ctrl-C, SIGTERM): the labels printed so far are whole
           sentences, and the last line says how many (--json prints nothing)
    """
    from uatlab.models.io import load

    if unknown not in ("", "error", "unk"):
        raise InputError(f"--unknown must be error or unk, got {unknown!r}")
    from uatlab.cli.next_token import is_next_token_model, predict_next_token_command

    check_input_file(input_path, "input file")
    if is_next_token_model(model_path):
        return predict_next_token_command(model_path, input_path, fmt, json_out, unknown)
    t0 = time.perf_counter()
    from uatlab.threads import apply_threads

    try:  # small products over many columns: extra threads only spin-wait on a busy machine (uatlab.threads)
        apply_threads("auto")
    except ValueError as exc:  # UATLAB_THREADS set to something unusable
        raise InputError(str(exc)) from None
    model = load(model_path)
    labels = model_encoding(model, model_path, input_path).id_to_label
    sentences, lines, reading = read_input(input_path, fmt, labels)
    policy = unknown or None
    try:  # every word and length checked before anything is labelled or printed
        model.encode_sentences(sentences, unknown=policy)
    except UnknownTokenError as exc:  # the token's own line in CoNLL (one token per line), else the sentence's
        from uatlab.data.dataset import token_line

        line = token_line(lines[exc.sentence], exc.position, reading in ("conll", "conll-tokens"))
        raise InputError(f"{input_path}:{line}: {exc}") from None
    except SentenceTooLongError as exc:  # the line the sentence starts on
        raise InputError(f"{input_path}:{lines[exc.sentence]}: {exc}") from None
    except InputError as exc:
        raise InputError(f"{input_path}: {exc}") from None
    from uatlab.cli.app import err_console

    if fmt == "auto":  # how the file was read: CoNLL columns and plain text look alike
        from uatlab.data.jsonl import format_note

        err_console.print(format_note(input_path, reading), highlight=False, soft_wrap=True)
    known = model.encoding.token_to_id
    unknown_tokens = sum(1 for s in sentences for t in s if t not in known)
    n_tokens = sum(len(s) for s in sentences)
    if unknown_tokens:
        err_console.print(
            f"warning: {input_path}: {unknown_tokens} of {n_tokens} tokens are not in the model's vocabulary and "
            f"were read as {model.encoding.unknown_token!r}",
            highlight=False,
            soft_wrap=True,
        )
    labels = _label_in_parts(model, sentences, policy, n_tokens, stream=not json_out)
    if json_out:
        print_json(
            {
                "model": str(model_path),
                "input": str(input_path),
                "sentences": len(sentences),
                "tokens": n_tokens,
                "unknown_tokens": unknown_tokens,
                "seconds": time.perf_counter() - t0,
                "labels": labels,
                "format": "conll" if reading == "conll-tokens" else reading,
                "words": sentences,
            }
        )


#: tokens labelled (and, as text, printed) at a time: the progress bar's step
PART_TOKENS = 65_536


def _label_in_parts(model, sentences: list[list[str]], policy: str | None, n_tokens: int, stream: bool) -> list:
    """The labels of ``sentences``, computed ``PART_TOKENS`` tokens at a time under a progress bar (stderr). With
    ``stream`` each part is printed as soon as it is labelled (``token<TAB>label`` lines, a blank line after each
    sentence) and nothing is returned: an interrupt keeps what was printed, and its last line says how much."""
    from uatlab.cli.app import say_on_interrupt
    from uatlab.cli.progress import StageBars

    out: list[list[str]] = []
    if not stream:
        say_on_interrupt("interrupted: nothing was printed (--json prints every label at the end)")
    with StageBars(unit="tok") as bars:
        step = bars.step("labelling", n_tokens)
        start = 0
        while start < len(sentences):
            stop, size = start, 0
            while stop < len(sentences) and (size == 0 or size + len(sentences[stop]) <= PART_TOKENS):
                size += len(sentences[stop])
                stop += 1
            part = model.predict(sentences[start:stop], unknown=policy)
            if stream:
                text = []
                for toks, labs in zip(sentences[start:stop], part, strict=True):
                    text.extend(f"{t}\t{y}" for t, y in zip(toks, labs, strict=True))
                    text.append("")
                # sentences end in a blank line, but the last: the output as one piece would be
                bars.print_out("\n".join(text) + ("\n" if stop < len(sentences) else ""))
                say_on_interrupt(
                    f"interrupted: the labels of the first {stop} of {len(sentences)} sentences were printed"
                )
            else:
                out.extend(part)
            step(size)
            start = stop
    return out
