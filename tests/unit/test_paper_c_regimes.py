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


def test_first_tensor_difference_names_the_first_missing_or_differing_tensor():
    from uatlab.constructions.paper_c.model import first_tensor_difference

    a = torch.arange(4, dtype=torch.float64)
    same = [("a", a.clone(), a), ("b", a[:2].clone(), a[:2])]
    assert first_tensor_difference(same) is None
    for got, why in [
        (None, "missing"),
        (a.float(), "dtype"),
        (a[:3].clone(), "shape"),
        (a + torch.tensor([0, 0, 2**-40, 0], dtype=torch.float64), "one value, one ulp-scale step"),
    ]:
        diff = first_tensor_difference([("a", a.clone(), a), ("b", got, a), ("c", None, a)])
        assert diff is not None and diff[0] == "b", why
        assert diff[1] is got and diff[2] is a
    calls = []

    def pairs():  # a generator is consumed only up to the first difference
        for name in ("x", "y", "z"):
            calls.append(name)
            yield name, (None if name == "y" else a), a

    assert first_tensor_difference(pairs())[0] == "y" and calls == ["x", "y"]


def test_token_table_rules_one_answer_for_file_and_certificate():
    from uatlab.constructions.paper_c.integer_tensors import token_table_problem

    good = [[0, 3, 0], [5, 1, 0]]  # n' = 2 positions, V = 2 (column 2 is the pad)
    assert token_table_problem(good, pad=2) is None
    assert token_table_problem(good, pad=2, value_range=6, rows=2) is None
    assert "shape (2, 3), needs (3, 3)" in token_table_problem(good, pad=2, rows=3)
    assert "shape (2, 3), needs (n', 4)" in token_table_problem(good, pad=3)
    assert "rows of different lengths" in token_table_problem([[0, 1, 0], [0, 0]], pad=2)
    negative = [[0, 3, 0], [-7, 1, 0]]
    assert token_table_problem(negative, pad=2) == "table nu[1, 0] = -7 is negative (the proof needs ν ≥ 0)"
    assert token_table_problem(negative, pad=2, value_range=6) == "table nu[1, 0] = -7 is outside [0, value_range = 6)"
    assert token_table_problem(good, pad=2, value_range=5) == "table nu[1, 0] = 5 is outside [0, value_range = 5)"
    big = [[0, 2**70, 0], [0, 1, 0]]  # Python ints past int64 (an object array)
    assert token_table_problem(big, pad=2) is None
    assert token_table_problem(big, pad=2, value_range=2**64) == (
        f"table nu[0, 1] = {2**70} is outside [0, value_range = {2**64})"
    )
    padded = [[0, 3, 0], [5, 1, 9]]
    assert token_table_problem(padded, pad=2) == "table nu[1, 2] = 9: the pad token's column must be 0"
