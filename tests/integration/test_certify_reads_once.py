"""``uatlab certify MODEL DATA`` reads DATA once and hashes each distinct word once (BLAKE2b calls counted)."""

from __future__ import annotations

import hashlib
import json
import pathlib

from uatlab.cli import main
from uatlab.data import keys
from uatlab.data.jsonl import iter_jsonl
from uatlab.data.synthetic import write_synthetic


class _CountingHashlib:
    def __init__(self):
        self.calls = 0

    def blake2b(self, *a, **k):
        self.calls += 1
        return hashlib.blake2b(*a, **k)


def test_certify_reads_the_data_once_and_hashes_each_word_once(tmp_path, capsys, monkeypatch):
    data = tmp_path / "syn.jsonl"
    write_synthetic(data, 200, 12, 90, 4, seed=3)  # 2,400 tokens over ≤ 90 distinct words
    model = tmp_path / "m.safetensors"
    assert main(["compile", str(data), "--out", str(model), "--no-certify", "--json"]) in (0, None)
    words = {w for toks, _, _ in iter_jsonl(data) for w in toks}
    tokens = sum(len(toks) for toks, _, _ in iter_jsonl(data))
    assert tokens == 2400 and len(words) < tokens // 10

    opened: list[str] = []
    real_open = pathlib.Path.open

    def counting_open(self, *a, **k):
        if self.resolve() == data.resolve():
            opened.append(a[0] if a else k.get("mode", "r"))
        return real_open(self, *a, **k)

    counting = _CountingHashlib()
    keys._token_hash.cache_clear()  # a fresh process: no word seen yet
    monkeypatch.setattr(pathlib.Path, "open", counting_open)
    monkeypatch.setattr(keys, "hashlib", counting)
    capsys.readouterr()
    assert main(["certify", str(model), str(data), "--json"]) in (0, None)
    fig = json.loads(capsys.readouterr().out)
    assert fig["tokens"] == tokens and fig["certified_tokens"] == tokens
    assert len(opened) == 1  # one pass over the file
    assert counting.calls == len(words)  # each distinct word hashed once, not once per token
