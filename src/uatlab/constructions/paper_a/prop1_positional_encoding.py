"""Universal approximation of a NON-equivariant map with a positional encoding (paper A, Prop. 1 + remark).

Paper A (Kajitsuka & Sato, ICLR 2024), Proposition 1: F_2^(FF) ∘ F^(SA) ∘ F_1^(FF) with one rank-1
attention layer approximates any continuous permutation-equivariant map; with a positional encoding
X ↦ X + E whose columns are far apart (§6 of the memorization corollary) the encoded tokens carry their
position, so the same construction approximates maps that are not equivariant.

Construction (d = 1, tokens x_k ∈ [0, 1), positions k = 0..n−1):

* positional encoding E_k = k: the encoded token z_k = x_k + k lies in [k, k+1), so the n encoded tokens
  occupy disjoint unit intervals of the box [0, n];
* the target f(X)_k = x_k · x_0 (the product with the FIRST token) is not equivariant; on encoded
  inputs it equals the equivariant map f̃(Z)_k = frac(z_k) · frac(min_j z_j) (min_j z_j is the
  position-0 token), which `uatlab.constructions.paper_a.prop1_universal_approximator.build_universal_approximator`
  approximates with a grid of G = n·g cells on [0, n] (g cells per unit, aligned with the integers,
  so no cell straddles two positions);
* without a positional encoding no equivariant model can do better than
  ½ max_{X,P} max_k |f(XP)_k − (f(X)P)_k| (for equivariant F: |F(XP) − f(XP)| + |F(X)P − f(X)P| ≥
  |f(XP) − f(X)P|), which `equivariant_lower_bound` estimates (1/2 at X = (1⁻, 0, …)).

Bound: off the mis-quantised band the error is that of the quantised target, ≤ sup over a cell of
|f̃ − f̄| ≤ 2·(1/(2g)) + (1/(2g))² for the product of two numbers in [0, 1) (each factor moves ≤ 1/(2g)).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from torch import nn

from uatlab.constructions.contract import Construction
from uatlab.constructions.paper_a.prop1_universal_approximator import (
    UniversalApproximator,
    build_universal_approximator,
)


def first_token_product(x: np.ndarray) -> np.ndarray:
    """f(X)_k = x_k · x_0, X: (B, n, 1) → (B, n, 1). Not permutation-equivariant."""
    return x * x[:, :1, :]


def encode_positions(x: np.ndarray) -> np.ndarray:
    """Z = X + E with E_k = k: (B, n, 1) → (B, n, 1)."""
    return x + np.arange(x.shape[1], dtype=np.float64)[None, :, None]


def lifted_target(z: np.ndarray) -> np.ndarray:
    """The equivariant map on the encoded box that equals f on encoded inputs: frac(z_k) · frac(min_j z_j)."""
    frac = z - np.floor(z)
    first = np.take_along_axis(frac, np.argmin(z, axis=1)[:, None, :], axis=1)  # (B, 1, 1)
    return frac * first


class AddPositions(nn.Module):
    """The positional encoding X ↦ X + E with E_k = k (token k of every sequence), (B, n, d) → (B, n, d)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.arange(x.shape[1], dtype=x.dtype, device=x.device)[None, :, None]


def build_positional_approximator(cells_per_unit: int, n: int = 3, seed: int = 0) -> Construction:
    """FF∘SA∘FF on the encoded box [0, n] with G = n · cells_per_unit cells (see the module docstring).

    Returns:
        `uatlab.constructions.contract.Construction`: ``model`` = positional encoding then the
        Proposition-1 Transformer (``model(X)`` approximates f(X)_k = x_k · x_0 on X ∈ [0, 1)^{n×1});
        ``guarantee`` the sup error bound off the mis-quantised bands (`error_bound`) beside
        Proposition 1's own numbers; ``detail`` the `UniversalApproximator` on encoded inputs.
    """
    base = build_universal_approximator(lifted_target, (0.0, float(n)), grid=n * cells_per_unit, n=n, d=1, seed=seed)
    model = nn.Sequential(AddPositions(), base.model)
    facts = {
        **base.facts,
        "theorem": "Proposition 1 with a positional encoding",
        "positional_encoding": "E_k = k",
        "cells_per_unit": cells_per_unit,
    }
    guarantee = {**base.guarantee, "sup_error_bound_off_bands": error_bound(cells_per_unit)}
    return Construction(model=model, guarantee=guarantee, facts=facts, certificate=base.certificate, detail=base.detail)


def error_bound(cells_per_unit: int) -> float:
    """sup |f̃ − f̄| over a cell: each factor of the product moves by at most h = 1/(2g)."""
    h = 1.0 / (2 * cells_per_unit)
    return 2 * h + h * h


def equivariant_lower_bound(n: int, samples: int, seed: int = 0) -> float:
    """½ max |f(XP) − f(X)P| over sampled X and transpositions P: no equivariant model (no PE) does better."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, size=(samples, n, 1))
    x[0, 0, 0], x[0, 1:, 0] = 1 - 1e-12, 0.0  # the extreme point (1⁻, 0, …, 0)
    worst = 0.0
    for j in range(1, n):
        perm = np.arange(n)
        perm[[0, j]] = perm[[j, 0]]
        diff = np.abs(first_token_product(x[:, perm]) - first_token_product(x)[:, perm])
        worst = max(worst, float(diff.max()))
    return worst / 2


def measure_positional(ap: UniversalApproximator, samples: int, seed: int = 0) -> dict[str, Any]:
    """Sup and L² error of model(X + E) against f(X) = x_k · x_0 on uniform X, and off the bands."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, size=(samples, ap.n, 1))
    z = encode_positions(x)
    err = np.abs(ap(z) - first_token_product(x))  # (B, n, 1)
    # mis-quantised: some coordinate within the ramp of a cell boundary
    pos = (z - ap.lo) / ap.delta
    band = np.abs(pos - np.round(pos)) * ap.delta < ap.ramp
    clean = ~band.any(axis=(1, 2))
    return {
        "sup_error": float(err.max()),
        "sup_error_clean": float(err[clean].max()) if clean.any() else float("nan"),
        "l2_error": float(np.sqrt((err**2).mean())),
        "misquantised_fraction": float(1 - clean.mean()),
    }


def sweep_positional(cells: list[int], n: int = 3, samples: int = 2000, seed: int = 0) -> list[dict[str, Any]]:
    """The error table: per g, the grid, ids, parameters, errors, bound and the no-PE lower bound."""
    lower = equivariant_lower_bound(n, samples, seed)
    rows = []
    for g in cells:
        t0 = time.perf_counter()
        ap = build_positional_approximator(g, n, seed).detail
        m = measure_positional(ap, samples, seed)
        rows.append(
            {
                "cells_per_unit": g,
                "grid": ap.grid,
                "context_ids": ap.n_ids,
                "params": int(sum(p.numel() for p in ap.model.parameters())),
                **m,
                "bound": error_bound(g),
                "no_pe_lower_bound": lower,
                "seconds": time.perf_counter() - t0,
            }
        )
    return rows
