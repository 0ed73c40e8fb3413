"""The seq2seq deep memorizer (Kajitsuka & Sato, ICLR 2025): exact, certified, float forward = exact."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from uatlab.constructions.paper_c.seq2seq_api import compile_seq2seq_deep
from uatlab.constructions.paper_c.seq2seq_memorizer import choose_deep_layout, compile_seq2seq
from uatlab.constructions.paper_c.seq2seq_memorizer import prepare as prepare_data
from uatlab.data.information import ceiling_mask
from uatlab.errors import PrecisionError
from uatlab.verify.seq2seq_deep import certify_seq2seq


def _data(seed: int, N: int = 60, V: int = 15, C: int = 4):
    """Random sentences (lengths 1..9) with labels that mostly follow the word, some random, some duplicates."""
    rng = np.random.default_rng(seed)
    word_label = rng.integers(0, C, size=V)
    sents, labs = [], []
    for _ in range(N):
        s = rng.integers(0, V, size=int(rng.integers(1, 10)))
        y = np.where(rng.random(len(s)) < 0.3, rng.integers(0, C, size=len(s)), word_label[s])
        sents.append(s)
        labs.append(y)
    for i in range(5):  # identical sentences, conflicting labels on some tokens
        sents.append(sents[i].copy())
        labs.append(rng.integers(0, C, size=len(sents[i])))
    return sents, labs, V, C


def _ceiling(sents, labs) -> np.ndarray:
    keys = [hash((tuple(s.tolist()), j)) for s in sents for j in range(len(s))]
    return ceiling_mask(np.asarray(keys, dtype=np.int64), np.concatenate(labs))


@pytest.mark.parametrize("seed", [0, 1])
def test_certified_at_the_ceiling_and_float64_forward_agrees(seed: int) -> None:
    sents, labs, V, C = _data(seed)
    con = compile_seq2seq_deep(sents, labs, V, C)
    cert = con.certificate
    ceiling = _ceiling(sents, labs)
    assert cert.ceiling_tokens == int(ceiling.sum()) < sum(len(s) for s in sents)  # conflicts were made
    assert cert.certified and cert.certified_tokens == cert.ceiling_tokens
    pred = np.concatenate([con.model(torch.tensor(s)[None]).argmax(-1)[0].numpy() for s in sents])
    lab = np.concatenate(labs)
    assert (pred[ceiling] == lab[ceiling]).all()
    # the counts: dense ≥ nonzero, and the dense figure is attention + every layer's width × (inputs + 1) + readout
    p = con.detail.parameters
    widths = [2] + [L.width for L in con.detail.circuit.layers]
    assert p["feed_forward_dense"] == sum(w * (v + 1) for v, w in zip(widths[:-1], widths[1:], strict=True))
    assert p["non_embedding"] >= p["non_embedding_nonzero"] > 0


def test_ambiguous_words_only_are_keys() -> None:
    sents, labs, V, C = _data(3)
    memo, data, _ = compile_seq2seq(sents, labs, V, C)
    amb = data.ceiling & (memo.v[data.token_word] == 0)
    inputs = set(zip(data.sentence_of[data.token_sentence[amb]].tolist(), data.token_pos[amb].tolist(), strict=True))
    assert memo.facts["keys"] <= len(inputs) + 1
    # a word with one label among its ceiling tokens carries it in v (1 + label); ambiguous words carry 0
    for w in range(V):
        ys = set(data.token_label[data.ceiling & (data.token_word == w)].tolist())
        assert memo.v[w] == (1 + ys.pop() if len(ys) == 1 else 0)


def test_certificate_fails_when_a_word_is_changed() -> None:
    sents, labs, V, C = _data(4)
    memo, data, _ = compile_seq2seq(sents, labs, V, C)
    assert certify_seq2seq(memo, data).certified
    layer = memo.circuit.layers[memo.circuit.depth - 1]  # the last layer: y = digit − C'·(…)
    layer.bias[0] += 1
    cert = certify_seq2seq(memo, data)
    assert not cert.certified and cert.correct_tokens < cert.ceiling_tokens


def test_float32_small_and_refused_when_too_large() -> None:
    sents, labs, V, C = _data(5, N=20)
    con = compile_seq2seq_deep(sents, labs, V, C, regime="float32")
    assert con.certificate.certified and con.model.nu.dtype == torch.float32
    with pytest.raises(PrecisionError, match=r"the largest number of keys that fits is (\d+)") as err:
        choose_deep_layout(200_000, 10, 128, "float32", 1.25)
    fit = int(err.value.args[0].split("fits is ")[1].split(";")[0])
    assert 0 < fit < 200_000
    choose_deep_layout(fit, 10, 128, "float32", 1.23 + 2 / fit**0.5)  # that many fit (at the base slack)


CONLL = "EU B-ORG\nrejects O\nGerman B-MISC\ncall O\n\nPeter B-PER\nBlackburn I-PER\n\nGerman B-MISC\nfarmers O\n\nEU O\ncall O\nPeter O\n"


def test_cli_compile_ff_deep(tmp_path, capsys) -> None:
    from uatlab.cli import main

    data = tmp_path / "d.txt"
    data.write_text(CONLL, encoding="utf-8")
    out = tmp_path / "m.safetensors"
    assert main(["compile", str(data), "--ff", "deep", "--out", str(out), "--json"]) == 0
    fig = json.loads(capsys.readouterr().out)
    assert fig["certified_at_ceiling"] and fig["certified_tokens"] == fig["ceiling_tokens"] == 11
    # "EU" and "Peter" have two labels each: their tokens are the keys; bits per parameter by Σ H(label | word)
    assert fig["label_bits_given_word"] == pytest.approx(4.0)
    assert fig["bits_per_param_non_embedding"] == pytest.approx(4.0 / fig["params_non_embedding"])
    import uatlab

    back = uatlab.load(out)
    assert back.saved_extra["depth"] == back.memo.circuit.depth == fig["ffn_depth"]
    assert back.predict([["EU", "rejects", "German", "call"], ["Peter", "Blackburn"]]) == [
        ["B-ORG", "O", "B-MISC", "O"],
        ["B-PER", "I-PER"],
    ]


def test_cli_ff_deep_refuses_causal(tmp_path, capsys) -> None:
    from uatlab.cli import main

    data = tmp_path / "d.txt"
    data.write_text(CONLL, encoding="utf-8")
    assert main(["compile", str(data), "--ff", "deep", "--causal", "--out", str(tmp_path / "m.safetensors")]) == 2
    err = capsys.readouterr().err
    assert "error: --ff deep: --causal is not supported" in err and "Traceback" not in err
    assert not (tmp_path / "m.safetensors").exists()


def test_deep_claim_passes_quick(tmp_path, monkeypatch) -> None:
    from uatlab.claims.registry import ClaimContext, all_claims, run_claim

    monkeypatch.delenv("UATLAB_CONLL_DIR", raising=False)
    claim = {c.id: c for c in all_claims()}["C.seq2seq.memorization-deep"]
    run = run_claim(claim, ClaimContext(quick=True, out_dir=tmp_path))
    f = run.result.figures
    assert run.result.verdict == "pass", run.result.note
    assert f["certified_tokens"] == f["ceiling_tokens"] and f["ranks_QKVO"] == [1, 1, 1, 1]
    assert f["bits_per_param_non_embedding"] == pytest.approx(f["label_bits_given_word"] / f["params_non_embedding"])
    assert f["bits_per_param_non_embedding"] >= f["bits_per_param_target"] == 0.25


def test_progress_reports_every_step_and_changes_nothing() -> None:
    """The progress callback sees the construction's steps and every certificate chunk up to its total, in
    order; the memorizer and certificate are the same as without it."""
    from uatlab.constructions.paper_c.seq2seq_memorizer import CONSTRUCT_STEPS

    sents, labs, V, C = _data(6, N=80)
    seen: list[tuple[str, int, int | None]] = []
    con = compile_seq2seq_deep(sents, labs, V, C, progress=lambda *a: seen.append(a))
    plain = compile_seq2seq_deep(sents, labs, V, C)
    stages = list(dict.fromkeys(s for s, _, _ in seen))
    assert stages == ["construct", "certify gate", "certify retrieval"]
    for stage in stages:
        counts = [(d, t) for s, d, t in seen if s == stage]
        assert counts[0][0] == 0 and counts[-1][0] == counts[-1][1] > 0  # from 0 to the total
        assert all(a[0] <= b[0] for a, b in zip(counts, counts[1:], strict=False))
    assert [d for s, d, _ in seen if s == "construct"] == list(range(len(CONSTRUCT_STEPS) + 1))
    chunks: list[tuple[str, int, int | None]] = []
    small = certify_seq2seq(con.detail, prepare_data(sents, labs, V), chunk=7, progress=lambda *a: chunks.append(a))
    gate = [d for s, d, t in chunks if s == "certify gate"]
    total = chunks[0][2]
    assert gate == [*range(0, total, 7), total]  # one report per chunk of 7 points
    a, b = con.detail, plain.detail
    assert all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("nu", "mu", "v"))
    assert [(x.weights, x.bias) for x in a.circuit.layers] == [(x.weights, x.bias) for x in b.circuit.layers]
    assert con.certificate.certified_tokens == plain.certificate.certified_tokens == small.certified_tokens


def test_long_context_attention_is_formed_in_blocks_with_the_same_result(monkeypatch) -> None:
    """A context of n' = 4096 (one sentence of 3,000 tokens): the forward pass never forms more than
    ATTENTION_BLOCK attention weights at once (it formed (B, n', n'): 34 GB at n' = 65,536), the residual
    stream equals the one-matrix softmax attention exactly, and the predictions are the labels."""
    from uatlab.constructions.paper_c import seq2seq_model
    from uatlab.constructions.paper_c.seq2seq_model import ATTENTION_BLOCK

    rng = np.random.default_rng(7)
    V, C = 12, 3
    word_label = rng.integers(0, C, size=V)
    sents = [rng.integers(0, V, size=6) for _ in range(20)] + [rng.integers(0, V, size=3000)]
    labs = [np.where(rng.random(len(s)) < 0.2, rng.integers(0, C, size=len(s)), word_label[s]) for s in sents]
    con = compile_seq2seq_deep(sents, labs, V, C, certify=False)
    model = con.model
    assert model.context == 4096 and 4096 * 4096 > ATTENTION_BLOCK
    shapes = []
    softmax = torch.softmax

    def spy(t, dim):
        shapes.append(tuple(t.shape))
        return softmax(t, dim=dim)

    monkeypatch.setattr(seq2seq_model.torch, "softmax", spy)
    with torch.no_grad():
        logits = model(torch.tensor(sents[-1])[None])  # (1, 3000, C)
        forward_shapes, shapes[:] = list(shapes), []
        stream = model.stream(torch.tensor(sents[0])[None])  # (1, n', 4): every query
    for seen, queries in ((forward_shapes, 3000), (shapes, 4096)):
        assert max(int(np.prod(s)) for s in seen) <= ATTENTION_BLOCK
        assert sum(s[1] for s in seen) == queries and all(s[2] == 4096 for s in seen)  # each query attends to n'
    # the reference: one (1, n', n') softmax attention on the same inputs
    ids = torch.cat([torch.tensor(sents[0]), torch.full((4096 - 6,), V)])[None]  # (1, n'), padded with V
    pos = torch.arange(4096)
    ones = torch.ones(1, 4096, dtype=model.dtype)
    x = torch.stack([model.nu[pos[None], ids], ones, model.mu[None], model.v[ids]], dim=-1)  # (1, n', 4)
    q, k, val = x @ model.W_Q.T, x @ model.W_K.T, x @ model.W_V.T
    assert torch.equal(stream, x + (softmax(q @ k.transpose(1, 2), dim=-1) @ val) @ model.W_O.T)
    ceiling = labs[-1]  # the long sentence occurs once: every token is a ceiling token
    assert np.array_equal(logits.argmax(-1)[0].numpy(), ceiling)
