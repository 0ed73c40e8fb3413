"""Reading CoNLL column files (CoNLL-2003 NER and the like).

Format: one token per line, columns separated by white space, the **word first** and the **label
last** (CoNLL-2003: ``word POS chunk NER``); sentences are separated by blank lines; lines starting
with ``-DOCSTART-`` are document markers: they end the sentence before them (as a blank line does) and are
skipped. Text is UTF-8 (a leading byte-order mark is
ignored). Errors name the file and line.

Tagging schemes: IOB2 (every entity starts with ``B-``) and IOB1 (``B-`` only between two adjacent
entities of the same type) are detected by `detect_scheme` and converted by `iob1_to_iob2`.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator
from pathlib import Path

from uatlab.data.dataset import SequenceDataset
from uatlab.data.text_file import decode_line, raw_lines
from uatlab.errors import InputError
from uatlab.io_safety import atomic_write, check_input_file

IOB_TAG = re.compile(r"O|[BIES]-\S+")  # an IOB/IOBES tag: O, B-X, I-X, E-X, S-X


def _jsonl_hint(first_line: str | None) -> str:
    """A hint to append to a CoNLL reading error when the file's first line is a JSON object (a JSONL file under
    another name), else ''."""
    import json

    if not first_line or not first_line.startswith("{"):
        return ""
    try:
        doc = json.loads(first_line)
    except ValueError:
        return ""
    if not isinstance(doc, dict):
        return ""
    return "; its first line is a JSON object: if the file is JSONL, give --format jsonl or name the file .jsonl"


def iter_conll(path: str | os.PathLike, *, plain_text_check: bool = True) -> Iterator[tuple[list[str], list[str], int]]:
    """Yield (tokens, labels, first_line) per sentence, streaming (constant memory per sentence).

    Plain text is refused (`check_not_plain_text`): the first sentence is held back until a second one
    starts, so a file that is one sentence with ≥ 3 columns and no IOB tag in its last column (a text file,
    one sentence per line) is an error naming line 1, not a one-sentence data set of first word → last word.
    ``plain_text_check=False`` (the format chosen explicitly: ``--format conll``) reads such a file as the
    columns it asks for (e.g. one POS-tagged sentence: word, lemma, ..., tag).
    """
    path = check_input_file(path)
    tokens: list[str] = []
    labels: list[str] = []
    start = 0
    ncols = None
    first: tuple[list[str], list[str], int] | None = None  # held back until a second sentence starts
    held = False  # the first sentence has been held back (it is released when a second one starts)
    tagged = False  # some line's last column of the first sentence is an IOB tag
    first_line: str | None = None  # the first non-blank line (for `_jsonl_hint`)
    with path.open("rb") as fh:
        # a blank line after the last one ends the last sentence like any other
        for lineno, raw in itertools.chain(enumerate(raw_lines(fh), start=1), [(0, b"")]):
            line = decode_line(raw, path, lineno).strip()
            if not line or line.startswith("-DOCSTART-"):  # a document marker ends a sentence too
                if tokens:
                    if held:
                        yield tokens, labels, start
                    else:
                        first, held = (tokens, labels, start), True
                    tokens, labels = [], []
                continue
            if first_line is None:
                first_line = line
            cols = line.split()
            if len(cols) < 2:
                raise InputError(
                    f"{path}:{lineno}: expected at least 2 columns (word ... label), got {len(cols)}: {line!r}"
                    + _jsonl_hint(first_line)
                )
            if ncols is None:
                ncols = len(cols)
            elif len(cols) != ncols:
                raise InputError(
                    f"{path}:{lineno}: expected {ncols} columns like the lines before, got {len(cols)}"
                    + _jsonl_hint(first_line)
                )
            if not tokens:
                start = lineno
                if first is not None:  # a second sentence: the file is not one long line-per-sentence text
                    yield first
                    first = None
            if not held and not tagged and IOB_TAG.fullmatch(cols[-1]):
                tagged = True  # only the single-sentence case (the first sentence) needs it
            tokens.append(cols[0])
            labels.append(cols[-1])
    if first is not None and plain_text_check:
        try:
            check_not_plain_text(path, first, ncols or 0, tagged)
        except InputError as exc:
            hint = _jsonl_hint(first_line)
            if hint:  # not plain text: JSONL read as CoNLL
                raise InputError(f"{path}:{first[2]}: read as CoNLL, the whole file is one sentence{hint}") from None
            raise exc from None
    if first is not None:
        yield first


def check_not_plain_text(path: Path, sentence: tuple[list[str], list[str], int], ncols: int, tagged: bool) -> None:
    """Refuse a whole file read as ONE CoNLL sentence of ≥ 3 columns none of whose labels is an IOB tag.

    That is what plain text (several words per line, no blank lines) looks like when read as CoNLL: each line
    becomes one token (its first word) labelled with its last word. Real CoNLL files separate sentences by
    blank lines (CoNLL-2003: thousands of sentences of 4 columns with IOB tags), so they never meet all three
    conditions; a two-column ``word label`` file is never refused."""
    tokens, _, start = sentence
    if ncols >= 3 and not tagged:
        raise InputError(
            f"{path}:{start}: read as CoNLL, the whole file is one sentence of {len(tokens)} line{'s' if len(tokens) != 1 else ''} with {ncols} "
            "columns and no IOB tag (O, B-X, I-X) in the last column: this looks like plain text. CoNLL has one "
            "token per line (word ... label) and a blank line between sentences; to read it as such columns "
            "anyway, give --format conll (from Python: format 'conll', or plain_text_check=False)"
        )


def read_conll(path: str | os.PathLike, scheme: str = "keep", *, plain_text_check: bool = True) -> SequenceDataset:
    """Read a whole CoNLL file. ``scheme='iob2'`` converts IOB1 labels to IOB2; ``'keep'`` leaves them.
    ``plain_text_check``: as in `iter_conll`."""
    if scheme not in ("keep", "iob2"):
        raise InputError(f"scheme must be 'keep' or 'iob2', got {scheme!r}")
    toks, labs, lines = [], [], []
    for t, y, line in iter_conll(path, plain_text_check=plain_text_check):
        toks.append(t)
        labs.append(iob1_to_iob2(y) if scheme == "iob2" else y)
        lines.append(line)
    if not toks:
        raise InputError(f"{path}: no sentences found")
    return SequenceDataset(toks, labs, source=str(path), lines=lines, token_lines=True)


def detect_scheme(labels: list[list[str]]) -> str:
    """'IOB2' if no I-X tag ever starts an entity, 'IOB1' if one does, 'none' if no B-/I- tags at all."""
    seen_prefix = False
    for seq in labels:
        prev = "O"
        for lab in seq:
            if lab.startswith(("B-", "I-")):
                seen_prefix = True
            if lab.startswith("I-") and (prev == "O" or prev[2:] != lab[2:]):
                return "IOB1"
            prev = lab
    return "IOB2" if seen_prefix else "none"


def iob1_to_iob2(labels: list[str]) -> list[str]:
    """Convert one sentence from IOB1 to IOB2 (an I-X that starts an entity becomes B-X)."""
    out = []
    prev = "O"
    for lab in labels:
        if lab.startswith("I-") and (prev == "O" or prev[2:] != lab[2:]):
            lab = "B-" + lab[2:]
        out.append(lab)
        prev = lab
    return out


def write_conll(data: SequenceDataset, path: str | os.PathLike) -> None:
    """Write ``word label`` lines with blank lines between sentences (for fixtures and exports)."""
    with atomic_write(Path(path)) as fh:
        for toks, labs in data:
            for t, y in zip(toks, labs, strict=True):
                fh.write(f"{t} {y}\n")
            fh.write("\n")
