"""Paper A Prop. 1 with a positional encoding: a non-equivariant target approximated within its bound."""

import numpy as np
import torch

from uatlab.constructions.paper_a.prop1_positional_encoding import (
    build_positional_approximator,
    encode_positions,
    equivariant_lower_bound,
    error_bound,
    first_token_product,
    lifted_target,
    measure_positional,
)


def test_lifted_target_equals_target_on_encoded_inputs_and_target_is_not_equivariant():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, size=(50, 3, 1))
    assert np.allclose(lifted_target(encode_positions(x)), first_token_product(x))
    p = np.array([1, 0, 2])
    assert not np.allclose(first_token_product(x[:, p]), first_token_product(x)[:, p])
    assert abs(equivariant_lower_bound(3, 100) - 0.5) < 1e-9


def test_error_within_bound_and_below_the_no_pe_floor():
    con = build_positional_approximator(4, n=3)
    m = measure_positional(con.detail, samples=500)
    assert m["sup_error_clean"] <= error_bound(4) == con.guarantee["sup_error_bound_off_bands"]
    assert m["sup_error"] < 0.5
    # the model carries its positional encoding: model(X) = the approximator on X + E
    x = np.random.default_rng(2).uniform(0, 1, size=(8, 3, 1))
    with torch.no_grad():
        out = con.model(torch.from_numpy(x)).numpy()
    assert np.array_equal(out, con.detail(encode_positions(x)))


def test_permutation_deviation_separates_equivariant_from_positional_maps():
    from uatlab.claims.equivariance import _perm_deviation

    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, size=(20, 4, 2))
    assert _perm_deviation(lambda z: z * z.mean(axis=1, keepdims=True), x, rng) < 1e-15
    assert _perm_deviation(lambda z: z + np.arange(4)[None, :, None], x, rng) > 0.1
