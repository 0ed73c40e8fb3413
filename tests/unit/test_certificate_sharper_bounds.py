"""Soundness regressions of the sharper float32 bounds (ON units linear, per-token term counts, exact
single products and scores, complement gates).

Every bound is checked against float32 evaluations in adversarial summation orders (random permutations of
all terms, zeros and bias included) with the input moved anywhere inside its radius, against an exact
(rational) evaluation. Where a refinement removes a term, a companion test shows that dropping more than
the proof allows is caught by the same harness.
"""

from fractions import Fraction

import numpy as np
import pytest
import torch
from hand_models import hand_model

import uatlab.verify.certificate as certificate_module
from uatlab.numerics.float_bounds import unit_roundoff
from uatlab.verify.certificate import _BoundedModel, _exact_score_products, _matvec_bound, logit_bounds

F32 = np.float32


def bounded(dtype="float32"):
    """A _BoundedModel shell with only the arithmetic constants (enough for the FF stage methods)."""
    bm = object.__new__(_BoundedModel)
    bm.dtype, bm.u, bm.eta = dtype, unit_roundoff(dtype), 2.0**-149
    return bm


def f32_sum(terms, rng):
    """Σ terms in float32, sequentially in a random order (every order is a valid PyTorch/BLAS order)."""
    acc = None
    for t in rng.permutation(len(terms)):
        v = F32(terms[t])
        acc = v if acc is None else F32(acc + v)
    return acc


def run_ff(x, W1, b1, W2, b2, rng):
    """y = x + W2 relu(W1 x + b1) + b2 in float32, every sum in a random order."""
    z = np.array(
        [f32_sum([F32(W1[i, j]) * F32(x[j]) for j in range(len(x))] + [F32(b1[i])], rng) for i in range(W1.shape[0])]
    )
    a = np.maximum(z, F32(0))
    o = np.array(
        [f32_sum([F32(W2[c, i]) * a[i] for i in range(len(a))] + [F32(b2[c])], rng) for c in range(W2.shape[0])]
    )
    return np.array([F32(F32(x[c]) + o[c]) for c in range(len(x))], dtype=np.float64)


def exact_ff(x, W1, b1, W2, b2):
    fx = [Fraction(float(v)) for v in x]
    z = [
        sum((Fraction(float(W1[i, j])) * fx[j] for j in range(len(x))), Fraction(float(b1[i])))
        for i in range(W1.shape[0])
    ]
    a = [max(v, Fraction(0)) for v in z]
    return [
        fx[c] + sum((Fraction(float(W2[c, i])) * a[i] for i in range(len(a))), Fraction(float(b2[c])))
        for c in range(len(x))
    ]


def ramp_layer(sigma_L, sigma_F, knots, G=2.375, zeros=12):
    """A float32 FF in the memorizer's form: coordinates [ctx, label A, label B, zeros...]; per knot pair two
    units reading ctx with weight 1 and −G on ``zeros`` coordinates that are exactly 0 for the token
    (complement gate); W2 columns ±σ (e_B − e_A)."""
    d = 3 + zeros
    q = 2 * len(knots)
    W1 = np.zeros((q, d), dtype=F32)
    W1[:, 0] = 1.0
    W1[:, 3:] = -G
    b1 = np.array([-z for pair in knots for z in pair], dtype=F32)
    W2 = np.zeros((d, q), dtype=F32)
    for p in range(len(knots)):
        W2[2, 2 * p], W2[1, 2 * p] = sigma_L, -sigma_L
        W2[2, 2 * p + 1], W2[1, 2 * p + 1] = -sigma_F, sigma_F
    return W1.astype(np.float64), b1.astype(np.float64), W2.astype(np.float64), np.zeros(d)


def ff_radius(bm, x, r, W1, b1, W2, b2):
    z, rp, rr = bm._preactivation_bounds(x[None], r[None], W1, b1, np.abs(W1))
    y, ry = bm._ff_tail(x[None], r[None], z, rp + rr, W2, np.abs(W2), b2, rr, W1)
    return y[0], ry[0]


def max_violation(x, r, W1, b1, W2, b2, ry, trials=60, seed=0):
    """max over adversarial runs of |y_run − y_exact| − ry (≤ 0 when the bound holds)."""
    rng = np.random.default_rng(seed)
    exact = exact_ff(x, W1, b1, W2, b2)
    worst = -np.inf
    for t in range(trials):
        xr = x.copy()
        for j in np.flatnonzero(r > 0):  # a float32 input anywhere in the radius (endpoints every other run)
            v = F32(x[j] + r[j] * (rng.choice([-1.0, 1.0]) if t % 2 else rng.uniform(-1, 1)))
            while abs(float(v) - x[j]) > r[j]:
                v = np.nextafter(v, F32(x[j]))
            xr[j] = float(v)
        y = run_ff(xr, W1, b1, W2, b2, rng)
        err = np.array([float(abs(Fraction(float(y[c])) - exact[c])) for c in range(len(x))])
        worst = max(worst, float((err - ry).max()))
    return worst


