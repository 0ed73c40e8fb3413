"""uatlab's row-layout attention equals a literal transcription of paper A's column formula."""

import numpy as np
import pytest
import torch

from uatlab.errors import InputError
from uatlab.models import MultiHeadSelfAttention, paper_self_attention, to_columns, to_rows


@pytest.mark.parametrize("heads,head_dim,rank", [(1, 1, 1), (2, 3, 1), (3, 2, 2), (2, 4, None)])
@pytest.mark.parametrize("kind", ["softmax", "hardmax"])
def test_attention_matches_paper_formula(heads, head_dim, rank, kind):
    rng = np.random.default_rng(0)
    d, n = 5, 6
    layer = MultiHeadSelfAttention(d, heads, head_dim, rank=rank, attention=kind, dtype=torch.float64)
    Z = rng.standard_normal((d, n))
    w = {k: v.detach().numpy() for k, v in layer.effective_weights().items()}
    expected = paper_self_attention(Z, w["W_O"], w["W_V"], w["W_K"], w["W_Q"], hardmax=kind == "hardmax")
    got = to_columns(layer(to_rows(Z)))[0]
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_rank_is_enforced_and_measured():
    layer = MultiHeadSelfAttention(6, 2, 4, rank=1, dtype=torch.float64)
    ranks = layer.check_ranks()
    assert all(r == [1, 1] for r in ranks.values())
    with pytest.raises(InputError, match="rank 5 is impossible"):
        MultiHeadSelfAttention(6, 1, 4, rank=5)
    full = torch.randn(2, 4, 6, dtype=torch.float64)
    with pytest.raises(InputError, match="above this layer's rank limit"):
        layer.W_Q.set_weight(full)


def test_hardmax_ties_are_averaged():
    from uatlab.models import hardmax

    w = hardmax(torch.tensor([[1.0, 3.0, 3.0, 0.0]]))
    assert w.tolist() == [[0.0, 0.5, 0.5, 0.0]]


def test_causal_and_padding_masks():
    torch.manual_seed(0)
    layer = MultiHeadSelfAttention(3, 1, 2, rank=None, causal=True, dtype=torch.float64)
    x = torch.randn(1, 5, 3, dtype=torch.float64)
    full = layer(x)
    prefix = layer(x[:, :3])
    torch.testing.assert_close(full[:, :3], prefix)  # a causal layer ignores the future
    pad = torch.tensor([[True, True, True, False, False]])
    layer.causal = False
    padded = layer(x, attend_mask=pad)
    torch.testing.assert_close(padded[:, :3], layer(x[:, :3]))
