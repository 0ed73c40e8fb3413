"""The claims added for statements that had code but no claim: registered, and the cheap ones pass."""

from uatlab.claims.registry import ClaimContext, all_claims, run_claim

NEW_IDS = {
    "B.approx.two-attention-layers",
    "B.exp.range-sweep",
    "B.exp.attention-maps-one-hot",
    "B.exp.trained-seq2seq",
    "A.sec5.depth-ablation",
    "A.cor1.causal-memorization",
    "baseline.yun2020.one-softmax-layer-replaces-deep-hardmax",
    "A.equivariance.constructions-without-pe",
    "A.prop1.positional-non-equivariant",
    "B.approx.standard-layers",
    "A.sec5.rank-ablation",
    "A.thm2.causal-exact",
    "B.approx.one-layer-softmax-pooling",
    "B.approx.incontext-ridge",
    "B.approx.incontext-relu-features",
    "B.exp.incontext-trained-attention",
    "B.approx.one-standard-layer-limit",
    "B.approx.one-standard-layer-positional-keys-limit",
    "B.exp.one-standard-layer-trained",
    "B.approx.one-standard-layer-data-keys-limit",
    "B.approx.one-standard-layer-two-tokens",
}


def _claims():
    return {c.id: c for c in all_claims()}


def test_new_claims_are_registered():
    assert NEW_IDS <= set(_claims())


def test_range_sweep_and_causal_memorization_pass_quick(tmp_path):
    claims = _claims()
    ctx = ClaimContext(quick=True, out_dir=tmp_path)
    rng = run_claim(claims["B.exp.range-sweep"], ctx)
    assert rng.result.verdict == "pass", rng.result.note
    assert 0.8 <= rng.result.figures["slope_vs_range"] <= 1.2
    causal = run_claim(claims["A.cor1.causal-memorization"], ctx)
    assert causal.result.verdict == "pass", causal.result.note
    assert causal.result.figures["max_prefix_output_change_when_suffix_changes"] == 0.0
