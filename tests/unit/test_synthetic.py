"""uatlab.data.synthetic: shapes, determinism, the no-repeat option, JSONL round trip, bad sizes."""

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
