"""Commands on inputs too large or malformed for them: one ``error:`` line, exit 2, nothing written."""

from __future__ import annotations

from uatlab.cli import main


def test_gd_in_context_refuses_a_context_that_would_not_fit_in_memory(capsys, tmp_path):
    out = tmp_path / "g"
    code = main(
        [
            "approx",
            "gd-in-context",
            "--contexts",
            "5000",
            "--eps",
            "0.01",
            "--d",
            "2",
            "--steps",
            "1",
            "--max-memory",
            "4G",
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: gd-in-context would need about ") and "N = 5000" in err
    assert "Traceback" not in err and not out.exists()


def _unk_model(tmp_path):
    import uatlab
    from uatlab.data.dataset import Encoding

    model = uatlab.Transformer(uatlab.TransformerConfig(d_model=4, vocab_size=3, num_labels=2))
    model.encoding = Encoding.from_lists(["<unk>", "a", "b"], ["X", "Y"], unknown_token="<unk>")
    return uatlab.save(model, tmp_path / "m.safetensors")


def test_predict_counts_unknown_words_and_warns(capsys, tmp_path):
    import json

    model = _unk_model(tmp_path)
    text = tmp_path / "in.txt"
    text.write_text("a zz b\nyy a\n")
    assert main(["predict", str(model), str(text), "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["unknown_tokens"] == 2 and out["tokens"] == 5
    assert f"warning: {text}: 2 of 5 tokens are not in the model's vocabulary and were read as '<unk>'" in captured.err
    text.write_text("a b\n")
    assert main(["predict", str(model), str(text), "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["unknown_tokens"] == 0 and "warning" not in captured.err


def test_predict_names_the_line_of_an_unknown_word_under_each_policy(capsys, tmp_path):
    """--unknown error (or a model without <unk>) names path:line, sentence, position and token: the token's own
    line in CoNLL (one token per line), the sentence's line in text."""
    import uatlab
    from uatlab.data.dataset import Encoding

    model = _unk_model(tmp_path)
    conll = tmp_path / "in.conll"
    conll.write_text("a X\nb Y\n\nb X\nzz Y\n")
    text = tmp_path / "in.txt"
    text.write_text("a b\n\nb zz\n")
    expected = "sentence 1, position 1: token 'zz' is not in the model's vocabulary"
    for path, fmt, line in ((conll, "conll", 5), (text, "text", 3)):
        assert main(["predict", str(model), str(path), "--format", fmt, "--unknown", "error"]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"error: {path}:{line}: {expected}" in err and "no unknown-word token" not in err, err
    bare = uatlab.Transformer(uatlab.TransformerConfig(d_model=4, vocab_size=2, num_labels=2))
    bare.encoding = Encoding.from_lists(["a", "b"], ["X", "Y"])
    bare_path = uatlab.save(bare, tmp_path / "bare.safetensors")
    assert main(["predict", str(bare_path), str(conll)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"error: {conll}:5: {expected} (this model has no unknown-word token)" in err, err


def test_predict_names_a_folder_and_a_non_finite_model(capsys, tmp_path):
    from safetensors import safe_open
    from safetensors.torch import save_file

    model = _unk_model(tmp_path)
    text = tmp_path / "in.txt"
    text.write_text("a b\n")
    assert main(["predict", str(model), str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"error: input file {tmp_path} is a directory, not a regular file"
    assert main(["predict", str(model), "/dev/null"]) == 2  # a device is named as one, not as a missing file
    assert capsys.readouterr().err.strip() == "error: input file /dev/null is a character device, not a regular file"
    assert main(["predict", str(tmp_path), str(text)]) == 2
    assert "is a folder, not a model file" in capsys.readouterr().err
    with safe_open(str(model), framework="pt") as f:
        meta, tensors = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    tensors["readout.weight"][0, 0] = float("nan")
    save_file(tensors, str(tmp_path / "nan.safetensors"), metadata=meta)
    assert main(["predict", str(tmp_path / "nan.safetensors"), str(text)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "tensor readout.weight has 1 non-finite entry" in err


def test_truncated_linear_float32_stops_at_the_largest_anchor_count_that_fits(capsys, tmp_path):
    import json

    args = ["approx", "truncated-linear", "--dtype", "float32", "--anchors", "11,21,41,81", "--points", "201"]
    assert main([*args, "--out", str(tmp_path / "t"), "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert [r["anchors"] for r in out["rows"]] == [11, 21]
    assert out["summary"]["stopped_at_anchors"] == 41 and "float32" in out["summary"]["stopped_because"]
    assert "warning: stopped at m = 41 anchors" in captured.err
    assert all(r["sup_error"] <= r["bound"] for r in out["rows"])


def test_certify_reads_unknown_words_as_unk_like_predict_and_counts_them(capsys, tmp_path):
    import json

    model = _unk_model(tmp_path)
    data = tmp_path / "d.conll"
    data.write_text("a X\nzz Y\nb X\n\nyy Y\na Y\n\n")
    same = tmp_path / "same.conll"  # the words the model reads
    same.write_text(data.read_text().replace("zz", "<unk>").replace("yy", "<unk>"))
    assert main(["certify", str(model), str(same), "--json"]) == 0
    expected = json.loads(capsys.readouterr().out)
    assert expected["unknown_tokens"] == 0
    assert main(["certify", str(model), str(data), "--json"]) == 0  # default: the model's <unk>, as predict
    captured = capsys.readouterr()
    fig = json.loads(captured.out)
    assert fig["unknown_tokens"] == 2
    for key in ("tokens", "ceiling_tokens", "certified_tokens", "correct_tokens", "certified"):
        assert fig[key] == expected[key], key
    assert f"warning: {data}: 2 of 5 tokens are not in the model's vocabulary" in " ".join(captured.err.split())
    assert main(["certify", str(model), str(data), "--unknown", "unk", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unknown_tokens"] == 2
    assert main(["certify", str(model), str(data), "--unknown", "error"]) == 2
    assert "token 'zz'" in " ".join(capsys.readouterr().err.split())
    assert main(["certify", str(model), str(data), "--unknown", "drop"]) == 2
    assert "--unknown must be error or unk, got 'drop'" in capsys.readouterr().err


def test_certify_of_a_model_without_unk_still_names_the_unknown_word(capsys, tmp_path):
    data = tmp_path / "d.conll"
    data.write_text("a X\nb Y\n\nb X\na X\n\n")
    model = tmp_path / "m.safetensors"
    assert main(["compile", str(data), "--out", str(model), "--json"]) == 0
    other = tmp_path / "o.conll"
    other.write_text("a X\nzz Y\n\n")
    capsys.readouterr()
    assert main(["certify", str(model), str(other)]) == 2
    assert "token 'zz'" in " ".join(capsys.readouterr().err.split())
    assert main(["certify", str(model), str(other), "--unknown", "unk"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"--unknown unk: {model} is a model with no unknown-word token" in err
    deep = tmp_path / "deep.safetensors"
    assert main(["compile", str(data), "--ff", "deep", "--out", str(deep), "--json"]) == 0
    capsys.readouterr()
    assert main(["certify", str(deep), str(data), "--unknown", "unk"]) == 2
    assert "is a --ff deep model with no unknown-word token" in " ".join(capsys.readouterr().err.split())
    assert main(["certify", str(deep), str(data), "--unknown", "error", "--json"]) == 0  # what it does anyway


def test_certify_counts_the_ceiling_on_the_words_as_written_not_as_unk(capsys, tmp_path, monkeypatch):
    """Two sentences that differ only in words the model does not know are two inputs: a model reading both as
    '<unk> a' cannot get both first tokens right, and that is the model's failure, not a conflict in the data."""
    import json

    import uatlab.verify.certificate as certificate

    model = _unk_model(tmp_path)
    data = tmp_path / "d.conll"
    data.write_text("zz X\na X\n\nyy Y\na X\n\n")
    merged = tmp_path / "merged.conll"  # the same sentences as the model reads them: a real conflict
    merged.write_text(data.read_text().replace("zz", "<unk>").replace("yy", "<unk>"))
    assert main(["certify", str(model), str(merged), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ceiling_tokens"] == 3
    assert main(["certify", str(model), str(data), "--json"]) == 0
    fig = json.loads(capsys.readouterr().out)
    assert fig["unknown_tokens"] == 2 and fig["ceiling_tokens"] == 4 and fig["conflict_tokens"] == 0
    assert fig["certified_tokens"] <= 3 and fig["certified"] is False
    # the second, salted key tells the inputs apart by their words too: with first keys that ignore the words
    # (as colliding hashes would), the ceiling is still 4
    import numpy as np

    calls = []

    def positions_only(sequences, context):
        calls.append(len(sequences))
        return np.concatenate([np.arange(len(s), dtype=np.int64) for s in sequences])

    monkeypatch.setattr(certificate, "input_keys_of_words", positions_only)
    assert main(["certify", str(model), str(data), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ceiling_tokens"] == 4
    assert calls == [2]  # the certificate's first keys came from the colliding stand-in


def test_the_api_takes_unknown_as_the_cli_does(tmp_path):
    import pytest

    import uatlab
    from uatlab.errors import InputError

    model = _unk_model(tmp_path)
    data = tmp_path / "d.conll"
    data.write_text("zz X\na X\n\nyy Y\na X\n\n")
    cert = uatlab.certify(model, data, unknown="unk")
    assert cert.unknown_tokens == 2 and cert.ceiling_tokens == 4
    with pytest.raises(InputError, match="token 'zz'"):
        uatlab.certify(model, data)
    with pytest.raises(InputError, match="unknown must be 'error' or 'unk', got 'drop'"):
        uatlab.certify(model, data, unknown="drop")


def test_the_api_refuses_unknown_unk_for_a_model_without_one(tmp_path):
    import pytest

    import uatlab
    from uatlab.errors import InputError

    data = tmp_path / "d.conll"
    data.write_text("a X\nb Y\n\nb X\na X\n\n")
    deep = tmp_path / "deep.safetensors"
    assert main(["compile", str(data), "--ff", "deep", "--out", str(deep), "--json"]) == 0
    for bad, message in (("drop", "unknown must be 'error' or 'unk', got 'drop'"), ("unk", "no unknown-word token")):
        with pytest.raises(InputError, match=message):
            uatlab.certify(deep, data, unknown=bad)


def test_certify_says_where_the_models_own_reference_is_not_finite(capsys, tmp_path):
    """A float32 model whose query scale β is ∞ in float32: PyTorch's logits and the float64 reference are NaN at
    every token. `uatlab certify` warns with the count, and its JSON counts no token correct and gives no finite
    logit error bound."""
    import json

    import torch

    import uatlab
    from uatlab.data.dataset import Encoding

    cfg = uatlab.TransformerConfig(d_model=4, vocab_size=2, num_labels=2, max_len=4, dtype="float32", beta=2.0**130)
    model = uatlab.Transformer(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(0.5)
        assert torch.isnan(model(torch.tensor([[0, 1]]))).all()  # the premise
    model.encoding = Encoding.from_lists(["a", "b"], ["X", "Y"])
    path = uatlab.save(model, tmp_path / "m.safetensors")
    data = tmp_path / "d.jsonl"
    for label in ("X", "Y"):
        data.write_text(json.dumps({"tokens": ["a", "b"], "labels": [label, label]}) + "\n")
        assert main(["certify", str(path), str(data), "--json"]) == 0
        captured = capsys.readouterr()
        out = json.loads(captured.out)
        assert out["correct_tokens"] == out["certified_tokens"] == 0, label
        assert out["max_logit_error_bound"] is None and out["reference_lost_tokens"] == 2
        assert out["torch_spot_check"]["torch_agrees_with_reference"] == 0
        assert f"warning: {data}: at 2 of 2 tokens the model's float64 reference logits are not finite" in captured.err