def token(h, zeros=12):
    return np.r_[h, 0.0, 1.0, np.zeros(zeros)]  # ctx = h, label A = 0, label B = 1 (embedding), gate coords 0


def saturated_ramps(seed):
    """h and three ramps well below it with arbitrary float32 knots and slopes σ = fl(1/width) ~ 1e4."""
    rng = np.random.default_rng(seed)
    h = float(F32(rng.uniform(-0.9, 0.9)))
    knots, sigmas = [], []
    for dist in (0.6, 0.2, 0.02):
        zL = float(F32(h - dist * rng.uniform(0.5, 1.0)))
        zF = float(F32(zL + rng.uniform(5e-5, 2e-4)))
        knots.append((zL, zF))
        sigmas.append(float(F32(1.0 / (zF - zL))))
    return h, knots, sigmas


def ramps_layer(knots, sigmas, G=2.375, zeros=12):
    W1, b1, W2, b2 = ramp_layer(1.0, 1.0, knots, G, zeros)
    for p, s in enumerate(sigmas):
        W2[:, 2 * p : 2 * p + 2] *= s
    return W1, b1, W2, b2


@pytest.mark.parametrize("seed", range(4))
def test_on_pairs_cancel_the_input_error_and_the_bound_still_covers_every_order(seed):
    # three saturated ramps below h (both units ON), σ ~ 1e4: the error of h (r = 3e-6) would cost
    # Σ 2 σ r ≈ 0.2 with |W2| |W1| r; with the ON units linear it cancels and only rounding is left
    bm = bounded()
    h, knots, sigmas = saturated_ramps(seed)
    W1, b1, W2, b2 = ramps_layer(knots, sigmas)
    x = token(h)
    r = np.zeros_like(x)
    r[0] = 3e-6
    _, ry = ff_radius(bm, x, r, W1, b1, W2, b2)
    assert ry[1] < 0.5 * sum(2 * s * r[0] for s in sigmas)  # the refinement is active
    assert max_violation(x, r, W1, b1, W2, b2, ry) <= 0


def test_the_harness_catches_a_bound_without_rounding(monkeypatch):
    # the same layers with the pre-activation rounding and the output rounding left out: some run escapes
    orig = _BoundedModel._preactivation_bounds

    def no_rounding(self, *args):
        z, rp, rr = orig(self, *args)
        return z, rp, 0 * rr

    monkeypatch.setattr(_BoundedModel, "_preactivation_bounds", no_rounding)
    monkeypatch.setattr(certificate_module, "gamma", lambda n, u: 0 * np.asarray(n, dtype=float))
    monkeypatch.setattr(certificate_module, "_gamma_of_counts", lambda n, u, offset=0: 0 * np.asarray(n, dtype=float))
    worst = []
    for seed in range(4):
        h, knots, sigmas = saturated_ramps(seed)
        W1, b1, W2, b2 = ramps_layer(knots, sigmas)
        x = token(h)
        r = np.zeros_like(x)
        r[0] = 3e-6
        _, ry = ff_radius(bounded(), x, r, W1, b1, W2, b2)
        worst.append(max_violation(x, r, W1, b1, W2, b2, ry))
    assert max(worst) > 0


def noncancelling_pair():
    """A ramp whose two on units have different slopes (σ_L = 2^14 ≠ σ_F = 2^13), input error 1e-4 on h."""
    h = 0.3
    W1, b1, W2, b2 = ramp_layer(2.0**14, 2.0**13, [(h - 0.25, h - 0.2)])
    x = token(F32(h))
    r = np.zeros_like(x)
    r[0] = 1e-4
    return x, r, W1, b1, W2, b2


def test_on_units_whose_weights_do_not_cancel_keep_their_input_error():
    # σ_L ≠ σ_F: the pair does not cancel h's error; the bound must still cover (|M| r = |σ_L − σ_F| r) ...
    x, r, W1, b1, W2, b2 = noncancelling_pair()
    _, ry = ff_radius(bounded(), x, r, W1, b1, W2, b2)
    assert max_violation(x, r, W1, b1, W2, b2, ry) <= 0


