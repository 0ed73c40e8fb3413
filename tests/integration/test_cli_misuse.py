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


def test_predict_names_a_folder_and_a_non_finite_model(capsys, tmp_path):
    from safetensors import safe_open
    from safetensors.torch import save_file

    model = _unk_model(tmp_path)
    text = tmp_path / "in.txt"
    text.write_text("a b\n")
    assert main(["predict", str(model), str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {tmp_path}: is a folder, not an input file"
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
