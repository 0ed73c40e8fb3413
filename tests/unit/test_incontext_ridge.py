"""In-context ridge by appended anchor tokens on paper B's attention-only GD layers."""

import numpy as np
import pytest

from uatlab.constructions.paper_b.appB_incontext_ridge import (
    augment,
    build_incontext_ridge,
    predict_ridge,
    ridge_closed_form,
    ridge_gd,
)
from uatlab.errors import InputError
from uatlab.experiments.measure import sample_regression


def test_augmented_least_squares_equals_ridge():
    x, y, q = sample_regression(8, 10, 3, seed=2)
    xa, ya = augment(x, y, 0.5)
    assert xa.shape == (8, 13, 3)
    # least squares on the augmented data, rescaled: its normal equations are ridge's
    A = np.einsum("bnd,bne->bde", xa, xa)
    w = np.linalg.solve(A, np.einsum("bnd,bn->bd", xa, ya)[..., None])[..., 0]
    assert np.allclose(np.einsum("bd,bd->b", w, q), ridge_closed_form(x, y, q, 0.5))


def test_network_matches_ridge_gd_and_approaches_closed_form():
    x, y, q = sample_regression(8, 16, 3, seed=0)
    lam, eta = 1.0, 0.2
    errs = []
    for k in (1, 15):
        c = build_incontext_ridge(3, 16, lam, steps=k, lr=eta)
        net = predict_ridge(c, x, y, q, lam)
        assert np.abs(net - ridge_gd(x, y, q, lam, eta, k)).max() < 1e-4
        errs.append(np.abs(net - ridge_closed_form(x, y, q, lam)).max())
    assert errs[1] < errs[0] / 10


def test_bad_lambda():
    with pytest.raises(InputError):
        build_incontext_ridge(2, 4, 0.0, steps=1, lr=0.1)
