"""Out-of-core compiling: the on-disk token store, the bounded-memory ceiling counter, point reduction."""

import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uatlab.constructions.paper_a.cor1_memorizer import compile_encoded, compile_store
from uatlab.constructions.paper_a.cor1_memorizer.contexts import Occurrences, label_boundaries, reduce_occurrences
from uatlab.data.ceiling_counter import CeilingCounter
from uatlab.data.encoded import encode_dataset
from uatlab.data.keys import input_keys
from uatlab.data.synthetic import synthetic_dataset
from uatlab.data.token_store import TokenStore
from uatlab.errors import InputError


def _records(data):
    return ((t, y, i + 1) for i, (t, y) in enumerate(data))


def _dict_ceiling(keys, labels):
    groups: dict[int, dict[int, int]] = {}
    for k, y in zip(keys.tolist(), labels.tolist(), strict=True):
        groups.setdefault(k, {}).setdefault(y, 0)
        groups[k][y] += 1
    return sum(max(g.values()) for g in groups.values())


@pytest.mark.parametrize("max_pairs", [10**9, 7])
def test_ceiling_counter_matches_a_dict_count_in_memory_and_spilled(tmp_path, max_pairs):
    rng = np.random.default_rng(0)
    keys = rng.integers(0, 40, size=500) * 1_000_003
    labels = rng.integers(0, 3, size=500)
    c = CeilingCounter(max_pairs=max_pairs, buckets=5, work_dir=tmp_path)
    for s in range(0, 500, 37):
        c.add(keys[s : s + 37], labels[s : s + 37])
    assert c.ceiling() == _dict_ceiling(keys, labels)
    spilled = list(tmp_path.iterdir())
    assert bool(spilled) == (max_pairs == 7)
    c.close()
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("max_pairs", [10**9, 7])
def test_ceiling_counter_tells_inputs_apart_by_the_second_key(tmp_path, max_pairs):
    # 40 inputs under 8 first keys (as if first keys collided): the ceiling is that of the 40 inputs
    rng = np.random.default_rng(1)
    inp = rng.integers(0, 40, size=500)
    keys, keys2 = (inp % 8) * 1_000_003, inp * 7_919 + 11
    labels = rng.integers(0, 3, size=500)
    c = CeilingCounter(max_pairs=max_pairs, buckets=5, work_dir=tmp_path)
    for s in range(0, 500, 37):
        c.add(keys[s : s + 37], labels[s : s + 37], keys2[s : s + 37])
    assert c.ceiling() == _dict_ceiling(inp, labels) > _dict_ceiling(keys, labels)
    c.close()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 30), st.integers(0, 2), st.integers(0, 3)), max_size=120),
    st.integers(0, 60),
)
def test_ceiling_counter_with_unique_and_shared_keys_matches_a_dict_count(triples, unique):
    # inputs (key, second key) with labels: some keys shared by many tokens, `unique` keys held by one token each,
    # interleaved; the ceiling counts each input's majority label once
    rows = [(k * 1_000_003, k2, y) for k, k2, y in triples] + [(-(i + 1), 0, i % 3) for i in range(unique)]
    order = np.random.default_rng(len(rows)).permutation(len(rows))
    keys, keys2, labels = (np.array([rows[i][j] for i in order], dtype=np.int64).reshape(-1) for j in range(3))
    c = CeilingCounter()
    c.add(keys, labels, keys2)
    assert c.ceiling() == _dict_ceiling(keys * 7 + keys2, labels)  # keys2 < 7: (key, key2) ↦ key·7 + key2 is one-to-one


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 40)), max_size=150), st.booleans())
def test_ceiling_counter_with_one_input_per_key_matches_a_dict_count(pairs, collide):
    # every key one input (its second key a function of it: the one-sort path), labels up to 40; with `collide`
    # one key also holds a second input (the three-key sort): both count each input's majority label once
    keys = np.array([k * 1_000_003 for k, _ in pairs], dtype=np.int64).reshape(-1)
    keys2 = keys * 3 + 1
    labels = np.array([y for _, y in pairs], dtype=np.int64).reshape(-1)
    if collide and len(keys) > 1:
        keys2[0] += 1  # the first token: another input under the same first key
    c = CeilingCounter()
    c.add(keys, labels, keys2)
    assert c.ceiling() == _dict_ceiling(keys * 2 + (keys2 != keys * 3 + 1), labels)


