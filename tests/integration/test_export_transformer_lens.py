"""TransformerLens export: same logits as uatlab, hooks work, read back and certified, clear refusals."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

pytest.importorskip("transformer_lens", reason="the interop extra (transformer-lens) is not installed")

from uatlab import compile_memorizer, load, save  # noqa: E402
from uatlab.cli import main  # noqa: E402
from uatlab.data.dataset import from_lists  # noqa: E402
from uatlab.data.synthetic import synthetic_dataset  # noqa: E402
from uatlab.errors import InputError  # noqa: E402
from uatlab.interop import (  # noqa: E402
    ExportError,
    from_hooked_transformer,
    load_hooked,
    max_logit_difference,
    save_hooked,
    to_hooked_transformer,
)
from uatlab.models import Transformer, TransformerConfig  # noqa: E402
from uatlab.training.trainer import TrainConfig, train  # noqa: E402
from uatlab.verify.certificate import certify  # noqa: E402


@pytest.fixture(scope="module")
def compiled():
    data = synthetic_dataset(N=1000, n=6, V=30, C=4, seed=3)
    c = compile_memorizer(data)
    model, cert = c.model, c.certificate
    assert cert.certified
    return data, model, cert


def test_compiled_memorizer_logits_equal_on_1000_sequences(compiled):
    data, model, _ = compiled
    hooked = to_hooked_transformer(model)
    ids = model.encoding.encode_tokens(data)
    assert len(ids) == 1000
    diff = max_logit_difference(model, hooked, ids)
    assert diff <= 1e-9, diff
    # the exported model predicts the labels itself: argmax of its logits equals uatlab's
    x = torch.as_tensor(np.stack(ids[:50]), dtype=torch.int64)
    with torch.no_grad():
        assert torch.equal(hooked(x).argmax(-1), model(x).argmax(-1))
    assert hooked.cfg.attention_dir == "bidirectional" and hooked.cfg.normalization_type is None
    assert hooked.token_list == model.encoding.id_to_token and hooked.label_list == model.encoding.id_to_label


def test_run_with_cache_gives_the_attention_pattern_uatlab_computes(compiled):
    data, model, _ = compiled
    hooked = to_hooked_transformer(model)
    x = torch.as_tensor(model.encoding.encode_tokens(data)[0], dtype=torch.int64)[None]  # (1, n)
    with torch.no_grad():
        _, cache = hooked.run_with_cache(x)
        ours = model.blocks[0].attn.attention_weights(model.embed_inputs(x))  # (1, h, n, n)
    assert torch.allclose(cache["pattern", 0], ours, atol=1e-12, rtol=0)
    assert cache["post", 0].shape[-1] == hooked.cfg.d_mlp


def test_wide_feed_forward_rounds_as_uatlab_does_before_and_after_a_round_trip(tmp_path):
    # A wide feed-forward layer (4,096 units): the sum over hidden units is blocked by BLAS according to
    # the weights' memory layout; the export holds W_out in uatlab's layout, so the logits are identical
    # bit for bit (TransformerLens's own row-major W_out gives differences of ~1e-15 here, 2.6e-9 on the
    # memorizer compiled from CoNLL-2003 train).
    torch.manual_seed(0)
    model = Transformer(
        TransformerConfig(
            d_model=16,
            n_layers=1,
            n_heads=1,
            head_dim=1,
            rank=1,
            ff_width=4096,
            vocab_size=50,
            num_labels=9,
            max_len=40,
            positional="learned",
            dtype="float64",
        )
    ).eval()
    x = torch.randint(0, 50, (64, 30))  # (B, n)
    hooked = to_hooked_transformer(model)
    back = load_hooked(save_hooked(hooked, tmp_path / "tl"))
    with torch.no_grad():
        want = model(x)
        assert torch.equal(hooked(x), want)
        assert torch.equal(back(x), want)
    assert hooked.blocks[0].mlp.W_out.shape == (4096, 16)
    assert torch.equal(back.blocks[0].mlp.W_out, model.blocks[0].ff.output.weight.T)


def test_exported_compiled_model_read_back_is_certified_at_the_ceiling(compiled, tmp_path):
    data, model, cert = compiled
    out = save_hooked(to_hooked_transformer(model), tmp_path / "tl")
    back = from_hooked_transformer(load_hooked(out))
    assert back.config.rank is None  # TransformerLens holds full matrices
    again = certify(back, data)
    assert again.certified
    assert again.certified_tokens == cert.ceiling_tokens == again.ceiling_tokens
    assert again.min_certified_margin == pytest.approx(cert.min_certified_margin, rel=1e-6)


def test_trained_and_general_models_logits_equal(tmp_path):
    # a trained model (a few epochs, float64) ...
    rng = np.random.default_rng(0)
    toks = [[f"w{int(v)}" for v in rng.integers(0, 12, size=int(rng.integers(2, 8)))] for _ in range(60)]
    labs = [[("B" if t < "w6" else "O") for t in s] for s in toks]
    data = from_lists(toks, labs)
    cfg = TrainConfig(
        epochs=3,
        dim=8,
        ff_mult=2,
        heads=2,
        head_dim=2,
        rank=1,
        layers=2,
        lr=1e-2,
        batch_size=16,
        warmup_steps=2,
        dtype="float64",
    )
    r = train(data, cfg, tmp_path / "run", progress=False, with_f1=False)
    assert r.epochs == 3
    trained = load(tmp_path / "run" / "model.safetensors")
    assert trained.encoding is not None
    # ... and a causal model with every option TransformerLens can hold
    general = Transformer(
        TransformerConfig(
            d_model=6,
            n_layers=2,
            n_heads=3,
            head_dim=2,
            rank=1,
            ff_width=(5, 0),
            vocab_size=17,
            num_labels=4,
            max_len=10,
            positional="learned",
            beta=0.7,
            scale_by_sqrt_head_dim=True,
            causal=True,
            readout_bias=False,
            dtype="float64",
        )
    )
    for model in (trained, general):
        hooked = to_hooked_transformer(model)
        g = torch.Generator().manual_seed(1)
        ids = [
            torch.randint(0, model.config.vocab_size, (int(n),), generator=g).numpy()
            for n in torch.randint(1, model.config.max_len + 1, (1000,), generator=g)
        ]
        assert max_logit_difference(model, hooked, ids) <= 1e-9
    assert to_hooked_transformer(general).cfg.attention_dir == "causal"


def test_refusals_name_what_cannot_be_represented():
    hard = Transformer(TransformerConfig(d_model=4, vocab_size=5, num_labels=2, attention="hardmax"))
    with pytest.raises(ExportError, match="hardmax attention"):
        to_hooked_transformer(hard)
    pre = Transformer(TransformerConfig(d_model=4, vocab_size=5, num_labels=2, input_ff_width=3))
    with pytest.raises(ExportError, match=r"F_1\^\(FF\)"):
        to_hooked_transformer(pre)
    vec = Transformer(TransformerConfig(d_model=4, num_labels=2))
    with pytest.raises(ExportError, match="token embedding"):
        to_hooked_transformer(vec)


def test_beta_zero_is_refused_naming_beta_not_a_division_by_zero(tmp_path, capsys):
    """β = 0 is a valid model (every score 0: uniform attention) that TransformerLens cannot hold: it divides
    the scores by attn_scale = 1/β."""
    cfg = TransformerConfig(d_model=4, vocab_size=3, num_labels=2, max_len=4, positional="learned", ff_width=4)
    torch.manual_seed(0)
    zero = Transformer(dataclasses.replace(cfg, beta=0.0))
    with pytest.raises(ExportError, match="beta = 0.0"):
        to_hooked_transformer(zero)
    path = save(zero, tmp_path / "b0.safetensors")
    out = tmp_path / "tl"
    capsys.readouterr()
    assert main(["export", str(path), str(out), "--to", "transformer-lens"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "beta = 0.0" in err and "attn_scale" in err and not out.exists()
    assert err.startswith(f"error: {path}: cannot export to TransformerLens")  # the refusal names the model file
    half = Transformer(dataclasses.replace(cfg, beta=0.5))  # any other β is exported
    ids = [np.array([0, 1, 2]), np.array([2, 2])]
    assert max_logit_difference(half, to_hooked_transformer(half), ids) <= 1e-6


def test_cli_export_writes_a_loadable_directory_and_refuses_bad_requests(compiled, tmp_path, capsys):
    data, model, _ = compiled
    path = save(model, tmp_path / "m.safetensors")
    out = tmp_path / "tl"
    assert main(["export", str(path), str(out), "--to", "transformer-lens", "--check", "20", "--json"]) == 0
    fig = json.loads(capsys.readouterr().out)
    assert fig["max_logit_difference"] <= 1e-9 and fig["vocabulary"] == model.config.vocab_size
    assert load_hooked(out).label_list == model.encoding.id_to_label
    before = sorted(p.name for p in out.iterdir())
    assert main(["export", str(path), str(out), "--to", "transformer-lens"]) == 2
    assert "already exists" in " ".join(capsys.readouterr().err.split())
    assert sorted(p.name for p in out.iterdir()) == before
    assert main(["export", str(path), str(tmp_path / "x"), "--to", "onnx"]) == 2
    assert "onnx" in capsys.readouterr().err and not (tmp_path / "x").exists()
    # check sequences beyond the memory limit: refused before any is made, nothing written
    assert main(["export", str(path), str(tmp_path / "x"), "--to", "transformer-lens", "--check", str(10**11)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "export --check 100000000000 would need about" in err and "above the limit" in err, err
    assert not (tmp_path / "x").exists()
    dangling = tmp_path / "link"
    dangling.symlink_to(tmp_path / "nowhere")  # a link of the user's, even one naming nothing, is left alone
    assert main(["export", str(path), str(dangling), "--to", "transformer-lens"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "is a symbolic link; choose a new directory (nothing was written)" in err, err
    user = tmp_path / "notes.txt"  # OUT under a file of the user's: refused before the model is read
    user.write_text("mine\n")
    import uatlab.models.io as model_io

    def no_load(*args, **kwargs):
        raise AssertionError("the model was read before OUT was checked")

    original, model_io.load = model_io.load, no_load
    try:
        assert main(["export", str(path), str(user / "tl"), "--to", "transformer-lens"]) == 2
    finally:
        model_io.load = original
    err = " ".join(capsys.readouterr().err.split())
    assert f"OUT {user / 'tl'}: {user} is a file, not a folder" in err, err
    assert user.read_text() == "mine\n"
    assert dangling.is_symlink() and not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_cli_export_folder_and_files_follow_the_umask(compiled, tmp_path, capsys, umask):
    """The exported folder and every file in it get a new folder's and file's permissions (0777 and 0666 less the
    umask), as every other output does: not the 0700 and 0600 of the temporary folder and of safetensors."""
    import os
    import stat

    _, model, _ = compiled
    path = save(model, tmp_path / "m.safetensors")
    out = tmp_path / "tl"
    old = os.umask(umask)
    try:
        assert main(["export", str(path), str(out), "--to", "transformer-lens", "--check", "2", "--json"]) == 0
    finally:
        os.umask(old)
    capsys.readouterr()
    assert stat.S_IMODE(out.stat().st_mode) == 0o777 & ~umask
    files = sorted(out.iterdir())
    assert [p.name for p in files] == ["config.json", "weights.safetensors"]
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in files} == {p.name: 0o666 & ~umask for p in files}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors", "tl"]  # no temporary folder left


def _perturbed(hooked, factor: float):
    """``hooked`` with its readout scaled by ``factor``: every logit moves by (factor − 1) of itself."""
    with torch.no_grad():
        hooked.unembed.W_U.mul_(factor)
        hooked.unembed.b_U.mul_(factor)
    return hooked


def test_compare_logits_reports_the_relative_difference_and_argmax_disagreements(compiled):
    from uatlab.interop import compare_logits

    data, model, _ = compiled
    ids = model.encoding.encode_tokens(data)[:40]
    same = compare_logits(model, to_hooked_transformer(model), ids)
    assert same.positions == sum(len(a) for a in ids) and same.argmax_disagreements == 0
    assert same.max_relative_difference <= 1e-12 and same.within(1e-12)
    off = compare_logits(model, _perturbed(to_hooked_transformer(model), 1.001), ids)
    x = torch.as_tensor(np.stack(ids), dtype=torch.int64)
    with torch.no_grad():
        ref = model(x)
    # a 0.1 % scale of every logit: max |ΔL| / max |L| per position is 1e-3 up to rounding, and the absolute
    # figure is 1e-3 of the largest logit
    assert off.max_relative_difference == pytest.approx(1e-3, rel=1e-6)
    assert off.max_abs_difference == pytest.approx(1e-3 * float(ref.abs().max()), rel=1e-6)
    assert not off.within(1e-4) and off.within(2e-3)
    flipped = _perturbed(to_hooked_transformer(model), -1.0)  # negated logits: the top label changes everywhere
    assert compare_logits(model, flipped, ids).argmax_disagreements == same.positions


def test_cli_export_refuses_logits_beyond_the_tolerance_and_writes_nothing(compiled, tmp_path, capsys, monkeypatch):
    """A conversion whose logits disagree with uatlab's is an error (exit 1), not a directory written with a figure
    nobody checks; ``--tolerance`` sets the bound (default √ε of the model's dtype)."""
    import math

    import uatlab.interop.transformer_lens as tl

    _, model, _ = compiled
    path = save(model, tmp_path / "m.safetensors")
    convert = tl.to_hooked_transformer
    monkeypatch.setattr(tl, "to_hooked_transformer", lambda m: _perturbed(convert(m), 1 + 1e-6))
    out = tmp_path / "tl"
    assert main(["export", str(path), str(out), "--to", "transformer-lens", "--check", "10"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith(f"error: {path}: the exported model's logits differ") and "nothing was written" in err
    default = math.sqrt(torch.finfo(torch.float64).eps)  # the default of a float64 model: √ε
    assert f"--tolerance {default:.3g}" in err and not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]
    # a tolerance above the difference accepts it, and reports what it accepted
    args = ["export", str(path), str(out), "--to", "transformer-lens", "--check", "10", "--json"]
    assert main([*args, "--tolerance", "1e-5"]) == 0
    fig = json.loads(capsys.readouterr().out)
    assert fig["tolerance"] == 1e-5 and 0 < fig["max_relative_logit_difference"] <= 1e-5
    assert fig["checked_positions"] > 0 and fig["argmax_disagreements"] == 0 and out.is_dir()
    monkeypatch.setattr(tl, "to_hooked_transformer", convert)
    out2 = tmp_path / "tl2"
    assert main(["export", str(path), str(out2), "--to", "transformer-lens", "--check", "5", "--json"]) == 0
    fig = json.loads(capsys.readouterr().out)
    assert fig["tolerance"] == math.sqrt(torch.finfo(torch.float64).eps)  # the default of a float64 model
    for bad in ("-1", "nan", "inf"):
        assert main(["export", str(path), str(tmp_path / "tl3"), "--to", "transformer-lens", "--tolerance", bad]) == 2
        assert "--tolerance must be a finite number" in capsys.readouterr().err
        assert not (tmp_path / "tl3").exists()


class _Fixed(torch.nn.Module):
    """A stand-in model whose logits for a batch of (B, n) ids are ``rows`` (n, C), the same for every sequence."""

    def __init__(self, rows):
        super().__init__()
        self.rows = torch.tensor(rows, dtype=torch.float64)

    def forward(self, x):
        return self.rows[: x.shape[1]].expand(x.shape[0], -1, -1)


def test_compare_logits_scales_each_position_by_its_own_largest_logit_and_compares_infinities():
    from uatlab.interop import compare_logits

    ids = [np.zeros(2, dtype=np.int64)]
    # position 0 has logits of order 1, position 1 of order 1000; both move by 1e-3
    ref = _Fixed([[1.0, -0.5], [1000.0, 10.0]])
    moved = _Fixed([[1.0 + 1e-3, -0.5], [1000.0 + 1e-3, 10.0]])
    c = compare_logits(ref, moved, ids)
    assert c.positions == 2 and c.nonfinite_positions == 0
    assert c.max_relative_difference == pytest.approx(1e-3)  # position 0's own scale, not the whole batch's 1000
    assert c.max_abs_difference == pytest.approx(1e-3)
    inf = math.inf
    # the same infinity in both models agrees; the position's finite logits are still compared, on their own scale
    c = compare_logits(_Fixed([[inf, 2.0], [1.0, 0.0]]), _Fixed([[inf, 2.0 + 2e-3], [1.0, 0.0]]), ids)
    assert c.nonfinite_positions == 1 and c.max_relative_difference == pytest.approx(1e-3)
    for other in ([[-inf, 2.0], [1.0, 0.0]], [[5.0, 2.0], [1.0, 0.0]], [[inf, 2.0], [1.0, math.nan]]):
        bad = compare_logits(_Fixed([[inf, 2.0], [1.0, 0.0]]), _Fixed(other), ids)
        assert bad.max_relative_difference == inf and not bad.within(1e300), other
        assert bad.mismatched_positions == 1 and bad.nonfinite_positions == 1, other
    # an infinity in the exported model only: a mismatch, though uatlab's own logits are all finite
    only = compare_logits(_Fixed([[3.0, 2.0], [1.0, 0.0]]), _Fixed([[3.0, inf], [1.0, 0.0]]), ids)
    assert only.mismatched_positions == 1 and only.nonfinite_positions == 0 and not only.within(1e300)
    # all-zero logits against finite others: an infinite relative figure with no mismatch
    zero = compare_logits(_Fixed([[0.0, 0.0]]), _Fixed([[5.0, 0.0]]), [np.zeros(1, dtype=np.int64)])
    assert zero.max_relative_difference == inf and zero.mismatched_positions == 0 and zero.max_abs_difference == 5.0
    both_nan = compare_logits(_Fixed([[math.nan, 0.0]]), _Fixed([[math.nan, 0.0]]), [np.zeros(1, dtype=np.int64)])
    assert not both_nan.within(1e300)  # NaN is never an agreement
    with pytest.raises(InputError, match="at least one"):
        compare_logits(ref, moved, [])


def test_cli_export_json_on_refusal_check_zero_and_near_tie_warning(compiled, tmp_path, capsys, monkeypatch):
    import uatlab.interop.transformer_lens as tl

    _, model, _ = compiled
    path = save(model, tmp_path / "m.safetensors")
    convert = tl.to_hooked_transformer
    monkeypatch.setattr(tl, "to_hooked_transformer", lambda m: _perturbed(convert(m), -1.0))  # every top label flips
    out = tmp_path / "tl"
    args = ["export", str(path), str(out), "--to", "transformer-lens", "--check", "5", "--json"]
    assert main(args) == 1  # refused under --json too, and its figures are on stdout
    captured = capsys.readouterr()
    fig = json.loads(captured.out)
    assert fig["written"] is False and fig["max_relative_logit_difference"] == pytest.approx(2.0)
    assert fig["argmax_disagreements"] == fig["checked_positions"] > 0 and not out.exists()
    assert "error:" in captured.err and "nothing was written" in captured.err
    # a tolerance above the difference accepts it; the flipped top labels are a warning, not silence
    assert main([*args, "--tolerance", "10"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["written"] is True and out.is_dir()
    assert f"warning: the top label differs at {fig['checked_positions']} of" in " ".join(captured.err.split())

    # a NaN in the exported model: the refusal says so (not a figure of nan)
    def with_nan(m):
        hooked = convert(m)
        with torch.no_grad():
            hooked.unembed.b_U[0] = math.nan
        return hooked

    monkeypatch.setattr(tl, "to_hooked_transformer", with_nan)
    outn = tmp_path / "tln"
    assert main(["export", str(path), str(outn), "--to", "transformer-lens", "--check", "3"]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "by a NaN, or an infinite logit that the other model does not have, at" in err and not outn.exists()
    # --check 0 compares nothing: no tolerance is reported as applied, and --tolerance with it is refused
    out0 = tmp_path / "tl0"
    assert main(["export", str(path), str(out0), "--to", "transformer-lens", "--check", "0", "--json"]) == 0
    fig0 = json.loads(capsys.readouterr().out)
    assert fig0["tolerance"] is None and fig0["max_relative_logit_difference"] is None and fig0["written"] is True
    out1 = tmp_path / "tl1"
    assert main(["export", str(path), str(out1), "--to", "transformer-lens", "--check", "0", "--tolerance", "1"]) == 2
    assert "--tolerance has no effect with --check 0" in capsys.readouterr().err and not out1.exists()
