"""Tiny Transformers whose weights the certificate tests set by hand."""

from __future__ import annotations

from typing import Any

import torch

from uatlab.models import Transformer, TransformerConfig


def hand_model(
    d: int, vocab: int, labels: int, *, layers: int = 1, ff_width: int = 0, max_len: int = 8, **config: Any
) -> Transformer:
    """A single-head rank-1 float32 model with every weight 0, no positional encoding and no readout bias
    (``config`` overrides any of these TransformerConfig fields), in eval mode."""
    fields = {"positional": "none", "dtype": "float32", "readout_bias": False, **config}
    cfg = TransformerConfig(
        d_model=d,
        n_layers=layers,
        n_heads=1,
        head_dim=1,
        rank=1,
        ff_width=ff_width,
        vocab_size=vocab,
        num_labels=labels,
        max_len=max_len,
        **fields,
    )
    model = Transformer(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    return model.eval()


def float32_tie_model() -> Transformer:
    """One token, no layers, float64: L_A = 1 and L_B = 1 + 2^-25. Label B is right and proven in float64, but a
    float32 evaluation rounds L_B to 1 (a tie: argmax picks A). The margin 2^-25 dwarfs float64 rounding
    (~2^-52) but not float32's (~2^-23)."""
    cfg = TransformerConfig(
        d_model=2,
        n_layers=0,
        vocab_size=1,
        num_labels=2,
        max_len=4,
        positional="none",
        dtype="float64",
        readout_bias=False,
    )
    model = Transformer(cfg).eval()
    with torch.no_grad():
        model.embed.weight.copy_(torch.tensor([[1.0, 2.0**-25]]))
        model.readout.weight.copy_(torch.tensor([[1.0, 0.0], [1.0, 1.0]]))
    return model
