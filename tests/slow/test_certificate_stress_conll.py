"""The certificate stress test on CoNLL-2003 (slow tier): the tightest certified tokens and a random sample
of sequences of each compiled model are evaluated by the independent numpy forward pass under every
evaluation of `certificate_stress.evaluations`; none may be misclassified or fall below its bound."""

from __future__ import annotations

import time

import numpy as np
import pytest
from certificate_stress import evaluations, stress
from conll_location import conll2003_dir

DATA = conll2003_dir()

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3600)]  # a shared machine can be slow


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("split", ["valid", "train"])
def test_tightest_and_random_conll_tokens_hold_in_every_evaluation(split, dtype):
    path = DATA / f"{split}.txt"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset
    from uatlab.data import read_conll

    data = read_conll(path)
    res = compile_dataset(data, dtype=dtype)
    cert = res.certificate
    flat = np.concatenate(cert.margins)
    seq_of = np.repeat(np.arange(len(cert.margins)), [len(m) for m in cert.margins])
    tight = seq_of[np.argsort(np.where(flat > 0, flat, np.inf))[:150]]  # sequences of the 150 tightest tokens
    rand = np.random.default_rng(0).choice(len(data), size=100, replace=False)
    sequences = np.union1d(tight, rand)
    c0 = time.process_time()
    out = stress(res.model, data, cert=cert, sequences=sequences)
    assert out["tokens"] > 0 and out["variants_differ"]
    assert out["wrong"] == 0 and out["below_bound"] == 0 and out["worst_fraction_of_radius"] <= 2, out
    print(
        f"\nCoNLL {split} {dtype}: {len(sequences)} sequences, {out['tokens']} certified tokens × "
        f"{len(evaluations(dtype, cert.exp_ulps))} evaluations = {out['runs']} runs, 0 violations, worst "
        f"|run − reference| = {out['worst_fraction_of_radius']:.3f} radius, {time.process_time() - c0:.1f} CPU s"
    )
