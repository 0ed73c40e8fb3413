"""Theorem 1 of paper A made executable: one hardmax self-attention layer is not a contextual mapping.

Statement (Kajitsuka & Sato, ICLR 2024, Theorem 1): F_H^(SA), one self-attention layer with the
hardmax σ_H, cannot be a contextual mapping. The paper's own counterexample is not available; this module builds ours [D], which defeats **every** hardmax layer at once, for any token
dimension d, any number of heads h, any head size s and any weights.

The argument (row convention; our notation → paper: x_k ↔ X_{:,k}, W_Q^i, W_K^i, W_V^i (s×d),
W_O^i (d×s) as in paper A):

1. Put every token on one ray: x_k = t_k e with a unit e ∈ R^d and scalars t_k > 0.
2. Head i scores key j for query k by (W_K^i x_j)·(W_Q^i x_k) = t_j t_k α_i with the single number
   α_i = (W_K^i e)·(W_Q^i e). Since t_k > 0, the argmax over keys j is the largest t_j if α_i > 0,
   the smallest t_j if α_i < 0, and every key ties if α_i = 0 (σ_H then averages all keys).
3. So for *every* query, head i returns W_O^i W_V^i e · g_i(T), where g_i is max(T), min(T) or
   mean(T) of the sequence's scalar set T, whatever the query is.
4. Take two sequences whose sets share min, max and mean but differ, e.g. T1 = {1, 2, 5, 6} and
   T2 = {1, 3, 4, 6} (for n > 4 add the same extra values 7, 8, …, n+2 to both, so min, max and sum
   stay equal). Then every head outputs the same vector in both sequences, and the shared token
   x = 1·e is mapped to the same output in both: F(X1)_1 = F(X2)_1 although V^(1) ≠ V^(2). Condition 2
   of a contextual mapping fails for every δ ≥ 0.
5. The inputs are tokenwise (0.99, n+2, 0.99)-separated with no duplicates, so Theorem 2's setting;
   n ≥ 4 is needed on a ray (three distinct positive numbers are determined by min, max and sum).

Softmax with the same weights sees the whole set (each head computes boltz(α t_k T)/(α t_k) rather
than max/min/mean, Lemma 1), so it separates the pair: `check_hardmax_collision` and
`hardmax_collision_trials` report that δ.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from uatlab._util import check_integer
from uatlab.constructions.contract import PAPER_A, Construction, count_parameters
from uatlab.errors import InputError
from uatlab.models.attention import MultiHeadSelfAttention, hardmax, masked_softmax
from uatlab.theory.contextual import ContextualMargin, contextual_margin

__all__ = [
    "HardmaxCollision",
    "batched_self_attention",
    "build_hardmax_counterexample",
    "check_hardmax_collision",
    "counterexample_scalars",
    "hardmax_collision_trials",
    "hardmax_counterexample_inputs",
]


def counterexample_scalars(n: int = 4) -> np.ndarray:
    """The two scalar sequences T1 = [1, 2, 5, 6, 7, …, n+2] and T2 = [1, 3, 4, 6, 7, …, n+2], shape (2, n).

    Same min, max and sum; different sets; shared values at positions 0, 3 and ≥ 4.
    """
    if n < 4:
        raise InputError(
            f"n = {n}: the ray construction needs n ≥ 4 (n ≤ 3 distinct positive values are determined by "
            "their min, max and mean)"
        )
    extra = list(range(7, n + 3))
    return np.array([[1, 2, 5, 6, *extra], [1, 3, 4, 6, *extra]], dtype=np.float64)


def hardmax_counterexample_inputs(d: int, n: int = 4, direction: Any = None, scale: float = 1.0) -> torch.Tensor:
    """The pair of sequences that defeats every hardmax layer: x_k = scale · t_k · e, shape (2, n, d) float64.

    Args:
        d: token dimension.
        n: sequence length (≥ 4).
        direction: the unit vector e (normalised if not unit); default (1, …, 1)/√d.
        scale: positive factor on all tokens.
    """
    if d < 1:
        raise InputError(f"d must be ≥ 1, got {d}")
    if not (math.isfinite(scale) and scale > 0):
        raise InputError(f"scale must be a positive number, got {scale}")
    e = np.ones(d) if direction is None else np.asarray(direction, dtype=np.float64).reshape(-1)
    if e.shape != (d,) or not np.isfinite(e).all() or np.linalg.norm(e) == 0:
        raise InputError(f"direction must be a finite non-zero vector of length {d}")
    e = e / np.linalg.norm(e)
    T = counterexample_scalars(n)  # (2, n)
    return torch.from_numpy(scale * T[:, :, None] * e[None, None, :])  # (2, n, d)


def batched_self_attention(
    X: torch.Tensor, W_Q: torch.Tensor, W_K: torch.Tensor, W_V: torch.Tensor, W_O: torch.Tensor, kind: str
) -> torch.Tensor:
    """Paper A's F^(SA) for a batch of weight draws at once (same formula as `MultiHeadSelfAttention`).

    Args:
        X: (B, n, d) inputs.
        W_Q, W_K, W_V: (T, h, s, d) weights of T layers; W_O: (T, h, d, s).
        kind: "hardmax" (ties averaged) or "softmax".

    Returns:
        (T, B, n, d) outputs X + Σ_i σ((X W_Qᵀ)(X W_Kᵀ)ᵀ) (X W_Vᵀ) W_Oᵀ of every layer on every input.
    """
    q = torch.einsum("bnd,thsd->tbhns", X, W_Q)  # (T, B, h, n, s)
    k = torch.einsum("bnd,thsd->tbhns", X, W_K)  # (T, B, h, n, s)
    v = torch.einsum("bnd,thsd->tbhns", X, W_V)  # (T, B, h, n, s)
    scores = q @ k.transpose(-1, -2)  # (T, B, h, n_query, n_key)
    P = hardmax(scores) if kind == "hardmax" else masked_softmax(scores)  # (T, B, h, n, n)
    heads = P @ v  # (T, B, h, n, s)
    return X[None] + torch.einsum("tbhns,thds->tbnd", heads, W_O)  # (T, B, n, d)


@dataclass(frozen=True)
class HardmaxCollision:
    """The collision exhibited for one layer.

    Attributes:
        distance: ‖F_H(X1)_k − F_H(X2)_k‖ at the shared query token, max over shared positions
            (0 up to rounding: a collision).
        positions: the shared positions k (same token, different vocabulary sets).
        hardmax: contextual margin of the hardmax layer on the pair (δ = 0, worst pair named).
        softmax: contextual margin of the same weights under softmax (δ > 0 separates the pair).
    """

    distance: float
    positions: tuple[int, ...]
    hardmax: ContextualMargin
    softmax: ContextualMargin

    @property
    def collides(self) -> bool:
        return self.hardmax.delta <= _collision_tol(self.hardmax.r)


def _collision_tol(scale: float) -> float:
    # Rounding only: the colliding outputs are the same one-hot row times the same value vector.
    return 64 * np.finfo(np.float64).eps * max(1.0, scale)


def check_hardmax_collision(layer: MultiHeadSelfAttention, n: int = 4, direction: Any = None) -> HardmaxCollision:
    """Exhibit the collision for a given layer, evaluated with hardmax and with softmax (same weights).

    The layer is copied and evaluated in float64; its ``attention`` setting is overridden, so a softmax
    layer can be checked too. Causal masking is not supported (the argument assumes full attention).
    """
    if layer.causal:
        raise InputError("the counterexample is for full (non-causal) attention; got a causal layer")
    X = hardmax_counterexample_inputs(layer.d_model, n, direction)  # (2, n, d)
    T = counterexample_scalars(n)
    shared = tuple(int(k) for k in np.flatnonzero(T[0] == T[1]))
    margins = {}
    dist = 0.0
    for kind in ("hardmax", "softmax"):
        twin = copy.deepcopy(layer).to(torch.float64)
        twin.attention = kind
        margins[kind] = contextual_margin(twin, X)
        if kind == "hardmax":
            with torch.no_grad():
                out = twin(X)  # (2, n, d)
            dist = float((out[0, list(shared)] - out[1, list(shared)]).norm(dim=-1).max())
    return HardmaxCollision(dist, shared, margins["hardmax"], margins["softmax"])


def build_hardmax_counterexample(
    d: int,
    n: int = 4,
    *,
    layer: MultiHeadSelfAttention | None = None,
    n_heads: int = 1,
    head_dim: int = 1,
    seed: int = 0,
    direction: Any = None,
) -> Construction:
    """Theorem 1 made executable: a hardmax layer and the pair of inputs on which it collides.

    Theorem 1 is a statement about every layer, so the weights are not constructed: ``layer`` is checked
    as given (copied, attention set to hardmax), or a full-rank float64 layer with seeded Gaussian weights
    is drawn. The construction is the input pair (`hardmax_counterexample_inputs`).

    Returns:
        `uatlab.constructions.contract.Construction`: ``model`` the hardmax layer; ``detail`` the
        inputs (2, n, d); ``certificate`` the `HardmaxCollision` (evaluated with hardmax and with
        softmax, same weights); ``guarantee`` the collision distance at the shared token (0 up to rounding)
        and the softmax margin on the same pair.
    """
    d = check_integer(d, "d", 1, None, "build_hardmax_counterexample()")
    if layer is None:
        for name, value in (("n_heads", n_heads), ("head_dim", head_dim)):
            check_integer(value, name, 1, None, "build_hardmax_counterexample()")
        with torch.random.fork_rng(devices=[]):  # seeded draw without touching the caller's generator
            torch.manual_seed(seed)
            layer = MultiHeadSelfAttention(d, n_heads=n_heads, head_dim=head_dim, rank=None, dtype=torch.float64)
    elif layer.d_model != d:
        raise InputError(f"the layer has d_model = {layer.d_model}, the inputs d = {d}")
    model = copy.deepcopy(layer).to(torch.float64)
    model.attention = "hardmax"
    collision = check_hardmax_collision(model, n, direction)
    facts = {
        "paper": PAPER_A,
        "theorem": "Theorem 1",
        "parameters": count_parameters(model),
        "d": d,
        "n": n,
        "n_heads": model.n_heads,
        "scalars": counterexample_scalars(n).tolist(),
        "collides": collision.collides,
    }
    guarantee = {"collision_distance": collision.distance, "softmax_delta": collision.softmax.delta}
    X = hardmax_counterexample_inputs(d, n, direction)  # (2, n, d)
    return Construction(model=model, guarantee=guarantee, facts=facts, certificate=collision, detail=X)


def _pair_margin(out: torch.Tensor) -> torch.Tensor:
    """Min distance between the 2n outputs of the pair (all keys differ: 2 sets × n tokens), (T, 2, n, d) → (T,)."""
    Tn = out.shape[0]
    flat = out.reshape(Tn, -1, out.shape[-1])  # (T, 2n, d)
    D = torch.cdist(flat, flat)  # (T, 2n, 2n)
    eye = torch.eye(flat.shape[1], dtype=torch.bool)
    return D.masked_fill(eye, float("inf")).amin(dim=(-1, -2))


def hardmax_collision_trials(
    heads: Sequence[int] = (1, 2, 4, 8),
    trials: int = 1000,
    seed: int = 0,
    d: int = 4,
    head_dim: int = 4,
    n: int = 4,
    weight_scale: float = 1.0,
    return_deltas: bool = False,
) -> dict[str, Any]:
    """Draw ``trials`` random layers per head count; count hardmax collisions and softmax separations.

    Weights are Gaussian like `MultiHeadSelfAttention`'s init (std weight_scale/√d for W_Q, W_K,
    W_V and weight_scale/√s for W_O), full rank, float64, drawn from ``torch.Generator().manual_seed(seed)``
    independently per head count. All trials of a head count run as one batched computation.

    Returns:
        a dict with ``trials``, ``heads``, ``collisions`` {h: count}, ``max_collision_distance`` {h},
        ``softmax_delta`` {h: min over trials of the softmax margin on the pair}, ``softmax_delta_median``,
        ``softmax_separated`` {h: trials with margin > 0}, ``hardmax_delta_max`` and ``seconds``; with
        ``return_deltas`` also ``softmax_deltas`` {h: list of every trial's softmax margin}.
    """
    if trials < 1:
        raise InputError(f"trials must be ≥ 1, got {trials}")
    if not heads or any(int(h) < 1 for h in heads):
        raise InputError(f"head counts must be positive integers, got {list(heads)}")
    if d < 1 or head_dim < 1:
        raise InputError(f"d and head_dim must be ≥ 1, got d={d}, head_dim={head_dim}")
    t0 = time.perf_counter()
    X = hardmax_counterexample_inputs(d, n)  # (2, n, d)
    shared = np.flatnonzero(counterexample_scalars(n)[0] == counterexample_scalars(n)[1])
    res: dict[str, Any] = {
        "trials": int(trials),
        "heads": [int(h) for h in heads],
        "dim": d,
        "head_dim": head_dim,
        "length": n,
        "seed": seed,
        "collisions": {},
        "exact_collisions": {},
        "max_collision_distance": {},
        "hardmax_delta_max": {},
        "softmax_delta": {},
        "softmax_delta_median": {},
        "softmax_separated": {},
    }
    for h in heads:
        h = int(h)
        gen = torch.Generator().manual_seed(seed * 1000003 + h)
        chunk = max(1, 200_000 // (h * head_dim * d * n * n))
        coll = exact = sep = 0
        max_dist = max_hd = 0.0
        deltas = []
        for s in range(0, trials, chunk):
            T = min(chunk, trials - s)

            def draw(*shape: int, std: float, g: torch.Generator = gen) -> torch.Tensor:
                return torch.randn(*shape, generator=g, dtype=torch.float64) * std

            W_Q = draw(T, h, head_dim, d, std=weight_scale / math.sqrt(d))  # (T, h, s, d)
            W_K = draw(T, h, head_dim, d, std=weight_scale / math.sqrt(d))
            W_V = draw(T, h, head_dim, d, std=weight_scale / math.sqrt(d))
            W_O = draw(T, h, d, head_dim, std=weight_scale / math.sqrt(head_dim))  # (T, h, d, s)
            hard = batched_self_attention(X, W_Q, W_K, W_V, W_O, "hardmax")  # (T, 2, n, d)
            soft = batched_self_attention(X, W_Q, W_K, W_V, W_O, "softmax")  # (T, 2, n, d)
            dist = (hard[:, 0, shared] - hard[:, 1, shared]).norm(dim=-1).amax(dim=-1)  # (T,)
            tol = torch.tensor([_collision_tol(float(v)) for v in hard.norm(dim=-1).amax(dim=(-1, -2))])
            coll += int((dist <= tol).sum())
            exact += int((dist == 0).sum())
            max_dist = max(max_dist, float(dist.max()))
            max_hd = max(max_hd, float(_pair_margin(hard).max()))
            m = _pair_margin(soft)  # (T,)
            sep += int((m > 0).sum())
            deltas.append(m)
        dl = torch.cat(deltas)
        res["collisions"][str(h)] = coll
        res["exact_collisions"][str(h)] = exact
        res["max_collision_distance"][str(h)] = max_dist
        res["hardmax_delta_max"][str(h)] = max_hd
        res["softmax_delta"][str(h)] = float(dl.min())
        res["softmax_delta_median"][str(h)] = float(dl.median())
        res["softmax_separated"][str(h)] = sep
        if return_deltas:
            res.setdefault("softmax_deltas", {})[str(h)] = dl.tolist()
    res["all_collide"] = all(v == trials for v in res["collisions"].values())
    res["softmax_separates"] = all(v == trials for v in res["softmax_separated"].values())
    res["tokens"] = counterexample_scalars(n).tolist()
    res["seconds"] = round(time.perf_counter() - t0, 3)
    return res
