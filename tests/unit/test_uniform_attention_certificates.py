"""The next-token and --ff deep certificates (Kajitsuka & Sato, ICLR 2025): they state what their exact-integer
proofs assume (IEEE round-to-nearest, a max-subtracted softmax with exp(0) = 1, full-precision float32 products),
and check it in the certifying process (a failed check voids the proof, as in the main certificate)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch_settings import float32_matmul_precision

from uatlab.cli import main
from uatlab.constructions.paper_c.next_token_memorizer import compile_memorizer
from uatlab.constructions.paper_c.seq2seq_memorizer import compile_seq2seq
from uatlab.verify.next_token import certify_next_token
from uatlab.verify.seq2seq_deep import certify_seq2seq


def _next_token(regime: str):
    rng = np.random.default_rng(7)
    tokens = rng.integers(0, 5, size=(200, 6))
    labels = rng.integers(0, 4, size=200)
    memo, _ = compile_memorizer(tokens, labels, V=5, C=4, regime=regime, seed=0)
    return memo, tokens, labels


def _deep(regime: str):
    rng = np.random.default_rng(8)
    sents = [rng.integers(0, 12, size=int(rng.integers(1, 7))) for _ in range(40)]
    labs = [rng.integers(0, 3, size=len(s)) for s in sents]
    memo, data, _ = compile_seq2seq(sents, labs, 12, 3, regime=regime)
    return memo, data


def _certify(kind: str, regime: str):
    if kind == "next-token":
        memo, tokens, labels = _next_token(regime)
        return certify_next_token(memo, tokens, labels), memo.layout.n_pad
    memo, data = _deep(regime)
    return certify_seq2seq(memo, data), memo.context


def _proven(cert) -> int:
    return cert.certified_rows if hasattr(cert, "certified_rows") else cert.certified_tokens


CASES = [("next-token", "float32"), ("next-token", "float64"), ("deep", "float32"), ("deep", "float64")]


@pytest.mark.parametrize(("kind", "regime"), CASES)
def test_the_certificate_states_and_checks_its_assumptions(kind, regime):
    cert, n = _certify(kind, regime)
    d = json.loads(json.dumps(cert.to_dict()))
    assert d["certified"] is True and d["invalidated_by"] == [] and _proven(cert) > 0
    text = " ".join(d["assumptions"])
    assert all(isinstance(a, str) for a in d["assumptions"])
    assert f"IEEE 754 round-to-nearest arithmetic in {regime}" in text
    assert "subtracts the row maximum and exp(0) = 1" in text and f"exactly 1/{n}" in text
    assert ("float32 matrix products at full precision" in text) == (regime == "float32")
    env = d["environment"]
    assert env["ok"] is True and env["round_to_nearest"] is True and env["float32_matmul_precision"] == "highest"
    assert env["exp_ulps_measured"]["dtype"] == regime and "exp_within_assumed" not in env  # no --exp-ulp here
    assert env["uniform_softmax"] == {"dtype": regime, "n": n, "exp_zero_is_one": True, "softmax_uniform_exact": True}


@pytest.mark.parametrize("kind", ["next-token", "deep"])
def test_reduced_float32_matmul_precision_voids_a_float32_proof_only(kind):
    with float32_matmul_precision("high"):
        cert, _ = _certify(kind, "float32")
        cert64, _ = _certify(kind, "float64")
    assert cert.certified is False and _proven(cert) == 0
    assert len(cert.invalidated_by) == 1 and "float32_matmul_precision=high" in cert.invalidated_by[0]
    assert cert.environment["ok"] is False and "float32_matmul_precision=high" in cert.reason
    # float64 products are not affected by float32 reduced-precision modes (as in the main certificate)
    assert cert64.certified is True and cert64.invalidated_by == [] and _proven(cert64) > 0


@pytest.mark.parametrize("kind", ["next-token", "deep"])
def test_a_softmax_that_is_not_exactly_uniform_voids_the_proof(kind, monkeypatch):
    softmax = torch.softmax
    monkeypatch.setattr(torch, "softmax", lambda x, dim: softmax(x, dim) * (1 + 2.0**-20))
    cert, n = _certify(kind, "float32")
    assert cert.environment["uniform_softmax"]["softmax_uniform_exact"] is False
    assert cert.certified is False and _proven(cert) == 0
    assert "uniform_softmax" in cert.invalidated_by[0] and f"constant row of {n}" in cert.invalidated_by[0]


def test_the_exact_regime_states_integer_evaluation_and_no_float_check_voids_it():
    with float32_matmul_precision("high"):
        cert, _ = _certify("next-token", "exact")
    assert cert.certified is True and cert.invalidated_by == [] and cert.certified_rows == cert.correct_rows > 0
    assert "exact integer arithmetic" in cert.assumptions[0] and "ExactNextTokenModule" in cert.assumptions[0]
    assert cert.environment["float32_matmul_precision"] == "high" and isinstance(
        cert.environment["uniform_softmax"], str
    )


def _write(path, sentences):
    path.write_text("\n\n".join("\n".join(f"{w} {y}" for w, y in s) for s in sentences) + "\n")


TIED = [[("x", "A"), ("y", "O")], [("x", "B"), ("y", "O")], [("z", "A"), ("x", "O")]]


def test_the_cli_reports_the_assumptions_in_json_and_tables(tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    data.write_text(
        "".join(json.dumps({"tokens": s.split(), "label": y}) + "\n" for s, y in [("a b", "b"), ("b", "a")])
    )
    model = tmp_path / "nt.safetensors"
    assert (
        main(["compile", "--task", "next-token", str(data), "--dtype", "float32", "--out", str(model), "--json"]) == 0
    )
    fig = json.loads(capsys.readouterr().out)
    assert fig["certified"] is True and fig["invalidated_by"] == [] and fig["environment"]["ok"] is True
    assert any("row maximum" in a for a in fig["assumptions"]) and fig["certified_examples"] == 2
    assert main(["certify", str(model), str(data), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["assumptions"] == fig["assumptions"] and out["environment"]["uniform_softmax"]["n"] == 2
    assert main(["certify", str(model), str(data)]) == 0
    table = capsys.readouterr().out
    assert "assumes: the softmax subtracts the row maximum" in table and "uniform_softmax=" in table
    conll = tmp_path / "t.txt"
    _write(conll, TIED)
    deep = tmp_path / "deep.safetensors"
    assert (
        main(["compile", "--ff", "deep", str(conll), "--format", "conll", "--dtype", "float32", "--out", str(deep)])
        == 0
    )
    table = capsys.readouterr().out
    assert "assumes: float32 matrix products at full precision" in table and "uniform_softmax=" in table
    assert main(["certify", str(deep), str(conll), "--format", "conll"]) == 0
    assert "assumes: IEEE 754 round-to-nearest arithmetic in float32" in capsys.readouterr().out


def test_the_cli_says_on_stderr_that_a_float32_proof_is_void(tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    data.write_text(
        "".join(json.dumps({"tokens": s.split(), "label": y}) + "\n" for s, y in [("a b", "b"), ("b", "a")])
    )
    model = tmp_path / "nt.safetensors"
    conll = tmp_path / "t.txt"
    _write(conll, TIED)
    deep = tmp_path / "deep.safetensors"
    with float32_matmul_precision("high"):
        assert main(["compile", "--task", "next-token", str(data), "--dtype", "float32", "--out", str(model)]) == 0
        err = capsys.readouterr().err
        assert "warning: the proof is void, no example is proven" in err and "float32_matmul_precision=high" in err
        assert main(["certify", str(model), str(data), "--json"]) == 0
        cap = capsys.readouterr()
        out = json.loads(cap.out)
        assert out["certified"] is False and out["certified_rows"] == 0 and out["environment"]["ok"] is False
        assert "float32_matmul_precision=high" in out["invalidated_by"][0] and "the proof is void" in cap.err
        args = ["compile", "--ff", "deep", str(conll), "--format", "conll", "--dtype", "float32", "--out", str(deep)]
        assert main([*args, "--json"]) == 0
        cap = capsys.readouterr()
        fig = json.loads(cap.out)
        assert fig["certified"] is False and fig["certified_tokens"] == 0 and "no token is proven" in cap.err
        assert main(["certify", str(deep), str(conll), "--format", "conll", "--json"]) == 0
        cap = capsys.readouterr()
        assert json.loads(cap.out)["invalidated_by"] and "no token is proven" in cap.err