def test_dropping_the_linear_term_would_be_caught(monkeypatch):
    # ... and a certificate that claimed full cancellation (no |M| r term) is contradicted by a run
    x, r, W1, b1, W2, b2 = noncancelling_pair()
    bm = bounded()
    monkeypatch.setattr(_BoundedModel, "_on_units_linear_error", staticmethod(lambda r, on, *a: np.zeros((1, 1))))
    _, ry_wrong = ff_radius(bm, x, r, W1, b1, W2, b2)
    assert max_violation(x, r, W1, b1, W2, b2, ry_wrong) > 0


def test_units_near_a_knot_keep_the_lipschitz_bound():
    # h inside the ramp (one unit live but not proven ON): every order and every h in the radius is covered
    bm = bounded()
    h = F32(0.3)
    W1, b1, W2, b2 = ramp_layer(2.0**10, 2.0**10, [(float(h) - 2.0**-11, float(h) + 2.0**-11)])
    x = token(h)
    r = np.zeros_like(x)
    r[0] = 2.0**-12
    _, ry = ff_radius(bm, x, r, W1, b1, W2, b2)
    assert max_violation(x, r, W1, b1, W2, b2, ry, trials=100) <= 0


def test_preactivation_counts_only_terms_that_can_be_nonzero_for_the_token():
    bm = bounded()
    W1 = np.array([[1.0] + [-2.375] * 12])
    b1 = np.array([-0.25])
    x = np.r_[0.75, np.zeros(12)]
    r = np.zeros(13)
    _, _, rr = bm._preactivation_bounds(x[None], r[None], W1, b1, np.abs(W1))
    u = bm.u
    assert rr[0, 0] == pytest.approx(2 * u / (1 - 2 * u) * (0.75 + 0.25), rel=1e-12)  # h and b1: n = 2
    # a coordinate whose value is 0 in the reference but may be non-zero in a run (radius > 0) is counted
    r[5] = 1e-7
    _, rp, rr2 = bm._preactivation_bounds(x[None], r[None], W1, b1, np.abs(W1))
    assert rr2[0, 0] > rr[0, 0] and rp[0, 0] == pytest.approx(2.375e-7)
    # and the bound covers a float32 run with that coordinate anywhere in its radius, in any order
    rng = np.random.default_rng(3)
    for _ in range(50):
        xr = x.copy()
        xr[5] = float(F32(rng.uniform(-1e-7, 1e-7)))
        z = f32_sum([F32(W1[0, j]) * F32(xr[j]) for j in range(13)] + [F32(b1[0])], rng)
        exact = Fraction(0.75) - Fraction(0.25)
        assert abs(Fraction(float(z)) - exact) <= Fraction(float(rp[0, 0] + rr2[0, 0]))


def test_single_power_of_two_weight_rows_are_exact_and_others_are_not():
    x = np.array([[[F32(1 / 3), F32(0.7)]]], dtype=np.float64)  # float32 values
    r = np.zeros_like(x)
    _, ry = _matvec_bound(x, r, np.array([[0.0, 2.0]]), np.zeros((1, 2)), 2.0**-24, 2.0**-149)
    assert ry[0, 0, 0] <= 2.0**-149  # only the underflow allowance
    assert float(F32(2.0) * F32(0.7)) == 2.0 * float(F32(0.7))  # the premise: ×2^k is exact
    _, ry3 = _matvec_bound(x, r, np.array([[0.0, 3.0]]), np.zeros((1, 2)), 2.0**-24, 2.0**-149)
    run = float(F32(3.0) * F32(0.7))
    assert run != 3.0 * float(F32(0.7)) and abs(run - 3.0 * float(F32(0.7))) <= ry3[0, 0, 0]
    _, ry2 = _matvec_bound(x, r, np.array([[1.0, 1.0]]), np.zeros((1, 2)), 2.0**-24, 2.0**-149)
    assert ry2[0, 0, 0] > 2.0**-149  # two terms: a rounded addition


@pytest.mark.parametrize("seed", range(3))
def test_scores_claimed_exact_are_exact_in_pytorch_float32(seed):
    rng = np.random.default_rng(seed)
    # codes like the memorizer's (few significant bits) mixed with arbitrary float32 values
    q = np.r_[rng.integers(1, 256, 6) / 64.0, rng.uniform(-2, 2, 6)].astype(F32).astype(np.float64)
    k = np.r_[rng.integers(-(2**15), 2**15, 6) / 2.0**15, rng.uniform(-1, 1, 6)].astype(F32).astype(np.float64)
    rq, rk = np.zeros_like(q), np.zeros_like(k)
    rk[-1] = 1e-7  # a key with an error is never exact
    mask = _exact_score_products(q[None, :, None], rq[None, :, None], k[None, :, None], rk[None, :, None])[0]
    run = (torch.tensor(q, dtype=torch.float32)[:, None] * torch.tensor(k, dtype=torch.float32)[None, :]).double()
    exact = q[:, None] * k[None, :]  # exact in float64
    assert np.all(run.numpy()[mask] == exact[mask])
    assert not mask[:, -1].any() and mask[:6, :6].all()  # 8 + 16 bits ≤ 24: the memorizer's scores
    assert np.any(run.numpy()[~mask] != exact[~mask])  # the premise: the others do round


