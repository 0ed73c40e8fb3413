"""Next-token data: N sequences with ONE label each (the next token, or a class of the sequence).

Two sources:

- JSONL, one object per line: ``{"tokens": [...], "label": ...}`` (tokens and label strings or integers;
  read as strings). Sequences may differ in length; shorter ones are left-padded with a pad id.
- A plain text file cut into windows: every run of ``window`` consecutive tokens is a sequence and the
  token after it is its label. Tokenisers: ``whitespace`` (str.split) and ``python`` (the standard
  library's `tokenize`; layout tokens become ``<NEWLINE>``, ``<INDENT>``, ``<DEDENT>``, ``<NL>``).

Every error names the file and line (JSONL) or the file and the offending quantity (text).
"""

from __future__ import annotations

import io
import json
import os
import tokenize
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from uatlab.data.jsonl import check_words, json_error_at
from uatlab.data.text_file import iter_lines, read_text, read_token_lines
from uatlab.errors import InputError

PAD = "<pad>"


@dataclass
class NextTokenData:
    """N sequences (left-padded to a common length with id ``pad_id``) and one label each.

    tokens: (N, n) int64 ids into ``token_vocab`` (``pad_id = len(token_vocab)`` marks padding);
    labels: (N,) int64 ids into ``label_vocab``; lines[i]: where example i comes from (file line, or
    the token index of the window in text mode).
    """

    tokens: np.ndarray
    labels: np.ndarray
    token_vocab: list[str]
    label_vocab: list[str]
    source: str = "<memory>"
    lines: list[int] = field(default_factory=list)

    @property
    def pad_id(self) -> int:
        return len(self.token_vocab)

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def window(self) -> int:
        return int(self.tokens.shape[1])

    @property
    def num_classes(self) -> int:
        return len(self.label_vocab)

    def checked_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """(tokens (N, n), labels (N,)) as int64 ids after the checks a reader of files makes: integer ids (an
        integral float is read as its integer), tokens in [0, pad_id] (``pad_id`` only before an example's first
        token), labels in [0, num_classes), one label per example; InputError naming the row otherwise (a
        NextTokenData built by hand is not checked when it is made)."""
        from uatlab.data.ids import check_next_token_ids

        try:
            return check_next_token_ids(self.tokens, self.labels, self.pad_id, self.num_classes)
        except InputError as exc:
            raise InputError(f"{self.source}: {exc}") from None


def _ids(items: Iterable[str], vocab: dict[str, int]) -> list[int]:
    out = []
    for it in items:
        if it not in vocab:
            vocab[it] = len(vocab)
        out.append(vocab[it])
    return out


def iter_example_objects(path: Path) -> Iterable[tuple[int, str, dict]]:
    """(line number, "FILE:LINE", object) of every non-blank line of a next-token JSONL file: one JSON object
    per line, with at most one "label" (never a per-token "labels"); InputError naming the line otherwise."""
    for lineno, raw in iter_lines(path):
        if not raw.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: not valid JSON ({json_error_at(exc)})") from None
        if not isinstance(obj, dict):
            raise InputError(f'{where}: expected an object {{"tokens": [...], "label": ...}}')
        if "labels" in obj and "label" in obj:
            raise InputError(f'{where}: has both "label" and "labels"; a next-token example has one "label"')
        if "labels" in obj:
            raise InputError(f'{where}: has "labels" (one per token); a next-token example has one "label"')
        yield lineno, where, obj


