"""Stress test of the certificate against an independent forward pass under many evaluation orders.

For compiled models (float32 and float64, word and word-position groups, causal) and for trained models
(not built to be certified), every certified token is evaluated by ``numpy_forward`` (its own numpy
implementation of paper A's formulas, sharing no code with the model or the certificate) under several
evaluations: sums in forward, reversed and random orders (input coordinates, feed-forward units, keys),
the residual added separately or fused into the sum, softmax by division or by reciprocal, and exp moved
up, down or either way by as many whole ulps as the certificate's assumed exp error allows. Asserted: no
certified token is misclassified, and no observed margin falls below the token's certified lower bound.
The harness itself is checked to be able to fail (a certificate of the wrong dtype is caught).
"""

from __future__ import annotations

import copy
import time

import numpy as np
import pytest
import torch
from certificate_stress import NP, evaluations, observed_margins, plain_weights, stress
from hand_models import float32_tie_model
from numpy_forward import Evaluation, forward

from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset
from uatlab.data import from_lists
from uatlab.data.synthetic import synthetic_dataset
from uatlab.models import Transformer, TransformerConfig
from uatlab.verify.certificate import certify, logit_bounds


def test_reference_forward_agrees_with_pytorch_within_the_radius():
    data = synthetic_dataset(24, 6, 10, 3, seed=3)
    for dtype, causal in (("float32", False), ("float64", True)):
        model = compile_dataset(data, dtype=dtype, causal=causal, run_certificate=False).model
        ids = np.stack(model.encoding.encode_tokens(data))
        with torch.no_grad():
            run = model(torch.from_numpy(ids)).numpy()
        ref = forward(plain_weights(model), ids, Evaluation("forward"))
        L, rL, bad = logit_bounds(model, ids)
        assert ref.dtype == NP[dtype] and not bad.any()
        # two runs are each within rL of the exact logits
        assert np.all(np.abs(ref.astype(np.float64) - run) <= 2 * rL)
        assert np.array_equal(ref.argmax(-1), run.argmax(-1))


COMPILED = [  # (dtype, group, causal, N, n, V, C, seed): small data sets with many contexts per word
    ("float32", "word-pos", False, 80, 8, 10, 3, 0),
    ("float32", "word", True, 80, 8, 10, 3, 1),
    ("float64", "word", False, 100, 8, 6, 3, 2),
    ("float64", "word-pos", True, 80, 8, 10, 4, 3),
]


@pytest.mark.parametrize("dtype,group,causal,N,n,V,C,seed", COMPILED)
def test_no_certified_token_of_a_compiled_model_fails_in_any_evaluation(dtype, group, causal, N, n, V, C, seed):
    t0 = time.process_time()
    data = synthetic_dataset(N, n, V, C, seed=seed)
    model = compile_dataset(data, dtype=dtype, causal=causal, group=group, run_certificate=False).model
    res = stress(model, data)
    assert res["cert"].dtype == dtype and res["cert"].method == "gated-sparse"
    assert res["cert"].certified and res["certified"] == res["tokens"] == res["cert"].ceiling_tokens  # all of it
    assert res["variants_differ"]  # the evaluations really round differently
    assert res["wrong"] == 0 and res["below_bound"] == 0 and res["worst_fraction_of_radius"] <= 2, res
    print(
        f"{dtype} {group} causal={causal}: {res['tokens']} tokens × {len(evaluations(dtype, 5))} evaluations"
        f" = {res['runs']} runs, 0 violations, worst |run − reference| = "
        f"{res['worst_fraction_of_radius']:.3f} radius, {time.process_time() - t0:.1f} CPU s"
    )