def test_a_model_with_exact_scores_is_still_bounded_by_its_radius():
    keys = [0.25, -0.375, 0.625, 0.5, -0.125]
    model = hand_model(3, 5, 2, max_len=5)
    with torch.no_grad():
        model.embed.weight.copy_(torch.tensor([[a, 1.5, 0.0] for a in keys]))
        attn = model.blocks[0].attn
        attn.W_Q.set_factors(torch.ones(1, 1, 1), torch.tensor([[[0.0, 1.0, 0.0]]]))
        attn.W_K.set_factors(torch.ones(1, 1, 1), torch.tensor([[[1.0, 0.0, 0.0]]]))
        attn.W_V.set_factors(torch.ones(1, 1, 1), torch.tensor([[[1.0, 0.0, 0.0]]]))
        attn.W_O.set_factors(torch.tensor([[[0.0], [0.0], [1.0]]]), torch.ones(1, 1, 1))
        model.readout.weight.copy_(torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]]))
    ids = np.array([[0, 1, 2, 3, 4], [4, 4, 1, 0, 2]])
    L, rL, bad = logit_bounds(model, ids)
    with torch.no_grad():
        run = model(torch.as_tensor(ids)).double().numpy()
    import math

    for b in range(2):
        a = [keys[i] for i in ids[b]]
        e = [math.exp(1.5 * v - 1.5 * max(a)) for v in a]
        h = sum(ei * v for ei, v in zip(e, a, strict=True)) / sum(e)
        assert np.all(np.abs(run[b, :, 0] - h) <= rL[b, :, 0]) and np.all(np.abs(L[b, :, 0] - h) <= rL[b, :, 0])
    assert not bad.any()


def test_complement_gated_units_are_recognised_and_agree_with_the_dense_path():
    from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset
    from uatlab.data.synthetic import synthetic_dataset

    data = synthetic_dataset(60, 7, 20, 4, seed=8)
    model = compile_dataset(data, dtype="float32", run_certificate=False).model
    assert model.config.meta["group"] == "word-pos"
    ids = np.stack(model.encoding.encode_tokens(data))
    bm = _BoundedModel(model)
    assert bm.gate is not None and bm.gate["gated"].all() and np.all(bm.gate["cap"] < 0)
    J = bm.gate["J"]
    L1, r1, _ = bm.forward_bounds(ids)
    bm.gate = None
    L2, r2, _ = bm.forward_bounds(ids)
    np.testing.assert_allclose(L1, L2, rtol=0, atol=1e-6)
    assert np.all(r1 <= r2 * (1 + 1e-9) + 1e-300)
    # every other word's unit really is off: the dense pre-activations of non-own units are ≤ −1/8
    x, r = bm.embed(ids)
    bm.attention(x, r, bm.layers[0][0], False)  # in place
    hid = bm.layers[0][1]
    z = x.reshape(-1, x.shape[-1]) @ hid.W.T + hid.b
    own = (bm.E[ids.reshape(-1)][:, J] > 0)[:, None, :] == (hid.W[:, J] == 0)[None]
    assert np.all(z[~own.all(-1)] <= -0.125)


def test_a_tampered_complement_row_is_not_gated():
    from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset
    from uatlab.data.synthetic import synthetic_dataset

    data = synthetic_dataset(40, 6, 15, 3, seed=9)
    model = compile_dataset(data, dtype="float32", group="word", run_certificate=False).model
    with torch.no_grad():
        w = model.blocks[0].ff.hidden.weight
        row = w[0]
        j = int(torch.nonzero(row[: model.config.meta["code_bits"]] < 0)[0])
        row[j] = row[j] / 2  # no longer −G on every coordinate outside an m-subset
    bm = _BoundedModel(model)
    # the tampered unit (and only it) is evaluated densely: never assumed off for other codes
    tampered = np.flatnonzero(~bm.gate["gated"])
    assert len(tampered) == 1
    ids = np.stack(model.encoding.encode_tokens(data))
    L1, r1, _ = bm.forward_bounds(ids)
    bm.gate = None
    L2, r2, _ = bm.forward_bounds(ids)
    np.testing.assert_allclose(L1, L2, rtol=0, atol=1e-6)
    with torch.no_grad():
        run = model(torch.as_tensor(ids)).double().numpy()
    assert np.all(np.abs(run - L1) <= 2 * r1 + 1e-12)


