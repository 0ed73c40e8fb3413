"""uatlab.data.synthetic: shapes, determinism, the no-repeat option, JSONL round trip, bad sizes."""

import json

import numpy as np
import pytest

from uatlab.data import read_jsonl
from uatlab.data.synthetic import iter_synthetic, synthetic_dataset, write_synthetic
from uatlab.errors import InputError


def test_shapes_and_vocabularies():
    ds = synthetic_dataset(50, 7, 20, 4, seed=1)
    assert len(ds) == 50 and all(len(t) == 7 for t in ds.tokens)
    assert set(ds.vocabulary()) <= {f"t{i}" for i in range(20)}
    assert set(ds.label_set()) <= {f"c{i}" for i in range(4)}


def test_seeded_determinism_and_seed_matters():
    a = synthetic_dataset(30, 5, 10, 3, seed=7)
    b = synthetic_dataset(30, 5, 10, 3, seed=7)
    c = synthetic_dataset(30, 5, 10, 3, seed=8)
    assert a.tokens == b.tokens and a.labels == b.labels
    assert a.tokens != c.tokens


def test_no_repeats_gives_distinct_tokens():
    for V in (12, 1000):  # both generation paths
        ds = synthetic_dataset(40, 10, V, 3, repeats=False, seed=2)
        assert all(len(set(t)) == len(t) for t in ds.tokens)
    with pytest.raises(InputError, match="V ≥ n"):
        list(iter_synthetic(1, 5, 3, 2, repeats=False))


def test_labels_are_roughly_uniform():
    ds = synthetic_dataset(400, 25, 100, 4, seed=0)
    counts = np.unique(np.concatenate([np.array(y) for y in ds.labels]), return_counts=True)[1]
    assert counts.min() > 0.2 * counts.sum() and counts.max() < 0.3 * counts.sum()


def test_jsonl_round_trip(tmp_path):
    path = write_synthetic(tmp_path / "s.jsonl", 20, 6, 9, 3, seed=4)
    back = read_jsonl(path)
    ref = synthetic_dataset(20, 6, 9, 3, seed=4)
    assert back.tokens == ref.tokens and back.labels == ref.labels


@pytest.mark.parametrize("args", [(0, 3, 3, 3), (3, 0, 3, 3), (3, 3, 0, 3), (3, 3, 3, 0)])
def test_bad_sizes(args):
    with pytest.raises(InputError, match="positive"):
        list(iter_synthetic(*args))


def _without_record(path, out):
    """``path`` as synth wrote it before line 1 recorded its options: the same lines, no "synth" key."""
    lines = path.read_text().splitlines(keepends=True)
    first = json.loads(lines[0])
    del first["synth"]
    out.write_text(json.dumps(first) + "\n" + "".join(lines[1:]))
    return out


def test_line_1_records_the_options_and_readers_ignore_it(tmp_path):
    from uatlab.data import iter_jsonl, read_sequences

    path = write_synthetic(tmp_path / "s.jsonl", 20, 6, 9, 3, repeats=False, seed=4)
    first = json.loads(path.read_text().splitlines()[0])
    assert first["synth"] == {"version": 1, "N": 20, "n": 6, "V": 9, "C": 3, "repeats": False, "seed": 4}
    bare = _without_record(path, tmp_path / "bare.jsonl")
    assert list(iter_jsonl(path)) == list(iter_jsonl(bare))  # compile and certify read this
    assert list(iter_jsonl(path, need_labels=False)) == list(iter_jsonl(bare, need_labels=False))  # predict
    a, b = read_sequences(path), read_sequences(bare)  # train, experiments, the library
    assert (a.tokens, a.labels, a.lines) == (b.tokens, b.labels, b.lines)


@pytest.mark.parametrize(
    "record,why",
    [
        ({"n": 10**12}, "line 1 differs"),  # a line of 10^12 tokens cannot fit: refused without generating it
        ({"V": 2**70}, "synth cannot write"),
        ({"version": 2}, "not one of synth's"),
        ({"seed": -1}, "options synth does not take"),
        ({"repeats": False, "V": 3}, "options synth does not take"),
    ],
)
def test_a_forged_record_is_refused_quickly(tmp_path, record, why):
    from uatlab.data.synthetic import check_synthetic_target

    path = write_synthetic(tmp_path / "s.jsonl", 5, 4, 10, 3)
    lines = path.read_text().splitlines(keepends=True)
    first = json.loads(lines[0])
    first["synth"].update(record)
    path.write_text(json.dumps(first) + "\n" + "".join(lines[1:]))
    before = path.read_bytes()
    with pytest.raises(InputError, match=why):
        check_synthetic_target(path)
    with pytest.raises(InputError, match="move it away"):
        write_synthetic(path, 5, 4, 10, 3)
    assert path.read_bytes() == before
