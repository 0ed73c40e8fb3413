"""The Transformer: shapes, parameter counts, positional encodings, input validation, save/load."""

import json

import pytest
import torch

from uatlab.errors import InputError, ModelFileError
from uatlab.models import Transformer, TransformerConfig, load_model, read_metadata, save_model


def small_config(**kw):
    base = dict(
        d_model=6,
        n_layers=2,
        n_heads=2,
        head_dim=3,
        rank=1,
        ff_width=(5, 7),
        vocab_size=11,
        num_labels=4,
        max_len=9,
        positional="learned",
        dtype="float64",
    )
    base.update(kw)
    return TransformerConfig(**base)


def test_forward_shapes_and_padding():
    torch.manual_seed(0)
    model = Transformer(small_config())
    ids = torch.randint(0, 11, (3, 7))
    mask = torch.ones(3, 7, dtype=torch.bool)
    mask[1, 5:] = False
    out = model(ids, attend_mask=mask)
    assert out.shape == (3, 7, 4) and out.dtype == torch.float64
    # padding keys do not influence real tokens: compare with the unpadded sequence
    alone = model(ids[1:2, :5])
    torch.testing.assert_close(out[1:2, :5], alone)


@pytest.mark.parametrize("causal", [False, True])
def test_a_padding_token_whose_value_overflows_leaves_real_tokens_as_without_padding(causal):
    """A masked key has weight exactly 0, but 0 · ∞ is NaN: the padding token's value must not reach real tokens
    even when it overflows (a padding id whose embedding row no real token of the batch uses)."""
    torch.manual_seed(1)
    model = Transformer(small_config(causal=causal))
    with torch.no_grad():
        model.embed.weight[0] = torch.finfo(torch.float64).max / 2  # finite, but W_V · row overflows
        model.blocks[0].attn.W_V.left.mul_(8.0)
    ids = torch.tensor([[3, 5, 7, 2, 0, 0], [4, 1, 6, 8, 9, 10]])  # sequence 0: 4 tokens, padded with id 0
    mask = torch.ones(2, 6, dtype=torch.bool)
    mask[0, 4:] = False
    with torch.no_grad():
        padded = model(ids, attend_mask=mask)
        alone = model(ids[:1, :4])
    assert torch.isfinite(alone).all()
    torch.testing.assert_close(padded[0, :4], alone[0])  # only the products' blocking differs
    assert torch.isfinite(padded[1]).all()


def test_parameter_counts_match_the_architecture():
    cfg = small_config()
    model = Transformer(cfg)
    d, h, s, r = cfg.d_model, cfg.n_heads, cfg.head_dim, cfg.rank
    attn = 4 * h * (s * r + r * d)  # W_Q, W_K, W_V (s×d) and W_O (d×s), each a rank-r product
    ff = sum(d * q + q + q * d + d for q in cfg.ff_width)
    readout = d * cfg.num_labels + cfg.num_labels
    non_embedding = cfg.n_layers * attn + ff + readout
    assert model.num_parameters(non_embedding=True) == non_embedding
    assert model.num_parameters() == non_embedding + cfg.vocab_size * d + cfg.max_len * d


def test_given_positional_encoding_is_counted_and_saved(tmp_path):
    model = Transformer(small_config(positional="given"))
    with torch.no_grad():
        model.pos.copy_(torch.arange(9 * 6, dtype=torch.float64).reshape(9, 6))
    path = save_model(model, tmp_path / "m.safetensors", extra={"note": "x"})
    loaded, extra = load_model(path)
    assert extra == {"note": "x"}
    torch.testing.assert_close(loaded.pos, model.pos)
    ids = torch.randint(0, 11, (2, 5))
    torch.testing.assert_close(loaded(ids), model(ids))
    assert loaded.num_parameters() == model.num_parameters()


def test_bad_inputs_are_named():
    model = Transformer(small_config())
    with pytest.raises(InputError, match="token id 11 at sequence 0, position 2"):
        model(torch.tensor([[1, 2, 11]]))
    with pytest.raises(InputError, match="exceeds max_len"):
        model(torch.zeros(1, 10, dtype=torch.long))
    with pytest.raises(InputError, match="ff_width lists 1 widths for 2 layers"):
        small_config(ff_width=(3,))
    vec = Transformer(small_config(vocab_size=None))
    with pytest.raises(InputError, match=r"expected vectors of shape \(batch, n, 6\)"):
        vec(torch.zeros(1, 3, 5))
    bad = torch.zeros(2, 3, 6)
    bad[1, 2, 0] = float("nan")
    with pytest.raises(InputError, match="sequence 1, position 2 is not finite"):
        vec(bad)


def test_model_files_are_checked(tmp_path):
    model = Transformer(small_config())
    good = save_model(model, tmp_path / "good.safetensors")
    truncated = tmp_path / "trunc.safetensors"
    truncated.write_bytes(good.read_bytes()[:-100])
    with pytest.raises(ModelFileError, match="truncated or corrupt"):
        load_model(truncated)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"not a model at all")
    with pytest.raises(ModelFileError):
        load_model(junk)
    with pytest.raises(ModelFileError, match="does not exist"):
        load_model(tmp_path / "missing.safetensors")
    from safetensors.torch import save_file

    other = tmp_path / "other.safetensors"
    save_file({"w": torch.zeros(2)}, str(other))
    with pytest.raises(ModelFileError, match="not a uatlab model"):
        load_model(other)
    meta = read_metadata(good)
    assert json.loads(meta["uatlab_config"])["d_model"] == 6


def test_zero_width_feed_forward_is_the_identity_plus_bias():
    from uatlab.models import FeedForward

    ff = FeedForward(4, 0, dtype=torch.float64)  # must not warn (warnings are errors in the tests)
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    torch.testing.assert_close(ff(x), x + ff.output.bias)


@pytest.mark.parametrize("limit", [1, 7, 20, 10**9])
def test_feed_forward_in_token_slices_gives_the_same_outputs_and_gradients(limit, monkeypatch):
    """``max_activations`` bounds the hidden activations formed at a time (tokens × width): the slices hold
    exactly the tokens' own outputs, gradients flow through them, and no slice exceeds the bound."""
    torch.manual_seed(0)
    cfg = small_config(input_ff_width=3)
    model = Transformer(cfg).train()
    ids = torch.randint(0, 11, (3, 9))
    widths = {cfg.input_ff_width, *cfg.ff_width}  # the hidden layers' widths (3, 5, 7)
    widest = []
    real = torch.nn.Linear.forward

    def spy(self, x):
        out = real(self, x)
        widest.append(out.shape[:-1].numel() * out.shape[-1] if out.shape[-1] in widths else 0)
        return out

    want = model(ids)
    (want.square().sum()).backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    monkeypatch.setattr(torch.nn.Linear, "forward", spy)
    got = model(ids, max_activations=limit)
    monkeypatch.undo()
    (got.square().sum()).backward()
    torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-13)
    for g, p in zip(grads, model.parameters(), strict=True):
        torch.testing.assert_close(p.grad, g, rtol=1e-12, atol=1e-12)
    # a slice holds at least one token (one token's activations of the widest layer when the bound is below that)
    assert max(widest) <= max(limit, max(widths))
    assert limit >= ids.numel() * max(widths) or max(widest) < ids.numel() * max(widths)  # sliced when it must be
