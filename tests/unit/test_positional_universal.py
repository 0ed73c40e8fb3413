"""Paper A Prop. 1 with a positional encoding: a non-equivariant target approximated within its bound."""

import numpy as np

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
    ap = build_positional_approximator(4, n=3)
    m = measure_positional(ap, samples=500)
    assert m["sup_error_clean"] <= error_bound(4)
    assert m["sup_error"] < 0.5


def test_permutation_deviation_separates_equivariant_from_positional_maps():
    from uatlab.claims.equivariance import _perm_deviation

    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, size=(20, 4, 2))
    assert _perm_deviation(lambda z: z * z.mean(axis=1, keepdims=True), x, rng) < 1e-15
    assert _perm_deviation(lambda z: z + np.arange(4)[None, :, None], x, rng) > 0.1
