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
    assert certify(model, data).certified_tokens == 100
    real = _BoundedModel.readout_bound

    def poisoned(self, y, ry):
        L, rL = real(self, y, ry)
        rL[0, 0], rL[1, 1] = np.inf, np.nan
        return L, rL

    monkeypatch.setattr(_BoundedModel, "readout_bound", poisoned)
    cert = certify(model, data)
    assert cert.certified_tokens == 98 and not cert.certified