def test_store_chunks_buckets_and_resume_after_an_error(tmp_path):
    data = synthetic_dataset(40, 6, 30, 3, seed=1)
    records = list(_records(data))
    bad = records[:25] + [(["x", "y"], ["A"], 26)] + records[25:]
    store = TokenStore(tmp_path / "w", "data", "sequence", chunk_tokens=50)
    with pytest.raises(InputError, match=r"data:26: 2 tokens but 1 labels \(ragged\)[\s\S]*25 sequences"):
        store.read(iter(bad), input_keys)
    assert store.sequences == 25 and not store.complete
    # a new process resumes from the manifest: vocabulary, lines and label counts are rebuilt from the chunks
    again = TokenStore(tmp_path / "w", "data", "sequence", chunk_tokens=50, resume=True)
    assert again.sequences == 25 and again.token_to_id == store.token_to_id
    again.read(iter(records), input_keys)
    assert again.complete and again.sequences == 40 and again.tokens == 240
    assert again.lines.tolist() == list(range(1, 41))
    assert sum(again.label_counts) == 240
    seen = [c.first_sequence for c in again.chunks()]
    assert seen == sorted(seen) and len(seen) == len(json.loads((tmp_path / "w/manifest.json").read_text())["chunks"])
    # buckets hold every occurrence of each of their words, once
    B = again.bucketize(lambda words: np.zeros((sum(map(len, words)), 1)), 1, {"x": 1})
    assert B == 5
    tables = list(again.bucket_tables())
    words = [set(t.word.tolist()) for t in tables]
    assert sum(len(t) for t in tables) == 240
    assert all(not (a & b) for i, a in enumerate(words) for b in words[i + 1 :])
    with pytest.raises(InputError, match="context='sequence'"):
        TokenStore(tmp_path / "w", "data", "prefix", resume=True)


@pytest.mark.parametrize("now", ["missing", "fifo"])
def test_resume_refuses_a_source_that_was_a_file_and_is_not_one_now(tmp_path, now):
    """The stored sequences were read from a file: a resume must be able to check that file again."""
    source = tmp_path / "data.txt"
    source.write_text("a b c\n" * 40)
    records = list(_records(synthetic_dataset(40, 3, 5, 2, seed=3)))
    store = TokenStore(tmp_path / "w", str(source), "sequence", chunk_tokens=30)
    with pytest.raises(InputError, match="ragged"):
        store.read(iter(records[:10] + [(["x", "y"], ["A"], 11)]), input_keys)
    manifest = (tmp_path / "w/manifest.json").read_bytes()
    source.unlink()
    if now == "fifo":
        os.mkfifo(source)
    with pytest.raises(InputError, match=r"data\.txt is not a regular file now[\s\S]*without --resume"):
        TokenStore(tmp_path / "w", str(source), "sequence", chunk_tokens=30, resume=True)
    assert (tmp_path / "w/manifest.json").read_bytes() == manifest  # the stored work is kept


@pytest.mark.parametrize("context", ["sequence", "prefix"])
def test_bucket_tables_carry_one_salted_key_per_input_and_an_older_pass_is_redone(tmp_path, context):
    data = synthetic_dataset(60, 5, 4, 3, seed=2)  # few words: repeated sentences and prefixes
    store = TokenStore(tmp_path / "w", "data", context, chunk_tokens=40)
    store.read(_records(data), input_keys)
    columns = (lambda words: np.zeros((sum(map(len, words)), 1)), 1, {"x": 1})
    store.bucketize(*columns)
    key_of: dict[tuple, int] = {}
    for t in store.bucket_tables():
        for q, k, key2 in zip(t.seq.tolist(), t.pos.tolist(), t.key2.tolist(), strict=True):
            toks = data.tokens[q]
            inp = tuple(toks[: k + 1]) if context == "prefix" else (tuple(toks), k)
            assert key_of.setdefault(inp, key2) == key2  # one key per input, across chunks and buckets
    assert len(set(key_of.values())) == len(key_of) < data.num_tokens  # none shared; some inputs repeat
    # a finished pass is reused with its keys; one recorded without the second key (an older layout) is redone
    first = np.concatenate([t.key2 for t in store.bucket_tables()])
    store.bucketize(*columns)
    assert np.array_equal(np.concatenate([t.key2 for t in store.bucket_tables()]), first)
    del store.m["buckets"]["record"]
    store.bucketize(*columns)
    again = np.concatenate([t.key2 for t in store.bucket_tables()])
    assert len(again) == data.num_tokens and not np.any(again == first)  # a new salt: new keys
    assert "record" in json.loads((tmp_path / "w/manifest.json").read_text())["buckets"]


