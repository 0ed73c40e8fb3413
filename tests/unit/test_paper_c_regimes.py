"""The paper C memorizers' regimes: one table of float regimes, their torch dtypes and mantissa widths."""

import torch

from uatlab.constructions.paper_c.layout import MANTISSA_BITS, REGIMES
from uatlab.constructions.paper_c.model import DTYPE_MANTISSA_BITS, REGIME_DTYPES


def test_every_float_regime_has_a_dtype_whose_mantissa_is_the_regimes():
    assert set(REGIME_DTYPES) == set(MANTISSA_BITS) == set(REGIMES) - {"exact"}
    for regime, dtype in REGIME_DTYPES.items():
        p = MANTISSA_BITS[regime]
        assert DTYPE_MANTISSA_BITS[dtype] == p
        assert torch.finfo(dtype).eps == 2.0 ** (1 - p)  # p significand bits, the implicit one included
        below = torch.tensor([2**p - 1, 2**p], dtype=torch.int64)
        assert torch.equal(below.to(dtype).to(torch.int64), below)  # every integer up to 2^p is exact ...
        assert int(torch.tensor(2**p + 1, dtype=torch.int64).to(dtype)) != 2**p + 1  # ... and 2^p + 1 is not
