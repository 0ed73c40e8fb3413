"""The floating-point certificate: its radii really bound the error, it never claims a wrong token,
it works on arbitrary (trained-like) models, and it rejects bad inputs clearly."""

import mpmath
import numpy as np
import pytest
import torch

from uatlab.data import from_lists
from uatlab.errors import InputError
from uatlab.models import Transformer, TransformerConfig
from uatlab.numerics.float_bounds import gamma, is_power_of_two, product_radius, representable
from uatlab.verify.certificate import certify, logit_bounds


def random_model(
    dtype="float32",
    causal=False,
    heads=1,
    head_dim=1,
    rank=1,
    layers=1,
    input_ff=None,
    seed=0,
    beta=1.0,
    vocab=7,
    labels=3,
    d=6,
    width=5,
):
    torch.manual_seed(seed)
    cfg = TransformerConfig(
        d_model=d,
        n_layers=layers,
        n_heads=heads,
        head_dim=head_dim,
        rank=rank,
        ff_width=width,
        vocab_size=vocab,
        num_labels=labels,
        max_len=9,
        positional="learned",
        causal=causal,
        input_ff_width=input_ff,
        dtype=dtype,
        beta=beta,
    )
    model = Transformer(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.5)
    model.eval()
    return model


def exact_logits(model, ids):
    """The model evaluated in float64 on its stored weights: exact up to ~1e-15 (≪ float32 radii)."""
    m64 = Transformer(TransformerConfig(**{**model.config.__dict__, "dtype": "float64"}))
    m64.load_state_dict({k: v.to(torch.float64) for k, v in model.state_dict().items()})
    with torch.no_grad():
        return m64(torch.as_tensor(ids)).numpy()


CASES = [
    {},
    {"causal": True},
    {"heads": 2, "head_dim": 3},
    {"heads": 2, "head_dim": 3, "rank": 2},
    {"layers": 2},
    {"input_ff": 4},
    {"beta": 0.7},
    {"rank": None, "head_dim": 2},
]


@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_radius_bounds_the_float32_error(case):
    model = random_model(**case)
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 7, size=(20, 8))
    L, rL, bad = logit_bounds(model, ids)
    with torch.no_grad():
        run32 = model(torch.as_tensor(ids)).double().numpy()  # a run in the model's dtype
    exact = exact_logits(model, ids)
    assert not bad.any()
    # the radius bounds the float32 run and the float64 reference, and is not absurdly loose
    assert np.all(np.abs(run32 - exact) <= rL)
    assert np.all(np.abs(L - exact) <= rL)
    assert np.median(rL / np.maximum(np.abs(run32 - exact), 1e-12)) < 1e4


