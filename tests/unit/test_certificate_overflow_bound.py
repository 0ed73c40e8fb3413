"""The certificate's overflow exclusion from the weights alone (`_BoundedModel._overflow_excluded`).

When a bound carried from the largest embedding entries through every layer keeps every product and
partial sum below max/4 of the dtype for every input, the per-batch overflow checks are skipped. These
tests check that bound against PyTorch's own activations, that it refuses models that could overflow, and
that skipping the per-batch checks leaves the certificate unchanged.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hand_models import hand_model

from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset
from uatlab.data import from_lists
from uatlab.data.synthetic import synthetic_dataset
from uatlab.models import Transformer, TransformerConfig
from uatlab.verify.certificate import _BoundedModel, certify, certify_chunks


def _activations(model: Transformer, ids: torch.Tensor) -> dict[str, np.ndarray]:
    """max |activation| per coordinate after each stage of a PyTorch forward pass (float64 copies)."""
    seen: dict[str, np.ndarray] = {}

    def keep(name):
        def hook(_module, _inputs, output):
            seen[name] = output.detach().abs().to(torch.float64).reshape(-1, output.shape[-1]).amax(0).numpy()

        return hook

    handles = []
    if model.input_ff is not None:
        handles.append(model.input_ff.register_forward_hook(keep("input_ff")))
    for li, block in enumerate(model.blocks):
        handles.append(block.attn.register_forward_hook(keep(f"attention {li}")))
        handles.append(block.ff.register_forward_hook(keep(f"ff {li}")))
    with torch.no_grad():
        seen["embed"] = model.embed_inputs(ids).abs().to(torch.float64).reshape(-1, model.config.d_model).amax(0)
        seen["embed"] = seen["embed"].numpy()
        model(ids)
    for h in handles:
        h.remove()
    return seen


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_bound_covers_every_stage_of_pytorch_runs(seed, dtype):
    """Random models (1–3 layers, 1–3 heads, an input FF or not, large weights) and random inputs: PyTorch's
    activations after every stage lie inside the bound the exclusion carries."""
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    cfg = TransformerConfig(
        d_model=int(rng.integers(3, 9)),
        n_layers=int(rng.integers(1, 4)),
        n_heads=int(rng.integers(1, 4)),
        head_dim=2,
        rank=2,
        ff_width=int(rng.integers(2, 12)),
        vocab_size=20,
        num_labels=3,
        max_len=12,
        positional="learned",
        dtype=dtype,
        input_ff_width=int(rng.integers(2, 6)) if seed % 2 else None,
    )
    model = Transformer(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(float(10.0 ** rng.uniform(0, 1)))  # weights up to 10 × their initial scale
    bm = _BoundedModel(model)
    assert bm.overflow_excluded  # far below max/4 here: the bound must not refuse such models
    bounds = dict(bm.a_priori_bounds)
    ids = torch.from_numpy(rng.integers(0, 20, (64, 12)))
    seen = _activations(model, ids)
    assert set(seen) == set(bounds)
    for stage, act in seen.items():
        assert np.all(act <= bounds[stage]), stage


def test_the_bound_carries_the_residual_stream():
    """Layers whose updates are zero pass the embedding through: the bound must still cover it after each."""
    torch.manual_seed(0)
    cfg = TransformerConfig(
        d_model=4, n_layers=2, ff_width=3, vocab_size=5, num_labels=2, max_len=6, positional="learned", rank=1
    )
    model = Transformer(cfg).eval()
    with torch.no_grad():
        for block in model.blocks:
            block.attn.W_O.set_weight(torch.zeros_like(block.attn.W_O.weight()))
            block.ff.output.weight.zero_()
            block.ff.output.bias.zero_()
    bm = _BoundedModel(model)
    seen = _activations(model, torch.arange(5).repeat(2, 1))
    assert bm.overflow_excluded and seen["ff 1"].max() > 0
    for stage, bound in bm.a_priori_bounds:
        assert np.all(seen[stage] <= bound), stage


def test_a_model_that_can_overflow_is_not_excluded():
    # logit = 1e30 · 1e10 overflows float32: the weights alone cannot exclude it, so the per-batch check runs
    model = hand_model(2, 1, 2, positional="learned")
    with torch.no_grad():
        model.embed.weight.copy_(torch.tensor([[1e10, 1e10]]))
        model.readout.weight.copy_(torch.tensor([[1e30, -1e30], [1e25, 0.0]]))
    bm = _BoundedModel(model)
    assert not bm.overflow_excluded
    data, enc = from_lists([["a"]], [["B"]]), {"tokens": ["a"], "labels": ["A", "B"]}
    cert = certify_chunks(model, [(0, data)], 1, enc, spot_check_flops=0)
    assert cert.certified_tokens == 0 and "checked per batch" in cert.assumptions[0]


def test_a_model_without_positional_encoding_is_not_excluded():
    """No max_len bounds the sequence length then (a softmax row's rounding grows with it)."""
    assert not _BoundedModel(hand_model(2, 1, 2)).overflow_excluded


def test_skipping_the_per_batch_checks_leaves_the_certificate_unchanged(monkeypatch):
    data = synthetic_dataset(80, 8, 40, 3, seed=2)
    model = compile_dataset(data, run_certificate=False).model
    assert _BoundedModel(model).overflow_excluded
    excluded = certify(model, data, keep_margins=True)
    assert "excluded for every input" in excluded.assumptions[0]
    monkeypatch.setattr(_BoundedModel, "_overflow_excluded", lambda self: False)
    checked = certify(model, data, keep_margins=True)
    assert "checked per batch" in checked.assumptions[0]
    a, b = excluded.to_dict(margins=True), checked.to_dict(margins=True)
    for fig in (a, b):
        fig.pop("seconds"), fig.pop("assumptions")
    assert a == b and excluded.certified


def test_a_bound_that_is_not_finite_is_never_certified(monkeypatch):
    """A logit radius that is inf or NaN (a radius blown up upstream) flags the token instead of comparing."""
    data = synthetic_dataset(20, 5, 15, 3, seed=4)
    model = compile_dataset(data, run_certificate=False).model
    tokens = sum(len(t) for t in data.tokens)
    assert certify(model, data).certified_tokens == tokens  # every token, before the poisoning
    real = _BoundedModel.readout_bound

    def poisoned(self, y, ry):
        L, rL = real(self, y, ry)
        rL[0, 0], rL[1, 1] = np.inf, np.nan
        return L, rL

    monkeypatch.setattr(_BoundedModel, "readout_bound", poisoned)
    cert = certify(model, data)
    assert cert.certified_tokens == tokens - 2 and not cert.certified  # exactly the two poisoned tokens lost


# ---------------------------------------------------------------------------------------------- non-finite radii
# A softmax row with a score spread of 1e5·1e5 has exp(2ρ) = ∞: its radius is ∞ (the row is flagged). With
# the per-batch overflow checks skipped these infinities must still never reach another row's bound as NaN.


def _unit(d: int, i: int) -> torch.Tensor:
    v = torch.zeros(1, 1, d)
    v[0, 0, i] = 1.0
    return v


def _two_layer(d: int, vocab: int) -> Transformer:
    cfg = TransformerConfig(
        d_model=d, n_layers=2, ff_width=1, vocab_size=vocab, num_labels=2, max_len=2, positional="learned",
        causal=True, readout_bias=False, dtype="float32", rank=1,
    )  # fmt: skip
    model = Transformer(cfg).eval()
    one = torch.ones(1, 1, 1)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        a1, a2 = model.blocks[0].attn, model.blocks[1].attn
        for w in (a1.W_Q, a1.W_K, a1.W_V):  # layer 1: score and value read c0 (token B: 1e5, a flagged row)
            w.set_factors(one, _unit(d, 0))
        a1.W_O.set_factors(_unit(d, 1).transpose(1, 2), one)  # … and write c1
        a2.W_Q.set_factors(torch.zeros(1, 1, 1), _unit(d, 0))
        a2.W_K.set_factors(torch.zeros(1, 1, 1), _unit(d, 0))
        a2.W_V.set_factors(one, _unit(d, 1))  # layer 2 averages c1 into c2
        a2.W_O.set_factors(_unit(d, 2).transpose(1, 2), one)
    return model


def test_an_infinite_radius_in_a_later_key_does_not_shrink_an_earlier_rows_bound():
    # token B's layer-1 radius is ∞; in layer 2 row 0 (token A, causal) gives B weight exactly 0, and 0·∞ = NaN.
    # The FF reads c2 + c3 − c6 + 0.3 with c3 = c6 = 2^20: a float32 run may sum ((0.3 + 2^20) + c2) − 2^20 = 0.25,
    # so label 1 (logit z = 0.3 exactly, against 0.28) is not provable for row 0 in any context.
    d = 7
    model = _two_layer(d, 2)
    with torch.no_grad():
        E = torch.zeros(2, d)
        E[:, 3] = E[:, 6] = 2.0**20
        E[:, 5] = 0.28
        E[1, 0] = 1e5
        model.embed.weight.copy_(E)
        ff = model.blocks[1].ff
        ff.hidden.weight.copy_(torch.tensor([[0, 0, 1.0, 1.0, 0, 0, -1.0]]))
        ff.hidden.bias.fill_(0.3)
        ff.output.weight[4, 0] = 1.0
        model.readout.weight[0, 5] = 1.0
        model.readout.weight[1, 4] = 1.0
    f = np.float32
    assert ((f(0.3) + f(2.0**20)) + f(0.0)) - f(2.0**20) < f(0.28)  # the premise: a legal run gets row 0 wrong
    bm = _BoundedModel(model)
    assert bm.overflow_excluded
    for seq in ([0], [0, 1]):
        L, rL, bad = bm.forward_bounds(np.array([seq]))
        lower = L[0, 0, 1] - L[0, 0, 0] - 2 * (rL[0, 0, 1] + rL[0, 0, 0])
        assert bad[0, 0] or not lower > 0, seq
    assert bm.forward_bounds(np.array([[0, 1]]))[2][0, 1]  # token B's own row is flagged


def test_an_infinite_radius_in_one_sequence_leaves_the_others_bounds_alone():
    # sequence [A, B] has B's ∞ radius; sequence [C] (same pass) must get the bound it gets alone: C's c2 carries
    # a real error (2^12 + 1.3 rounds in float32) that a NaN in the same coordinate of B must not hide
    d = 6
    model = _two_layer(d, 3)
    with torch.no_grad():
        E = torch.zeros(3, d)
        E[:, 5] = 1.2999
        E[1, 0] = 1e5
        E[2, 0], E[2, 1], E[2, 2] = 1.3, 2.0**12, -(2.0**12)
        model.embed.weight.copy_(E)
        ff = model.blocks[1].ff
        ff.hidden.weight[0, 2] = 1.0
        ff.output.weight[4, 0] = 1.0
        model.readout.weight[0, 5] = 1.0
        model.readout.weight[1, 4] = 1.0
        assert int(model(torch.tensor([[2]])).argmax(-1)) == 0  # the premise: PyTorch gets C's label 1 wrong
    bm = _BoundedModel(model)
    alone = bm.forward_bounds_groups([np.array([[2]])])[0]
    together = bm.forward_bounds_groups([np.array([[0, 1]]), np.array([[2]])])[1]
    for a, b in zip(alone, together, strict=True):
        assert np.array_equal(a, b)
    L, rL, bad = together
    assert bad[0, 0] or not L[0, 0, 1] - L[0, 0, 0] - 2 * (rL[0, 0, 1] + rL[0, 0, 0]) > 0


def _two_coordinate_model(positional: str, **cfg) -> Transformer:
    """d = 2, one head, no FF, a readout voting for label 1 with coordinate 1 (every other weight zero)."""
    base = dict(d_model=2, n_layers=1, n_heads=1, ff_width=0, vocab_size=1, num_labels=2, max_len=4)
    base.update(cfg)
    model = Transformer(TransformerConfig(**base, positional=positional, dtype="float32", readout_bias=False))
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.readout.weight.copy_(torch.tensor([[0.0, -1.0], [0.0, 1.0]]))
    return model.eval()


ENC = {"tokens": ["a"], "labels": ["A", "B"]}


@pytest.mark.parametrize("positional", ["given", "none"])
def test_a_score_that_overflows_before_its_scale_is_refused(positional):
    """PyTorch forms q·k and then multiplies by β: with β = 2^-125 and q = k = 2^65 (float32) the product
    2^130 overflows although β·q·k = 32 does not. Neither the bound from the weights nor the per-batch check
    may pass such a model."""
    model = _two_coordinate_model(positional, head_dim=1, rank=1, beta=2.0**-125)
    with torch.no_grad():
        model.embed.weight.copy_(torch.tensor([[2.0**65, 1.0]]))
        attn = model.blocks[0].attn
        for maps in (attn.W_Q, attn.W_K):
            maps.left.fill_(1.0)
            maps.right.copy_(torch.tensor([[[1.0, 0.0]]]))
        logits = model(torch.zeros(1, 2, dtype=torch.int64))
    assert torch.isnan(logits).all()  # the premise: this run really overflows
    assert not _BoundedModel(model).overflow_excluded
    data = from_lists([["a", "a"], ["a"]], [["B", "B"], ["B"]])
    cert = certify_chunks(model, iter([(0, data)]), len(data), ENC, spot_check_flops=0)
    assert cert.certified_tokens == 0 and not cert.certified


@pytest.mark.parametrize("positional", ["given", "none"])
def test_a_low_rank_weight_whose_products_overflow_is_refused(positional):
    """PyTorch forms W_V = A·B in float32: products ±2^140 give ∞ − ∞ = NaN, which reaches every logit
    (NaN·0 = NaN) although the exact W_V is 0 and W_O is 0."""
    model = _two_coordinate_model(positional, head_dim=2, rank=2)
    with torch.no_grad():
        model.embed.weight.copy_(torch.tensor([[0.0, 1.0]]))
        attn = model.blocks[0].attn
        attn.W_V.left.copy_(torch.tensor([[[2.0**70, 2.0**70], [0.0, 0.0]]]))
        attn.W_V.right.copy_(torch.tensor([[[2.0**70, 0.0], [-(2.0**70), 0.0]]]))
        logits = model(torch.zeros(1, 3, dtype=torch.int64))
    assert torch.isnan(logits).all()  # the premise
    bm = _BoundedModel(model)
    assert not bm.overflow_excluded and bm.layers[0][0].factor_abs == 2.0**141
    data = from_lists([["a", "a", "a"]], [["B", "B", "B"]])
    cert = certify_chunks(model, iter([(0, data)]), len(data), ENC, spot_check_flops=0)
    assert cert.certified_tokens == 0 and not cert.certified


def test_a_model_with_overflowing_bounds_is_refused_without_warnings():
    """A float64 model whose bounds overflow is refused quietly (the test run turns warnings into errors)."""
    model = _two_coordinate_model("given", head_dim=1, rank=1)
    model = model.to(torch.float64)
    with torch.no_grad():
        model.embed.weight.copy_(torch.tensor([[1e300, 1.0]], dtype=torch.float64))
        attn = model.blocks[0].attn
        for maps in (attn.W_Q, attn.W_K):
            maps.left.fill_(1e10)
            maps.right.copy_(torch.tensor([[[1.0, 0.0]]], dtype=torch.float64))
    bm = _BoundedModel(model)
    assert not bm.overflow_excluded
    L, rL, bad = bm.forward_bounds(np.zeros((1, 2), dtype=np.int64))
    assert bad.all()


def _qk_model(beta: float, embed: list[list[float]]) -> Transformer:
    """q = k = coordinate 0 of the embedding (one head, head dim 1), query scale β, float32."""
    model = _two_coordinate_model("given", head_dim=1, rank=1, beta=beta, vocab_size=len(embed))
    with torch.no_grad():
        model.embed.weight.copy_(torch.tensor(embed))
        attn = model.blocks[0].attn
        for maps in (attn.W_Q, attn.W_K):
            maps.left.fill_(1.0)
            maps.right.copy_(torch.tensor([[[1.0, 0.0]]]))
    return model


def test_a_scale_beyond_float32s_range_is_refused():
    """PyTorch rounds β to float32 before the product: β = 2^130 becomes ∞ and every score ∞ or NaN, however
    small q·k (here 2^-140, so β·q·k = 2^-10 is finite)."""
    model = _qk_model(2.0**130, [[2.0**-70, 1.0]])
    with torch.no_grad():
        logits = model(torch.zeros(1, 2, dtype=torch.int64))
    assert torch.isnan(logits).all()  # the premise
    bm = _BoundedModel(model)
    assert bm.layers[0][0].scale == np.inf and not bm.overflow_excluded
    data = from_lists([["a", "a"]], [["B", "B"]])
    cert = certify_chunks(model, iter([(0, data)]), len(data), ENC, spot_check_flops=0)
    assert cert.certified_tokens == 0


def test_a_reference_that_is_not_finite_is_neither_correct_nor_bounded_nor_agreeing():
    """With fl32(β) = ∞ the float64 reference itself is NaN at every token, as PyTorch's logits are: no token may
    be counted correct or as agreeing with PyTorch, and no finite logit radius may be reported, whichever label
    the data gives (the zeroed stand-in values the bounds carry for such a token have an argmax of their own)."""
    model = _qk_model(2.0**130, [[2.0**-70, 1.0]])
    with torch.no_grad():
        assert torch.isnan(model(torch.zeros(1, 2, dtype=torch.int64))).all()  # the premise
    for label in ENC["labels"]:
        data = from_lists([["a", "a"], ["a"]], [[label, label], [label]])
        cert = certify_chunks(model, iter([(0, data)]), len(data), ENC)
        assert cert.correct_tokens == cert.certified_tokens == 0, label
        assert cert.max_logit_error_bound == np.inf and cert.to_dict()["max_logit_error_bound"] is None
        spot = cert.torch_spot_check
        assert spot["tokens"] == 3 and spot["torch_agrees_with_reference"] == 0, label
        assert cert.tokens == cert.reference_lost_tokens == cert.unbounded_tokens == 3, label


def test_a_reference_lost_at_some_tokens_leaves_the_others_figures_alone():
    """A float64 model whose third token's embedding (1e308) overflows the reference's scores and values: in the
    sequences that hold it, PyTorch's logits are NaN at some tokens and finite at others (a query that gives it
    weight exactly 0). Every token where PyTorch's own float64 forward is not finite has no reference; the others
    are labelled with PyTorch's argmax, so each token with a reference is correct and agrees with PyTorch, whichever
    label the lost ones carry. (The reference may also give up where PyTorch is finite: a score that overflowed is
    not trusted, `_BoundedModel.attention`.)"""
    torch.manual_seed(0)
    cfg = TransformerConfig(d_model=4, n_layers=1, n_heads=1, head_dim=2, rank=1, ff_width=3, vocab_size=3,
                            num_labels=2, max_len=4, positional="given", dtype="float64")  # fmt: skip
    model = Transformer(cfg).eval()
    with torch.no_grad():
        model.embed.weight[2] = 1e308
    rng = np.random.default_rng(1)
    seqs = [rng.integers(0, 2, int(rng.integers(2, 5))).tolist() for _ in range(12)]
    seqs[3][0] = seqs[7][-1] = seqs[9][1] = 2
    with torch.no_grad():
        runs = [model(torch.tensor([s]))[0] for s in seqs]
    finite = [torch.isfinite(r).all(-1).numpy() for r in runs]
    clean = int(sum(f.sum() for f in finite))
    lost = sum(len(s) for s in seqs) - clean
    assert lost >= 3 and any(0 < f.sum() < len(f) for f in finite)  # the premise: partly lost sequences
    enc = {"tokens": ["t0", "t1", "t2"], "labels": ["c0", "c1"]}
    for lost_label in (0, 1):
        labels = [
            [f"c{int(y)}" if ok else f"c{lost_label}" for y, ok in zip(r.argmax(-1), f, strict=True)]
            for r, f in zip(runs, finite, strict=True)
        ]
        data = from_lists([[f"t{i}" for i in s] for s in seqs], labels)
        cert = certify_chunks(model, iter([(0, data)]), len(data), enc, keep_margins=True)
        assert cert.correct_tokens <= clean and cert.correct_tokens + cert.reference_lost_tokens == cert.tokens
        assert cert.reference_lost_tokens >= lost, lost_label
        assert cert.correct_tokens >= sum(len(s) for s in seqs if 2 not in s)  # sequences where nothing overflows
        # the flagged rows' radii bound nothing and are left out of the maximum: the others' bound is finite
        assert 0 < cert.max_logit_error_bound < 1e-12
        assert cert.unbounded_tokens == sum(int((m == -np.inf).sum()) for m in cert.margins) >= lost
        spot = cert.torch_spot_check
        assert spot["tokens"] == cert.tokens and spot["torch_agrees_with_reference"] == cert.correct_tokens
        assert spot["certified_but_wrong"] == 0
        for m, f in zip(cert.margins, finite, strict=True):
            assert np.all(m[~f] == -np.inf)


def test_logits_whose_difference_exceeds_float64s_range_neither_warn_nor_certify():
    """Reference logits ±1e308 (finite, exactly PyTorch's): their difference overflows float64. The certificate
    (under pytest's warnings-as-errors) neither warns nor certifies the token, whose run is within max/4 of
    overflowing."""
    cfg = TransformerConfig(d_model=1, n_layers=0, vocab_size=1, num_labels=2, max_len=2, positional="none",
                            dtype="float64")  # fmt: skip
    model = Transformer(cfg).eval()
    with torch.no_grad():
        model.embed.weight.fill_(1.0)
        model.readout.weight.copy_(torch.tensor([[1e308], [-1e308]], dtype=torch.float64))
        model.readout.bias.zero_()
        assert model(torch.tensor([[0]]))[0, 0].tolist() == [1e308, -1e308]  # the premise
    data = from_lists([["t0"]], [["c0"]])
    cert = certify_chunks(model, iter([(0, data)]), 1, {"tokens": ["t0"], "labels": ["c0", "c1"]}, keep_margins=True)
    assert cert.correct_tokens == 1 and cert.certified_tokens == 0 and cert.margins[0][0] == -np.inf
    assert cert.unbounded_tokens == 1 and cert.max_logit_error_bound == np.inf


def _overflowing_unit_model() -> Transformer:
    """float64, d = 3, token 0 embedded as (1e200, 1e200, 1e200), attention writing nothing (W_O = 0), one FF unit
    z = 1e200·(−x0 − x1 + 3 x2) (exactly 1e400 > 0, beyond float64: its partial sums overflow, to −∞ in an order
    that adds the negative products first) whose output goes to x0; logits (2 x1, x0): label 1 in exact arithmetic,
    label 0 if z is read as −∞ (ReLU 0)."""
    cfg = TransformerConfig(d_model=3, n_layers=1, n_heads=1, head_dim=1, ff_width=1, vocab_size=1, num_labels=2,
                            max_len=2, positional="none", dtype="float64", readout_bias=False)  # fmt: skip
    model = Transformer(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        model.embed.weight.fill_(1e200)
        model.blocks[0].ff.hidden.weight.copy_(torch.tensor([[-1e200, -1e200, 3e200]], dtype=torch.float64))
        model.blocks[0].ff.output.weight[0, 0] = 1.0
        model.readout.weight.copy_(torch.tensor([[0.0, 2.0, 0.0], [1.0, 0.0, 0.0]], dtype=torch.float64))
    return model


def test_a_preactivation_the_reference_could_not_form_leaves_no_reference():
    """A pre-activation whose sum overflowed is ±∞ or NaN whatever its exact value: read as −∞ (the unit off) it
    would give the reference finite logits for the wrong label. The token has no reference: neither label counts
    as correct, and its logits are NaN."""
    model = _overflowing_unit_model()
    bm = _BoundedModel(model)
    hid, out = bm.layers[0][1], bm.layers[0][2]
    x, r = np.full((2, 3), 1e200), np.zeros((2, 3))
    x[1] = 1.0  # a second token whose pre-activation is finite keeps its value
    with np.errstate(over="ignore", invalid="ignore"):
        y, _ = bm.ff_dense(x, r, hid, out)
    assert np.isnan(y[0]).all() and y[1].tolist() == [1e200, 1.0, 1.0]  # 1 + relu(1e200)
    for label in ("c0", "c1"):
        data = from_lists([["t0"], ["t0", "t0"]], [[label], [label, label]])
        cert = certify_chunks(model, iter([(0, data)]), len(data), {"tokens": ["t0"], "labels": ["c0", "c1"]})
        assert cert.correct_tokens == cert.certified_tokens == 0, label
        assert cert.reference_lost_tokens == cert.tokens == 3, label


def test_a_subnormal_scale_is_taken_as_the_run_rounds_it():
    """β = 2^-135/3 lies in float32's subnormal range, where fl32(β) is off by 6·10⁻⁵ relative (far above u):
    the reference scales by fl32(β) itself, and PyTorch's logits lie within the certified radii."""
    beta = 2.0**-135 / 3
    model = _qk_model(beta, [[2.0**60, 1.0], [0.0, -1.0]])  # q·k up to 2^120: no overflow
    bm = _BoundedModel(model)
    run_beta = float(np.float32(beta))
    assert abs(run_beta - beta) / beta > 1e-5  # the premise: far from β
    assert bm.layers[0][0].scale == run_beta
    ids = np.array([[0, 1, 0], [1, 1, 0]])
    L, rL, bad = bm.forward_bounds(ids)
    with torch.no_grad():
        Lt = model(torch.from_numpy(ids)).double().numpy()
    assert not bad.any()
    assert (np.abs(Lt - L) <= rL).all()


def test_radii_whose_float64_sums_could_outgrow_the_safety_factor_are_refused(monkeypatch):
    """RADIUS_SAFETY covers the float64 rounding of a radius's sums up to a number of terms: a model whose widths
    could exceed it is refused, and so is a sequence long enough to (here with the factor shrunk to fit a small
    model and sequences of ≤ 5 tokens)."""
    import uatlab.verify.certificate as certificate_module
    from uatlab.errors import InputError
    from uatlab.numerics.float_bounds import gamma

    model = _two_coordinate_model("none", head_dim=1, rank=1, ff_width=3)
    terms = _BoundedModel(model).radius_terms
    assert terms > 2 * 2 + 3  # d, the FF's two matrices, the readout, the heads
    monkeypatch.setattr(certificate_module, "RADIUS_SAFETY", 1 + 2 * gamma(terms + 5.5, 2.0**-53))
    bm = _BoundedModel(model)
    bm.check_length(5)
    with pytest.raises(InputError, match="length 6"):
        bm.check_length(6)
    monkeypatch.setattr(certificate_module, "RADIUS_SAFETY", 1 + 2 * gamma(terms - 0.5, 2.0**-53))
    with pytest.raises(InputError, match="float64 safety margin"):
        _BoundedModel(model)
