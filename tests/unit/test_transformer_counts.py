"""Feed-forward layers without biases and the non-zero parameter count."""

from __future__ import annotations

import torch

from uatlab.models.transformer import Transformer, TransformerConfig


def _model(ff_bias: bool) -> Transformer:
    cfg = TransformerConfig(
        d_model=6,
        ff_width=5,
        vocab_size=11,
        num_labels=3,
        max_len=4,
        positional="given",
        readout_bias=False,
        ff_bias=ff_bias,
        dtype="float64",
    )
    return Transformer(cfg)


def test_ff_without_bias_drops_exactly_b1_and_b2():
    with_b, without = _model(True), _model(False)
    assert with_b.num_parameters(non_embedding=True) - without.num_parameters(non_embedding=True) == 5 + 6
    assert without.blocks[0].ff.hidden.bias is None and without.blocks[0].ff.output.bias is None
    x = torch.randint(0, 11, (2, 4))
    assert without(x).shape == (2, 4, 3)


def test_nonzero_count_counts_only_nonzero_entries():
    m = _model(False)
    with torch.no_grad():
        for p in m.parameters():
            p.zero_()
        m.blocks[0].ff.hidden.weight[0, :3] = 1.0  # 3 non-zero FF weights
        m.embed.weight[0, 0] = 1.0  # embedding: excluded from the non-embedding count
    assert m.num_parameters(non_embedding=True, nonzero=True) == 3
    assert m.num_parameters(nonzero=True) == 4
    assert m.num_parameters(non_embedding=True) > 3
