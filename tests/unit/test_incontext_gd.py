"""Softmax attention running gradient descent in context."""

from __future__ import annotations

import pytest

from uatlab.constructions.paper_b.appB_incontext_gd import build_incontext_gd
from uatlab.errors import InputError, PrecisionError
from uatlab.experiments.measure import relative_error


def test_one_step_context64_d8():
    g = build_incontext_gd(8, 64, steps=1, lr=0.5, eps=1e-4).detail
    r = relative_error(g, batch=16)
    assert r["relative_error"] < 1e-3
    assert r["sup_error"] <= r["bound"]


def test_three_steps():
    g = build_incontext_gd(8, 64, steps=3, lr=0.5, eps=1e-4).detail
    r = relative_error(g, batch=16)
    assert r["relative_error"] < 1e-3
    assert r["sup_error"] <= r["bound"]


def test_error_shrinks_with_eps():
    errs = [
        relative_error(build_incontext_gd(4, 16, eps=e).detail, batch=16)["relative_error"] for e in (1e-1, 1e-2, 1e-3)
    ]
    assert errs[0] > errs[1] > errs[2]


def test_bad_input():
    with pytest.raises(InputError):
        build_incontext_gd(0, 8)
    with pytest.raises(InputError):
        build_incontext_gd(4, 8, eps=-1.0)
    with pytest.raises(PrecisionError):
        build_incontext_gd(4, 8, eps=1e-7, dtype="float32")
