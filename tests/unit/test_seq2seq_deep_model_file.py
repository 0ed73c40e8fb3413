"""The seq2seq deep memorizer (Kajitsuka & Sato, ICLR 2025) in uatlab's one model file format: saved, loaded
back by ``uatlab.load``, certified and used for prediction (library and command line), bad files refused."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

import uatlab
from uatlab.cli import main
from uatlab.constructions.paper_c.seq2seq_api import compile_seq2seq_deep
from uatlab.constructions.paper_c.seq2seq_file import FORMAT_TAG, memo_from, save_seq2seq_deep
from uatlab.data.dataset import Encoding, SequenceDataset
from uatlab.errors import InputError, ModelFileError


def _strings(seed: int, N: int = 50, V: int = 12, C: int = 4):
    """Random sentences of words w0..w{V-1} (lengths 1..9), labels mostly by word, some conflicting duplicates."""
    rng = np.random.default_rng(seed)
    word_label = rng.integers(0, C, size=V)
    toks, labs = [], []
    for _ in range(N):
        s = rng.integers(0, V, size=int(rng.integers(1, 10)))
        y = np.where(rng.random(len(s)) < 0.3, rng.integers(0, C, size=len(s)), word_label[s])
        toks.append([f"w{t}" for t in s])
        labs.append([f"L{c}" for c in y])
    for i in range(4):
        toks.append(list(toks[i]))
        labs.append([f"L{c}" for c in rng.integers(0, C, size=len(toks[i]))])
    return SequenceDataset(toks, labs, source="fixture")


def _compiled(data: SequenceDataset, regime: str = "float64"):
    enc = Encoding.fit(data)
    sents = enc.encode_tokens(data)
    labs = enc.encode_labels(data)
    con = compile_seq2seq_deep(sents, labs, len(enc.token_to_id), max(2, len(enc.label_to_id)), regime=regime)
    con.model.encoding = enc
    return con, enc


def _write_jsonl(path, data: SequenceDataset) -> None:
    path.write_text(
        "".join(json.dumps({"tokens": t, "labels": y}) + "\n" for t, y in zip(data.tokens, data.labels, strict=True)),
        encoding="utf-8",
    )


@pytest.mark.parametrize("regime", ["float64", "float32"])
def test_round_trip_is_exact_and_keeps_predictions_and_certificate(tmp_path, regime):
    data = _strings(0, N=30 if regime == "float32" else 50)
    con, enc = _compiled(data, regime)
    memo = con.detail
    path = uatlab.save(con.model, tmp_path / "m.safetensors")
    back = uatlab.load(path)
    assert back.memo.layout == memo.layout and back.memo.facts == json.loads(json.dumps(memo.facts))
    for name in ("nu", "mu", "v"):
        assert np.array_equal(getattr(back.memo, name), getattr(memo, name))
    for a, b in zip(back.memo.circuit.layers, memo.circuit.layers, strict=True):
        assert a.weights == b.weights and a.bias == b.bias
        assert np.array_equal(a.ptr, b.ptr) and np.array_equal(a.cols, b.cols)
    assert back.memo.circuit.notes == memo.circuit.notes and back.encoding == enc
    ids = torch.full((len(data), data.max_len), memo.V, dtype=torch.long)
    for i, row in enumerate(enc.encode_tokens(data)):
        ids[i, : len(row)] = torch.from_numpy(row)
    with torch.no_grad():
        assert torch.equal(back(ids), con.model(ids))  # bit-exact forward pass
    assert back.predict(data.tokens) == con.model.predict(data.tokens)
    cert = uatlab.certify(back, data)
    before = con.certificate.to_dict()
    after = cert.to_dict()
    before.pop("seconds"), after.pop("seconds")
    assert after == before and cert.certified_at_ceiling
    # the predictions are the labels on every ceiling token (majority label per identical input)
    pred = back.predict(data.tokens)
    right = sum(p == y for ps, ys in zip(pred, data.labels, strict=True) for p, y in zip(ps, ys, strict=True))
    assert right >= cert.ceiling_tokens


def test_integers_beyond_float64_and_int64_are_stored_exactly(tmp_path):
    con, enc = _compiled(_strings(1))
    memo = con.detail
    layer = memo.circuit.layers[-1]
    layer.bias[0] += 3**100  # 159 bits: the file must keep it exactly (the float model would refuse it)
    path = save_seq2seq_deep(memo, tmp_path / "big.safetensors", enc)
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    last = memo.circuit.depth - 1
    assert f"layer{last}.bias.limbs" in tensors and f"layer{last - 1}.bias" in tensors
    back, _ = memo_from(path, meta, tensors)
    assert back.circuit.layers[-1].bias == layer.bias and back.circuit.layers[-1].bias[0] > 2**158
    with pytest.raises(ModelFileError, match="do not fit"):  # uatlab.load builds the float model: refused clearly
        uatlab.load(path)


def test_a_tampered_weight_is_caught_by_the_certificate_from_the_file(tmp_path, capsys):
    data = _strings(2)
    con, enc = _compiled(data)
    data_path = tmp_path / "d.jsonl"
    _write_jsonl(data_path, data)
    memo = con.detail
    memo.circuit.layers[-1].bias[0] += 1  # y = digit − C'·(…) + 1: wrong labels on the ambiguous words' tokens
    save_seq2seq_deep(memo, tmp_path / "bad.safetensors", enc)
    assert main(["certify", str(tmp_path / "bad.safetensors"), str(data_path), "--json"]) == 0
    fig = json.loads(capsys.readouterr().out)
    assert not fig["certified"] and fig["correct_tokens"] < fig["ceiling_tokens"] == con.certificate.ceiling_tokens


def test_cli_compile_certify_predict_agree_with_compile_time(tmp_path, capsys):
    data = _strings(3)
    data_path = tmp_path / "d.jsonl"
    _write_jsonl(data_path, data)
    out = tmp_path / "m.safetensors"
    assert main(["compile", str(data_path), "--ff", "deep", "--out", str(out), "--json"]) == 0
    fig = json.loads(capsys.readouterr().out)
    assert fig["certified_at_ceiling"] and fig["model_file_bytes"] == out.stat().st_size
    with safe_open(str(out), framework="pt") as f:
        meta = f.metadata()
    assert meta["uatlab_format"] == FORMAT_TAG
    header = json.loads(meta["uatlab_seq2seq_deep"])
    assert header["encoding"]["unknown_token"] is None and header["uatlab_version"] == uatlab.__version__
    assert header["compile_certificate"]["certified_tokens"] == fig["certified_tokens"]
    assert header["depth"] == fig["ffn_depth"]
    assert main(["certify", str(out), str(data_path), "--json"]) == 0
    cert = json.loads(capsys.readouterr().out)
    for k in ("tokens", "ceiling_tokens", "certified_tokens", "certified", "certified_at_ceiling", "float_bound_bits"):
        assert cert[k] == fig[k], k
    assert cert["reason"] == fig["certificate"] and cert["sequences"] == fig["sequences"] == len(data)
    con, _ = _compiled(data)  # the same compile in memory (same seed): predict from the file == in memory
    assert main(["predict", str(out), str(data_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["labels"] == con.model.predict(data.tokens)


def test_predict_errors_name_the_word_and_the_sequence():
    data = _strings(4)
    con, _ = _compiled(data)
    with pytest.raises(InputError, match=r"sentence 1, position 0: token 'Zorbia'"):
        con.model.predict([["w1"], ["Zorbia", "w2"]])
    with pytest.raises(InputError, match="unknown-word token"):
        con.model.predict([["Zorbia"]], unknown="unk")
    with pytest.raises(InputError, match="unknown must be one of"):
        con.model.predict([["w1"]], unknown="ignore")
    n = con.model.context
    with pytest.raises(InputError, match=rf"sentence 0 has {n + 1} tokens; the model's context covers {n}"):
        con.model.predict([["w1"] * (n + 1)])
    assert con.model.predict([]) == []


def _one_error_line(capsys, *needles: str) -> str:
    err = capsys.readouterr().err
    # progress bars (stderr, each redraw ending in \r) may come first; the terminal overwrites them
    lines = [ln for ln in err.splitlines() if ln.strip() and not re.match(r"[\w ]+: .*\[\d+:\d+", ln)]
    assert lines and lines[0].startswith("error:") and "Traceback" not in err, err
    assert len([ln for ln in lines if ln.startswith("error:")]) == 1, err
    for n in needles:
        assert n in err, (n, err)
    return err


def test_bad_files_and_bad_data_are_one_error_line(tmp_path, capsys):
    data = _strings(5)
    data_path = tmp_path / "d.jsonl"
    _write_jsonl(data_path, data)
    out = tmp_path / "m.safetensors"
    assert main(["compile", str(data_path), "--ff", "deep", "--out", str(out), "--json"]) == 0
    capsys.readouterr()
    raw = out.read_bytes()
    truncated = tmp_path / "truncated.safetensors"
    truncated.write_bytes(raw[: len(raw) // 2])
    assert main(["certify", str(truncated), str(data_path)]) == 2
    _one_error_line(capsys, "truncated.safetensors")
    assert main(["predict", str(truncated), str(data_path)]) == 2
    _one_error_line(capsys, "truncated.safetensors")
    # a well-formed safetensors file with the tag but a broken header, and one of another kind
    with safe_open(str(out), framework="pt") as f:
        meta, tensors = f.metadata(), {k: f.get_tensor(k) for k in f.keys()}
    broken = tmp_path / "broken.safetensors"
    save_file(tensors, str(broken), metadata={**meta, "uatlab_seq2seq_deep": meta["uatlab_seq2seq_deep"][:-9]})
    assert main(["certify", str(broken), str(data_path)]) == 2
    _one_error_line(capsys, "broken.safetensors", "header is invalid")
    short = dict(tensors)
    short["nu"] = short["nu"][:, :-1].contiguous()
    wrong_shape = tmp_path / "shape.safetensors"
    save_file(short, str(wrong_shape), metadata=meta)
    with pytest.raises(ModelFileError, match="tensor nu"):
        uatlab.load(wrong_shape)
    no_layer = {k: v for k, v in tensors.items() if not k.startswith("layer3.")}
    missing = tmp_path / "missing.safetensors"
    save_file(no_layer, str(missing), metadata=meta)
    with pytest.raises(ModelFileError, match="missing entry 'layer3.ptr'"):
        uatlab.load(missing)
    other = tmp_path / "other.safetensors"
    save_file({"x": torch.zeros(2)}, str(other), metadata={"format": "pt"})
    assert main(["certify", str(other), str(data_path)]) == 2
    _one_error_line(capsys, "other.safetensors", "not a uatlab model")
    npz = tmp_path / "old.npz"
    np.savez(npz, nu=np.zeros(3))
    assert main(["predict", str(npz), str(data_path)]) == 2
    _one_error_line(capsys, "old.npz", "not a readable safetensors file")
    # wrong data: an unknown word, an unknown label, a sequence longer than the context (file:line named)
    bad = tmp_path / "bad.jsonl"
    for row, needle in (
        ({"tokens": ["w1", "Zorbia"], "labels": ["L0", "L0"]}, "token 'Zorbia'"),
        ({"tokens": ["w1"], "labels": ["B-NOPE"]}, "label 'B-NOPE'"),
        ({"tokens": ["w1"] * 40, "labels": ["L0"] * 40}, "40 tokens; the model's context covers"),
    ):
        bad.write_text(json.dumps({"tokens": ["w1"], "labels": ["L0"]}) + "\n" + json.dumps(row) + "\n")
        assert main(["certify", str(out), str(bad)]) == 2
        _one_error_line(capsys, f"{bad}:2", needle)
    # predict names the line a too-long sentence starts on, as for a token model
    text = tmp_path / "long.txt"
    text.write_text("w1 w2\n\n" + " ".join(["w1"] * 40) + "\n")
    assert main(["predict", str(out), str(text)]) == 2
    _one_error_line(capsys, f"{text}:3: sentence 1 has 40 tokens; the model's context covers")
    # commands that need a Transformer refuse the circuit model with one line
    assert main(["export", str(out), "--to", "transformer-lens", str(tmp_path / "tl")]) == 2
    _one_error_line(capsys, "Seq2SeqDeepModel", "not a uatlab Transformer")
    assert not (tmp_path / "tl").exists()
    assert (
        main(
            [
                "train",
                str(data_path),
                "--init",
                str(out),
                "--out",
                str(tmp_path / "t"),
                "--epochs",
                "1",
                "--warmup-steps",
                "0",
            ]
        )
        == 2
    )
    _one_error_line(capsys, "Seq2SeqDeepModel", "cannot be trained")
    # a failed compile leaves the existing model file untouched
    before = out.read_bytes()
    bad.write_text(json.dumps({"tokens": ["a", "b"], "labels": ["X"]}) + "\n")
    assert main(["compile", str(bad), "--ff", "deep", "--out", str(out)]) == 2
    _one_error_line(capsys, f"{bad}:1")
    assert main(["compile", str(data_path), "--ff", "deep", "--dtype", "float16", "--out", str(out)]) == 2
    _one_error_line(capsys, "float16")
    assert out.read_bytes() == before
