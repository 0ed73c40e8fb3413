"""The exp assumption of the certificate, checked: the ulp measure of `uatlab.numerics.exp_accuracy` against
values one ulp apart, and PyTorch's exp kernels (the ones uatlab's attention runs) within the default assumption."""

import numpy as np
import pytest
import torch

from uatlab.numerics.exp_accuracy import (
    _PRECISION,
    _exp_error_ulps_arb,
    _softmax_exp_values,
    exp_error_ulps,
    measured_exp_ulps,
)
from uatlab.numerics.float_bounds import DEFAULT_EXP_ULPS


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_ulp_measure_sees_one_ulp_steps(dtype):
    rng = np.random.default_rng(3)
    t = rng.uniform(-80.0, 0.0, 500).astype(dtype)
    # the correctly rounded exp from ball arithmetic: its error is at most 1/2 ulp, and one step up is 1/2 to 3/2
    import flint

    flint.ctx.prec = 200
    try:
        exact = np.array([float(flint.arb(float(v)).exp().mid()) for v in t]).astype(dtype)
    finally:
        flint.ctx.prec = 53
    up = np.nextafter(exact, np.array(np.inf, dtype=dtype))
    e0, e1 = exp_error_ulps(exact, t, dtype), exp_error_ulps(up, t, dtype)
    assert e0.max() <= 0.5 + 2.0**-9 and e1.min() >= 0.5 - 2.0**-9 and e1.max() <= 1.5 + 2.0**-9
    # one ulp up from the rounded value: 1 + e0 if the exact value lies below it, 1 − e0 if above
    assert (np.minimum(np.abs(e1 - (1 + e0)), np.abs(e1 - (1 - e0))) <= 2.0**-9).all()
    # the wide-format reference agrees with the ball-arithmetic one
    assert np.abs(e1 - _exp_error_ulps_arb(up, t, _PRECISION[dtype])).max() <= 2.0**-9


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_rows_isolate_its_exp(dtype):
    w, t = _softmax_exp_values(dtype, 700, np.random.default_rng(0))
    assert len(w) >= 500 and w.dtype == np.dtype(dtype)
    # each weight is one exp of its argument (within the kernel's error), not a quotient by a sum above 1
    assert exp_error_ulps(w, t, dtype).max() < 4.0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pytorch_exp_kernels_are_within_the_default_assumption(dtype):
    torch.set_num_threads(1)
    m = measured_exp_ulps(dtype, 4096)
    assert set(m) == {"torch.exp", "torch.softmax"}
    assert all(0.0 < v <= DEFAULT_EXP_ULPS for v in m.values()), m
    assert measured_exp_ulps(dtype, 4096) == m  # measured again: seeded, the same figures
