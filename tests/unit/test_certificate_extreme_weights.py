"""Random float32 models with weights and query scales near the limits of the dtype: a token the certificate
certifies is predicted right by PyTorch's own forward pass, whose logits are finite. Half the models are drawn
with each weight tensor at a scale between 2^-70 and 2^72 and a query scale β beyond float32's range at both
ends (fl32(β) = ∞ or subnormal), so that many of PyTorch's runs overflow (asserted); the other half are tame.
Specific overflows have their own tests (test_certificate_overflow_bound.py)."""

from __future__ import annotations

import numpy as np
import torch

from uatlab.data import from_lists
from uatlab.models import Transformer, TransformerConfig
from uatlab.verify.certificate import _BoundedModel, certify_chunks


def _model(rng: np.random.Generator, extreme: bool) -> Transformer:
    head_dim = int(rng.integers(1, 3))
    cfg = TransformerConfig(
        d_model=int(rng.integers(2, 5)),
        n_layers=1,
        n_heads=1,
        head_dim=head_dim,
        rank=int(rng.integers(1, head_dim + 1)),
        ff_width=int(rng.integers(0, 4)),
        vocab_size=3,
        num_labels=2,
        max_len=4,
        positional=str(rng.choice(["given", "none"])),
        dtype="float32",
        # past float32's range at both ends when extreme (fl32(β) = ∞, or subnormal)
        beta=float(2.0 ** rng.integers(-140, 131) * rng.uniform(1, 2)) if extreme else 2.0 ** rng.uniform(-3, 3),
    )
    model = Transformer(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():  # each tensor at its own scale, 2^-70 … 2^72 when extreme
            e = rng.integers(-70, 73) if extreme else rng.integers(-2, 3)
            p.copy_(torch.from_numpy(rng.standard_normal(tuple(p.shape)) * 2.0**e))
    return model


def test_certified_tokens_of_extreme_models_are_right_in_pytorch():
    rng = np.random.default_rng(0)
    overflowing_runs = certified = refused_models = 0
    for i in range(80):
        model = _model(rng, extreme=i % 2 == 0)
        seqs = [rng.integers(0, 3, int(rng.integers(1, 4))).tolist() for _ in range(3)]
        bm = _BoundedModel(model)
        refs = [bm.forward_bounds(np.array([s]))[0][0].argmax(-1) for s in seqs]  # the reference's labels
        data = from_lists([[f"t{i}" for i in s] for s in seqs], [[f"c{y}" for y in ref] for ref in refs])
        enc = {"tokens": ["t0", "t1", "t2"], "labels": ["c0", "c1"]}
        cert = certify_chunks(model, iter([(0, data)]), len(data), enc, spot_check_flops=0, keep_margins=True)
        refused_models += not bm.overflow_excluded
        for s, ref, margin in zip(seqs, refs, cert.margins, strict=True):
            with torch.no_grad():
                logits = model(torch.tensor([s]))[0]
            finite = torch.isfinite(logits).all(dim=-1).numpy()
            overflowing_runs += int((~finite).sum())
            ok = margin > 0
            certified += int(ok.sum())
            assert finite[ok].all()
            assert (logits.argmax(-1).numpy()[ok] == ref[ok]).all()
    # the premise: the draws reach both sides of the limit
    assert overflowing_runs >= 50 and certified >= 150 and refused_models >= 20
