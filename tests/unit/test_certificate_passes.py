"""The certificate's pass machinery: row maxima, attention scratch reuse, the flat fold of a pass."""

from __future__ import annotations

import numpy as np
import pytest

from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset
from uatlab.data import from_lists
from uatlab.data.synthetic import synthetic_dataset
from uatlab.verify.certificate import ROW_MAX_COLUMNS, _BoundedModel, _piece_position, _row_max, certify


@pytest.mark.parametrize("n", [1, 2, 7, ROW_MAX_COLUMNS, ROW_MAX_COLUMNS + 1, 60])
def test_row_max_equals_numpy_including_nan_and_infinities(n):
    rng = np.random.default_rng(n)
    a = rng.standard_normal((5, 3, n))
    a[0, 0, n // 2] = np.nan  # NaN propagates, wherever it sits in the row
    a[1, 1, -1] = np.inf
    a[2, 2, 0] = -np.inf
    got = _row_max(a)
    assert got.shape == (5, 3)
    np.testing.assert_array_equal(got, a.max(axis=-1))  # NaN positions equal too
    assert np.isnan(got[0, 0])


@pytest.fixture(scope="module")
def model_and_data():
    data = synthetic_dataset(80, 7, 40, 3, seed=11)
    return compile_dataset(data, run_certificate=False).model, data


def _attention_once(bm, ids):
    att = bm.layers[0][0]
    x, r = bm.embed(ids)
    bad = bm.attention(x, r, att, att.causal)
    return x.copy(), r.copy(), bad.copy()


def test_attention_scratch_reuse_is_bit_identical(model_and_data):
    model, data = model_and_data
    ids = np.stack(model.encoding.encode_tokens(data))  # (N, n), one length
    fresh = [_attention_once(_BoundedModel(model), part) for part in (ids[:3], ids[3:40], ids[:1])]
    bm = _BoundedModel(model)  # one model: its scratch arrays are reused, larger then smaller
    reused = [_attention_once(bm, part) for part in (ids[3:40], ids[:3], ids[:1])]
    for (x0, r0, b0), (x1, r1, b1) in zip(fresh, [reused[1], reused[0], reused[2]], strict=True):
        np.testing.assert_array_equal(x0, x1)
        np.testing.assert_array_equal(r0, r1)
        np.testing.assert_array_equal(b0, b1)


def test_flat_pass_equals_its_groups(model_and_data):
    model, data = model_and_data
    bm = _BoundedModel(model)
    ids = np.stack(model.encoding.encode_tokens(data))
    groups = [ids[:5], ids[5:6, :4], ids[6:20, :2]]  # three lengths in one pass
    L, rL, bad = bm.forward_bounds_flat(groups)
    per = bm.forward_bounds_groups(groups)
    np.testing.assert_array_equal(L, np.concatenate([g[0].reshape(-1, L.shape[1]) for g in per]))
    np.testing.assert_array_equal(rL, np.concatenate([g[1].reshape(-1, L.shape[1]) for g in per]))
    np.testing.assert_array_equal(bad, np.concatenate([g[2].reshape(-1) for g in per]))
    for g, (Lg, _, _) in zip(groups, per, strict=True):  # each group alone: the same logits
        alone = bm.forward_bounds_groups([g])[0][0]
        assert alone.shape == Lg.shape
        assert np.all(np.abs(alone - Lg) <= 1e-9 * (1 + np.abs(Lg)))


@pytest.mark.parametrize("chunk_tokens", [10**6, 60])
def test_fold_figures_agree_with_the_token_margins(chunk_tokens):
    """The fold of a pass (pieces of several lengths at once): the smallest certified margin is the smallest
    positive token margin, found where it is; the uncertified examples are the first tokens in data order whose
    margin is not positive, each with its own word, label, line and margin; the counts are those of the margins."""
    base = synthetic_dataset(60, 6, 30, 3, seed=2)
    other = {"c0": "c1", "c1": "c2", "c2": "c0"}
    toks = [list(t) for t in base.tokens]
    labs = [list(y) for y in base.labels]
    for i in (0, 3, 7):  # conflicts: the inputs of three sequences again, every label another one
        toks.append(list(base.tokens[i]))
        labs.append([other[y] for y in base.labels[i]])
    toks.append(list(base.tokens[1][:4]))  # and a shorter one twice: a piece of length 4
    labs.append(list(base.labels[1][:4]))
    toks.append(list(base.tokens[1][:4]))
    labs.append([other[y] for y in base.labels[1][:4]])
    data = from_lists(toks, labs)
    model = compile_dataset(data, run_certificate=False).model
    cert = certify(model, data, chunk_tokens=chunk_tokens, max_examples=40)
    flat = [(s, k, m) for s, row in enumerate(cert.margins) for k, m in enumerate(row.tolist())]
    positive = [(m, s, k) for s, k, m in flat if m > 0]
    assert cert.certified_tokens == len(positive) and 0 < cert.certified_tokens < cert.tokens
    m, s, k = min(positive)
    assert cert.min_certified_margin == m
    at = cert.min_margin_at
    assert (at["sequence"], at["position"], at["token"]) == (s, k, toks[s][k])
    wrong = [(s, k, m) for s, k, m in flat if not m > 0][:40]
    assert len(wrong) > 6  # several sequences, positions 0 onwards
    got = [(e["sequence"], e["position"], e["certified_margin_lower_bound"]) for e in cert.uncertified_examples]
    assert got == wrong
    for e in cert.uncertified_examples:
        assert (e["token"], e["label"]) == (toks[e["sequence"]][e["position"]], labs[e["sequence"]][e["position"]])


def test_piece_position_at_every_boundary():
    lengths = [3, 5, 2]  # pieces of 2, 1 and 3 rows
    offsets = np.cumsum([0, 2 * 3, 1 * 5, 3 * 2])
    expected = [
        (p, b, k)
        for p, (rows, n) in enumerate(zip([2, 1, 3], lengths, strict=True))
        for b in range(rows)
        for k in range(n)
    ]
    assert [_piece_position(offsets, lengths, t) for t in range(int(offsets[-1]))] == expected
    with pytest.raises(IndexError):
        _piece_position(offsets, lengths, int(offsets[-1]))
