"""The first feed-forward layer's bound evaluated in batches of codes equals its evaluation code by code."""

from __future__ import annotations

import numpy as np
import pytest
from ff_per_code import per_code as _per_code

from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset
from uatlab.data import from_lists
from uatlab.data.synthetic import synthetic_dataset
from uatlab.verify.certificate import _BoundedModel, certify


@pytest.fixture(scope="module")
def compiled():
    data = synthetic_dataset(120, 9, 60, 4, seed=5)
    return data, compile_dataset(data, run_certificate=False).model


@pytest.mark.parametrize("batch_pairs", [0, 64, 4096, 10**9])
def test_batches_equal_code_by_code(compiled, batch_pairs, monkeypatch):
    data, model = compiled
    monkeypatch.setattr(_BoundedModel, "BATCH_PAIRS", batch_pairs)
    bm = _BoundedModel(model)
    assert bm.gate is not None
    att, hid, out = bm.layers[0]
    ids = np.stack(model.encoding.encode_tokens(data))  # (N, n): one length
    x, r = bm.embed(ids)
    bm.attention(x, r, att, att.causal)  # in place
    d = x.shape[-1]
    x, r, ids = x.reshape(-1, d), r.reshape(-1, d), ids.reshape(-1)
    y, ry = bm.ff_gated(x.copy(), r.copy(), ids, hid, out)  # in place: on copies
    y0, ry0 = _per_code(bm, x, r, ids, hid, out)
    assert not np.isnan(y0).any()
    # the same sums, possibly in another order inside the BLAS: two float64 evaluations of the same exact
    # value, each within its own radius of it
    assert (np.abs(y - y0) <= ry + ry0).all()
    np.testing.assert_allclose(ry, ry0, rtol=1e-12, atol=0)
    assert (ry >= 0).all()


def test_certificate_unchanged_by_batching(compiled, monkeypatch):
    data, model = compiled
    blocked = certify(model, data)
    monkeypatch.setattr(_BoundedModel, "BATCH_PAIRS", 0)  # every code a batch of its own
    single = certify(model, data)
    assert blocked.certified and single.certified
    assert blocked.certified_tokens == single.certified_tokens == blocked.ceiling_tokens
    # the smallest margin at the same token; its value equal up to the reference's own rounding (another
    # summation order inside the BLAS), far below the radii's RADIUS_SAFETY slack of 2^-30
    at_b, at_s = dict(blocked.min_margin_at), dict(single.min_margin_at)
    assert at_b.pop("reference_margin") == pytest.approx(at_s.pop("reference_margin"), rel=1e-12)
    assert at_b == at_s
    assert blocked.min_certified_margin == pytest.approx(single.min_certified_margin, rel=1e-12)


def test_gated_layer_forms_abs_weights_per_slice_with_the_same_bounds(compiled):
    """The gated FF's |W1| and |W2| (the model's largest matrices) are not stored; forming them per slice gives
    bit-identical bounds to storing them."""
    data, model = compiled
    bm = _BoundedModel(model)
    _, hid, out = bm.layers[0]
    assert bm.gate is not None and hid.stored_absW is None and out.stored_absW is None
    ids = np.stack(model.encoding.encode_tokens(data))
    L, rL, bad = bm.forward_bounds(ids)
    hid.stored_absW, out.stored_absW = np.abs(hid.W), np.abs(out.W)
    L1, rL1, bad1 = bm.forward_bounds(ids)
    assert np.array_equal(L, L1) and np.array_equal(rL, rL1) and np.array_equal(bad, bad1)
    # |W| @ v in blocks of rows (a large layer): the same dot products up to the BLAS's summation order
    # (it only decides which units are proven off, with its own float64 slack, and the overflow check)
    v = np.linspace(0.0, 1.0, hid.W.shape[1])
    hid.stored_absW = None
    np.testing.assert_allclose(hid.abs_matvec(v, block=7), np.abs(hid.W) @ v, rtol=1e-14, atol=0)
    np.testing.assert_allclose(
        out.abs_matvec(np.ones(out.W.shape[1]), block=5), np.abs(out.W) @ np.ones(out.W.shape[1]), rtol=1e-14, atol=0
    )