def train_tiny(dtype: str, seed: int) -> tuple[Transformer, object, dict]:
    """A small Transformer trained by Adam on a synthetic task (nothing in it is built for the certificate)."""
    torch.manual_seed(seed)
    data = synthetic_dataset(40, 6, 8, 3, seed=seed)
    tokens = sorted({t for s in data.tokens for t in s})
    labels = sorted({y for s in data.labels for y in s})
    enc = {"tokens": tokens, "labels": labels}
    cfg = TransformerConfig(
        d_model=8,
        n_layers=1,
        n_heads=1,
        head_dim=2,
        rank=None,
        ff_width=16,
        vocab_size=len(tokens),
        num_labels=len(labels),
        max_len=6,
        positional="learned",
        dtype=dtype,
        readout_bias=True,
    )
    model = Transformer(cfg)
    ids = torch.tensor([[tokens.index(t) for t in s] for s in data.tokens])
    ys = torch.tensor([[labels.index(y) for y in s] for s in data.labels])
    opt = torch.optim.Adam(model.parameters(), lr=0.03)
    for _ in range(150):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(ids).reshape(-1, len(labels)), ys.reshape(-1))
        loss.backward()
        opt.step()
    return model.eval(), data, enc


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_no_certified_token_of_a_trained_model_fails_in_any_evaluation(dtype):
    model, data, enc = train_tiny(dtype, seed=5)
    res = stress(model, data, encoding=enc)
    assert res["cert"].method == "dense"
    assert res["tokens"] > 0.3 * data.num_tokens  # the training run fits a good part, and it is proven
    assert res["variants_differ"]
    assert res["wrong"] == 0 and res["below_bound"] == 0 and res["worst_fraction_of_radius"] <= 2, res
    print(
        f"trained {dtype}: {res['tokens']} of {data.num_tokens} tokens certified × {len(evaluations(dtype, 5))}"
        f" evaluations = {res['runs']} runs, 0 violations"
    )


def test_the_harness_catches_a_certificate_of_the_wrong_dtype():
    # L_B = 1 + 2^-25 vs L_A = 1: certified in float64, but a float32 evaluation rounds L_B to 1 (a tie,
    # argmax A). Proving the float32 weights with float64 rounding is the unsoundness the harness must see.
    model = float32_tie_model()
    data, enc = from_lists([["a", "a"]], [["B", "B"]]), {"tokens": ["a"], "labels": ["A", "B"]}
    cert64 = certify(model, data, encoding=enc)
    assert cert64.certified_tokens == 2
    wrong_dtype = plain_weights(copy.deepcopy(model).float())
    logits = forward(wrong_dtype, np.zeros((1, 2), dtype=np.int64), Evaluation("forward"))
    ys = np.ones((1, 2), dtype=np.int64)
    assert (logits.argmax(-1) != ys).all() and (observed_margins(logits, ys) < np.stack(cert64.margins)).all()
    assert stress(copy.deepcopy(model).float(), data, encoding=enc)["tokens"] == 0  # the fixed certificate


def test_a_certified_model_is_right_in_padded_batches_whatever_the_padding_row_holds():
    """`Transformer.predict` pads with id 0. Its embedding row is read by no real token of data without that word,
    so the certificate never bounds it; a padded run must still give what the certificate proved."""
    data = synthetic_dataset(120, 8, 40, 4, seed=5)
    model = compile_dataset(data, dtype="float64", run_certificate=False).model
    pad_word = model.encoding.id_to_token[0]
    keep = [i for i, t in enumerate(data.tokens) if pad_word not in t and len(set(t)) > 1]
    short = [data.tokens[i][: 3 + i % 6] for i in keep]  # several lengths: predict pads the shorter ones
    labels = [data.labels[i][: len(s)] for i, s in zip(keep, short, strict=True)]
    subset = from_lists(short, labels)
    with torch.no_grad():
        model.embed.weight[0] = torch.finfo(torch.float64).max / 2  # finite: W_V times it overflows
        model.blocks[0].attn.W_V.left.mul_(4.0)  # times 4 and divided by 4: powers of two, so every real
        model.blocks[0].attn.W_O.left.div_(4.0)  # token's arithmetic is unchanged
    cert = certify(model, subset, keep_margins=True)
    assert cert.certified_tokens > 0
    assert len({len(s) for s in short}) > 1
    # one batch holds every sentence, so each shorter one is padded to the longest
    predicted = model.predict(short, max_tokens=len(short) * max(map(len, short)))
    wrong = [
        (s, k)
        for s, (pred, ys, m) in enumerate(zip(predicted, labels, cert.margins, strict=True))
        for k in range(len(ys))
        if m[k] > 0 and pred[k] != ys[k]
    ]
    assert not wrong