def test_float64_radius_bounds_error_against_high_precision():
    model = random_model(dtype="float64", d=4, width=3, vocab=5)
    ids = np.array([[0, 3, 1, 4, 2]])
    L, rL, _ = logit_bounds(model, ids)
    mpmath.mp.dps = 50
    sd = {k: v.numpy() for k, v in model.state_dict().items()}
    # literal high-precision evaluation of the same network (one block, one head, s = 1, rank 1)
    x = [
        [mpmath.mpf(float(sd["embed.weight"][t, j])) + mpmath.mpf(float(sd["pos"][k, j])) for j in range(4)]
        for k, t in enumerate(ids[0])
    ]

    def mat(name):
        return [[mpmath.mpf(float(v)) for v in row] for row in np.atleast_2d(sd[name])]

    Wq = [
        mpmath.mpf(float(sd["blocks.0.attn.W_Q.left"].ravel()[0])) * mpmath.mpf(float(v))
        for v in sd["blocks.0.attn.W_Q.right"].ravel()
    ]
    Wk = [
        mpmath.mpf(float(sd["blocks.0.attn.W_K.left"].ravel()[0])) * mpmath.mpf(float(v))
        for v in sd["blocks.0.attn.W_K.right"].ravel()
    ]
    Wv = [
        mpmath.mpf(float(sd["blocks.0.attn.W_V.left"].ravel()[0])) * mpmath.mpf(float(v))
        for v in sd["blocks.0.attn.W_V.right"].ravel()
    ]
    Wo = [
        mpmath.mpf(float(v)) * mpmath.mpf(float(sd["blocks.0.attn.W_O.right"].ravel()[0]))
        for v in sd["blocks.0.attn.W_O.left"].ravel()
    ]
    dot = lambda w, v: mpmath.fsum(a * b for a, b in zip(w, v, strict=True))  # noqa: E731
    q = [dot(Wq, xi) for xi in x]
    k_ = [dot(Wk, xi) for xi in x]
    v = [dot(Wv, xi) for xi in x]
    W1, b1, W2, b2 = (
        mat("blocks.0.ff.hidden.weight"),
        mat("blocks.0.ff.hidden.bias")[0],
        mat("blocks.0.ff.output.weight"),
        mat("blocks.0.ff.output.bias")[0],
    )
    R, bR = mat("readout.weight"), mat("readout.bias")[0]
    for i, xi in enumerate(x):
        e = [mpmath.exp(q[i] * kj) for kj in k_]
        h = mpmath.fsum(ej * vj for ej, vj in zip(e, v, strict=True)) / mpmath.fsum(e)
        x1 = [xi[j] + Wo[j] * h for j in range(4)]
        r = [max(dot(W1[u], x1) + b1[u], 0) for u in range(3)]
        y = [x1[j] + dot(W2[j], r) + b2[j] for j in range(4)]
        logits = [dot(R[c], y) + bR[c] for c in range(3)]
        for c in range(3):
            assert abs(L[0, i, c] - float(logits[c])) <= rL[0, i, c]


def test_certificate_never_claims_a_wrong_token():
    model = random_model(dtype="float32", vocab=6, labels=3)
    toks = [[f"w{t}" for t in row] for row in np.random.default_rng(2).integers(0, 6, size=(40, 7))]
    ids = np.array([[int(t[1:]) for t in row] for row in toks])
    with torch.no_grad():
        pred = model(torch.as_tensor(ids)).argmax(-1).numpy()
    # labels: the model's own predictions on even sequences, a shifted (wrong) label on odd ones
    labels = [[f"y{(p + (b % 2)) % 3}" for p in pred[b]] for b in range(40)]
    enc = {"tokens": [f"w{i}" for i in range(6)], "labels": ["y0", "y1", "y2"]}
    cert = certify(model, from_lists(toks, labels), encoding=enc)
    assert cert.correct_tokens == 20 * 7
    assert cert.certified_tokens <= 20 * 7 and not cert.certified
    assert cert.certified_tokens > 0.5 * 20 * 7  # random float32 models have comfortable margins mostly
    assert 0 < cert.certified_fraction < 1 and cert.method == "dense"


def test_unknown_token_label_and_unsupported_models():
    model = random_model()
    enc = {"tokens": [f"w{i}" for i in range(7)], "labels": ["a", "b", "c"]}
    with pytest.raises(InputError, match=r"token 'zz' \(sequence 1, position 1\)"):
        certify(model, from_lists([["w1"], ["w2", "zz"]], [["a"], ["a", "b"]]), encoding=enc)
    with pytest.raises(InputError, match="label 'q'"):
        certify(model, from_lists([["w1"]], [["q"]]), encoding=enc)
    with pytest.raises(InputError, match="no token encoding"):
        certify(model, from_lists([["w1"]], [["a"]]))
    with pytest.raises(InputError, match=r"<memory>:2: sequence 1 has 12 tokens; the model's positional encoding"):
        certify(model, from_lists([["w1"], ["w1"] * 12], [["a"], ["a"] * 12]), encoding=enc)
    hard = Transformer(TransformerConfig(d_model=4, vocab_size=3, num_labels=2, attention="hardmax"))
    with pytest.raises(InputError, match="softmax"):
        certify(hard, from_lists([["x"]], [["a"]]), encoding={"tokens": ["x", "y", "z"], "labels": ["a", "b"]})


