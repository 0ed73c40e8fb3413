"""The certificate does not depend on how the data is cut into chunks or where the chunks run."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset
from uatlab.data import from_lists
from uatlab.data.synthetic import synthetic_dataset
from uatlab.verify.certificate import _chunks, certify_chunks


@pytest.fixture(scope="module")
def mixed():
    """Sequences of lengths 1–8 cut from a synthetic set, with relabelled copies of some of them inserted later:
    conflicts (a second label for an input seen before: no model gets both right, never certified) spread over
    every length and over the data."""
    base = synthetic_dataset(90, 8, 30, 3, seed=11)
    rng = np.random.default_rng(2)
    cut = rng.integers(1, 9, len(base.tokens))
    tokens = [t[:k] for t, k in zip(base.tokens, cut, strict=True)]
    labels = [y[:k] for y, k in zip(base.labels, cut, strict=True)]
    for i in rng.choice(len(tokens), 20, replace=False).tolist():
        at = int(rng.integers(i + 1, len(tokens) + 1))  # after the original: the original's label wins ties
        tokens.insert(at, list(tokens[i]))
        labels.insert(at, ["conflict"] * len(tokens[i]))
    data = from_lists(tokens, labels)
    model = compile_dataset(data, run_certificate=False).model
    return data, model


def _certify(model, data, tokens_per_chunk, **kw):
    return certify_chunks(model, _chunks(data, tokens_per_chunk), len(data), spot_check_flops=0, **kw)


def test_examples_are_the_first_uncertified_tokens_whatever_the_chunks(mixed):
    data, model = mixed
    whole = _certify(model, data, 10**9, max_examples=5, keep_margins=True)
    failed = [(s, k) for s, m in enumerate(whole.margins) for k in np.flatnonzero(~(m > 0)).tolist()]
    assert len(failed) > 5  # the premise: more uncertified tokens than examples, across lengths
    for tokens in (1, 7, 40, 10**9):
        cert = _certify(model, data, tokens, max_examples=5)
        assert [(e["sequence"], e["position"]) for e in cert.uncertified_examples] == failed[:5]
        for e in cert.uncertified_examples:
            assert e["token"] == data.tokens[e["sequence"]][e["position"]]


def test_a_thread_pool_mapper_gives_the_in_process_certificate(mixed):
    """Threads share one bounded model per process: each thread needs its own pass buffers."""
    data, model = mixed
    here = _certify(model, data, 25, keep_margins=True)

    def threads(fn, items):
        with ThreadPoolExecutor(4) as pool:
            yield from pool.map(lambda item: fn(*item), items)

    for _ in range(3):
        there = _certify(model, data, 25, keep_margins=True, mapper=threads)
        assert there.certified_tokens == here.certified_tokens > 0
        assert there.min_certified_margin == here.min_certified_margin
        for a, b in zip(there.margins, here.margins, strict=True):
            assert np.array_equal(a, b)