def read_next_token_jsonl(path: str | os.PathLike, labels_are_tokens: bool = False) -> NextTokenData:
    """Read ``{"tokens": [...], "label": ...}`` lines. With ``labels_are_tokens`` (next-token prediction),
    a label that never occurs as a token is an error naming it and its line."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"data file {path} does not exist")
    tok_vocab: dict[str, int] = {}
    lab_vocab: dict[str, int] = {}
    seqs: list[list[int]] = []
    labs: list[int] = []
    lines: list[int] = []
    first_line: dict[str, int] = {}
    for lineno, where, obj in iter_example_objects(path):
        if "tokens" not in obj or "label" not in obj:
            raise InputError(f'{where}: expected an object with "tokens" and "label"')
        toks, lab = obj["tokens"], obj["label"]
        if not isinstance(toks, list):
            raise InputError(f'{where}: "tokens" must be a list')
        if len(toks) == 0:
            raise InputError(f"{where}: empty token list")
        for v in [*toks, lab]:
            if not isinstance(v, (str, int)) or isinstance(v, bool):
                raise InputError(f"{where}: {v!r} is neither a string nor an integer")
        strs = [str(t) for t in toks]
        check_words(strs, [str(lab)], path, lineno)
        seqs.append(_ids(strs, tok_vocab))
        lab_s = str(lab)
        first_line.setdefault(lab_s, lineno)
        labs.append(_ids([lab_s], lab_vocab)[0])
        lines.append(lineno)
    if not seqs:
        raise InputError(f"{path}: no examples found")
    if labels_are_tokens:
        for lab_s, ln in first_line.items():
            if lab_s not in tok_vocab:
                raise InputError(
                    f"{path}:{ln}: label {lab_s!r} never occurs as a token, so next-token generation cannot "
                    f"produce it (use classification labels without next-token generation)"
                )
    n = max(len(s) for s in seqs)
    pad = len(tok_vocab)
    arr = np.full((len(seqs), n), pad, dtype=np.int64)
    for i, s in enumerate(seqs):
        arr[i, n - len(s) :] = s
    return NextTokenData(arr, np.asarray(labs, dtype=np.int64), list(tok_vocab), list(lab_vocab), str(path), lines)


def tokenize_text(text: str, tokenizer: str, source: str = "<text>") -> list[str]:
    """Split text into tokens: 'whitespace' or 'python' (the tokenize module)."""
    if tokenizer == "whitespace":
        return text.split()
    if tokenizer == "python":
        out: list[str] = []
        try:
            _python_tokens(text, out)
        except (tokenize.TokenError, SyntaxError, IndentationError) as exc:
            raise InputError(f"{source}: not tokenizable as Python ({exc})") from None
        return out
    raise InputError(f"unknown tokenizer {tokenizer!r}: use 'whitespace' or 'python'")


_LAYOUT = {tokenize.NEWLINE: "<NEWLINE>", tokenize.NL: "<NL>", tokenize.INDENT: "<INDENT>", tokenize.DEDENT: "<DEDENT>"}


def _python_tokens(text: str, out: list[str]) -> None:
    """Append the tokens of ``text`` by the ``tokenize`` module to ``out`` (layout tokens as ``<NEWLINE>`` …;
    no ENCODING/ENDMARKER); raises what ``tokenize`` raises, with the tokens read before it already in ``out``."""
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type not in (tokenize.ENCODING, tokenize.ENDMARKER):
            out.append(_LAYOUT.get(tok.type, tok.string))


LINE_END_LAYOUT = ("<NEWLINE>", "<NL>", "<DEDENT>")  # what `tokenize` adds at the end of a line of Python


def tokenize_line(line: str, tokenizer: str, source: str = "<line>") -> list[str]:
    """The tokens of one line read as one whole sequence (``uatlab predict``: a sequence per line), with the
    tokenizer of `tokenize_text`. Python: the end of the line is not a token (the ``<NEWLINE>``, ``<NL>`` and
    ``<DEDENT>`` that `tokenize` adds there are dropped), and a statement still open at the end of the line
    (an unclosed bracket or string: a prefix is often unfinished) keeps the tokens read before the end."""
    if tokenizer != "python":
        return tokenize_text(line, tokenizer, source)
    out: list[str] = []
    try:
        _python_tokens(line.rstrip("\r\n"), out)
    except tokenize.TokenError as exc:
        if "EOF in multi-line" not in str(exc.args[0]):  # the line ends inside a bracket or a string: kept
            raise InputError(f"{source}: not tokenizable as Python ({exc.args[0]})") from None
    except (SyntaxError, IndentationError) as exc:
        raise InputError(f"{source}: not tokenizable as Python ({exc})") from None
    while out and out[-1] in LINE_END_LAYOUT:
        out.pop()
    if not out:
        raise InputError(f"{source}: no Python tokens on this line")
    return out


def read_sequence_lines(path: str | os.PathLike, tokenizer: str = "whitespace") -> list[tuple[int, list[str]]]:
    """(line number, tokens by `tokenize_line`) of every non-blank line of ``path``: one sequence per line;
    InputError when there is none (`read_token_lines` with this tokenizer)."""
    return read_token_lines(path, "sequences", lambda line, where: tokenize_line(line, tokenizer, where))


def windows_from_tokens(
    streams: list[tuple[str, list[str]]], window: int, max_windows: int | None = None, window_from: str | None = None
) -> NextTokenData:
    """All windows of ``window`` tokens of each stream, each labelled with the token after it.

    streams: (name, tokens) pairs (windows never cross streams). Errors: window < 1 (empty window),
    window ≥ the longest stream (no window fits). ``window_from``: what fixed the window when it is not the
    ``--window`` option (e.g. 'the model m.safetensors'): the error then asks for a longer text instead.
    """
    if window < 1:
        raise InputError(f"--window {window}: a window needs at least one token")
    longest = max((len(t) for _, t in streams), default=0)
    if window >= longest:
        name = max(streams, key=lambda s: len(s[1]))[0] if streams else "<text>"
        if longest < 2:  # no window size works: a next-token example needs a window token and a next token
            raise InputError(
                f"{name} has {longest} token{'' if longest == 1 else 's'}: a next-token example needs at least 2 "
                "(a window of ≥ 1 token and the token after it); give a longer text"
            )
        if window_from is not None:
            raise InputError(
                f"{name} has {longest} tokens: {window_from} reads windows of {window} tokens, and each needs the "
                f"token after it; give a text of at least {window + 1} tokens"
            )
        raise InputError(
            f"--window {window} is longer than the text: {name} has {longest} tokens, so no window of "
            f"{window} tokens has a next token (use --window ≤ {longest - 1})"
        )
    tok_vocab: dict[str, int] = {}
    rows, labs, where = [], [], []
    for _, toks in streams:
        if len(toks) <= window:
            continue
        ids = np.asarray(_ids(toks, tok_vocab), dtype=np.int64)
        count = len(ids) - window
        if max_windows is not None:
            count = min(count, max_windows - len(labs))
        if count <= 0:
            break
        idx = np.arange(count)[:, None] + np.arange(window)[None, :]
        rows.append(ids[idx])
        labs.extend(ids[window : window + count].tolist())
        where.extend(range(count))
    tokens = np.concatenate(rows)
    labels_tok = np.asarray(labs, dtype=np.int64)
    # labels: the subset of tokens that occur as a next token, in first-seen order
    used, lab_ids = np.unique(labels_tok, return_inverse=True)
    first = {int(u): i for i, u in enumerate(used)}
    vocab_list = list(tok_vocab)
    label_vocab = [vocab_list[int(u)] for u in used]
    labels = np.asarray([first[int(v)] for v in labels_tok], dtype=np.int64)
    assert (labels == lab_ids.reshape(-1)).all()
    src = streams[0][0] if len(streams) == 1 else f"{len(streams)} files"
    return NextTokenData(tokens, labels, vocab_list, label_vocab, src, where)


def read_text_windows(
    path: str | os.PathLike, window: int, tokenizer: str = "whitespace", window_from: str | None = None
) -> NextTokenData:
    """Windows of a text file (see `windows_from_tokens`, also for ``window_from``); validates ``window`` before
    reading."""
    if window < 1:
        raise InputError(f"--window {window}: a window needs at least one token")
    path = Path(path)
    if not path.is_file():
        raise InputError(f"text file {path} does not exist")
    text = read_text(path)  # strict UTF-8 (a byte-order mark dropped): errors name the line and byte
    return windows_from_tokens(
        [(str(path), tokenize_text(text, tokenizer, str(path)))], window, window_from=window_from
    )


def python_stdlib_windows(window: int, min_windows: int, root: str | os.PathLike | None = None) -> NextTokenData:
    """Windows of this Python's standard-library sources (tokenised by `tokenize`), files in sorted
    order until at least ``min_windows`` windows are collected (a text corpus every machine with Python has)."""
    import sysconfig

    base = Path(root or sysconfig.get_paths()["stdlib"])
    streams: list[tuple[str, list[str]]] = []
    total = 0
    for f in sorted(base.glob("*.py")):
        try:
            toks = tokenize_text(f.read_text(encoding="utf-8"), "python", str(f))
        except (InputError, UnicodeDecodeError):
            continue
        streams.append((f.name, toks))
        total += max(0, len(toks) - window)
        if total >= min_windows:
            break
    return windows_from_tokens(streams, window, max_windows=min_windows)
