"""A float32 model whose gate code has many coordinates (1-hot over ~1,500 words) certifies on the gated path.

The gate proof bounds the rounding of an off unit's pre-activation per token: a token's 1-hot code has one
non-zero coordinate, so the run's sum has a handful of non-zero terms, however many code coordinates the unit
weighs. Counting every coordinate the chunk's tokens touch instead (the chunk has a one on each) makes the
float32 rounding bound γ_|J|·G·|J| exceed the gate's −1/8 margin, and every unit then ran for every token.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from ff_per_code import per_code as _per_code

from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset
from uatlab.data.synthetic import synthetic_dataset
from uatlab.verify.certificate import _BoundedModel, certify


@pytest.fixture(scope="module")
def wide():
    data = synthetic_dataset(300, 20, 2000, 5, seed=3)
    model = compile_dataset(data, dtype="float32", code="1-hot", run_certificate=False).model
    return data, model


def _first_ff_inputs(bm, ids):
    """x, r (T, d) at the first FF for token ids (B, n), flattened, and the flat ids."""
    att = bm.layers[0][0]
    x, r = bm.embed(ids)
    bm.attention(x, r, att, att.causal)  # in place
    d = x.shape[-1]
    return x.reshape(-1, d), r.reshape(-1, d), ids.reshape(-1)


def test_wide_one_hot_code_takes_the_gated_path(wide, monkeypatch):
    data, model = wide
    bm = _BoundedModel(model)
    assert model.config.dtype == "float32" and bm.gate is not None
    assert len(bm.gate["J"]) > 1400  # the regime under test: |J|²·2^-24·G well above the gate's 1/8

    # every unit the layer evaluates densely for a token goes through `_ff_units`; the gated path evaluates a
    # token's own code's units only (in `_ff_batched`)
    def spy(self, x, r, units, hid, out):
        raise AssertionError(f"{len(units)} units evaluated densely for {len(x)} tokens")

    monkeypatch.setattr(_BoundedModel, "_ff_units", spy)
    # all 6,000 tokens at once (as one certificate pass holds them): every code coordinate is 1 for some token
    ids = np.stack(model.encoding.encode_tokens(data))  # (300, 20)
    x, r, flat = _first_ff_inputs(bm, ids)
    att, hid, out = bm.layers[0]
    y, ry = bm.ff_gated(x, r, flat, hid, out)
    assert np.isfinite(y).all() and np.isfinite(ry).all()


def test_wide_one_hot_certified_tokens_are_right_in_torch_float32(wide):
    data, model = wide
    cert = certify(model, data, keep_margins=True)
    assert cert.method == "gated-sparse" and cert.dense_units == 0  # its counter of densely evaluated units
    assert cert.certified_tokens == cert.ceiling_tokens == cert.tokens  # the fix certifies them all
    ids = torch.from_numpy(np.stack(model.encoding.encode_tokens(data)))
    labels = np.stack(model.encoding.encode_labels(data))
    with torch.no_grad():
        pred = model(ids).argmax(-1).numpy()  # PyTorch's own float32 forward
    assert model.embed.weight.dtype == torch.float32
    certified = np.stack(cert.margins) > 0
    assert certified.sum() == cert.certified_tokens
    assert (pred[certified] == labels[certified]).all()


def test_proven_off_units_are_off_in_torch_float32(wide):
    """Soundness of the gate lemma itself against a real float32 run: every unit the proof skips for a token
    (a gated unit of another code) has a pre-activation ≤ 0 in PyTorch's float32 forward."""
    data, model = wide
    bm = _BoundedModel(model)
    g = bm.gate
    ids = np.stack(model.encoding.encode_tokens(data))
    hidden = {}
    hook = model.blocks[0].ff.hidden.register_forward_hook(lambda m, i, o: hidden.setdefault("z", o.detach()))
    try:
        with torch.no_grad():
            model(torch.from_numpy(ids))
    finally:
        hook.remove()
    z = hidden["z"].reshape(-1, hidden["z"].shape[-1]).numpy()  # (T, q) float32 pre-activations
    assert z.dtype == np.float32
    cid = g["word_cid"][ids.reshape(-1)]  # (T,) code of each token
    unit_cid = np.empty_like(g["unit_cid"])
    unit_cid[g["order"]] = g["unit_cid"]  # code of each unit, in W1's row order
    gated = np.empty_like(g["gated"])
    gated[g["order"]] = g["gated"]
    other = gated[None, :] & (unit_cid[None, :] != cid[:, None])  # (T, q): skipped by the gated path
    assert other.sum() > 0.9 * other.size
    assert (z[other] <= 0).all()
    # and the proof's own bound: run on the same tokens, every gated unit is proven off (none dense)
    counters: dict[str, int] = {}
    bm.forward_bounds_groups([ids], counters)
    assert counters["dense_units"] == 0


@pytest.mark.parametrize("which", ["wide 1-hot", "3-hot forced sparse"])
def test_per_code_columns_equal_the_full_rows(wide, which, monkeypatch):
    """The batched layer gathers, per code, only the coordinates its tokens can be non-zero on: the same bound
    as evaluating every coordinate, code by code."""
    if which == "wide 1-hot":
        data, model = wide
    else:
        data = synthetic_dataset(120, 9, 60, 4, seed=5)
        model = compile_dataset(data, dtype="float32", code="3-hot", run_certificate=False).model
    monkeypatch.setattr(_BoundedModel, "BATCH_PAIRS", 4096)  # many codes per batch, several batches
    bm = _BoundedModel(model)
    if which == "wide 1-hot":
        assert bm.gate["sparse_columns"]
    else:
        assert not bm.gate["sparse_columns"]
        bm.gate["sparse_columns"] = True
    ids = np.stack(model.encoding.encode_tokens(data))
    x, r, flat = _first_ff_inputs(bm, ids)
    att, hid, out = bm.layers[0]
    y, ry = bm.ff_gated(x.copy(), r.copy(), flat, hid, out)  # in place: on copies
    y0, ry0 = _per_code(bm, x, r, flat, hid, out)
    assert not np.isnan(y0).any()
    # two float64 evaluations of the same exact sums (zero products left out), each within its radius of it
    assert (np.abs(y - y0) <= ry + ry0).all()
    np.testing.assert_allclose(ry, ry0, rtol=1e-12, atol=0)


@pytest.mark.parametrize("dtype, code", [("float64", "binary"), ("float32", "3-hot"), ("float32", "1-hot")])
def test_gate_analysed_in_row_blocks_is_the_same(dtype, code, monkeypatch):
    """`_detect_gate` reads W1[:, J] a block of units at a time (a wide code's W1[:, J] is most of W1): the gate
    it finds does not depend on the block size."""
    data = synthetic_dataset(120, 9, 60, 4, seed=5)
    model = compile_dataset(data, dtype=dtype, code=code, run_certificate=False).model
    whole = _BoundedModel(model).gate
    assert whole is not None and whole["gated"].all()
    monkeypatch.setattr(_BoundedModel, "GATE_ROWS", 1)  # one unit per block
    rows = _BoundedModel(model).gate
    assert whole.keys() == rows.keys()
    for key in whole:
        np.testing.assert_array_equal(rows[key], whole[key], err_msg=key)