@pytest.mark.parametrize("when", ["after", "before"])
def test_store_interrupted_while_a_chunk_is_written_resumes_to_the_same_store(tmp_path, monkeypatch, when):
    """Ctrl-C just after (or just before) a chunk reaches the disk: the resumed store equals an uninterrupted one
    (the chunk is neither written twice nor lost, and every token keeps one id)."""
    data = synthetic_dataset(40, 6, 30, 3, seed=1)
    whole = TokenStore(tmp_path / "whole", "data", "sequence", chunk_tokens=50)
    whole.read(_records(data), input_keys)
    real = TokenStore._write_chunk
    calls = []

    def interrupted(self, *args):
        calls.append(1)
        if len(calls) == 2 and when == "before":
            raise KeyboardInterrupt
        real(self, *args)
        if len(calls) == 2 and when == "after":
            raise KeyboardInterrupt

    monkeypatch.setattr(TokenStore, "_write_chunk", interrupted)
    store = TokenStore(tmp_path / "w", "data", "sequence", chunk_tokens=50)
    with pytest.raises(KeyboardInterrupt):
        store.read(_records(data), input_keys)
    monkeypatch.setattr(TokenStore, "_write_chunk", real)
    again = TokenStore(tmp_path / "w", "data", "sequence", chunk_tokens=50, resume=True)
    again.read(_records(data), input_keys)
    assert again.complete and again.sequences == whole.sequences and again.tokens == whole.tokens
    assert again.token_to_id == whole.token_to_id and again.lines.tolist() == whole.lines.tolist()
    words = np.concatenate([w for c in again.chunks() for w in c.word])
    assert np.array_equal(words, np.concatenate([w for c in whole.chunks() for w in c.word]))


def test_store_never_deletes_a_directory_it_did_not_make(tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(InputError, match="not a uatlab work directory"):
        TokenStore(precious, "data", "sequence")
    assert (precious / "notes.txt").read_text() == "keep me"
    with pytest.raises(InputError, match="no work directory"):
        TokenStore(tmp_path / "missing", "data", "sequence", resume=True)


def test_remove_deletes_only_the_stores_own_files(tmp_path):
    """`TokenStore.remove` deletes the files it wrote, by the names it writes: a manifest entry edited to name a
    file outside the work directory (or any other name) deletes nothing there; a fresh store over a kept one is
    refused, not cleared."""
    store = TokenStore(tmp_path / "w", "data", "sequence", chunk_tokens=50)
    store.read(_records(synthetic_dataset(20, 4, 10, 2, seed=2)), input_keys)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    with pytest.raises(InputError, match=r"holds all of data read by an earlier run[\s\S]*add --resume"):
        TokenStore(tmp_path / "w", "data", "sequence", chunk_tokens=50)
    store.m["chunks"][0]["file"] = "../victim.txt"
    killed = tmp_path / "w" / ".manifest.json.0123abcd.tmp"  # a killed run's partial manifest: the store's
    killed.write_text("{")
    (tmp_path / "w" / ".manifest.json.bak.tmp").write_text("mine")  # a user's file the pattern must not match
    store.remove()
    assert victim.read_text() == "keep me"
    # the chunk the edited entry no longer names is not proved the store's: left, and so is its folder
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == [".manifest.json.bak.tmp", "chunk_00000.npz"]


def test_store_compile_equals_in_memory_compile(tmp_path):
    data = synthetic_dataset(60, 7, 20, 4, repeats=True, seed=5)
    m1, r1 = compile_encoded(encode_dataset(data, context="sequence"))
    store = TokenStore(tmp_path / "w", "data", "sequence", chunk_tokens=37)
    store.read(_records(data), input_keys)
    m2, r2 = compile_store(store)
    assert store.m["buckets"]["count"] > 1
    for (k, a), (_, b) in zip(m1.state_dict().items(), m2.state_dict().items(), strict=True):
        assert np.array_equal(a.numpy(), b.numpy()), k
    for key in ("tokens", "ceiling_tokens", "conflict_tokens", "distinct_contexts", "beta", "ff_width"):
        assert r1[key] == r2[key], key


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 30), st.integers(0, 2)), min_size=1, max_size=60))
def test_reduction_keeps_every_label_boundary_and_first_point(points):
    pts = sorted(set((w, h) for w, h, _ in points))
    lab = {(w, h): y for w, h, y in points}
    occ = Occurrences(
        np.array([p[0] for p in pts]),
        np.array([float(p[1]) for p in pts]),
        np.array([lab[p] for p in pts]),
        len(pts),
        len(pts),
        [],
        0,
    )
    red = reduce_occurrences(occ)
    bi, gi = label_boundaries(occ)
    br, gr = label_boundaries(red)
    full = {(occ.word[i], occ.h[i], occ.h[i + 1], occ.label[i], occ.label[i + 1]) for i in bi}
    kept = {(red.word[i], red.h[i], red.h[i + 1], red.label[i], red.label[i + 1]) for i in br}
    assert full == kept and red.distinct == len(pts)
    first = lambda o: {(w, o.label[i]) for i, w in enumerate(o.word) if i == 0 or o.word[i - 1] != w}  # noqa: E731
    assert first(occ) == first(red)


