"""A next-token memorizer saved in uatlab's one model file format (safetensors + metadata), loaded back
by ``uatlab.load``, certified and used for prediction from the command line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import uatlab
from uatlab.cli import main
from uatlab.constructions.paper_c.api import compile_next_token
from uatlab.constructions.paper_c.model_file import _pack, _unpack, save_next_token
from uatlab.errors import InputError, ModelFileError
from uatlab.verify.next_token import certify_next_token

TEXT = "the cat sat on the mat and the dog sat on the log and the cat ran to the dog " * 2


def _random(N: int, n: int, V: int, C: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    toks = np.unique(rng.integers(0, V, size=(N, n)), axis=0)
    return toks, rng.integers(0, C, size=len(toks))


def test_integers_beyond_int64_round_trip_exactly():
    vals = [0, 1, -1, 2**62 - 1, -(2**62), 3**200, -(7**90) + 5, 2**63]
    out: dict[str, torch.Tensor] = {}
    _pack("w", vals, out)
    assert "w.limbs" in out  # the big ones force the limb encoding
    assert _unpack("w", out) == vals
    small: dict[str, torch.Tensor] = {}
    _pack("s", [5, -3, 0], small)
    assert set(small) == {"s"} and _unpack("s", small) == [5, -3, 0]


@pytest.mark.parametrize("regime", ["float64", "exact"])
def test_save_load_round_trip_keeps_every_prediction_and_the_certificate(tmp_path, regime):
    toks, labs = _random(300, 8, 3, 7, seed=1)
    con = compile_next_token(toks, labs, V=3, C=7, regime=regime)
    model = con.model
    model.token_vocab, model.label_vocab = ["a", "b", "c"], [f"y{c}" for c in range(7)]
    path = uatlab.save(model, tmp_path / "m.safetensors")
    back = uatlab.load(path)
    assert back.memo.layout == con.detail.layout and back.memo.nu == con.detail.nu
    assert [L.weights for L in back.memo.circuit.layers] == [L.weights for L in con.detail.circuit.layers]
    with torch.no_grad():
        assert torch.equal(back(torch.from_numpy(toks)), model(torch.from_numpy(toks)))
    cert = certify_next_token(back.memo, toks, labs)
    assert cert.certified and cert.correct_rows == len(labs)
    assert back.token_vocab == ["a", "b", "c"] and back.label_vocab[3] == "y3"


def test_exact_words_wider_than_int64_survive_the_file(tmp_path):
    toks, labs = _random(400, 8, 4, 10, seed=2)
    memo = compile_next_token(toks, labs, V=4, C=10, regime="exact", certify=False).detail
    words = memo.circuit.layers[memo.circuit.notes["words"]]
    words.weights[0] += 3**100  # a 159-bit word (the exact regime's words grow like √N·log2 C bits)
    assert memo.circuit.max_weight_bits() > 62
    save_next_token(memo, tmp_path / "x.safetensors")
    from safetensors import safe_open

    with safe_open(str(tmp_path / "x.safetensors"), framework="pt") as f:
        assert any(k.endswith(".limbs") for k in f.keys())
    back = uatlab.load(tmp_path / "x.safetensors")
    assert [L.weights for L in back.memo.circuit.layers] == [L.weights for L in memo.circuit.layers]
    assert np.array_equal(back.memo.predict_exact(toks[:500]), memo.predict_exact(toks[:500]))


def test_corrupted_next_token_file_is_a_model_file_error(tmp_path):
    toks, labs = _random(50, 4, 3, 3, seed=0)
    path = save_next_token(compile_next_token(toks, labs, V=3, C=3).detail, tmp_path / "m.safetensors")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFileError, match="m.safetensors"):
        uatlab.load(path)


@pytest.fixture(scope="module")
def compiled_dir(tmp_path_factory):
    """A folder with a text file and its next-token model compiled by the CLI (window 3)."""
    import os

    folder = tmp_path_factory.mktemp("nt")
    (folder / "t.txt").write_text(TEXT, encoding="utf-8")
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        assert main(["compile", "t.txt", "--task", "next-token", "--window", "3", "--out", "m.safetensors"]) == 0
    finally:
        os.chdir(cwd)
    return folder


def test_cli_compile_certify_predict_on_a_saved_next_token_model(compiled_dir, monkeypatch, capsys):
    tmp_path = compiled_dir
    monkeypatch.chdir(tmp_path)
    assert uatlab.models.io.file_format("m.safetensors") == "uatlab-next-token-v1"
    capsys.readouterr()
    assert main(["certify", "m.safetensors", "t.txt", "--format", "text", "--json"]) == 0
    fig = json.loads(capsys.readouterr().out)
    assert fig["certified"] and fig["correct_rows"] == fig["ceiling_rows"] and fig["examples"] == len(TEXT.split()) - 3
    # predict: each line's next token is the one that follows it in the text, where that is unambiguous
    (tmp_path / "q.txt").write_text("the mat and\ncat ran to\nsat\n", encoding="utf-8")
    assert main(["predict", "m.safetensors", "q.txt"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["the mat and\tthe", "cat ran to\tthe"] and len(lines) == 3
    # a JSONL certificate against a wrong label is not certified, and says why
    (tmp_path / "w.jsonl").write_text('{"tokens": ["the", "mat", "and"], "label": "dog"}\n', encoding="utf-8")
    assert main(["certify", "m.safetensors", "w.jsonl", "--json"]) == 0
    fig = json.loads(capsys.readouterr().out)
    assert not fig["certified"] and fig["correct_rows"] == 0


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("zebra cat\n", "q.txt:1: token 'zebra' (position 0) is not in the model's vocabulary"),
        ("the cat\nthe cat sat on\n", "q.txt:2: 4 tokens, the model reads windows of at most 3"),
    ],
)
def test_cli_predict_bad_sequences_one_line(compiled_dir, monkeypatch, capsys, query, message):
    tmp_path = compiled_dir
    monkeypatch.chdir(tmp_path)
    (tmp_path / "q.txt").write_text(query, encoding="utf-8")
    capsys.readouterr()
    assert main(["predict", "m.safetensors", "q.txt"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {message}"]


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda h: {**h, "source": "text"}, "header field source must be a JSON object, got 'text'"),
        (lambda h: {**h, "source": {**h["source"], "tokenizer": "x"}}, "header field source.tokenizer must be"),
        (lambda h: {**h, "facts": []}, "header field facts must be a JSON object, got list"),
        (lambda h: {**h, "token_vocab": [[]] * len(h["token_vocab"])}, "header field token_vocab must be a list"),
        (lambda h: [h], "header field uatlab_next_token must be a JSON object, got list"),
        (lambda h: {**h, "token_vocab": [h["token_vocab"][0]] * len(h["token_vocab"])}, "token_vocab lists '"),
    ],
)
def test_a_header_field_of_the_wrong_type_is_refused_naming_the_file_and_field(tmp_path, capsys, edit, message):
    from safetensors import safe_open
    from safetensors.torch import save_file

    text = tmp_path / "t.txt"
    text.write_text(TEXT)
    good = tmp_path / "m.safetensors"
    assert main(["compile", str(text), "--task", "next-token", "--window", "3", "--out", str(good), "--json"]) == 0
    with safe_open(str(good), framework="pt") as f:
        meta, tensors = dict(f.metadata()), {k: f.get_tensor(k) for k in f.keys()}
    bad = tmp_path / "bad.safetensors"
    header = edit(json.loads(meta["uatlab_next_token"]))
    save_file(tensors, str(bad), metadata={**meta, "uatlab_next_token": json.dumps(header)})
    with pytest.raises(ModelFileError, match=message) as info:
        uatlab.load(bad)
    assert str(info.value).startswith(f"{bad}: ")
    for cmd in ("certify", "predict"):
        capsys.readouterr()
        assert main([cmd, str(bad), str(text)]) == 2
        assert message in " ".join(capsys.readouterr().err.split())


def test_save_refuses_a_vocabulary_with_a_repeated_name(tmp_path):
    toks = np.array([[0, 1, 2], [2, 1, 0]])
    memo = compile_next_token(toks, np.array([1, 2]), V=3, C=3, certify=False).detail
    with pytest.raises(InputError, match="token_vocab lists 'a' twice"):
        save_next_token(memo, tmp_path / "m.safetensors", token_vocab=["a", "b", "a"])
    assert not (tmp_path / "m.safetensors").exists()