@pytest.mark.parametrize("positional, batch", [("none", 2), ("given", 2), ("given", 1)])
def test_input_ff_models_are_bounded_with_the_on_units_rule(positional, batch):
    # the input FF sees (B, n, d) arrays: the ON-units rule must read r per coordinate, not per (position,
    # coordinate) — a batch of 2 sequences of length 3, or an inexact embedding+position sum at position 1 only

    model = hand_model(2, 2, 2, ff_width=1, max_len=3, positional=positional, input_ff_width=2)
    with torch.no_grad():
        model.embed.weight.copy_(torch.tensor([[1.0, 0.0], [0.75, 0.0]]))
        if positional == "given":
            model.pos[1, 0] = float(F32(2.0**-24 * 1.5))  # 1 + p and 0.75 + p round
        model.input_ff.hidden.weight.copy_(torch.tensor([[1.5, 0.0], [1.5, 0.0]]))
        model.input_ff.hidden.bias.copy_(torch.tensor([0.0, -0.25]))
        model.input_ff.output.weight.copy_(torch.tensor([[0.0, 0.0], [3.0, 1.0]]))
        model.readout.weight.copy_(torch.tensor([[0.0, 1.0], [0.0, -1.0]]))
    ids = np.array([[0, 1, 0], [1, 0, 1]])[:batch]
    L, rL, bad = logit_bounds(model, ids)
    with torch.no_grad():
        run = model(torch.as_tensor(ids)).double().numpy()
    assert not bad.any() and np.all(np.abs(run - L) <= rL)


def test_the_exact_score_rule_fires_on_a_compiled_float32_memorizer(monkeypatch):
    # W_Q, W_K are single weight-1 rows and the inputs are exact, so q and k have radius 0 (no underflow
    # allowance: x·2^k, k ≥ 0, cannot underflow) and every score of the compiled model is proven exact
    import uatlab.verify.certificate as cert_mod
    from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset
    from uatlab.data.synthetic import synthetic_dataset

    seen = {"exact": 0, "scores": 0}
    real = cert_mod._exact_score_products

    def spy(q, rq, k, rk, prod=None):
        mask = real(q, rq, k, rk, prod)
        seen["exact"] += int(mask.sum())
        seen["scores"] += mask.size
        return mask

    monkeypatch.setattr(cert_mod, "_exact_score_products", spy)
    res = compile_dataset(synthetic_dataset(30, 6, 20, 3, seed=2), dtype="float32")
    assert res.certificate.certified and seen["scores"] > 0 and seen["exact"] == seen["scores"]


def test_a_coordinate_equal_for_every_word_is_not_taken_as_the_code():
    """Words coded 2-hot over four coordinates, plus a coordinate that is 1 for every word and read by the first
    FF: the gate's code coordinates are the four (each word its own code), not the constant one, and PyTorch's
    logits lie in the bounds."""
    codes = np.array([[1, 1, 0, 0], [1, 0, 1, 0], [0, 1, 1, 0], [0, 0, 1, 1]], float)
    m = hand_model(6, 4, 2, ff_width=4, dtype="float64")
    E = np.zeros((4, 6))
    E[:, :4], E[:, 4], E[:, 5] = codes, 0.5, 1.0
    W1 = np.zeros((4, 6))
    W1[:, :4], W1[:, 5] = 2.0 * codes, 0.125
    with torch.no_grad():
        m.embed.weight.copy_(torch.tensor(E))
        m.blocks[0].ff.hidden.weight.copy_(torch.tensor(W1))
        m.blocks[0].ff.hidden.bias.copy_(torch.full((4,), -3.0, dtype=torch.float64))
        m.blocks[0].ff.output.weight.copy_(torch.ones(6, 4, dtype=torch.float64))
    bm = _BoundedModel(m)
    assert bm.gate is not None and bm.gate["J"].tolist() == [0, 1, 2, 3]
    assert len(np.unique(bm.gate["word_cid"])) == 4
    ids = np.array([[0, 1, 2], [3, 3, 1]])
    L, rL, bad = bm.forward_bounds(ids)
    with torch.no_grad():
        Lt = m(torch.from_numpy(ids)).numpy()
    assert not bad.any() and (np.abs(Lt - L) <= rL).all()
