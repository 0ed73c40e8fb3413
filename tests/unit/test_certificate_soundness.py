"""Soundness regressions of the floating-point certificate (review of issue 3).

Each test pins a hole found in review: underflowing products (the relative-error model of Higham does not
hold below the normal range), softmax weights that can be subnormal after the division by Σ, the float32
rounding of the Python scalar that scales the scores, and the PyTorch spot check that must veto a
certificate it contradicts.
"""

from fractions import Fraction

import numpy as np
import torch
from hand_models import hand_model

import uatlab.verify.certificate as certificate_module
from uatlab.data import from_lists
from uatlab.models import Transformer
from uatlab.numerics.float_bounds import TINY, product_radius
from uatlab.verify.certificate import certify, certify_chunks, logit_bounds


def tiny_model(d: int, vocab: int, labels: int, ff_width: int = 0) -> Transformer:
    return hand_model(d, vocab, labels, ff_width=ff_width)


def test_a_logit_made_of_an_underflowing_product_is_not_certified():
    # logit_1 = 1e-30 · 1e-16 = 1e-46 exactly, but float32 rounds the product to 0 (< half the smallest
    # subnormal): PyTorch sees a tie (0, 0) and argmax picks label 0. The old bound, purely relative,
    # gave the reference margin 1e-46 a radius of 6e-54 and certified label 1.
    model = tiny_model(d=2, vocab=1, labels=2)
    with torch.no_grad():
        model.embed.weight.copy_(torch.tensor([[1e-16, 0.0]]))
        model.readout.weight.copy_(torch.tensor([[0.0, 0.0], [1e-30, 0.0]]))
        run = model(torch.zeros(1, 1, dtype=torch.int64))  # (1, 1, 2)
    assert run[0, 0, 0] == run[0, 0, 1] == 0.0 and int(run.argmax(-1)) == 0  # the premise: label 1 is lost
    L, rL, _ = logit_bounds(model, np.zeros((1, 1), dtype=np.int64))
    assert L[0, 0, 1] > 0 and abs(float(run[0, 0, 1]) - L[0, 0, 1]) <= rL[0, 0, 1]
    cert = certify(model, from_lists([["a"]], [["B"]]), encoding={"tokens": ["a"], "labels": ["A", "B"]})
    assert cert.certified_tokens == 0 and not cert.certified


def test_product_radius_covers_gradual_underflow():
    # float32: a·b is exact in float64 but subnormal in float32, where rounding is absolute, not relative
    a, b = np.float32(1e-30), np.float32(1.1e-15)
    exact = float(a) * float(b)  # exact: 24-bit × 24-bit fits in 53 bits
    run = float((torch.tensor([a]) * torch.tensor([b])).item())
    assert exact < TINY["float32"] and run != exact
    rad = product_radius(np.array([[[float(a)]]]), np.array([[[float(b)]]]), "float32")
    assert rad[0, 0, 0] >= abs(run - exact)
    # float64: a power of two times x is exact only while the product stays normal
    a64, b64 = 2.0**-1000, 3.0 * 2.0**-80
    run64 = a64 * b64  # rounds to 0: 3·2^-1080 < 2^-1075
    err64 = abs(Fraction(run64) - Fraction(a64) * Fraction(b64))
    rad64 = product_radius(np.array([[[a64]]]), np.array([[[b64]]]), "float64")[0, 0, 0]
    assert err64 > 0 and Fraction(float(rad64)) >= err64


