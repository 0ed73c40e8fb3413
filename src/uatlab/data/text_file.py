"""Data files as UTF-8 text: strict decoding, a leading byte-order mark dropped, errors naming file:line.

Every reader of user data (CoNLL, JSONL, plain text, next-token text) decodes through these functions, so a
binary or mis-encoded file gives the same one-line error everywhere:
``FILE:LINE: not UTF-8 text (byte 0x.. at column ..)`` (the column counts bytes from 1, after the mark).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from uatlab.errors import InputError

BOM = b"\xef\xbb\xbf"  # the UTF-8 byte-order mark ("utf-8-sig")


def decode_line(raw: bytes, path: str | os.PathLike, lineno: int) -> str:
    """One line of a data file as text: UTF-8 (a byte-order mark on line 1 is dropped), errors name the line."""
    if lineno == 1 and raw.startswith(BOM):
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path}:{lineno}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
        ) from None


# one line and its end: \r\n, a lone \r or \n, or none (the file's last line)
_LINE = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def raw_lines(fh: BinaryIO) -> Iterator[bytes]:
    """The lines of a binary file, each ending at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (Unix, Windows and
    classic Mac OS line ends, as Python's universal newlines and text editors count them), with its line end
    kept. A file saved with ``\\r`` alone is then as many lines as an editor shows, not one line of every
    column (which a CoNLL reader would take as one token with the file's last word as its label)."""
    for raw in fh:  # split at \n: a \r\n pair is never cut
        cr = raw.find(b"\r")
        if cr < 0 or (cr == len(raw) - 2 and raw.endswith(b"\r\n")):
            yield raw
        else:
            yield from (m.group() for m in _LINE.finditer(raw))


def iter_lines(path: str | os.PathLike) -> Iterator[tuple[int, str]]:
    """(line number from 1, text) per line of ``path`` (`raw_lines`: split at ``\\n``, ``\\r\\n`` and a lone
    ``\\r``; the line end is kept), streaming."""
    with Path(path).open("rb") as fh:
        for lineno, raw in enumerate(raw_lines(fh), start=1):
            yield lineno, decode_line(raw, path, lineno)


def read_text(path: str | os.PathLike) -> str:
    """The whole of ``path`` as text (strict UTF-8, the mark dropped, ``\\r\\n`` and ``\\r`` read as ``\\n``)."""
    raw = Path(path).read_bytes()
    if raw.startswith(BOM):
        raw = raw[3:]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start]  # its lines end at \n, \r\n or a lone \r, as `raw_lines` ends them
        start = max(before.rfind(b"\n"), before.rfind(b"\r")) + 1  # first byte of the offending line
        lineno = before.count(b"\n") + before.count(b"\r") - before.count(b"\r\n") + 1
        raise InputError(
            f"{path}:{lineno}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start - start + 1})"
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_token_lines(
    path: str | os.PathLike, what: str = "sequences", tokenize: Callable[[str, str], list[str]] | None = None
) -> list[tuple[int, list[str]]]:
    """(line number, tokens) of every non-blank line of ``path``: one sequence per line, the tokens by
    ``tokenize(line, "PATH:LINE")`` (default: split at whitespace); InputError ``"PATH: no WHAT found (the file
    is empty or blank)"`` when there is none. The one reader of such files: decoding, blank lines and errors
    naming the line are the same whatever the tokenizer."""
    rows = [
        (lineno, line.split() if tokenize is None else tokenize(line, f"{path}:{lineno}"))
        for lineno, line in iter_lines(path)
        if line.strip()
    ]
    if not rows:
        raise InputError(f"{path}: no {what} found (the file is empty or blank)")
    return rows


def read_token_blocks(path: str | os.PathLike) -> list[tuple[int, list[str]]]:
    """(line number of the first token, tokens) of every sentence of an unlabelled CoNLL file: one token per
    line, a blank line between sentences, ``-DOCSTART-`` lines skipped. A line with more than one column is an
    InputError naming it (a labelled file is read by `uatlab.data.conll.read_conll`)."""
    out: list[tuple[int, list[str]]] = []
    cur: list[str] = []
    first = 0
    for lineno, line in iter_lines(path):
        cols = line.split()
        if not cols or cols[0].startswith("-DOCSTART-"):
            if cur:
                out.append((first, cur))
                cur = []
            continue
        if len(cols) > 1:
            raise InputError(
                f"{path}:{lineno}: {len(cols)} columns in a file of one token per line (unlabelled CoNLL): {line.strip()!r}"
            )
        if not cur:
            first = lineno
        cur.append(cols[0])
    if cur:
        out.append((first, cur))
    if not out:
        raise InputError(f"{path}: no sentences found (the file is empty or blank)")
    return out