@pytest.mark.parametrize("unit_pairs", [1, 8, 64])
def test_token_slices_of_a_code_keep_the_bounds(compiled, unit_pairs, monkeypatch):
    """A code's tokens evaluated in slices (UNIT_PAIRS): the same values, radii no larger (up to rounding)."""
    data, model = compiled
    bm = _BoundedModel(model)
    att, hid, out = bm.layers[0]
    ids = np.stack(model.encoding.encode_tokens(data))
    x, r = bm.embed(ids)
    bm.attention(x, r, att, att.causal)  # in place
    d = x.shape[-1]
    x, r, ids = x.reshape(-1, d), r.reshape(-1, d), ids.reshape(-1)
    y0, ry0 = bm.ff_gated(x.copy(), r.copy(), ids, hid, out)  # in place: on copies
    monkeypatch.setattr(_BoundedModel, "UNIT_PAIRS", unit_pairs)
    y, ry = bm.ff_gated(x.copy(), r.copy(), ids, hid, out)
    assert (np.abs(y - y0) <= ry + ry0).all()  # both within their radius of the exact value
    assert (ry >= 0).all() and (ry <= ry0 * (1 + 1e-9) + 1e-300).all()
    sliced = certify(model, data)
    assert sliced.certified and sliced.certified_tokens == sliced.ceiling_tokens


def test_length_groups_together_equal_one_at_a_time(monkeypatch):
    """`forward_bounds_groups` (the token-wise stages once over several lengths, attention in blocks of
    sequences) bounds every token as `forward_bounds` of its own length does: values within both radii, the
    same radii up to their float64 rounding, the same flags."""
    base = synthetic_dataset(150, 10, 40, 3, seed=7)
    cut = np.random.default_rng(0).integers(2, 11, len(base.tokens))
    data = from_lists(
        [t[:k] for t, k in zip(base.tokens, cut, strict=True)], [y[:k] for y, k in zip(base.labels, cut, strict=True)]
    )
    model = compile_dataset(data, run_certificate=False).model
    bm = _BoundedModel(model)
    assert bm.gate is not None
    enc = model.encoding.encode_tokens(data)
    lengths = np.array([len(t) for t in enc])
    groups = [np.stack([enc[i] for i in np.flatnonzero(lengths == n)]) for n in np.unique(lengths)]
    assert len(groups) == 9
    together = bm.forward_bounds_groups(groups)
    monkeypatch.setattr(_BoundedModel, "ATTENTION_ELEMENTS", 1)  # attention one sequence at a time
    for ids, (L, rL, bad) in zip(groups, together, strict=True):
        L1, rL1, bad1 = bm.forward_bounds(ids)
        assert L.shape == L1.shape == rL.shape == (*ids.shape, 3)
        assert np.array_equal(bad, bad1) and not bad.any()
        assert (np.abs(L - L1) <= rL + rL1).all()
        np.testing.assert_allclose(rL, rL1, rtol=1e-12, atol=0)
    cert = certify(model, data)
    assert cert.certified and cert.certified_tokens == cert.ceiling_tokens


def test_certificate_unchanged_by_pass_size(monkeypatch):
    """Forward passes of any size (length groups packed together or split by sequences): the same certified
    tokens, spot check, examples and smallest margin (its value up to the reference's rounding)."""
    import uatlab.verify.certificate as certificate_module

    base = synthetic_dataset(90, 8, 30, 3, seed=11)
    cut = np.random.default_rng(1).integers(1, 9, len(base.tokens))
    data = from_lists(
        [t[:k] for t, k in zip(base.tokens, cut, strict=True)], [y[:k] for y, k in zip(base.labels, cut, strict=True)]
    )
    model = compile_dataset(data, run_certificate=False).model
    whole = certify(model, data)
    for elements in (1, 50 * model.config.d_model):
        monkeypatch.setattr(certificate_module, "PASS_ELEMENTS", elements)
        split = certify(model, data)
        assert split.certified_tokens == whole.certified_tokens == whole.ceiling_tokens
        assert split.torch_spot_check == whole.torch_spot_check and split.torch_spot_check["tokens"] > 0
        assert len(split.uncertified_examples) == len(whole.uncertified_examples) > 0  # conflicts of the cut data
        for a, b in zip(split.uncertified_examples, whole.uncertified_examples, strict=True):
            a, b = dict(a), dict(b)
            assert a.pop("certified_margin_lower_bound") == pytest.approx(
                b.pop("certified_margin_lower_bound"), rel=1e-9
            )
            assert a == b
        at_s, at_w = dict(split.min_margin_at), dict(whole.min_margin_at)
        assert at_s.pop("reference_margin") == pytest.approx(at_w.pop("reference_margin"), rel=1e-12)
        assert at_s == at_w
        for a, b in zip(split.margins, whole.margins, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-9)
