"""The JSONL sequence format shared by ``uatlab compile``, ``uatlab train`` and the generators.

One JSON object per line: ``{"tokens": [...], "labels": [...]}``; tokens and labels may be strings
or integers (they are read as strings). Blank lines are skipped. Errors name the file and line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

from uatlab.data.dataset import SequenceDataset
from uatlab.errors import InputError


def iter_jsonl(path: str | os.PathLike) -> Iterator[tuple[list[str], list[str], int]]:
    """Yield (tokens, labels, line) per sequence, streaming."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"data file {path} does not exist")
    with path.open(encoding="utf-8") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
            if not isinstance(obj, dict) or "tokens" not in obj or "labels" not in obj:
                raise InputError(f'{path}:{lineno}: expected an object with "tokens" and "labels"')
            toks, labs = obj["tokens"], obj["labels"]
            if not isinstance(toks, list) or not isinstance(labs, list):
                raise InputError(f'{path}:{lineno}: "tokens" and "labels" must be lists')
            if len(toks) == 0:
                raise InputError(f"{path}:{lineno}: empty sequence")
            if len(toks) != len(labs):
                raise InputError(f"{path}:{lineno}: {len(toks)} tokens but {len(labs)} labels (ragged)")
            for k, v in enumerate(toks + labs):
                if not isinstance(v, (str, int)) or isinstance(v, bool):
                    kind = "token" if k < len(toks) else "label"
                    raise InputError(f"{path}:{lineno}: {kind} {v!r} is neither a string nor an integer")
            yield [str(t) for t in toks], [str(y) for y in labs], lineno


def read_jsonl(path: str | os.PathLike) -> SequenceDataset:
    toks, labs, lines = [], [], []
    for t, y, line in iter_jsonl(path):
        toks.append(t)
        labs.append(y)
        lines.append(line)
    if not toks:
        raise InputError(f"{path}: no sequences found")
    return SequenceDataset(toks, labs, source=str(path), lines=lines)


def write_jsonl(data: SequenceDataset, path: str | os.PathLike) -> None:
    with Path(path).open("w", encoding="utf-8") as fh:
        for toks, labs in data:
            fh.write(json.dumps({"tokens": toks, "labels": labs}) + "\n")


def read_sequences(path: str | os.PathLike, fmt: str = "auto") -> SequenceDataset:
    """Read CoNLL or JSONL; ``fmt='auto'`` picks JSONL for .jsonl/.json files, CoNLL otherwise."""
    from uatlab.data.conll import read_conll

    if fmt == "auto":
        fmt = "jsonl" if str(path).endswith((".jsonl", ".json")) else "conll"
    if fmt == "jsonl":
        return read_jsonl(path)
    if fmt == "conll":
        return read_conll(path)
    raise InputError(f"unknown data format {fmt!r}: use 'conll' or 'jsonl'")