def test_every_pass_reads_each_chunk_file_once(tmp_path, monkeypatch):
    """Each pass over the store (the vocabulary rebuild of a resume, chunks, chunk_arrays, the bucket pass) opens
    each chunk file once: its size, digest and arrays come from one read, not a digest read and then a load."""
    import builtins
    import io
    import os
    from pathlib import Path

    data = synthetic_dataset(40, 6, 30, 3, seed=1)
    source = tmp_path / "data.txt"
    source.write_text("".join(" ".join(t) + "\n" for t, _ in data))
    work = tmp_path / "w"
    store = TokenStore(work, str(source), "sequence", chunk_tokens=50)
    store.read(_records(data), input_keys)
    names = [c["file"] for c in store.m["chunks"]]
    assert len(names) > 1
    opened: dict[str, int] = {}
    real_open = builtins.open

    def counting_open(file, *a, **k):
        if isinstance(file, str | os.PathLike) and Path(file).parent == work and Path(file).name in names:
            opened[Path(file).name] = opened.get(Path(file).name, 0) + 1
        return real_open(file, *a, **k)

    monkeypatch.setattr(builtins, "open", counting_open)
    monkeypatch.setattr(io, "open", counting_open)  # Path.open and Path.read_bytes call io.open
    passes = {
        "resume": lambda: TokenStore(work, str(source), "sequence", chunk_tokens=50, resume=True),
        "chunks": lambda: list(store.chunks()),
        "chunk_arrays": lambda: list(store.chunk_arrays(with_lines=True)),
        "bucketize": lambda: store.bucketize(lambda w: np.zeros((sum(map(len, w)), 1)), 1, {"x": 1}),
    }
    for what, run in passes.items():
        opened.clear()
        run()
        assert opened == dict.fromkeys(names, 1), what


def test_the_manifest_reaches_the_disk_before_it_replaces_the_old_one_and_a_failed_save_keeps_the_old(
    tmp_path, monkeypatch
):
    """The manifest is written beside the old one, fsynced and renamed over it: a save that fails (a full disk at
    the rename) leaves the old manifest byte for byte and no partial file; a killed run's temporary is removed
    with the store."""
    import errno

    store = TokenStore(tmp_path / "w", "data", "sequence", chunk_tokens=30)
    store.read(_records(synthetic_dataset(20, 3, 5, 2, seed=3)), input_keys)
    manifest = tmp_path / "w/manifest.json"
    events: list[tuple[str, int]] = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.fstat(fd).st_ino)), real_fsync(fd))[1])
    monkeypatch.setattr(
        os, "replace", lambda a, b: (events.append(("replace", os.stat(a).st_ino)), real_replace(a, b))[1]
    )
    store._save_manifest()
    ino = manifest.stat().st_ino
    assert ("replace", ino) in events and ("fsync", ino) in events[: events.index(("replace", ino))], events

    def full(a, b):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    before = {p.name: p.read_bytes() for p in (tmp_path / "w").iterdir() if p.is_file()}
    store.m["note"] = "not saved"
    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        store._save_manifest()
    assert {p.name: p.read_bytes() for p in (tmp_path / "w").iterdir() if p.is_file()} == before
    monkeypatch.setattr(os, "replace", real_replace)
    (tmp_path / "w/.manifest.json.0123abcd.tmp").write_text("{")  # what a killed save leaves
    store.remove()
    assert not (tmp_path / "w").exists()
