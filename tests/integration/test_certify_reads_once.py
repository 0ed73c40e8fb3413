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


def test_certificate_from_the_token_store_equals_the_streamed_one(tmp_path):
    """The compile's certificate reads the store's encoded words and keys; it is the certificate of the records
    streamed from the file (every field, margins included), with a chunk boundary inside the data."""
    from uatlab.constructions.paper_a.cor1_memorizer import compile_memorizer
    from uatlab.data.token_store import TokenStore
    from uatlab.verify.certificate import certify_chunks, store_chunks, stream_chunks

    data = tmp_path / "syn.jsonl"
    write_synthetic(data, 150, 9, 60, 3, seed=11)
    store = TokenStore(tmp_path / "work", str(data), "sequence", 400)
    store.read(iter_jsonl(data), keys.input_keys)
    con = compile_memorizer(store, certify=False)
    model = con.model
    streamed = list(stream_chunks(iter_jsonl(data), str(data), tokens_per_chunk=500))
    stored = list(store_chunks(store, model.encoding, tokens_per_chunk=500))
    assert [s for s, _ in stored] == [s for s, _ in streamed] and len(stored) == 3
    a = certify_chunks(model, iter(streamed), keep_margins=True)
    b = certify_chunks(model, iter(stored), keep_margins=True)
    da, db = a.to_dict(margins=True), b.to_dict(margins=True)
    da.pop("seconds"), db.pop("seconds")
    assert da == db and a.tokens == 1350 and a.certified_tokens > 0


def test_store_chunks_cut_where_the_stream_cuts_for_any_chunk_size(tmp_path):
    """Certify chunks cut from the store's flat arrays: the same starts and the same sequences as the streamed
    records, for chunk sizes below one sequence, across store-chunk boundaries and past the whole data; a size
    below 1 is refused."""
    import numpy as np
    import pytest

    from uatlab.constructions.paper_a.cor1_memorizer import compile_memorizer
    from uatlab.data.token_store import TokenStore
    from uatlab.verify.certificate import store_chunks, stream_chunks

    data = tmp_path / "syn.jsonl"
    write_synthetic(data, 40, 7, 30, 3, seed=2)
    store = TokenStore(tmp_path / "work", str(data), "sequence", 37)  # store chunks of ≥ 37 tokens
    store.read(iter_jsonl(data), keys.input_keys)
    enc = compile_memorizer(store, certify=False).model.encoding
    for size in (1, 6, 7, 36, 37, 100, 280, 10**6):
        streamed = list(stream_chunks(iter_jsonl(data), str(data), tokens_per_chunk=size))
        stored = list(store_chunks(store, enc, tokens_per_chunk=size))
        assert [s for s, _ in stored] == [s for s, _ in streamed], size
        for (_, a), (_, b) in zip(stored, streamed, strict=True):
            assert np.array_equal(a.lengths(), [len(t) for t in b.tokens])
            assert np.array_equal(a.tok, np.concatenate(enc.encode_tokens(b)))
            assert np.array_equal(a.lab, np.concatenate(enc.encode_labels(b)))
            assert list(a.lines) == list(b.lines)
    with pytest.raises(ValueError, match="at least 1"):
        next(store_chunks(store, enc, tokens_per_chunk=0))