def test_float_bound_helpers():
    u = 2.0**-24
    assert gamma(3, u) == pytest.approx(3 * u / (1 - 3 * u))
    with pytest.raises(ArithmeticError):
        gamma(2**23, u)
    assert is_power_of_two(0.25) and is_power_of_two(-8.0) and not is_power_of_two(3.0) and not is_power_of_two(0.0)
    assert representable(np.array([0.5, 1 + 2.0**-20]), "float32")
    assert not representable(np.array([1 + 2.0**-30]), "float32")
    left = np.array([[[1.0], [0.3]]])  # (1, 2, 1)
    right = np.array([[[0.1, 2.0]]])  # (1, 1, 2)
    r64 = product_radius(left, right, "float64")
    assert r64[0, 0, 0] == 0 and r64[0, 0, 1] == 0  # left = 1 (a power of two): exact
    assert r64[0, 1, 1] == 0 and r64[0, 1, 0] > 0  # right = 2: exact; 0.3·0.1 rounds


def test_softmax_rows_that_could_underflow_are_not_certified():
    model = random_model(dtype="float32", seed=3)
    with torch.no_grad():
        model.blocks[0].attn.W_Q.left.mul_(200.0)  # scores spread far beyond exp's normal range
    L, rL, bad = logit_bounds(model, np.random.default_rng(0).integers(0, 7, size=(5, 8)))
    assert bad.any()
    toks = [[f"w{t}" for t in row] for row in np.random.default_rng(0).integers(0, 7, size=(5, 8))]
    pred = L.argmax(-1)  # labels = the reference's own predictions: only the range check can refuse a token
    labels = [[f"y{p}" for p in row] for row in pred]
    cert = certify(
        model, from_lists(toks, labels), encoding={"tokens": [f"w{i}" for i in range(7)], "labels": ["y0", "y1", "y2"]}
    )
    assert cert.certified_tokens <= int((~bad).sum()) and not cert.certified
    margins = np.stack(cert.margins)  # (5, 8): a flagged row is never certified, whatever its margin
    assert np.all(margins[bad] == -np.inf) and np.all(margins[~bad] > -np.inf)


def test_gated_fast_path_agrees_with_dense_evaluation():
    from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset
    from uatlab.data.synthetic import synthetic_dataset
    from uatlab.verify.certificate import _BoundedModel

    data = synthetic_dataset(50, 7, 20, 4, seed=4)
    model = compile_dataset(data, run_certificate=False).model
    ids = np.stack(model.encoding.encode_tokens(data))
    bm = _BoundedModel(model)
    assert bm.gate is not None and bm.gate["gated"].all()
    L1, r1, _ = bm.forward_bounds(ids)
    bm.gate = None
    L2, r2, _ = bm.forward_bounds(ids)
    np.testing.assert_allclose(L1, L2, rtol=0, atol=1e-9)
    assert np.all(r1 <= r2 * (1 + 1e-9) + 1e-300)


def test_input_keys_identify_inputs_and_are_stable_across_processes():
    import subprocess
    import sys

    from uatlab.data.keys import input_keys

    seq = ["a", "b", "a", "c"] * 20
    keys = input_keys(seq, "sequence")
    assert len(set(keys)) == len(seq)  # every position of a sequence is a different input
    assert keys == input_keys(list(seq), "sequence")
    assert input_keys(seq[:-1] + ["d"], "sequence")[0] != keys[0]  # whole-sequence context
    pre = input_keys(seq, "prefix")
    assert len(set(pre)) == len(seq) and input_keys(seq[:3] + ["zz"], "prefix")[:3] == pre[:3]
    code = "from uatlab.data.keys import input_keys; print(input_keys(['x', 'y'], 'sequence'))"
    import os

    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # a different str-hash seed than this process
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env).stdout
    assert out == f"{input_keys(['x', 'y'], 'sequence')}\n"