def test_softmax_rows_whose_weights_could_be_subnormal_are_not_certified():
    # keys: seven at score 86, one at score 0 (T = 86: exp(−86) = 4.4e-38 is still normal, so the old
    # check passed) — but the weight exp(−86)/Σ with Σ ≈ 7 is subnormal, outside the relative error model
    model = tiny_model(d=2, vocab=2, labels=2)
    with torch.no_grad():
        model.embed.weight.copy_(torch.tensor([[0.0, 1.0], [86.0, 1.0]]))  # token: [key a, query 1]
        model.blocks[0].attn.W_Q.set_factors(torch.ones(1, 1, 1), torch.tensor([[[0.0, 1.0]]]))  # q = 1
        model.blocks[0].attn.W_K.set_factors(torch.ones(1, 1, 1), torch.tensor([[[1.0, 0.0]]]))  # k = a
        model.readout.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
    ids = np.array([[0, 1, 1, 1, 1, 1, 1, 1]])
    with torch.no_grad():
        p = model.blocks[0].attn.attention_weights(model.embed_inputs(torch.as_tensor(ids)))  # (1, 1, 8, 8)
    assert 0 < float(p[0, 0, 0, 0]) < TINY["float32"]  # the premise: a subnormal attention weight
    _, _, bad = logit_bounds(model, ids)
    assert bad.all()


def test_float32_scores_round_the_python_scale_before_multiplying():
    # The certificate charges two roundings for a scale that float32 cannot represent, because PyTorch
    # computes fl32(fl32(scale) · x), not fl32(scale · x). Pin that behaviour: if it changed, the bound
    # would still hold (it only over-counts), but the reason for the extra u would be gone.
    rng = np.random.default_rng(0)
    x = rng.uniform(1, 2, 4000).astype(np.float32)
    scale = 0.7 / 3.0  # not representable in float32
    run = (scale * torch.from_numpy(x)).numpy()
    twice = (np.float32(scale) * x).astype(np.float32)
    once = (scale * x.astype(np.float64)).astype(np.float32)
    assert np.array_equal(run, twice) and not np.array_equal(run, once)


def test_a_pytorch_run_that_contradicts_the_proof_vetoes_the_certificate(monkeypatch):
    model = tiny_model(d=2, vocab=1, labels=2)
    with torch.no_grad():
        model.embed.weight.copy_(torch.tensor([[1.0, 0.0]]))
        model.readout.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))  # PyTorch predicts label 0
    wrong = (np.array([[0.0, 1.0]]), np.zeros((1, 2)), np.zeros(1, dtype=bool))  # a broken proof (flat: one token)
    monkeypatch.setattr(
        certificate_module._BoundedModel, "forward_bounds_flat", lambda self, groups, counters=None: wrong
    )
    cert = certify(model, from_lists([["a"]], [["B"]]), encoding={"tokens": ["a"], "labels": ["A", "B"]})
    assert cert.bound_certified_tokens == 1 and cert.torch_spot_check["certified_but_wrong"] == 1
    assert not cert.certified  # a void proof proves no token
    assert cert.certified_tokens == 0 and cert.certified_fraction == 0.0 and cert.min_margin_at is None
    assert "PyTorch's own forward got 1 of the 1 certified tokens" in cert.invalidated_by[0]
    assert np.isneginf(cert.margin(0, 0))


def two_layer_model(causal: bool) -> Transformer:
    """Layer 1: token 0 = [key 0, query 1] sees token 1 = [key 100, query 0] at a score gap of 100 (its row
    may underflow); token 1's own rows score 0 everywhere. Layer 2: zero attention (never flagged itself)."""
    model = hand_model(2, 2, 2, layers=2, causal=causal)
    with torch.no_grad():
        model.embed.weight.copy_(torch.tensor([[0.0, 1.0], [100.0, 0.0]]))
        model.blocks[0].attn.W_Q.set_factors(torch.ones(1, 1, 1), torch.tensor([[[0.0, 1.0]]]))  # q = query
        model.blocks[0].attn.W_K.set_factors(torch.ones(1, 1, 1), torch.tensor([[[1.0, 0.0]]]))  # k = key
        model.readout.weight.copy_(torch.eye(2))
    return model.eval()


