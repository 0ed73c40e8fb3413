"""Next-token memorizer (Kajitsuka & Sato, ICLR 2025): circuit gadgets, retrieval, compile, certificate."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from uatlab.constructions.paper_c.circuit_stages import extract_digit, mixed_radix_digits, residues
from uatlab.constructions.paper_c.layout import choose_layout
from uatlab.constructions.paper_c.model import NextTokenModel
from uatlab.constructions.paper_c.next_token_memorizer import compile_memorizer
from uatlab.constructions.paper_c.relu_circuit import Circuit, evaluate_exact, float_exactness_bound
from uatlab.constructions.paper_c.retrieval import lookup, solve_retrieval
from uatlab.errors import PrecisionError
from uatlab.verify.next_token import certify_next_token


def _run(circ: Circuit, outs, cols):
    circ.add_layer(outs)
    return [[int(v) for v in c] for c in evaluate_exact(circ, cols)]


def test_mixed_radix_digits_match_python():
    rng = np.random.default_rng(1)
    radices, h_max = [7, 4, 13], 5000
    h = rng.integers(0, h_max, size=300).tolist()
    circ = Circuit(1)
    regs = mixed_radix_digits(circ, {"h": circ.inputs()[0]}, "h", radices, h_max, "d")
    got = _run(circ, [regs["d0"], regs["d1"], regs["d2"]], [h])
    want = [[v % 7 for v in h], [(v // 7) % 4 for v in h], [(v // 28) % 13 for v in h]]
    assert got == want


def test_residues_match_python_for_big_integers():
    h = [0, 1, 2**80 + 12345, 3**50, 2**90 - 1]
    circ = Circuit(1)
    regs = residues(circ, {"h": circ.inputs()[0]}, "h", [1009, 1013, 7], 2**90, "s")
    got = _run(circ, [regs["s0"], regs["s1"], regs["s2"]], [h])
    assert got == [[v % 1009 for v in h], [v % 1013 for v in h], [v % 7 for v in h]]


def test_extract_digit_reads_the_requested_digit():
    rng = np.random.default_rng(2)
    C, D = 10, 6
    x = rng.integers(0, C**D, size=200).tolist()
    o = rng.integers(0, D, size=200).tolist()
    circ = Circuit(2)
    inp = circ.inputs()
    regs = extract_digit(circ, {"x": inp[0], "o": inp[1]}, ["x"], ["o"], ["y"], C, D)
    (got,) = _run(circ, [regs["y"]], [x, o])
    assert got == [(xi // C**oi) % C for xi, oi in zip(x, o, strict=True)]


def test_retrieval_tables_reproduce_every_label():
    rng = np.random.default_rng(3)
    N, C = 2000, 7
    sizes = (877, 881, 883)
    slots = np.stack([rng.integers(0, s, size=N) for s in sizes], axis=1)
    y = rng.integers(0, C, size=N)
    T = solve_retrieval(slots, y, sizes, C)
    assert T is not None
    assert (lookup(T, slots, C) == y).all()


def test_retrieval_rejects_contradictory_keys():
    slots = np.array([[0, 0, 0], [0, 0, 0]])
    assert solve_retrieval(slots, np.array([1, 2]), (3, 3, 3), 5) is None


@pytest.mark.parametrize("regime", ["exact", "float64"])
def test_compiled_memorizer_is_certified_and_predicts_labels(regime):
    rng = np.random.default_rng(4)
    N, n, V, C = 600, 12, 5, 10
    tokens = rng.integers(0, V, size=(N, n))
    labels = rng.integers(0, C, size=N)
    memo, _ = compile_memorizer(tokens, labels, V=V, C=C, regime=regime, seed=0)
    cert = certify_next_token(memo, tokens, labels)
    assert cert.certified, cert.reason
    assert cert.correct_rows == cert.ceiling_rows == N
    assert (memo.predict_exact(tokens) == labels).all()
    if regime == "float64":
        with torch.no_grad():
            pred = NextTokenModel(memo)(torch.tensor(tokens)).argmax(dim=1).numpy()
        assert (pred == labels).all()
        worst, _, _ = float_exactness_bound(memo.circuit, memo.stream(tokens))
        assert worst <= 2**53


def test_conflicting_duplicates_set_the_ceiling():
    tokens = np.array([[0, 1, 2], [0, 1, 2], [0, 1, 2], [2, 1, 0]])
    labels = np.array([3, 3, 4, 1])
    memo, _ = compile_memorizer(tokens, labels, V=3, C=5, regime="float64")
    cert = certify_next_token(memo, tokens, labels)
    assert cert.ceiling_rows == 3 and cert.correct_rows == 3 and cert.certified


def test_corrupted_word_breaks_the_certificate():
    rng = np.random.default_rng(5)
    tokens = rng.integers(0, 4, size=(300, 8))
    labels = rng.integers(0, 10, size=300)
    memo, _ = compile_memorizer(tokens, labels, V=4, C=10, regime="float64")
    # the word-selection layer holds the packed labels: add 1 to every nonzero weight there
    layer = memo.circuit.layers[memo.circuit.notes["words"]]
    big = max(abs(w) for w in layer.weights)  # the gate weight K = C^D; every other weight is a word
    layer.weights[:] = [w + 1 if 1 < w < big else w for w in layer.weights]
    cert = certify_next_token(memo, tokens, labels)
    assert not cert.certified and cert.correct_rows < cert.ceiling_rows


def test_too_many_sequences_for_float32_names_the_largest_n():
    with pytest.raises(PrecisionError, match=r"largest N that fits is \d+"):
        choose_layout(100_000, 10, 32, "float32")


def test_exact_regime_parameters_grow_sublinearly():
    counts = []
    for N in (200, 3200):
        rng = np.random.default_rng(N)
        tokens = rng.integers(0, 4, size=(N, 16))
        memo, _ = compile_memorizer(tokens, rng.integers(0, 10, size=N), V=4, C=10, regime="exact")
        counts.append(memo.parameters["non_embedding"])
    slope = np.log(counts[1] / counts[0]) / np.log(16)
    assert slope < 0.6, counts


def test_compile_next_token_returns_a_certified_construction():
    from uatlab.constructions import BY_THEOREM
    from uatlab.constructions.paper_c.api import compile_next_token

    rng = np.random.default_rng(6)
    tokens = rng.integers(0, 4, size=(200, 10))
    labels = rng.integers(0, 10, size=200)
    for regime in ("exact", "float64"):
        con = compile_next_token(tokens, labels, V=4, C=10, regime=regime)
        assert con.certificate.certified and con.facts["paper"] == "Kajitsuka & Sato, ICLR 2025"
        with torch.no_grad():
            assert (con.model(torch.tensor(tokens)).argmax(dim=1).numpy() == labels).all()
    assert BY_THEOREM[("C", "next-token memorization")] is compile_next_token
