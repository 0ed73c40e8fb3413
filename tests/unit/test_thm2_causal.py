"""Theorem 2 with a causal mask: exact certificate on a small case, float64 collapse, CLI."""

import json

from uatlab.cli import main
from uatlab.constructions.paper_a.thm2_causal_mask import build_theorem2_causal_layer, certify_causal
from uatlab.constructions.paper_a.thm2_contextual_mapping import build_theorem2_layer, random_vocabulary
from uatlab.experiments.thm2_precision import theorem2_causal
from uatlab.numerics.arb import arb_attention, working_precision


def test_small_case_certified_and_float64_collapses():
    res = theorem2_causal(vocab_size=3, dim=2, n=2, seed=0)
    assert res["passes"] and res["uncertified_pairs"] == 0
    assert res["contexts"] == 3 + 3 * 2  # prefixes of length 1 (3) and (set of 2, last token) pairs (6)
    assert res["float64_collapsed_ids"] > 0


def test_too_few_digits_do_not_pass():
    V = random_vocabulary(3, 2, 0.5, 1.0, 2.0, seed=0)
    con = build_theorem2_layer(V, 2, 0.5, 1.0, 2.0, seed=0).detail
    assert not certify_causal(con, 16)["passes"]


def test_same_set_same_last_token_gives_the_same_output():
    V = random_vocabulary(4, 2, 0.5, 1.0, 2.0, seed=1)
    con = build_theorem2_layer(V, 3, 0.5, 1.0, 2.0, seed=1).detail
    W = [[con.weights[k].tolist()] for k in ("W_Q", "W_K", "W_V", "W_O")]
    with working_precision(digits=200):
        a = arb_attention([V[t].tolist() for t in (0, 1, 2)], *W)[-1]
        b = arb_attention([V[t].tolist() for t in (1, 0, 2)], *W)[-1]
        assert all(x.overlaps(y) for x, y in zip(a, b, strict=True))


def test_cli_causal_json(capsys):
    code = main(["contextual-mapping", "literal", "--causal", "--vocab-size", "3", "--length", "2", "--json"])
    out = capsys.readouterr().out
    assert code == 0 and json.loads(out)["passes"] is True


def test_builder_returns_a_causal_construction_whose_prefix_outputs_match_the_literal_layer():
    import torch

    V = random_vocabulary(3, 2, 0.5, 1.0, 2.0, seed=0)
    con = build_theorem2_causal_layer(V, 2, 0.5, 1.0, 2.0, seed=0)
    assert con.model.causal and not con.detail.layer.causal
    assert con.certificate["passes"] and con.facts["digits"] >= 32
    assert con.guarantee["log10_delta_causal"] < 0 and con.facts["theorem"] == "Theorem 2 with a causal mask"
    X = torch.from_numpy(V[[0, 2, 1]][None])  # (1, 3, 2)
    with torch.no_grad():
        full = con.model(X)[0]  # (3, 2)
        for k in range(3):
            prefix = con.detail.layer(X[:, : k + 1])[0, -1]
            assert torch.allclose(full[k], prefix, rtol=0, atol=1e-12)