def test_a_row_flagged_in_one_layer_taints_every_later_query_that_attends_to_it():
    # its radius is invalid (relative bounds fail below the normal range), and in layer 2 it is a key/value
    _, _, bad = logit_bounds(two_layer_model(causal=False), np.array([[0, 1, 1]]))
    assert bad.all()  # before the fix only row 0 was flagged
    _, _, bad = logit_bounds(two_layer_model(causal=True), np.array([[1, 0, 1, 1]]))
    assert bad.tolist() == [[False, True, True, True]]  # row 0 never sees row 1


def test_a_run_that_can_overflow_is_not_certified():
    # logit_A = 1e30·1e10 − 1e30·1e10: 0 in the reference (radius 5e33), but float32 overflows to inf − inf = NaN
    # and torch.argmax returns the NaN; logit_B = 1e35 "beat" the radius, so the old check certified label B
    model = tiny_model(d=2, vocab=1, labels=2)
    with torch.no_grad():
        model.embed.weight.copy_(torch.tensor([[1e10, 1e10]]))
        model.readout.weight.copy_(torch.tensor([[1e30, -1e30], [1e25, 0.0]]))
        run = model(torch.zeros(1, 1, dtype=torch.int64))
    assert torch.isnan(run[0, 0, 0]) and int(run.argmax(-1)) == 0  # the premise: label B is lost
    data, enc = from_lists([["a"]], [["B"]]), {"tokens": ["a"], "labels": ["A", "B"]}
    cert = certify_chunks(model, [(0, data)], 1, enc, spot_check_flops=0)  # the proof alone, no PyTorch veto
    assert cert.certified_tokens == 0 and not cert.certified


def test_the_spot_check_meets_long_sequences_when_short_ones_could_use_up_its_budget(monkeypatch):
    """A length-1 sequence's softmax is 1 whatever its scores: a veto spent on short sequences alone would never
    run PyTorch's attention over several keys. Rounds over the lengths, in a spread order, reach the longest."""
    from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset

    short = [[f"w{i % 50}"] for i in range(3000)]
    long = [[f"w{(i * 7 + k) % 50}" for k in range(12)] for i in range(4)]
    mid = [[f"w{(i + k) % 50}" for k in range(5)] for i in range(4)]
    tokens = short + mid + long
    data = from_lists(tokens, [["A" if w[-1] in "02468" else "B" for w in s] for s in tokens])
    model = compile_dataset(data, dtype="float64", run_certificate=False).model
    seen: list[int] = []
    forward = type(model).forward

    def recording(self, inputs, *a, **k):
        seen.append(int(inputs.shape[1]))
        return forward(self, inputs, *a, **k)

    monkeypatch.setattr(type(model), "forward", recording)
    per_token = sum(p.numel() for p in model.parameters() if p.dim() == 2) - model.embed.weight.numel()
    cert = certify_chunks(model, [(0, data)], len(data), spot_check_flops=300 * per_token)  # 300 tokens' worth
    assert set(seen) == {1, 5, 12}
    assert cert.torch_spot_check["tokens"] >= 300 and cert.torch_spot_check["certified_but_wrong"] == 0
    takes, left = certificate_module._spot_takes([1, 5, 12], [3000, 4, 4], 300, 1)
    assert takes[1] >= 1 and takes[2] >= 1 and left <= 0
    assert sum(t * n for t, n in zip(takes, [1, 5, 12], strict=True)) - left == 300  # what was spent
    lengths = list(range(1, 41))  # 40 lengths and a budget for a fraction of one round: the longest is met
    takes, _ = certificate_module._spot_takes(lengths, [5] * 40, 100, 1)
    assert takes[0] == takes[-1] == takes[20] == 1  # shortest, longest, middle
    spent = sum(t * n for t, n in zip(takes, lengths, strict=True))
    assert 100 <= spent < 100 + max(lengths) and sum(takes) < len(lengths)  # a fraction of one round, no more
    for m in range(1, 130):
        order = certificate_module._spread_order(m)
        assert sorted(order) == list(range(m)) and order[: min(m, 2)] == [0, m - 1][: min(m, 2)]
