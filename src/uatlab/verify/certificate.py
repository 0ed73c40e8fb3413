"""Rigorous floating-point certificate that a token-classifying uatlab Transformer gets each token right.

What is proved, per token t with true label c (the "target"):

    for every label o ≠ c:   L_c(t) − L_o(t) > 0      in ANY evaluation of the model in its dtype

where "its dtype" is the dtype of the model's parameters (float32 or float64; a model whose tensors mix
dtypes is refused), and an "evaluation" is any implementation of the model's formula in that dtype: any
summation order / blocking / FMA use, a residual add fused into the preceding matrix product, with or
without padding masks (a masked key's weight exactly 0 and its value zeroed, as uatlab's forward does), whose exp errs by at most ``exp_ulps`` ulp in the normal range (see "Assumptions"
below). The proof is a forward error analysis (Higham's model, see
`uatlab.numerics.float_bounds`):

1. The **exact model** is the network evaluated in real arithmetic on the stored weights (a low-rank
   weight W = A B is the exact product of its stored factors).
2. We evaluate the model once more in float64 with our own code (the **reference**, structured to skip
   provably-zero ReLU units) and carry, for every intermediate quantity z, a radius r(z) with
   ``|z_run − z_exact| ≤ r(z)`` for every run in the model's dtype (u = 2^-53 or 2^-24). Since
   u(float64) ≤ u(dtype), the same radius bounds the reference's own deviation from the exact model.
   The reference's own evaluation order is therefore free: products in blocks or batches of any shape,
   padded with exact zero terms (a zero product added to a partial sum leaves it unchanged, so the sum
   and its count of rounding terms are those of the unpadded sum), sums split at any point. Each is one
   float64 run of the same formula, within the radius of the exact value, whose bound does not depend on
   the order; only the reference's last bits (at the scale of the radius, not of the value) change with it.
   The radii are sums and products of non-negative float64 terms in any order (see RADIUS_SAFETY).
3. So ``L_c − L_o ≥ ref_c − ref_o − 2 (r_c + r_o)`` for every run; the token is certified when this lower
   bound is positive for every o ≠ c. It is reported as the token's *certified margin*.

Per-operation rules (x̂ the reference value, r its radius, X = |x̂| + 2r a bound on |x| in any run):

* embedding + positional encoding: a rounding u|x| unless the sum is exact (checked by TwoSum);
* matrix-vector products: ``r_out = |W| r_in + r_W X + γ_n (|W| + r_W) X`` (n = non-zero weights per
  row, + 1 for a bias) — exact zeros cost no rounding; a row whose only non-zero weight is ±2^k (and
  exact) is a single exact product (no γ);
* feed-forward pre-activations: n counted **per token**: weights ≠ 0 on coordinates with X > 0 (a
  coordinate with X = |x̂| + 2r = 0 is exactly 0 in every run: its products are exact zeros);
* scores ``β q·k``: product errors plus γ_s, plus one rounding if β is not a power of two; in float32 with
  s = 1, a score whose q and k have radius 0 and whose product is representable in float32 is exact;
* softmax (both PyTorch code paths: ``exp(s − max)·(1/Σ)`` and ``exp(s − max)/Σ``): with
  ``T_j = max − s_j`` every weight obeys ``p_run/p_exact ∈ [e^{−2ρ}(1−u)²/(1+γ), e^{2ρ}(1+u)²/((1−u)(1−γ))]``,
  ``ρ = max_j (r(s_j)·2 + u T_j) + exp error``; rows where exp could leave the normal range are
  **not** certified (never claimed);
* ``h = Σ p_j v_j``: ``r_h = ε_p Σp|v| + Σ p r_v + γ_n Σ p |v|``;
* residual adds ``x + Σ_i w_i t_i (+ b)`` (after attention and after each FF): the larger of the separate
  evaluation (the sum of n terms, then one more add: ``γ_n S + u(|x| + |y|)``) and the fused one (a GEMM
  whose accumulator starts at x, e.g. ``torch.addmm(x, a, W2ᵀ)``: one sum of n + 1 terms, ``γ_{n+1}(|x| + S)``),
  S = Σ|w_i t_i| + |b| (see `_BoundedModel._residual`);
* ReLU is 1-Lipschitz; a unit whose pre-activation satisfies ``ẑ + 2 r(z) ≤ 0`` is exactly 0 in every
  run and is skipped (it contributes neither value nor rounding). A unit with ``ẑ − 2 r(z) > 0`` is the
  identity in every run: the ON units together are linear in the input, so their propagated input error
  is ``|W2_on W1_on| r`` (a ramp's two units cancel the error of h exactly) and only their own rounding
  goes through ``|W2|`` (`_BoundedModel._on_units_linear_error`, used when ≤ 4 input coordinates
  carry an error). The output sum counts, per output coordinate, only live units with W2[c, i] ≠ 0.
* gradual underflow: every product that can be non-zero adds ETA (the smallest subnormal) to its radius;
  softmax rows are flagged unless every exp(s − max) and every weight exp(·)/Σ (Σ ≤ n) stays normal; a
  row flagged in one layer also flags every later-layer query that attends to it;
* overflow: a batch in which any product or partial sum could exceed max/4 of the dtype is not certified;
  when a bound carried from the weights alone excludes that for every input of any length ≤ max_len
  (`_BoundedModel._overflow_excluded`), the per-batch check is skipped; a row whose bound is not finite
  is never certified;
* a PyTorch spot-check run that contradicts a certified token makes ``certified`` False.

Structure used to scale (the "gated" fast path, checked exactly, never assumed): if some coordinates J
(read by the first FF) carry codes in the embedding, 0 in the positional encoding and 0 in every row of
W_O, then at the first feed-forward layer those coordinates are exactly the token's code. Two kinds are
recognised: ±1 codes (a unit with weights G_u·σ_u, σ_u ∈ {±1}^J, receives at most G_u(|J| − 2) from J for
every token whose code differs from σ_u) and constant-weight {0,1} codes with m ones (a unit with weight
G_u on exactly m coordinates receives at most G_u(m − 1) from a different code; a *complement* unit with
weight −G_u on exactly |J| − m coordinates, i.e. 0 on an m-subset S, receives at most −G_u from any code
≠ S, since that code has a one outside S). With a box over the
other coordinates of the chunk, and the run's rounding counted per token (a token's code has only its m
non-zero coordinates, whatever |J| is: `_BoundedModel.ff_gated`), this proves the unit is off for all such
tokens, in O(q·|others|) work instead of O(q·d·tokens). Units where the check fails are evaluated densely
(the certificate's ``dense_units`` reports how many). Models without such structure (e.g. trained ones) use
the dense path throughout.

Assumptions (each reported in the certificate's ``assumptions``; those that can be checked in the running
process are checked by `environment_checks` and reported in ``environment``):

* IEEE 754 binary arithmetic in the parameters' dtype, round to nearest (checked: a tie rounds to even);
* gradual underflow: subnormals are neither flushed to zero nor treated as zero on input (checked: a
  subnormal survives a PyTorch multiply, i.e. ``torch.set_flush_denormal(True)`` was not called);
* float32 matrix products at full precision, no TF32/bf16 reduced-precision modes (checked:
  ``torch.get_float32_matmul_precision() == 'highest'``);
* exp errs by at most ``exp_ulps`` ulp for results in the normal range (a parameter; not checkable
  exhaustively: it is a property of the evaluator's exp kernel, see `uatlab.numerics.float_bounds`);
* no compiler rewrites beyond the orders, FMAs and fused residuals covered above (``torch.compile`` may
  change the formula, e.g. recompute softmax algebraically; not covered and not checkable from the model);
* input identity for the ceiling (the majority label per identical input): two tokens are one input only if
  the data's 64-bit rolling-hash key (`uatlab.data.keys.input_keys`) and a second 64-bit key salted at random
  per certificate (`uatlab.data.keys.salted_input_keys`) both agree. The first alone is linear mod 2^64, so
  colliding inputs can be built on purpose, and a collision of inputs with different labels would lower the
  ceiling; the salted key cannot be targeted by data written before the salt is drawn.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import numbers
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import torch

from uatlab.data.ceiling_counter import CeilingCounter
from uatlab.data.dataset import Encoding, SequenceDataset, check_own_encoding, token_line
from uatlab.data.keys import input_identity_assumption, input_keys_of_words, salt_table, salted_input_keys
from uatlab.errors import InputError
from uatlab.memory_guard import check_memory, limit_as_of_now
from uatlab.models.io import one_float_dtype
from uatlab.models.transformer import Transformer
from uatlab.numerics.float_bounds import (
    DEFAULT_EXP_ULPS,
    check_exp_ulps,
    exp_relative_error,
    exp_underflow_threshold,
    gamma,
    is_power_of_two,
    product_radius,
    underflow_eta,
    unit_roundoff,
)
from uatlab.verify.environment import (
    EXP_CHECK_SAMPLES,
    environment_checks,
    environment_failures,
    exp_error_text,
    void_reasons,
)

U64 = 2.0**-53

# The radii themselves are computed in float64 with round-to-nearest from non-negative terms (no cancellation:
# the one signed sum, M of `_on_units_linear_error`, carries its own γ slack); a sum of n such terms has a
# relative error below γ_n(2^-53) ≈ n·1.1e-16 (zero terms add nothing). Every decision (a unit may be live, a
# gated unit is off, a margin is positive) inflates the radius by 1 + 2^-30 ≈ 1 + 9.3e-10, which covers a radius
# whose sums hold ~4·10⁶ non-zero terms in all (twice that by the first-order count): `_BoundedModel.check_length`
# refuses a model whose widths, or a sequence whose length, could exceed it.
RADIUS_SAFETY = 1.0 + 2.0**-30


@dataclass
class Certificate:
    """The outcome of `certify`: which tokens are proven correct in every evaluation of the model.

    All counts are tokens unless named otherwise. A token is *certified* when the certified lower bound of
    its margin ``min_{o ≠ c} (L_c − L_o)`` (c its label) is > 0 for every evaluation allowed by
    ``assumptions`` (see the module docstring).

    Attributes:
        dtype: the floating-point format proven: the dtype of the model's parameters.
        config_dtype: the dtype the model's config names (differs from ``dtype`` after e.g. ``model.float()``
            on a float64 model, or for a model file whose config names another dtype than its tensors hold; the
            proof always follows the tensors).
        exp_ulps: the assumed error of exp in ulps (normal range).
        sequences: sequences checked.
        tokens: tokens checked.
        ceiling_tokens: tokens a perfect model can get right: per identical input (whole sequence and
            position, or the prefix for a causal model; the words as written, also where ``unknown='unk'``
            reads some as the unknown-word token), the count of its majority label. A model without
            positional encoding cannot tell inputs apart that differ only in order (its attention is
            permutation-equivariant), so for it the ceiling can exceed what it can reach: certifying is then
            harder, never easier.
        conflict_tokens: ``tokens − ceiling_tokens`` (minority labels of identical inputs).
        correct_tokens: tokens whose label is the argmax of the float64 reference logits (a token whose reference
            logits are not finite is not correct: ``reference_lost_tokens``). The reference follows the model in
            exact arithmetic: a key hidden by the causal mask or a head whose W_O is 0 adds nothing to it, so it
            can be finite and correct where a run overflows (0·∞ = NaN in PyTorch); such a token is not certified.
        certified_tokens: tokens proven correct: whose certified lower margin is > 0, or 0 when the proof is
            void (``invalidated_by``).
        certified: ``certified_tokens ≥ ceiling_tokens`` and the proof is not void.
        certified_fraction: ``certified_tokens / ceiling_tokens`` (1.0 for empty data, unless void).
        min_certified_margin: the smallest certified lower margin among certified tokens (None if none).
        min_margin_at: where that is (sequence, position, token, file line, the reference margin there).
        max_logit_error_bound: the largest radius of a logit over the tokens whose bound holds (all but
            ``unbounded_tokens``): there |L_run − L_exact| ≤ it in every run; ∞ (``null`` in JSON) when no token's
            bound holds.
        unbounded_tokens: tokens whose logits have no valid error bound, never certified: a run might overflow, a
            softmax weight might leave the normal range, or a value or radius is not finite (every
            ``reference_lost_tokens`` token among them), or the token reads such a row through attention.
        method: "gated-sparse" (the structured fast path for compiled models) or "dense".
        dense_units: with "gated-sparse", the most first-FF units that one forward pass evaluated for every one
            of its tokens (units not proven off for other codes' tokens, see `_BoundedModel.ff_gated`): 0 when
            every token met only its own code's units; up to the FF width when the gate proof failed and the
            layer ran densely. None with "dense".
        seconds: wall time of the certification.
        uncertified_examples: up to ``max_examples`` tokens not certified, with their lower margins.
        assumptions: the assumptions the proof rests on, in words.
        environment: run-time checks of the checkable assumptions in this process
            (`environment_checks`); ``environment["ok"]`` is False if one fails.
        torch_spot_check: PyTorch's own forward on a few sequences (a veto, not part of the proof).
        bound_certified_tokens: tokens whose certified lower margin the bounds found > 0 (equal to
            ``certified_tokens`` unless the proof is void; then what the bounds would prove if nothing voided them).
        invalidated_by: why the proof is void, empty if it stands: the PyTorch spot check found a certified token
            wrong (the model that runs is not the one the bounds describe), or a run-time check of the assumptions
            failed in this process (``environment["ok"]`` false; a reduced float32 matmul mode voids float32
            proofs only). Then no token is proven: ``certified_tokens`` is
            0, every margin −inf, and ``min_margin_at`` None.
        reference_lost_tokens: tokens whose float64 reference logits are not finite: the reference overflowed
            (e.g. a query scale β that is ∞ in the dtype), or the token reads, through attention, one that did.
            Such a token is never certified, never counted correct, and never counted as agreeing with PyTorch.
        unknown_tokens: tokens outside the model's vocabulary that were read as its unknown-word token
            (``unknown='unk'``); 0 otherwise. Inputs that only such words tell apart are still different inputs
            for the ceiling, so a model that merges them cannot reach it on them.
        margins: per sequence (data order), a float64 array with every token's certified lower margin
            (−inf where a softmax row could leave the normal range, and everywhere when void); None when not kept
            (``keep_margins=False``). Excluded from ``to_dict``/``to_json`` unless asked for.
    """

    dtype: str
    sequences: int
    tokens: int
    ceiling_tokens: int
    conflict_tokens: int
    correct_tokens: int
    certified_tokens: int
    bound_certified_tokens: int
    certified: bool
    certified_fraction: float
    min_certified_margin: float | None
    min_margin_at: dict[str, Any] | None
    max_logit_error_bound: float
    method: str
    seconds: float
    uncertified_examples: list[dict[str, Any]] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    torch_spot_check: dict[str, Any] = field(default_factory=dict)
    exp_ulps: float = DEFAULT_EXP_ULPS
    config_dtype: str | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    margins: list[np.ndarray] | None = field(default=None, repr=False)
    dense_units: int | None = None
    invalidated_by: list[str] = field(default_factory=list)
    unknown_tokens: int = 0
    reference_lost_tokens: int = 0
    unbounded_tokens: int = 0

    def margin(self, sequence: int, position: int) -> float:
        """The certified lower margin of one token (> 0: proven correct)."""
        if self.margins is None:
            raise ValueError("this certificate kept no per-token margins (certify(..., keep_margins=True))")
        if not 0 <= sequence < len(self.margins):  # (a negative index would read from the end)
            raise IndexError(f"sequence {sequence}: the certificate has sequences 0…{len(self.margins) - 1}")
        row = self.margins[sequence]
        if not 0 <= position < len(row):
            raise IndexError(f"position {position}: sequence {sequence} has positions 0…{len(row) - 1}")
        return float(row[position])

    def to_dict(self, margins: bool = False) -> dict[str, Any]:
        """The fields as plain Python values (JSON-ready); per-token margins only with ``margins=True``
        (as lists per sequence, ``None`` for −inf)."""
        out = _plain({f.name: getattr(self, f.name) for f in fields(self) if f.name != "margins"})
        if margins:
            if self.margins is None:
                raise ValueError("this certificate kept no per-token margins (certify(..., keep_margins=True))")
            out["margins"] = [[float(v) if np.isfinite(v) else None for v in m] for m in self.margins]
        return out

    def to_json(self, margins: bool = False, indent: int | None = None) -> str:
        """The certificate as JSON text (see `to_dict`)."""
        return json.dumps(self.to_dict(margins=margins), indent=indent, allow_nan=False)


def _plain(obj: Any) -> Any:
    """Nested dicts/lists of Python scalars: numpy scalars converted, non-finite floats → None."""
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


# ----------------------------------------------------------------------------------------------
# weights as float64 numpy arrays, with radii for rounded low-rank products


@dataclass
class _Linear:
    W: np.ndarray  # (out, in)
    b: np.ndarray  # (out,)
    stored_absW: np.ndarray | None  # |W|, or None: formed per slice (the gated layer's large FF)
    terms: np.ndarray  # (out,) number of possibly non-zero terms per row (weights + bias)
    gam: np.ndarray | None = None  # (out,) γ_terms(u) of the model's dtype, set by _BoundedModel

    @property
    def absW(self) -> np.ndarray:
        """|W| (stored, or formed now: the same values)."""
        return self.stored_absW if self.stored_absW is not None else np.abs(self.W)

    def abs_rows(self, sel) -> np.ndarray:
        """|W[sel]| without forming |W|."""
        return self.stored_absW[sel] if self.stored_absW is not None else np.abs(self.W[sel])

    def abs_cols(self, sel) -> np.ndarray:
        """|W[:, sel]| without forming |W|."""
        return self.stored_absW[:, sel] if self.stored_absW is not None else np.abs(self.W[:, sel])

    def abs_matvec(self, v: np.ndarray, block: int = 1 << 22) -> np.ndarray:
        """|W| @ v without forming |W| when it is not stored: slices of about ``block`` entries (32 MB), whole
        rows of a tall W or whole columns of a wide W at a time. The same sums up to the BLAS's summation
        order: used only for the coarse overflow checks (`_stage_may_overflow`, `_overflow_excluded`), whose
        factor-4 headroom covers float64 rounding."""
        if self.stored_absW is not None:
            return self.stored_absW @ v
        rows, cols = self.W.shape
        if rows >= cols:
            step = max(1, block // max(cols, 1))
            return np.concatenate([np.abs(self.W[s : s + step]) @ v for s in range(0, rows, step)])
        step = max(1, block // max(rows, 1))
        return sum(np.abs(self.W[:, s : s + step]) @ v[s : s + step] for s in range(0, cols, step))


def _linear(layer: torch.nn.Linear | None, out_dim: int, in_dim: int, store_abs: bool = True) -> _Linear:
    if layer is None:
        W = np.zeros((out_dim, in_dim))
        b = np.zeros(out_dim)
    elif not store_abs:  # a large layer: the model's own memory when it is float64 (read-only), else a copy
        W = layer.weight.detach().to(torch.float64).numpy().view()
        W.flags.writeable = False
        b = layer.bias.detach().to(torch.float64).numpy().copy() if layer.bias is not None else np.zeros(W.shape[0])
    else:
        W = layer.weight.detach().to(torch.float64).numpy().copy()
        b = layer.bias.detach().to(torch.float64).numpy().copy() if layer.bias is not None else np.zeros(W.shape[0])
    terms = (W != 0).sum(axis=1) + (b != 0)
    return _Linear(W, b, np.abs(W) if store_abs else None, terms.astype(np.int64))


@dataclass
class _Attention:
    WQ: np.ndarray  # (h, s, d)
    WK: np.ndarray
    WV: np.ndarray
    WO: np.ndarray  # (h, d, s)
    rQ: np.ndarray
    rK: np.ndarray
    rV: np.ndarray
    rO: np.ndarray
    scale: float  # β as the run multiplies by it: rounded to the dtype (`_run_scale`)
    causal: bool
    # largest Σ_k |A_ik||B_kj| over the low-rank maps W = A·B (0 without one): bounds every product and partial
    # sum of the run's own W (formed by PyTorch in the model's dtype), which must not overflow either
    factor_abs: float = 0.0


def _attention_weights(attn, dtype: str) -> _Attention:
    mats, radii = {}, {}
    factor_abs = 0.0
    for name in ("W_Q", "W_K", "W_V", "W_O"):
        maps = getattr(attn, name)
        if maps.full is not None:  # what `LowRankLinearMaps.weight` (the forward) uses whenever it is set
            w = maps.full.detach().to(torch.float64).numpy().copy()
            r = np.zeros_like(w)
        else:
            left = maps.left.detach().to(torch.float64).numpy()
            right = maps.right.detach().to(torch.float64).numpy()
            with np.errstate(over="ignore", invalid="ignore"):  # ∞ here: refused by `_stage_may_overflow`
                w = left @ right
                r = product_radius(left, right, dtype)
                factor_abs = max(factor_abs, float(np.max(np.abs(left) @ np.abs(right), initial=0.0)))
        mats[name], radii[name] = w, r
    return _Attention(
        mats["W_Q"],
        mats["W_K"],
        mats["W_V"],
        mats["W_O"],
        radii["W_Q"],
        radii["W_K"],
        radii["W_V"],
        radii["W_O"],
        _run_scale(float(attn.score_scale), dtype),
        bool(attn.causal),
        factor_abs,
    )


def _run_scale(beta: float, dtype: str) -> float:
    """The score scale a run multiplies by: PyTorch rounds the Python scalar β to the model's dtype first (the
    opmath of float32 is float32), so a float32 run scales by fl32(β), which may be ∞ (|β| above float32's
    range: every score is then ∞ or NaN, refused by the overflow check) or subnormal (then far from β in
    relative terms). Taking fl32(β) itself as the reference's scale leaves one rounding, that of the product."""
    if dtype != "float32":
        return beta
    with np.errstate(over="ignore"):
        return float(np.float32(beta))


def _rows_cols(rows: np.ndarray, cols: np.ndarray) -> tuple:
    """The index of the (len(rows), len(cols)) block x[rows][:, cols]: a slice of columns when ``cols`` is a
    contiguous increasing range (a faster index, the same elements), else an outer fancy index."""
    if len(cols) and np.array_equal(cols, np.arange(cols[0], cols[0] + len(cols))):
        return rows, slice(int(cols[0]), int(cols[0]) + len(cols))
    return rows[:, None], cols


def _columns(W: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """W[:, cols]: a view when ``cols`` is a contiguous increasing range, else a copy (gathered by columns)."""
    if len(cols) and np.array_equal(cols, np.arange(cols[0], cols[0] + len(cols))):
        return W[:, cols[0] : cols[0] + len(cols)]
    return np.take(W, cols, axis=1)


def _matvec_bound(x, r, W, rW, u, eta):
    """y = x Wᵀ for x (..., in), W (out, in): reference value and radius (eta: underflow per product).

    Only the columns of W or rW that are not all zero are read: every other product is an exact zero in
    every run (x is finite), adds nothing to a partial sum and no term to the counts below."""
    cols = np.flatnonzero(np.any(W != 0, axis=0) | np.any(rW != 0, axis=0))
    if len(cols) < W.shape[1]:
        x, r, W, rW = np.take(x, cols, axis=-1), np.take(r, cols, axis=-1), W[:, cols], rW[:, cols]
    lead = x.shape[:-1]
    m = math.prod(lead)
    x, r = x.reshape(m, x.shape[-1]), r.reshape(m, r.shape[-1])  # one 2-D product instead of a stack
    absW = np.abs(W)
    X = np.abs(x) + 2 * r
    count = (W != 0).sum(axis=-1) + (rW != 0).sum(axis=-1)  # products that can be non-zero (ETA each)
    terms = np.maximum(count, 1)
    # a row with a single exact weight ±2^k (and nothing else that can be non-zero) is a single product by a
    # power of two: exact barring underflow (count·ETA below) and overflow (checked separately); the zero
    # products of the other coordinates are exact zeros and adding them changes nothing
    only = W.sum(axis=-1)  # the row's one weight where exactly one is non-zero
    mant, _ = np.frexp(np.abs(only))
    single = (count == 1) & (mant == 0.5)  # count == 1 also means rW is zero on the row
    g = np.where(single, 0.0, gamma(terms, u))
    # a product by 2^k with k ≥ 0 cannot underflow either (x·2^k is representable for every finite x, subnormal
    # or not, barring overflow): such single rows need no ETA, so exact inputs give exactly-known outputs
    big = single & (np.abs(only) >= 1.0)
    y = x @ W.T
    ry = r @ absW.T + X @ rW.T + g * (X @ (absW + rW).T) + np.where(big, 0, count) * eta
    return y.reshape(*lead, W.shape[0]), ry.reshape(*lead, W.shape[0])


_GAMMA_TABLES: dict[float, np.ndarray] = {}


def _gamma_of_counts(n: np.ndarray, u: float, offset: int = 0) -> np.ndarray:
    """γ_{max(n + offset, 1)} (u) for an array of non-negative integer term counts n (any numeric dtype), by
    lookup in a table of `gamma` over 1, 2, …: the same values as ``gamma(np.maximum(n + offset, 1), u)``,
    without its four passes over the array (`gamma` refuses n·u ≥ 1/2 when the table grows past it)."""
    n = np.asarray(n)
    top = int(n.max(initial=0)) + offset
    tab = _GAMMA_TABLES.get(u)
    if tab is None or len(tab) <= top:
        size = max(top + 1, 2 * (0 if tab is None else len(tab)), 64)
        size = min(size, max(top + 1, int(0.25 / u)))  # never past n·u = 1/4 unless asked for (then gamma raises)
        tab = _GAMMA_TABLES[u] = gamma(np.maximum(np.arange(size), 1), u)
    idx = n.astype(np.intp)
    if offset:
        idx += offset
    return tab[idx]


def _quarantine(x: np.ndarray, r: np.ndarray, bad: np.ndarray, lost: np.ndarray) -> None:
    """Flag (in ``bad``, (T,)) the tokens of x, r (T, d) whose value or radius is not finite, and set their radius
    to 0; a token whose value is not finite is also flagged in ``lost`` and its value set to 0.

    Such a radius arises only in a row already beyond the certificate's rules (e.g. a softmax row whose bound
    exp(2ρ) overflows, which is flagged, and then a masked key's 0 · ∞ in a later row that is not). NaN fails
    every comparison, so left in place it could make a live unit look dead, or drop an error-carrying
    coordinate from a bound taken over the tokens of a call; zeroed, the token adds nothing to such bounds
    (a box only widens with an extra point, here the token's own reference value) and stays flagged. A value
    that is not finite is the float64 reference's own (an overflow in it, or a softmax row whose weights are
    undefined, see `attention`): from here on the token has no reference (``lost``), and nothing read off it
    (its argmax, its radius) describes one. The common case is one reduction per array: a finite sum means
    every entry is finite."""
    if np.isfinite(x.sum()) and np.isfinite(r.sum()):
        return
    nx = ~np.isfinite(x).all(axis=1)
    nf = nx | ~np.isfinite(r).all(axis=1)
    if nf.any():
        x[nx], r[nf] = 0.0, 0.0
        bad |= nf
        lost |= nx


def _column_stats(x: np.ndarray, r: np.ndarray, block: int = 1 << 13) -> tuple[np.ndarray, ...]:
    """Per column of x, r (T, d): max_t (|x_t| + 2 r_t), max_t r_t, min_t (x_t − r_t), max_t (x_t + r_t), in blocks
    of rows (cache-sized temporaries instead of (T, d) arrays); the same values as the whole-array forms."""
    d = x.shape[1]
    mx, mr, lo, hi = np.zeros(d), np.zeros(d), np.full(d, np.inf), np.full(d, -np.inf)
    for s in range(0, x.shape[0], block):
        xb, rb = x[s : s + block], r[s : s + block]
        t = np.abs(xb)
        t += 2 * rb
        np.maximum(mx, t.max(axis=0), out=mx)
        np.maximum(mr, rb.max(axis=0), out=mr)
        np.subtract(xb, rb, out=t)
        np.minimum(lo, t.min(axis=0), out=lo)
        np.add(xb, rb, out=t)
        np.maximum(hi, t.max(axis=0), out=hi)
    return mx, mr, lo, hi


def _score_row_extremes(q: np.ndarray, k: np.ndarray, scale: float, causal: bool) -> tuple[np.ndarray, np.ndarray]:
    """For head dimension 1: max_j and min_j over each query's allowed keys of the reference scores
    S_ij = fl(fl(q_i k_j) β) (keys j ≤ i when causal), from q, k (B, n) without forming a reduction over S.

    Rounding is monotone, so k ↦ fl(fl(q_i k) β) is non-decreasing when q_i β ≥ 0 (both factors' signs
    agree, or one is 0: then every score is ±0) and non-increasing otherwise: its maximum over the keys is
    attained at the largest key when q_i β ≥ 0 (else at the smallest), its minimum at the other. Evaluated
    with the same two roundings as S, the values are S's own entries: equal to ``S.max`` and ``S.min``
    (up to the sign of a zero)."""
    if causal:
        kmax, kmin = np.maximum.accumulate(k, axis=1), np.minimum.accumulate(k, axis=1)
    else:
        kmax, kmin = k.max(axis=1, keepdims=True), k.min(axis=1, keepdims=True)
    up = (q >= 0) == (scale >= 0)
    hi = q * np.where(up, kmax, kmin)
    hi *= scale
    lo = q * np.where(up, kmin, kmax)
    lo *= scale
    return hi, lo


# rows up to this long are reduced column by column (`_row_max`)
ROW_MAX_COLUMNS = 24


def _row_max(a: np.ndarray) -> np.ndarray:
    """``a.max(axis=-1)``, the same values: for short rows (≤ ROW_MAX_COLUMNS) as a running maximum over the
    columns, one vectorised pass each, which is faster than numpy's reduction along a short axis. The maximum
    is exact, so the order does not change it; NaN propagates through both forms (the sign of a zero may
    differ between them: callers pass arrays without zeros, or do not read it)."""
    n = a.shape[-1]
    if n > ROW_MAX_COLUMNS or n == 0:
        return a.max(axis=-1)
    out = a[..., 0].copy()
    for j in range(1, n):
        np.maximum(out, a[..., j], out=out)
    return out


def _exact_score_products(q, rq, k, rk, prod: np.ndarray | None = None) -> np.ndarray:
    """(B, n_q, n_k) mask of float32 scores q_i·k_j (head dim 1) that are exact in every run.

    Where q_i and k_j have radius 0, every run holds exactly the reference values, which are therefore
    float32 numbers; their product is exact in float64 (24 + 24 significant bits ≤ 53), and when it is
    representable in float32, the run's rounded product equals it (subnormal results included: a
    representable value is returned unchanged). So the score costs no rounding there.
    """
    if prod is None:  # q_i·k_j, (B, n_q, n_k)
        prod = q[..., 0][:, :, None] * k[..., 0][:, None, :]
    return (
        (rq[..., 0] == 0)[:, :, None]
        & (rk[..., 0] == 0)[:, None, :]
        & (prod.astype(np.float32).astype(np.float64) == prod)
    )


def _row_keys(packed: np.ndarray) -> np.ndarray:
    """One fixed-width bytes key per row of a uint8 matrix (for np.unique / searchsorted)."""
    packed = np.ascontiguousarray(packed)
    return packed.view(np.dtype((np.void, packed.shape[1]))).ravel()


def _exact_sum_mask(a: np.ndarray, b: np.ndarray, dtype: str) -> np.ndarray:
    """True where fl_dtype(a + b) == a + b exactly (TwoSum in float64; float32 sums checked directly)."""
    s = a + b
    bb = s - a
    exact64 = ((a - (s - bb)) + (b - bb)) == 0  # Knuth's TwoSum: the exact rounding error of s
    if dtype == "float32":
        s32 = (a.astype(np.float32) + b.astype(np.float32)).astype(np.float64)
        return exact64 & (s32 == s)
    return exact64


# ----------------------------------------------------------------------------------------------


def parameter_dtype(model: torch.nn.Module) -> str:
    """The one floating-point dtype of all of ``model``'s parameters and buffers: 'float32' or 'float64'.

    This, not ``model.config.dtype``, is the arithmetic PyTorch will do (``model.float()`` re-types the
    tensors and leaves the config alone). Raises InputError for mixed or unsupported dtypes, naming them.
    """
    dtype, why = one_float_dtype(dict(itertools.chain(model.named_parameters(), model.named_buffers())))
    if why is not None:
        raise InputError(
            f"the model {why}; convert it to one dtype, float32 or float64, first (model.float() or "
            "model.double()) so that the certificate proves the arithmetic PyTorch will do"
        )
    if dtype is None:
        raise InputError("the model has no floating-point parameters to certify")
    return dtype


def _gate_rows(WJ: np.ndarray, m: int) -> tuple[np.ndarray, ...]:
    """Per unit (row of WJ = W1[:, J], the code coordinates J): is it gated, and its numbers for `ff_gated`.

    ``m = 0``: ±1 codes (another word's code agrees in at most |J| − 1 places). A unit with weights G·σ, σ ∈ {±1}^J,
    receives at most cap = G (|J| − 2) from another code; its own code is σ (the sign pattern).
    ``m ≥ 1``: constant-weight {0,1} codes with m ones. A unit with weight G on exactly m coordinates receives
    at most cap = G (m − 1) from another code (which shares at most m − 1 ones); its code is its ones.
    *Complement gate*: weight −Gc on the |J| − m coordinates outside an m-subset S. A token whose code c ≠ S
    (also m ones) has a one outside S, so it receives ≤ cap = −Gc; a token with code S receives exactly 0
    (every product is 0 · (−Gc)). The unit's code is S, the zero pattern of its row.

    Returns (gated, cap, code_abs = Σ_J |W1|, code_terms, code_mag, G, the unit's code packed by
    ``np.packbits``). Over any one word's code c (exactly the code in every run) at most code_terms of the
    products W1[i, j]·c_j are non-zero (c has ``ones`` non-zero coordinates: m, or |J| for ±1 codes; the row
    min(ones, #{W1[i, J] ≠ 0})), each of size ≤ max_J |W1[i, j]| (|c_j| ≤ 1): code_mag bounds Σ_J |W1[i, j] c_j|.
    Every value is per row: the same whatever block of rows it is computed in.
    """
    nJ = WJ.shape[1]
    if m == 0:
        G = np.abs(WJ[:, 0])
        gated = (G > 0) & np.all(np.abs(WJ) == G[:, None], axis=1)
        cap = G * (nJ - 2)
        unit_pattern = WJ > 0
        ones = nJ  # every code coordinate of every word is ±1: non-zero
    else:
        ones = m  # every word's code has exactly m non-zero coordinates
        G = WJ.max(axis=1)
        gated = (G > 0) & np.all((WJ == 0.0) | (WJ == G[:, None]), axis=1) & ((WJ > 0).sum(axis=1) == m)
        cap = G * (m - 1)
        Gc = -WJ.min(axis=1)
        comp = ~gated & (Gc > 0) & np.all((WJ == 0.0) | (WJ == -Gc[:, None]), axis=1) & ((WJ < 0).sum(axis=1) == nJ - m)
        cap = np.where(comp, -Gc, cap)
        G = np.where(comp, Gc, G)
        unit_pattern = np.where(comp[:, None], WJ == 0.0, WJ > 0)
        gated = gated | comp
    aWJ = np.abs(WJ)
    code_abs = aWJ.sum(axis=1)  # Σ_J |W1| (for the float64 slack of the bound)
    code_terms = np.minimum(ones, (WJ != 0.0).sum(axis=1))
    code_mag = aWJ.max(axis=1, initial=0.0) * code_terms
    return gated, cap, code_abs, code_terms, code_mag, G, np.packbits(unit_pattern, axis=1)


def _check_plain_modules(model: Transformer) -> None:
    """Refuse a model whose forward is not uatlab's: a module of another class (a subclass may compute anything),
    a method replaced on an instance (an instance attribute shadowing a callable of the class: ``forward``,
    ``hidden_states``, ``_call_impl``, ...), or a forward hook (on a module or global) that may rewrite what a
    module returns. The bounds describe the computation of uatlab's own classes on the stored tensors."""
    from torch.nn.modules import module as torch_module

    from uatlab.models.attention import LowRankLinearMaps, MultiHeadSelfAttention
    from uatlab.models.feedforward import FeedForward
    from uatlab.models.transformer import Block

    allowed = (Transformer, Block, MultiHeadSelfAttention, LowRankLinearMaps, FeedForward)
    allowed += (torch.nn.Linear, torch.nn.Embedding, torch.nn.ModuleList)
    hooks = ("_forward_hooks", "_forward_pre_hooks", "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs")
    if any(getattr(torch_module, "_global" + h, None) for h in ("_forward_hooks", "_forward_pre_hooks")):
        raise InputError(
            "a global forward hook is registered (torch.nn.modules.module.register_module_forward_hook or "
            "_pre_hook): it may change every module's output, so the model's forward is not the one certified"
        )
    for name, module in model.named_modules():
        where = name or "the model"
        if type(module) not in allowed:
            raise InputError(
                f"{where} is a {type(module).__module__}.{type(module).__qualname__}: certify covers uatlab's "
                "own modules only (a subclass or another module may compute something else)"
            )
        replaced = sorted(n for n in vars(module) if callable(getattr(type(module), n, None)))
        if replaced:
            raise InputError(
                f"{where} has its {', '.join(replaced)} replaced on the instance: its computation is not certified"
            )
        if any(getattr(module, h, None) for h in hooks):
            raise InputError(
                f"{where} has a forward hook: it may change what the module returns, so the model's forward is not "
                "the one certified (remove it, e.g. handle.remove(), then certify)"
            )


def check_modules_match_config(model: Transformer) -> None:
    """Refuse a model whose modules would compute something else than the config the certificate reads.

    The bounds are built from the modules' tensors and attributes (the attention kind and causal mask of each
    layer, the score scale), while the ceiling's notion of one input (the whole sequence, or the prefix of a
    causal model), the width d and the label count come from ``model.config``: they must agree. A config edited
    in memory (``dataclasses.replace(model.config, causal=True)``) or a module switched to hardmax would
    otherwise be certified against the wrong model. An embedding that renormalises its rows when read
    (``nn.Embedding(max_norm=...)``) computes with other vectors than its stored weights: refused too."""
    cfg = model.config
    _check_plain_modules(model)
    for i, block in enumerate(model.blocks):
        attn = block.attn
        if attn.attention != "softmax":
            raise InputError(
                f"layer {i}'s attention is {attn.attention!r}: certify supports softmax attention only (hardmax is "
                "discontinuous in its scores)"
            )
        if attn.attention != cfg.attention:
            raise InputError(
                f"layer {i}'s attention is {attn.attention!r} but the model's config says {cfg.attention!r}: the "
                "config must describe the modules"
            )
        if bool(attn.causal) != bool(cfg.causal):
            raise InputError(
                f"layer {i}'s attention has causal={bool(attn.causal)} but the model's config says "
                f"causal={bool(cfg.causal)}: the config must describe the modules"
            )
    if model.embed is not None:
        if model.embed.max_norm is not None:
            raise InputError(
                f"the token embedding renormalises rows to max_norm={model.embed.max_norm} when it reads them: "
                "certify needs an embedding that returns its stored rows (max_norm=None)"
            )
        if model.embed.weight.shape[1] != cfg.d_model:
            raise InputError(
                f"the token embedding has width {model.embed.weight.shape[1]} but the config says d_model={cfg.d_model}"
            )
    if model.readout is not None and model.readout.weight.shape[0] != cfg.num_labels:
        raise InputError(
            f"the readout has {model.readout.weight.shape[0]} rows but the config says num_labels={cfg.num_labels}"
        )


class _BoundedModel:
    """A uatlab Transformer as float64 arrays, evaluated with error radii for runs in its parameters' dtype."""

    def __init__(self, model: Transformer, exp_ulps: float = DEFAULT_EXP_ULPS) -> None:
        cfg = model.config
        if model.embed is None:
            raise InputError("certify needs a model with a token embedding (vocab_size set)")
        if model.readout is None:
            raise InputError("certify needs a model with a label readout (num_labels set)")
        check_modules_match_config(model)
        self.cfg = cfg
        self.dtype = parameter_dtype(model)  # the arithmetic PyTorch will do (not cfg.dtype)
        self.exp_ulps = check_exp_ulps(exp_ulps)
        self.u = unit_roundoff(self.dtype)
        self.eta = underflow_eta(self.dtype)  # absolute error of one underflowing product
        self.E = model.embed.weight.detach().to(torch.float64).numpy().copy()  # (V, d)
        self.P = model.pos.detach().to(torch.float64).numpy().copy() if model.pos is not None else None
        # coordinates where some word's embedding and some position's encoding are both non-zero
        self.embed_overlap = (
            np.flatnonzero(np.any(self.E != 0.0, axis=0) & np.any(self.P != 0.0, axis=0))
            if self.P is not None
            else np.zeros(0, dtype=np.int64)
        )
        d = cfg.d_model
        self.input_ff = (
            (
                _linear(model.input_ff.hidden, model.input_ff.width, d),
                _linear(model.input_ff.output, d, model.input_ff.width),
            )
            if model.input_ff is not None
            else None
        )
        self.layers = []
        for block in model.blocks:
            self.layers.append(
                (
                    _attention_weights(block.attn, self.dtype),
                    _linear(block.ff.hidden, block.ff.width, d, store_abs=False),
                    _linear(block.ff.output, d, block.ff.width, store_abs=False),
                )
            )
        self.readout = _linear(model.readout, cfg.num_labels, d)
        self.readout_cols = np.flatnonzero(np.any(self.readout.W != 0, axis=0))  # coordinates the readout weighs
        for lin in self._linears():
            lin.gam = gamma(np.maximum(lin.terms, 1), self.u)
        self.gate = self._detect_gate()
        # an upper bound on the non-zero terms of the float64 sums that make up one radius, besides the attention's
        # sums over keys (n per layer, added in `check_length`): RADIUS_SAFETY covers their relative error
        # γ_terms(2^-53) while it is ≤ (RADIUS_SAFETY − 1) / 2 (a zero term adds nothing, so widths overcount)
        self.radius_terms = d + sum(lin.W.shape[0] + lin.W.shape[1] for lin in self._linears())
        self.radius_terms += sum(4 * att.WQ.shape[0] * att.WQ.shape[1] for att, _, _ in self.layers)
        self.check_length(0)
        # no run on any input can overflow (proved from the weights alone): no per-batch checks then
        with np.errstate(over="ignore", invalid="ignore"):  # a bound that overflows is ∞: refused, not a warning
            self.overflow_excluded = self._overflow_excluded()
        self._ws: dict[tuple[str, int], tuple[np.ndarray, ...]] = {}  # reused buffers per thread (`_buffers`)
        for li, (_, hid, out) in enumerate(self.layers):
            if li > 0 or self.gate is None:  # evaluated densely: |W| stored once (the gated FF forms it per slice)
                hid.stored_absW, out.stored_absW = np.abs(hid.W), np.abs(out.W)

    def _linears(self) -> list[_Linear]:
        out = [self.readout, *(self.input_ff or ())]
        for _, hid, o in self.layers:
            out += [hid, o]
        return out

    # ---------------------------------------------------------------- gated structure
    GATE_ROWS = 1 << 22  # entries of W1[:, J] analysed at a time by `_detect_gate` (32 MB of float64)

    def _detect_gate(self):
        """Code coordinates J and gated units of the first FF (see module docstring), or None."""
        if self.input_ff is not None or not self.layers:
            return None
        attn, ff1, _ = self.layers[0]
        E = self.E
        untouched = np.all(attn.WO == 0.0, axis=(0, 2)) & np.all(attn.rO == 0.0, axis=(0, 2))
        if self.P is not None:
            untouched &= np.all(self.P == 0.0, axis=0)
        reads = np.any(ff1.W != 0.0, axis=0)  # coordinates the first FF actually reads
        untouched &= reads
        # a coordinate equal for every word carries no code (it would make every word's code the same)
        untouched &= ~np.all(E == E[:1], axis=0)
        J = np.flatnonzero(untouched & np.all(np.abs(E) == 1.0, axis=0))
        m = 0  # ±1 codes: another word's code agrees in at most |J| − 1 places
        if len(J) == 0:  # constant-weight {0,1} codes: another word's code shares at most m − 1 ones
            J = np.flatnonzero(untouched & np.all((E == 0.0) | (E == 1.0), axis=0))
            if len(J) == 0:
                return None
            weights = (E[:, J] == 1.0).sum(axis=1)
            m = int(weights[0])
            if m < 1 or np.any(weights != m):
                return None
        # the rows of W1[:, J] in blocks of GATE_ROWS units (a wide code's W1[:, J] is most of W1: never copied whole)
        step = max(1, self.GATE_ROWS // max(len(J), 1))
        rows = [_gate_rows(_columns(ff1.W[s : s + step], J), m) for s in range(0, ff1.W.shape[0], step)]
        gated, cap, code_abs, code_terms, code_mag, G, unit_packed = (
            np.concatenate([blk[i] for blk in rows]) if rows else np.zeros(0) for i in range(7)
        )
        del rows
        if not gated.any():
            return None
        cap = np.where(gated, cap, np.inf)
        # codes as byte strings → integer ids (vectorised: np.unique over fixed-width void views)
        word_bytes = _row_keys(np.packbits(E[:, J] > 0, axis=1))
        unit_bytes = _row_keys(unit_packed)
        uniq, word_cid = np.unique(word_bytes, return_inverse=True)
        pos = np.searchsorted(uniq, unit_bytes)
        pos_c = np.minimum(pos, len(uniq) - 1)
        found = uniq[pos_c] == unit_bytes
        # -1: not gated; -2: gated with a code that no word has (then never active, proven below)
        unit_cid = np.where(gated, np.where(found, pos_c, -2), -1).astype(np.int64)
        others = np.setdiff1d(np.arange(E.shape[1]), J)
        R1 = np.flatnonzero(reads)
        # the FF's units in code-id order (a sum over units is order-free, and so is its error bound): position
        # k of this order is unit order[k], and the candidate units of one code are a contiguous range of
        # positions. W1 and W2 (the model's largest matrices, |W| formed per slice) stay as they are, read
        # through ``order``; the per-unit vectors below are stored in this order
        order = np.argsort(unit_cid, kind="stable")
        ff2 = self.layers[0][2]
        unit_cid, gated, cap, code_abs, G = unit_cid[order], gated[order], cap[order], code_abs[order], G[order]
        code_terms, code_mag = code_terms[order], code_mag[order]
        Wo = _columns(ff1.W, others)[order]  # (q, |others|) W1's non-code columns, in this order
        return {
            "J": J,
            "others": others,
            "G": G,
            "cap": cap,
            "code_abs": code_abs,
            "code_terms": code_terms,
            "code_mag": code_mag,
            "gated": gated,
            "unit_cid": unit_cid,
            "word_cid": word_cid.astype(np.int64),
            "sorted_cid": unit_cid,
            "order": order,
            "b": ff1.b[order],
            "Wo": Wo,
            "absWo": np.abs(Wo),
            "Wo_nz": (Wo != 0.0).astype(np.float64),  # for exact counts of the non-zero weights per unit
            # coordinates the layer reads (a weight ≠ 0) and writes (a weight or bias ≠ 0)
            "R1": R1,
            # a token is non-zero on at most m (±1: |J|) code coordinates and the others of R1: when that is under a
            # quarter of R1, the batched layer gathers per code only the coordinates its tokens can be non-zero on
            "sparse_columns": 4 * ((m or len(J)) + len(np.setdiff1d(R1, J))) < len(R1),
            "R2": np.flatnonzero(np.any(ff2.W != 0.0, axis=1) | (ff2.b != 0.0)),
        }

    # ---------------------------------------------------------------- stages
    def check_length(self, n: int) -> None:
        """InputError unless sequences of length ``n`` fit the model's positional encoding, and the float64 sums of
        one radius (`radius_terms` plus n keys per attention layer) stay within RADIUS_SAFETY."""
        if self.P is not None and n > self.P.shape[0]:
            raise InputError(f"a sequence of length {n} exceeds the model's max_len {self.P.shape[0]}")
        terms = self.radius_terms + n * len(self.layers)
        if terms * U64 >= 0.5 or gamma(terms, U64) > (RADIUS_SAFETY - 1) / 2:
            raise InputError(
                f"the certificate's radii sum {terms:,} float64 terms (model widths"
                + (f" and sequences of length {n}" if n else "")
                + f"): more than its float64 safety margin covers (about {(RADIUS_SAFETY - 1) / 2 / U64:,.0f})"
            )

    def embed(self, ids: np.ndarray, out: tuple[np.ndarray, np.ndarray] | None = None):
        """ids (B, n) → x, r (B, n, d), written into ``out`` (two (B, n, d) float64 arrays) when given."""
        B, n = ids.shape
        x, r = out if out is not None else (np.empty((B, n, self.E.shape[1])), np.empty((B, n, self.E.shape[1])))
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= self.E.shape[0]):
            raise InputError(f"token ids must lie in [0, {self.E.shape[0]}), got {int(ids.min())}…{int(ids.max())}")
        np.take(self.E, ids, axis=0, out=x, mode="clip")  # ids checked above ("raise" with out= copies twice)
        r.fill(0.0)
        if self.P is None:
            return x, r
        self.check_length(n)
        x += self.P[:n]
        # e + p is exact wherever e or p is 0 for every word or position (radius 0 there); TwoSum on the other
        # coordinates only
        both = self.embed_overlap
        if len(both):
            eb = np.take(self.E, both, axis=1)[ids]
            pb = np.broadcast_to(np.take(self.P[:n], both, axis=1), eb.shape)
            exact = _exact_sum_mask(eb, pb, self.dtype)
            r[..., both] = np.where(exact, 0.0, self.u * np.abs(np.take(x, both, axis=-1)) * (1 + self.u))
        return x, r

    def ff_dense(self, x, r, hid: _Linear, out: _Linear):
        z, rz_prop, rz_round = self._preactivation_bounds(x, r, hid.W, hid.b, hid.absW)
        return self._ff_tail(x, r, z, rz_prop + rz_round, out.W, out.absW, out.b, rz_round, hid.W)

    def _ff_tail(self, x, r, z, rz, W2, absW2, b2, rz_round=None, W1=None):
        """Given pre-activations of the evaluated units: output y = x + W2 relu(z) + b2 and its radius."""
        live = ~((z + 2 * rz * RADIUS_SAFETY) <= 0)  # units that may be non-zero in some run (NaN: live)
        a = np.maximum(z, 0.0)
        A = np.where(live, np.maximum(z + 2 * rz, 0.0), 0.0)
        ra = np.where(live, rz, 0.0)
        prop = 0.0
        if rz_round is not None and W1 is not None:
            # Units ON in every run (ẑ − 2 r_z > 0) act linearly: their propagated input error is
            # |W2_on W1_on| r, not |W2_on| |W1_on| r (see _on_units_linear_error); only their rounding
            # r_round goes through |W2|. Used when few input coordinates carry an error (else: the old bound).
            Jr = np.flatnonzero(~(r.max(axis=0) <= 0) & np.any(W1 != 0, axis=0))  # (NaN: carries an error)
            if len(Jr) <= self.LINEAR_ON_MAX_COORDS:
                on = (z - 2 * rz * RADIUS_SAFETY) > 0
                ra = np.where(on, rz_round, ra)
                prop = self._on_units_linear_error(r, on, W1, W2, absW2, Jr)
        # terms per output coordinate c that can be non-zero: live units with W2[c, i] ≠ 0, and the bias b2_c
        # (a product W2[c, i]·a_i with W2[c, i] = 0 or a_i exactly 0 is an exact 0 and costs no rounding)
        nnz = live.astype(np.float64) @ (W2 != 0).T.astype(np.float64) + (b2 != 0)  # (T, d_out), exact
        nprod = nnz - (b2 != 0)
        o = a @ W2.T + b2
        ro_prop = ra @ absW2.T + prop + nprod * self.eta
        y, ry = self._residual(x, r, o, ro_prop, A @ absW2.T + np.abs(b2), nnz)
        if not np.isfinite(z.sum()):
            # a pre-activation the float64 reference could not form: a sum whose partial sums overflowed is ±∞ or
            # NaN whatever its exact value (an FMA with an infinite accumulator stays infinite), so z = −∞ may
            # stand for a large positive z that ReLU would pass; the token has no reference value from here on
            # (NaN, which `_quarantine` marks as lost)
            y[~np.isfinite(z).all(axis=-1)] = np.nan
        return y, ry

    LINEAR_ON_MAX_COORDS = 4

    @staticmethod
    def _on_units_linear_error(r, on, W1, W2, absW2, Jr):
        """Σ_j |Σ_{i ON} W2[:, i] W1[i, j]| r_j over the coordinates Jr (the only ones with r ≠ 0 read by W1).

        Proof. For a unit i with ẑ_i − 2 r_z,i > 0, both the exact z_i and every run's z_i are > 0 (each is
        within r_z,i of ẑ_i), so relu is the identity there and a_i,run − a_i,exact = z_i,run − z_i,exact =
        W1_i (x_run − x_exact) + δ_i with δ_i the run's rounding of the pre-activation sum, |δ_i| ≤ r_round,i.
        Summed with the W2 weights over the ON units: Σ_j (Σ_{i ON} W2[c, i] W1[i, j]) (x_run − x_exact)_j +
        Σ_i W2[c, i] δ_i, bounded by Σ_j |M_cj| r_j + |W2_on| r_round. Units that are live but not proven ON
        keep the 1-Lipschitz bound |W2| r_z. Coordinates with r_j = 0 contribute nothing. M is formed in
        float64: its rounding is below γ_{q+1}(2^-53) (|W2_on| |W1_on|), added as slack. (For a ramp pair,
        columns +σ and −σ with CTX weight 1 each, M_c,CTX = 0: the error of h cancels.)
        """
        prop = np.zeros((r.shape[0], W2.shape[0]))
        g64 = gamma(W1.shape[0] + 1, U64)
        for j in Jr:
            w = np.where(on, W1[:, j], 0.0)  # (T, units)
            M = w @ W2.T  # (T, d_out)
            prop += (np.abs(M) + g64 * (np.abs(w) @ absW2.T)) * r[:, j : j + 1]
        return prop

    def _residual(self, x, r, y, ry_prop, S, n):
        """x + y where y = Σ_i w_i t_i (+ b) is a sum of n terms with Σ|w_i t_i| + |b| ≤ S in every run.

        ``ry_prop`` bounds |y_run − y_exact| except the rounding of y's own sum (propagated input errors and
        underflow). Returns x + y and its radius, valid for both ways of evaluating it:

        * separately, fl(x + fl(Σ)): |fl(Σ) − Σ| ≤ γ_n S (Higham Lemma 3.1, any order), then the add rounds
          once more by ≤ u |x + ŷ| ≤ u (X + Y) with X, Y bounds on |x_run|, |y_run|; an add of an exact 0
          (X = 0 or Y = 0) is exact;
        * fused, a GEMM whose accumulator starts at x (``addmm(x, ·, ·)``, a residual epilogue): one sum of
          n + 1 terms x, w_1 t_1, …, b in some order, so |fl − (x + Σ)| ≤ γ_{n+1}(|x| + S) ≤ γ_{n+1}(X + S);
          when X = 0 the extra term is an exact zero and the bound is γ_n S; with n = 0 (no term can be
          non-zero: S = 0) the accumulator is returned unchanged, exactly.

        The radius adds the larger of the two rounding bounds to r + ry_prop; both forms also cover FMA
        accumulation (one rounding instead of two).
        """
        u = self.u
        n = np.asarray(n)
        gS = _gamma_of_counts(n, u) * S  # γ_n S, the rounding of y's own sum (formed once, used three times)
        ry = ry_prop + gS
        X, Y = np.abs(x) + 2 * r, np.abs(y) + 2 * ry
        Xpos = X > 0
        separate = gS + np.where(Xpos & (Y > 0), u * (X + Y), 0.0)
        fused = np.where(Xpos & (n > 0), _gamma_of_counts(n, u, offset=1) * (X + S), gS)
        return x + y, r + ry_prop + np.maximum(separate, fused)

    def attention(self, x, r, att: _Attention, mask_causal: bool):
        """x, r (B, n, d) → x + SA(x) and its radius, written into x and r (only the coordinates some head writes
        change); returns a (B, n) flag of rows that are not certifiable."""
        u = self.u
        B, n, d = x.shape
        Hb_acc = []
        bad = np.zeros((B, n), dtype=bool)
        causal = bool(mask_causal)
        if causal:
            allowed = np.tril(np.ones((n, n), dtype=bool))[None]
        else:
            allowed = np.ones((1, n, n), dtype=bool)
        nkeys = allowed.sum(axis=-1)  # (1, n)
        scale_exact = is_power_of_two(att.scale)
        undefined = np.zeros((B, n), dtype=bool)
        heads = []
        for i in range(att.WQ.shape[0]):
            # q, k, v (B, n, s) as one product: each output row is its own dot product and radius. Formed per block:
            # the BLAS may round a row differently with the number of rows in a product, so forming them for a whole
            # pass at once would move the reference values (within their radii) and the certificate's figures
            s_dim = att.WQ.shape[1]
            qkv, rqkv = _matvec_bound(
                x,
                r,
                np.concatenate([att.WQ[i], att.WK[i], att.WV[i]]),
                np.concatenate([att.rQ[i], att.rK[i], att.rV[i]]),
                u,
                self.eta,
            )
            q, k, v = (qkv[..., j * s_dim : (j + 1) * s_dim] for j in range(3))
            rq, rk, rv = (rqkv[..., j * s_dim : (j + 1) * s_dim] for j in range(3))
            Qb, Kb, Vb = np.abs(q) + 2 * rq, np.abs(k) + 2 * rk, np.abs(v) + 2 * rv
            s_dim = q.shape[-1]
            exact = None
            # four (B, n, n) scratch arrays, reused from call to call (`_score_workspace`): S, then D = S − max in
            # place; rS; P; a temporary. Every value below is the one the plain expressions give (the same
            # operations on the same operands, in the same order, written into a buffer instead of a new array)
            S, rS, P, tmp = self._score_workspace(B, n)
            # rS = |β| (Σ_s rq Kb + Qb rk + γ_s Qb Kb + s η): the first and third sums as one product
            if s_dim == 1:  # one product per score, an outer product per sequence (einsum forms each product
                # once, as a broadcast multiply or a k = 1 matmul would, and is faster than both on short rows)
                np.einsum("bi,bj->bij", q[..., 0], k[..., 0], out=S)  # (B, n_q, n_k)
                if self.dtype == "float32":
                    exact = _exact_score_products(q, rq, k, rk, prod=S)
                np.einsum("bi,bj->bij", (rq + gamma(s_dim, u) * Qb)[..., 0], Kb[..., 0], out=rS)
                np.einsum("bi,bj->bij", Qb[..., 0], rk[..., 0], out=tmp)
            else:
                np.matmul(q, k.transpose(0, 2, 1), out=S)  # (B, n_q, n_k)
                np.matmul(rq + gamma(s_dim, u) * Qb, Kb.transpose(0, 2, 1), out=rS)
                np.matmul(Qb, rk.transpose(0, 2, 1), out=tmp)
            rS += tmp
            if att.scale != 1.0:  # x·1 = x exactly (±0, ±∞ and NaN included)
                S *= att.scale
            rS += s_dim * self.eta
            if abs(att.scale) != 1.0:
                rS *= abs(att.scale)
            if exact is not None:
                np.copyto(rS, 0.0, where=exact)
            if not scale_exact:  # the run's own scale (`_run_scale`): one rounding of the product
                np.abs(S, out=tmp)
                tmp += rS
                tmp *= u
                rS += tmp  # rS + u (|S| + rS)
            rS += self.eta  # scaling (even by 2^k) may underflow
            # D = s − max over the allowed keys (≤ 0); P = exp(D) / Σ exp(D); masked keys: weight exactly 0 and,
            # below, D = 0 and rS = 0, so they add nothing to the maxima that follow
            if s_dim == 1:  # the row's extreme scores from the keys' extremes (`_score_row_extremes`)
                Smax, Smin = _score_row_extremes(q[..., 0], k[..., 0], att.scale, causal)
            else:
                Smax = (np.where(allowed, S, -np.inf) if causal else S).max(axis=-1)
                Smin = None
            if causal:
                np.copyto(S, -np.inf, where=~allowed)
            S -= Smax[..., None]
            D = S  # S is not read again
            np.exp(D, out=P)
            P /= P.sum(axis=-1, keepdims=True)  # (B, n, n)
            if causal:
                np.copyto(D, 0.0, where=~allowed)
                np.copyto(rS, 0.0, where=~allowed)
            rSmax = _row_max(rS)  # (B, n)
            # T_j = max − s_j + 4 max rS ≥ 0 (over allowed keys); ρ = max_j (2 rS_j + u T_j) + exp error
            # min_j D_j = fl(min s − max s) (x ↦ fl(x − c) is monotone; ≤ 0, so the masked keys' 0 does not change it)
            Dmin = D.min(axis=-1) if Smin is None else Smin - Smax  # (B, n)
            Tmax = 4 * rSmax - Dmin
            # Dmin is finite iff every allowed score and the row's maximum are (NaN propagates through the min;
            # a weight exp(D)/Σ with D ≤ 0 and a term exp(0) = 1 in Σ is then finite too): a row where it is
            # not has no reference weights, see below. A score whose sum overflowed in the reference is ±∞
            # whatever its exact value (−∞ may stand for a large positive score and give its key weight 0)
            undefined |= ~np.isfinite(Dmin)
            D *= -u
            np.multiply(rS, 2, out=tmp)
            D += tmp
            rho = _row_max(D) + 4 * u * rSmax + exp_relative_error(u, self.exp_ulps)  # (B, n)
            del D, S, rS, tmp
            # margin for kernels that form exp(s − max − log Σ) instead of dividing: u (log n + 2) more
            rho = rho + u * (np.log(nkeys) + 2.0)
            # every exp(s − max) AND every weight exp(·)/Σ (Σ ≤ nkeys) must stay normal for the relative bounds
            bad |= ~((Tmax + rho + np.log(nkeys)) <= exp_underflow_threshold(self.dtype))  # (NaN: flagged)
            g = gamma(np.maximum(nkeys - 1, 1), u)  # (1, n)
            # e^{2ρ}(1+u)²/((1−u)(1−γ)) − 1, via expm1/log1p: in float64 (1 + 2^-53) rounds to 1
            eps_p = np.expm1(2 * rho + 2 * np.log1p(u) - np.log1p(-u) - np.log1p(-g))  # (B, n)
            PV = (1 + eps_p)[..., None] * (P @ Vb)  # bound on Σ p_exact |v|   (B, n, s)
            h = P @ v
            rh = (
                eps_p[..., None] * PV
                + (1 + eps_p)[..., None] * (P @ rv)
                + gamma(nkeys, u)[..., None] * (1 + eps_p[..., None]) * PV
                + nkeys[..., None] * self.eta
            )
            heads.append((h, rh))
            Hb_acc.append(np.abs(h) + 2 * rh)
        # update = Σ_i W_O^i h_i  (einsum over heads and s: h·s terms per output coordinate)
        hs_count = ((att.WO != 0) | (att.rO != 0)).sum(axis=(0, 2))  # (d,) products that can be non-zero
        # coordinates no head writes (hs_count 0) pass through exactly: x + 0 with radius r (`_residual` with
        # no term that can be non-zero); the update and its bound are formed on the written ones only
        W = np.flatnonzero(hs_count)
        upd = np.zeros((B, n, len(W)))
        rupd_lin = np.zeros_like(upd)
        rounding = np.zeros_like(upd)
        for i, (h, rh) in enumerate(heads):
            WO, rO = att.WO[i][W], att.rO[i][W]  # (|W|, s)
            upd += h @ WO.T
            rupd_lin += rh @ np.abs(WO).T + Hb_acc[i] @ rO.T
            rounding += Hb_acc[i] @ (np.abs(WO) + rO).T
        # update = Σ W_O h over h·s terms per coordinate; residual x + update, possibly fused (see _residual)
        x[..., W], r[..., W] = self._residual(
            x[..., W], r[..., W], upd, rupd_lin + hs_count[W] * self.eta, rounding, hs_count[W]
        )
        if undefined.any():
            # a row whose softmax weights or allowed scores are not finite (its scores overflowed in the reference,
            # or fl32(β) = ∞) has no reference value, even where W_O = 0 drops its h: NaN, which `_quarantine`
            # marks as lost
            x[undefined] = np.nan
            bad |= undefined
        return bad

    def readout_bound(self, y, ry):
        """Logits L = y Wᵀ + b and their radius, reading only the coordinates the readout weighs (every other
        product is an exact zero)."""
        ro = self.readout
        cols = self.readout_cols
        W, absW = ro.W[:, cols], ro.absW[:, cols]
        if len(cols) < y.shape[-1]:
            y, ry = np.take(y, cols, axis=-1), np.take(ry, cols, axis=-1)
        Y = np.abs(y) + 2 * ry
        L = y @ W.T + ro.b
        rL = ry @ absW.T + gamma(np.maximum(ro.terms, 1), self.u) * (Y @ absW.T + np.abs(ro.b)) + ro.terms * self.eta
        return L, rL

    # ---------------------------------------------------------------- first FF, gated fast path
    def ff_gated(self, x, r, ids, hid: _Linear, out: _Linear, stats=None, counters=None):
        """x, r (T, d) flattened tokens of a chunk, ids (T,) token ids; ``stats``: `_column_stats` of these x, r
        if already formed (else formed here). The output and its radius are written into x and r (every token
        once, each read before it is written) and returned. ``counters`` (a dict), when given, keeps in
        ``"dense_units"`` the largest number of units a call evaluated for every token (units not proven off).

        **Lemma (a gated unit is off for the other codes).** Let unit i be gated (`_detect_gate`) and t a token of
        these x with code c ≠ the unit's code. If ``upper_i + (r_i + slack_i)·RADIUS_SAFETY ≤ 0`` (below), then
        z_i(t) ≤ 0 in every run and in the exact model, so ReLU gives an exact 0 and W2·0 adds exact zeros (no
        value, no rounding): the unit may be skipped for t.

        *Proof.* Write z = Σ_{j∈J} W1_ij x_j + Σ_{j∈O} W1_ij x_j + b1_i (J the code coordinates, O the others).
        On J, x is exactly the word's code c in every run and in the exact model (the structure `_detect_gate`
        checks: the embedding holds c there, the positional encoding and every row of W_O are 0).

        1. Exact value: Σ_J W1_ij c_j ≤ cap_i (a ±1 code differing in ≥ 1 digit; an m-hot code with a one outside
           the unit's ones, or a one the complement unit weighs, see `_detect_gate`), and each x_exact,j of O
           lies in the box [lo_j, hi_j] (x̂ − r, x̂ + r over the tokens), so
           z_exact ≤ upper_i = cap_i + Σ_O max(W1_ij, 0) hi_j + Σ_O min(W1_ij, 0) lo_j + b1_i.
        2. Run error: z_run − z_exact = Σ_O W1_ij (x_run − x_exact)_j + δ (on J both are c): the first term
           is ≤ |W1_iO| Mr_O (Mr the column maxima of r; the reference's radius on J, 0 by the same structure,
           is added as Σ_J |W1_ij| · max_J Mr when it is not). δ is the rounding of the run's sum of products
           and bias, in any order, FMA or not: Higham Lemma 3.1 (and its dot-product form, §3.1) in the
           standard model with u of the dtype, |δ| ≤ γ_n Σ|terms| with n the number of terms that can be
           non-zero, plus η per product for gradual underflow (Higham §2.1; ``underflow_eta``). A product with
           an exact zero factor is an exact ±0, and adding it leaves every partial sum unchanged, so only
           terms that can be non-zero *for this token* count: on J the products W1_ij c_j with c_j ≠ 0, at most
           code_terms_i = min(ones, #{j∈J : W1_ij ≠ 0}) of them (every word's code has ``ones`` non-zero
           coordinates: m for an m-hot code, |J| for ±1), each |W1_ij c_j| ≤ max_J |W1_ij| (|c_j| ≤ 1), in all
           ≤ code_mag_i; on O those with W1_ij ≠ 0 and Mx_j > 0 (Mx_j = max_t |x̂_tj| + 2 r_tj = 0: x_j is an
           exact 0 for every token here), each ≤ |W1_ij| Mx_j since |x_run| ≤ |x̂| + 2r; and the bias. So
           |z_run − z_exact| ≤ r_i = |W1_iO| Mr_O + γ_{n_i}(u) S_i + n_i η, S_i = code_mag_i + |W1_iO| Mx_O + |b1_i|.
           (Counting per token is what makes the proof work for codes with many coordinates, e.g. 1-hot: the
           chunk's Mx is 1 on every code coordinate, but one token's code has only m non-zero ones, so the
           sum a run actually rounds has a handful of terms, not |J|.)
        3. float64: r_i is a sum of non-negative terms (covered by RADIUS_SAFETY, module header); upper_i is a
           signed sum of ≤ |O| + 3 terms, computed in float64 within γ_{d+3}(2^-53)(|cap_i| + |W1_iO|(|lo| + |hi|)
           + |b1_i|) ≤ slack_i (|cap_i| ≤ Σ_J |W1_ij|, S_i added as further slack).
        Hence z_run ≤ z_exact + r_i ≤ upper_i + r_i ≤ 0 in every run (and z_exact ≤ 0). ∎
        """
        g = self.gate
        others, J = g["others"], g["J"]
        if stats is None:
            stats = _column_stats(x, r)
        Mx, Mr, lo, hi = stats
        lo, hi = lo[others], hi[others]  # box of the chunk over the non-code coordinates
        uorder, b1, Wo, aWo = g["order"], g["b"], g["Wo"], g["absWo"]  # units in code order (see _detect_gate)
        upper = g["cap"] + np.maximum(Wo, 0.0) @ hi + np.minimum(Wo, 0.0) @ lo + b1  # bound on z_exact (other codes)
        Mxo = Mx[others]
        rz = aWo @ Mr[others]  # propagated input error (step 2 of the lemma)
        mrJ = float(Mr[J].max(initial=0.0))
        if not mrJ <= 0.0:  # a radius on the code coordinates (NaN included: then never proven)
            rz = rz + g["code_abs"] * mrJ
        n = g["code_terms"] + g["Wo_nz"] @ (Mxo > 0.0) + (b1 != 0.0)  # terms that can be non-zero, exact counts
        S = g["code_mag"] + aWo @ Mxo + np.abs(b1)
        rz = rz + _gamma_of_counts(n, self.u) * S + n * self.eta
        slack = gamma(hid.W.shape[1] + 3, U64) * (g["code_abs"] + S + aWo @ (np.abs(lo) + np.abs(hi)) + np.abs(b1))
        # gated units proven off for every token whose code differs from theirs; all others are dense
        proven_off = g["gated"] & (upper + (rz + slack) * RADIUS_SAFETY <= 0)
        dense_units = np.flatnonzero(~proven_off)
        if counters is not None:
            counters["dense_units"] = max(counters.get("dense_units", 0), len(dense_units))
        # tokens grouped by code id; gated units with the same code are candidates
        cid = g["word_cid"][ids]
        # coordinates outside R2 (no unit writes them, zero bias) pass through exactly: x + 0, radius r
        # (`_residual` with no term that can be non-zero); the batched codes write R2 only
        yv, ry = x, r  # in place: each token's slice is read (gathered) before its result is written
        order = np.argsort(cid, kind="stable")
        cids_sorted = cid[order]
        starts = np.flatnonzero(np.r_[True, cids_sorted[1:] != cids_sorted[:-1]])
        ends = np.r_[starts[1:], len(order)]
        codes = cids_sorted[starts]
        lo_u = np.searchsorted(g["sorted_cid"], codes, side="left")
        hi_u = np.searchsorted(g["sorted_cid"], codes, side="right")
        # a code whose units are all proven off for other codes (and no dense unit): its tokens need only
        # its own units. Such codes are evaluated together in batches (see _ff_batched)
        not_off = np.r_[0, np.cumsum(~proven_off)]
        own_only = (hi_u > lo_u) & (len(dense_units) == 0) & (not_off[hi_u] == not_off[lo_u])
        no_unit_tokens = []
        for i in np.flatnonzero(~own_only):
            toks = order[starts[i] : ends[i]]
            if hi_u[i] == lo_u[i]:
                no_unit_tokens.append(toks)
                continue
            units = np.arange(lo_u[i], hi_u[i])
            sel = np.concatenate([units[proven_off[units]], dense_units])  # the rest are in dense_units
            # tokens in slices of ≤ UNIT_PAIRS (token, unit) pairs: every bound of _ff_units is per token or
            # taken over the tokens of its call, so any split is as sound
            step = max(1, self.UNIT_PAIRS // max(len(sel), 1))
            for k in range(0, len(toks), step):
                t = toks[k : k + step]
                yv[t], ry[t] = self._ff_units(x[t], r[t], uorder[sel], hid, out)
        if no_unit_tokens:
            toks = np.concatenate(no_unit_tokens)
            if len(dense_units):
                yv[toks], ry[toks] = self._ff_units(x[toks], r[toks], uorder[dense_units], hid, out)
            elif out.b[g["R2"]].any():  # no unit at all: `_ff_units` with none, y = x + b2 on R2 (the rest passes
                # through; with b2 = 0 everywhere all of it does: x + 0 with radius r, already in place)
                R2 = g["R2"]
                at2 = _rows_cols(toks, R2)
                xo, ro, b2 = x[at2], r[at2], out.b[R2]
                nb2 = np.broadcast_to((b2 != 0).astype(np.float64), xo.shape)
                yv[at2], ry[at2] = self._residual(
                    xo, ro, np.broadcast_to(b2, xo.shape), np.zeros_like(xo), np.broadcast_to(np.abs(b2), xo.shape), nb2
                )
        fast = np.flatnonzero(own_only)
        if len(fast):
            self._ff_batched(x, r, order, starts[fast], ends[fast], lo_u[fast], hi_u[fast], hid, out, yv, ry)
        return yv, ry

    # (token, unit) pairs of one call for a code with many tokens (bounds the memory: ~20 such arrays)
    UNIT_PAIRS = 1 << 20
    # (token, unit) pairs of one batched evaluation, padding included (its ~20 temporaries: 4 MB each)
    BATCH_PAIRS = 1 << 19

    def _ff_batched(self, x, r, order, starts, ends, lo_u, hi_u, hid: _Linear, out: _Linear, yv, ry):
        """Codes i (tokens ``order[starts[i]:ends[i]]``, units ``lo_u[i]:hi_u[i]``) whose tokens read only their own
        code's units, evaluated many codes at a time: codes with similar token and unit counts (both within a
        factor √2) are stacked into one batch of products ``(codes, tokens, d) @ (codes, d, units)``, padded to the
        batch's largest counts.

        The result is `_ff_units` per code. Padding: a padded token slot repeats a token of its own code (every
        per-code quantity below, a maximum or an "any" over the code's tokens, is unchanged by a repeat; the
        slot's outputs are discarded); a padded unit slot has an all-zero weight row, bias and output column, so
        its pre-activation and radius are exactly 0, it is not live, and every sum over units only gains exact
        zero terms (a run's sum, and its rounding count, is that of the code's own units). The per-code
        quantities of `_ff_tail` (the error-carrying coordinates Jr with their ≤ LINEAR_ON_MAX_COORDS test, γ of
        the unit count in `_on_units_linear_error`) are taken per code. A code with more than UNIT_PAIRS
        (token, unit) pairs is split into slices of its tokens: every per-code quantity is a bound over the
        tokens it is given, so it stays sound per slice.
        """
        size = hi_u - lo_u
        step = np.maximum(1, self.UNIT_PAIRS // np.maximum(size, 1))
        if ((ends - starts) > step).any():
            pieces = [np.arange(s, e, k) for s, e, k in zip(starts.tolist(), ends.tolist(), step.tolist(), strict=True)]
            rep = np.asarray([len(p) for p in pieces])
            starts = np.concatenate(pieces)
            ends = np.minimum(starts + np.repeat(step, rep), np.repeat(ends, rep))
            lo_u, hi_u = np.repeat(lo_u, rep), np.repeat(hi_u, rep)
        T, K = ends - starts, hi_u - lo_u  # both ≥ 1
        tb = np.ceil(2 * np.log2(T)).astype(np.int64)  # buckets of counts within a factor √2
        kb = np.ceil(2 * np.log2(K)).astype(np.int64)
        perm = np.lexsort((T, K, kb, tb))
        key = tb[perm] * (int(kb.max()) + 1) + kb[perm]
        cuts = np.flatnonzero(np.r_[True, key[1:] != key[:-1], True]).tolist()
        R1 = self.gate["R1"]
        xr1 = (np.take(x, R1, axis=1), np.take(r, R1, axis=1))  # (T, |R1|): rows gathered per batch
        if self.gate["sparse_columns"]:  # X = |x̂| + 2r > 0: the coordinate can be non-zero in a run
            xr1 += ((np.abs(xr1[0]) + 2 * xr1[1]) > 0,)
        for a, b in itertools.pairwise(cuts):
            idx = perm[a:b]
            per = max(1, self.BATCH_PAIRS // (int(T[idx].max()) * int(K[idx].max())))
            for s in range(0, len(idx), per):
                p = idx[s : s + per]
                self._ff_batch(x, r, xr1, order, starts[p], T[p], lo_u[p], K[p], hid, out, yv, ry)

    def _ff_batch(self, x, r, xr1, order, start, T, lo, K, hid: _Linear, out: _Linear, yv, ry):
        """One batch of `_ff_batched`: codes with tokens ``order[start[i] : start[i] + T[i]]`` and units
        ``lo[i] : lo[i] + K[i]``; writes the output coordinates the layer can change (``gate["R2"]``). ``xr1``:
        the pass's x[:, R1], r[:, R1] (and X[:, R1] > 0, X = |x̂| + 2r, with ``gate["sparse_columns"]``).

        Only the coordinates R1 that some unit of the layer reads enter the pre-activation products (the others
        are multiplied by exact zero weights, and ``n`` counts non-zero weights only). With a wide code
        (``gate["sparse_columns"]``: a token can be non-zero on under a quarter of R1) only those, per code,
        where some token of the code has X > 0: where every token has X = |x̂| + 2r = 0, x is an
        exact 0 in every run, so each product there is an exact ±0 in the run and in the reference (adding it
        leaves a partial sum unchanged), its radius terms |W1| X and |W1| r are exact zeros, ``n`` never counted it
        (X = 0 for every token: both of its forms below give the per-token counts of the full rows) and it
        carries no input error (not in the error-carrying coordinates Jr). The kept coordinates of a
        code fill its first slots of a padded column axis (in increasing order); a padded column slot has a zero
        weight and x = r = 0, so it adds exact zeros only (as a padded unit slot does). With a wide code (e.g.
        1-hot: a token has one non-zero code coordinate of thousands) this keeps a handful of columns. Values are the ones of
        `_ff_units` up to the summation order inside the products (a float64 run of the same sums: within the
        radius of the exact value, whose bound does not depend on the order); radii are `_ff_units`'s bounds for
        each code on its own (what they take over tokens, e.g. the error-carrying coordinates, is taken over the
        code's tokens, so they can be smaller than one call over many codes would give), and their own float64
        rounding is covered by RADIUS_SAFETY. Two simplifications are exact:

        * ``A = max(ẑ + 2 r_z, 0)`` needs no "live" mask: a unit that is not live has
          ``fl(ẑ + fl(2·RADIUS_SAFETY·r_z)) ≤ 0``, and by the monotonicity of rounding
          ``fl(ẑ + fl(2 r_z)) ≤`` that, so the maximum is 0 there (as is ``max(ẑ, 0)``);
        * a padded unit slot (zero weights, zero bias) has ``ẑ = 0`` and ``r_z = 0`` exactly: never live.
        """
        g = self.gate
        R1, R2 = g["R1"], g["R2"]
        u, eta = self.u, self.eta
        Tm, Km = int(T.max()), int(K.max())
        at, ak = np.arange(Tm), np.arange(Km)
        toks = order[start[:, None] + np.minimum(at, T[:, None] - 1)]  # (nb, Tm): padding repeats the last token
        valid = ak < K[:, None]  # (nb, Km)
        units = g["order"][lo[:, None] + np.minimum(ak, K[:, None] - 1)]  # (nb, Km) unit indices
        if g["sparse_columns"]:
            # per code, the coordinates of R1 where one of its tokens can be non-zero: slots [0, cnt) of C columns
            need = xr1[2][toks].any(axis=1)  # (nb, |R1|)
            cnt = need.sum(axis=1)
            rows, cols = np.nonzero(need)  # row-major: each code's coordinates in increasing order
            slot = np.arange(len(rows)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
            colidx = np.zeros((len(T), max(int(cnt.max()), 1)), dtype=np.intp)  # (nb, C) positions in R1
            colidx[rows, slot] = cols
            vcol = np.zeros(colidx.shape, dtype=bool)
            vcol[rows, slot] = True
            del need, rows, cols, slot
            xb = xr1[0][toks[:, :, None], colidx[:, None, :]]  # (nb, Tm, C): x[:, R1] of the batch's tokens
            rb = xr1[1][toks[:, :, None], colidx[:, None, :]]
            pad = np.broadcast_to(~vcol[:, None, :], xb.shape)
            xb[pad], rb[pad] = 0.0, 0.0  # padded column slots: exact zeros
            W1 = hid.W[units[:, :, None], R1[colidx][:, None, :]]  # (nb, Km, C), a gathered copy
            W1[np.broadcast_to(~vcol[:, None, :], W1.shape)] = 0.0
        else:  # C = |R1|: every coordinate the layer reads
            xb, rb = xr1[0][toks], xr1[1][toks]  # (nb, Tm, |R1|): x[:, R1], r[:, R1] of the batch's tokens
            W1 = np.take(hid.W, units, axis=0)[..., R1]  # (nb, Km, |R1|), a gathered copy
        W1[~valid] = 0.0  # padded units: all-zero rows
        W1t = np.ascontiguousarray(W1.transpose(0, 2, 1))  # (nb, C, Km)
        aW1t = np.abs(W1t)
        W2T = out.W[R2[None, None, :], units[..., None]]  # (nb, Km, |R2|)
        W2T[~valid] = 0.0
        aW2T = np.abs(W2T)
        b1 = hid.b[units] * valid  # (nb, Km): padded slots 0
        b2 = out.b[R2]
        has_b1 = bool(b1.any())
        X = np.abs(xb)
        X += 2 * rb
        nz = W1 != 0
        read = nz.any(axis=1)  # (nb, C) coordinates the code's units read
        if ((X > 0) | ~read[:, None, :]).all():  # n of _preactivation_bounds: every unit's term count
            n = (nz.sum(axis=2) + (b1 != 0)).astype(np.float64)[:, None, :]  # (nb, 1, Km)
        else:  # exact counts per (token, unit)
            n = (X > 0).astype(np.float64) @ nz.transpose(0, 2, 1).astype(np.float64) + (b1 != 0)[:, None, :]
        # rounding of the pre-activation sum: γ_n (Σ_j |W1_ij| X_tj + |b1_i|) + n η
        rz_round = X @ aW1t  # (nb, Tm, Km)
        del X
        if has_b1:
            rz_round += np.abs(b1)[:, None, :]
        rz_round *= _gamma_of_counts(n, u)
        rz_round += n * eta
        rz = rb @ aW1t  # propagated input error |W1| r
        rz += rz_round
        z = xb @ W1t
        if has_b1:
            z += b1[:, None, :]
        # live: fl(ẑ + fl(2·RADIUS_SAFETY·r_z)) > 0, i.e. ẑ > −fl(2·RADIUS_SAFETY·r_z) (the sum of two floats is
        # positive iff its rounding is); ON: ẑ − 2·RADIUS_SAFETY·r_z > 0 likewise
        slack = rz * (2 * RADIUS_SAFETY)
        on = z > slack  # ON in every run (implies live)
        np.negative(slack, out=slack)
        live = ~(z <= slack)  # units that may be non-zero in some run (NaN: live)
        del slack
        # per code: coordinates with an input error read by its units (Jr of _ff_tail)
        Jr = ~(rb <= 0).all(axis=1) & read  # (nb, C) (NaN: carries an error)
        linear = Jr.sum(axis=1) <= self.LINEAR_ON_MAX_COORDS
        if not linear.all():
            on &= linear[:, None, None]
        # terms per output coordinate that can be non-zero: live units with W2 ≠ 0 (exact counts)
        nz2 = W2T != 0  # (nb, Km, |R2|)
        if (nz2 | ~valid[..., None]).all():  # every unit writes every coordinate of R2: a count of live units
            nnz = np.repeat(np.count_nonzero(live, axis=2)[..., None].astype(np.float64), len(R2), axis=2)
        else:
            nnz = live.astype(np.float64) @ nz2.astype(np.float64)  # (nb, Tm, |R2|)
        ro_prop = nnz * eta
        nnz += b2 != 0
        # ra: the radius through |W2| of each unit: r_z if live, only its rounding if ON (see _on_units_linear_error)
        ra = np.where(on, rz_round, rz)
        ra *= live  # 0 where not live (ON implies live)
        del rz_round
        if linear.any():  # ON units: Σ_j |Σ_{i ON} W2[:, i] W1[i, j]| r_j, with the float64 slack of that sum
            onf = on.astype(np.float64)
            g64 = _gamma_of_counts(K + 1, U64)[:, None, None]  # γ of each code's unit count (`gamma` by lookup)
            for j in np.flatnonzero(Jr[linear].any(axis=0)):
                # W1[i, j]·W2[c, i] per unit, rounded once as in the per-pair product; its sum over the ON units
                # (a sum of ≤ K terms: with that product rounding, below γ_{K+1} Σ |W1||W2|)
                V = W1[:, :, j, None] * W2T  # (nb, Km, |R2|)
                M = onf @ np.concatenate([V, np.abs(V)], axis=2)  # (nb, Tm, 2|R2|)
                prop = np.abs(M[..., : len(R2)])
                prop += g64 * M[..., len(R2) :]
                prop *= rb[:, :, j : j + 1]
                ro_prop += prop
        del on, live
        rz *= 2
        rz += z
        np.maximum(rz, 0.0, out=rz)  # A = max(ẑ + 2 r_z, 0): 0 where not live (see above)
        S = rz @ aW2T
        S += np.abs(b2)
        np.maximum(z, 0.0, out=z)  # relu(ẑ): 0 where not live
        o = z @ W2T
        o += b2
        ro_prop += ra @ aW2T
        del z, rz, ra
        keep = at[None, :] < T[:, None]
        tk = toks[keep]
        at2 = _rows_cols(tk, R2)
        xo, ro = x[at2], r[at2]
        y, ryb = self._residual(xo, ro, o[keep], ro_prop[keep], S[keep], nnz[keep])
        yv[at2], ry[at2] = y, ryb

    def _ff_units(self, x, r, units, hid: _Linear, out: _Linear):
        """The feed-forward layer restricted to ``units`` (indices of W1's rows) for tokens x, r (T, d)."""
        W1, b1, aW1 = hid.W[units], hid.b[units], hid.abs_rows(units)
        z, rz_prop, rz_round = self._preactivation_bounds(x, r, W1, b1, aW1)
        return self._ff_tail(x, r, z, rz_prop + rz_round, out.W[:, units], out.abs_cols(units), out.b, rz_round, W1)

    def _preactivation_bounds(self, x, r, W1, b1, aW1):
        """z = x W1ᵀ + b1 with its radius split into the propagated input error |W1| r and the rounding.

        Rounding (Higham Lemma 3.1, any order): γ_n Σ_j |W1_ij x_j| + n·η with n the number of terms that
        can be non-zero **for this token**: n_ti = #{j : W1_ij ≠ 0 and X_tj > 0} + [b1_i ≠ 0]. A coordinate
        with X_tj = |x̂_tj| + 2 r_tj = 0 is exactly 0 in every run, so its product is an exact ±0 and adding
        it leaves every partial sum unchanged: the run's sum equals the same-order sum of the other terms.
        """
        X = np.abs(x) + 2 * r
        z = x @ W1.T + b1
        nz = W1 != 0
        read = nz.any(axis=0)
        if (X[:, read] > 0).all():  # every coordinate a unit reads can be non-zero: n is the unit's term count
            n = (nz.sum(axis=1) + (b1 != 0)).astype(np.float64)[None, :]  # (1, units), the same counts
        else:
            n = (X > 0).astype(np.float64) @ nz.T.astype(np.float64) + (b1 != 0)  # (T, units), exact
        g1 = _gamma_of_counts(n, self.u)
        rz_round = g1 * (X @ aW1.T + np.abs(b1)) + n * self.eta
        return z, r @ aW1.T, rz_round

    # ---------------------------------------------------------------- whole forward
    def forward_bounds(self, ids: np.ndarray):
        """ids (B, n) → logits L, radii rL (B, n, C) and a (B, n) flag of uncertifiable rows; where the float64
        reference itself is not finite (or was lost to a value that was not), L is NaN and rL ∞ (and the row is
        flagged)."""
        return self.forward_bounds_groups([ids])[0]

    # score elements (sequences × n × n) of one attention evaluation (its ~15 temporaries: 2 MB each)
    ATTENTION_ELEMENTS = 1 << 18

    def forward_bounds_groups(
        self, groups: list[np.ndarray], counters: dict[str, int] | None = None
    ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Several batches of token ids, each (B_g, n_g) of one length → per batch (L, rL, bad) as in
        `forward_bounds`.

        Attention runs per batch, in blocks of at most ATTENTION_ELEMENTS scores (a row's bound involves its own
        sequence only); every later stage is per token and runs once over all batches' tokens together. What
        the token-wise stages take over the tokens of a call is a bound over those tokens (the gated layer's
        box, the per-code error coordinates, the coarse overflow check), so it is as sound over the union. An
        overflow found in a block of sequences flags that block; one found in a token-wise stage flags every
        batch. After every stage a token whose value or radius is not finite is flagged and zeroed
        (`_quarantine`), so no bound over the union sees it. A bound that overflows is ∞ or NaN and is
        handled as such (flagged, never certified): numpy's overflow warnings are silenced here. ``counters``: see
        `ff_gated`.
        """
        if not groups:
            return []
        L, rL, bad = self.forward_bounds_flat(groups, counters)
        cut = np.cumsum([ids.size for ids in groups])[:-1]
        return [
            (Lg.reshape(*ids.shape, -1), rLg.reshape(*ids.shape, -1), b.reshape(ids.shape))
            for Lg, rLg, b, ids in zip(np.split(L, cut), np.split(rL, cut), np.split(bad, cut), groups, strict=True)
        ]

    def forward_bounds_flat(
        self, groups: list[np.ndarray], counters: dict[str, int] | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """`forward_bounds_groups` with the batches' tokens in one flat order (batch by batch, each row-major):
        L, rL (T, C) and the flags (T,)."""
        if not groups:
            C = self.readout.W.shape[0]
            return np.zeros((0, C)), np.zeros((0, C)), np.zeros(0, dtype=bool)
        with np.errstate(over="ignore", invalid="ignore"):
            return self._forward_bounds_flat(groups, counters)

    def _forward_bounds_flat(
        self, groups: list[np.ndarray], counters: dict[str, int] | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        d = self.cfg.d_model
        check = not self.overflow_excluded  # per-batch overflow checks, unless excluded for the whole model
        sizes = [ids.size for ids in groups]
        cut = np.cumsum(sizes)[:-1]
        # every group's tokens in one (T, d) buffer; the groups' (B, n, d) arrays are views of it, updated in place
        xf, rf = self._workspace(sum(sizes), d)

        def views(xf, rf):
            xs = [x.reshape(*ids.shape, d) for x, ids in zip(np.split(xf, cut), groups, strict=True)]
            rs = [r.reshape(*ids.shape, d) for r, ids in zip(np.split(rf, cut), groups, strict=True)]
            return xs, rs

        xs, rs = views(xf, rf)
        badf = np.zeros(sum(sizes), dtype=bool)  # per token: not certifiable; the groups' (B, n) flags are views
        bads = [b.reshape(ids.shape) for b, ids in zip(np.split(badf, cut), groups, strict=True)]
        # per token: its reference value was lost (zeroed by `_quarantine`, or it reads a key that was)
        lostf = np.zeros(sum(sizes), dtype=bool)
        losts = [b.reshape(ids.shape) for b, ids in zip(np.split(lostf, cut), groups, strict=True)]
        flags = []
        for gi, ids in enumerate(groups):
            x, r = self.embed(ids, out=(xs[gi], rs[gi]))
            flag = np.zeros(ids.shape[0], dtype=bool)  # per sequence: some run might overflow
            if check:
                flag[:] = self._may_overflow(x, r, "embed")
            if self.input_ff is not None:
                if check:
                    flag |= self._may_overflow(x, r, "ff", self.input_ff)
                xs[gi][...], rs[gi][...] = self._ff_dense_chunked(x, r, *self.input_ff)
            del x, r
            flags.append(flag)
        _quarantine(xf, rf, badf, lostf)
        overflow = False
        for li, (att, hid, out) in enumerate(self.layers):
            for gi, ids in enumerate(groups):
                B, n = ids.shape
                bad = bads[gi]
                # a flagged row's radius is not valid (or it was zeroed by `_quarantine`), and it is a key of every
                # later query that sees it
                for flagged in (bad, losts[gi]):  # a lost key's zeroed value also loses its queries' reference
                    if flagged.any():
                        if att.causal:
                            np.logical_or.accumulate(flagged, axis=1, out=flagged)
                        else:
                            flagged |= flagged.any(axis=1, keepdims=True)
                x, r = xs[gi], rs[gi]
                step = max(1, self.ATTENTION_ELEMENTS // max(n * n, 1))
                for s in range(0, B, step):
                    e = min(B, s + step)
                    if check:
                        flags[gi][s:e] |= self._may_overflow(x[s:e], r[s:e], "attention", att)
                    # a flagged row's exp(2ρ) may overflow: its radius is then ∞ or NaN, quarantined below
                    bad[s:e] |= self.attention(x[s:e], r[s:e], att, att.causal)  # in place
            _quarantine(xf, rf, badf, lostf)
            if li == 0 and self.gate is not None:
                # one pass over the tokens for the gated layer's box and the overflow check's maxima (the same
                # Mx); rows of W2 outside R2 are all zero (their |W2| X is exactly 0)
                stats = _column_stats(xf, rf)
                if check:
                    overflow |= self._stage_may_overflow(stats[0], "ff", (hid, out), out_rows=self.gate["R2"])
                ids = np.concatenate([ids.reshape(-1) for ids in groups])
                self.ff_gated(xf, rf, ids, hid, out, stats=stats, counters=counters)  # in place
            else:
                if check:
                    overflow |= self._may_overflow(xf, rf, "ff", (hid, out))
                xf, rf = self._ff_dense_chunked(xf[None], rf[None], hid, out)
                xf, rf = xf[0], rf[0]
                xs, rs = views(xf, rf)
            _quarantine(xf, rf, badf, lostf)
        del xs, rs
        if check:
            overflow |= self._may_overflow(xf, rf, "readout", self.readout)
        L, rL = self.readout_bound(xf, rf)
        # a bound that is not finite (a radius blown up in a row already flagged, or infinities meeting) never
        # certifies: such rows are flagged here rather than trusted to compare False
        L_nonfinite = ~np.isfinite(L).all(axis=-1)
        nonfinite = L_nonfinite | ~np.isfinite(rL).all(axis=-1)
        del xf, rf
        # where the reference's logits are not finite, or its value was lost upstream, they are unknown: NaN, with an
        # infinite radius (a zeroed token's logits are finite numbers that describe no run, and must not be read as
        # the reference's); a radius alone that is not finite leaves the reference's logits as they are
        lostf |= L_nonfinite
        if lostf.any():
            L[lostf], rL[lostf] = np.nan, np.inf
        # some run might overflow (a sequence's flag, the token-wise stages' one), or the bound is not finite
        flagf = np.concatenate([np.repeat(flag, ids.shape[1]) for flag, ids in zip(flags, groups, strict=True)])
        return L, rL, badf | flagf | overflow | nonfinite

    def _buffers(self, name: str, count: int, shape: tuple[int, ...], minimum: int) -> tuple[np.ndarray, ...]:
        """``count`` float64 arrays of ``shape``, views of buffers kept per thread under ``name`` and reused from call
        to call (grown to at least ``minimum`` elements, or the size asked for): a fresh array of these sizes comes
        from the operating system on every call and costs a page fault per 4 kB on first touch. The caller writes
        every entry before reading it. Per thread: a thread-based mapper's chunks run in one bounded model at once."""
        size = math.prod(shape)
        key = (name, threading.get_ident())
        bufs = self._ws.get(key)
        if bufs is None or bufs[0].size < size:
            bufs = self._ws[key] = tuple(np.empty(max(size, minimum)) for _ in range(count))
        return tuple(b[:size].reshape(shape) for b in bufs)

    def _workspace(self, T: int, d: int) -> tuple[np.ndarray, np.ndarray]:
        """Two (T, d) arrays for a pass's values and radii (`_buffers`), at least a full pass (PASS_ELEMENTS) so that
        the passes of a chunk, which are up to that size, reuse one pair instead of growing it."""
        return self._buffers("pass", 2, (T, d), PASS_ELEMENTS)

    def _score_workspace(self, B: int, n: int) -> tuple[np.ndarray, ...]:
        """Four (B, n, n) arrays for one attention evaluation's scores and their bounds (`_buffers`), at least one
        block (ATTENTION_ELEMENTS)."""
        return self._buffers("scores", 4, (B, n, n), self.ATTENTION_ELEMENTS)

    def _may_overflow(self, x, r, stage: str, params=None, out_rows=None) -> bool:
        """True unless every product and partial sum of ``stage`` stays below max/4 in any run (coarse: the
        batch's largest |input| per coordinate). Given finite inputs, each bound S = Σ|terms| also bounds
        every product and every partial sum (times 1 + γ < 2), in any order.

        ``stage == "ff"`` may be given ``out_rows``: the only rows of W2 and b2 that are not all zero (the others'
        bound is |x| alone)."""
        Xm = _column_stats(x.reshape(-1, x.shape[-1]), r.reshape(-1, r.shape[-1]))[0]  # (d,)
        return self._stage_may_overflow(Xm, stage, params, out_rows)

    def _stage_may_overflow(self, Xm, stage: str, params=None, out_rows=None) -> bool:
        """`_may_overflow` given Xm (d,), a bound on |x| per coordinate of the stage's input in every run, monotone
        in Xm. Called under ``np.errstate(over="ignore", invalid="ignore")`` (by `forward_bounds_groups` and the
        constructor): a size that overflows is ∞ or NaN and refused below, not a warning."""
        lim = float(np.finfo(np.float32 if self.dtype == "float32" else np.float64).max) / 4
        if stage == "embed":
            sizes = [Xm]
        elif stage == "attention":
            if not math.isfinite(params.scale):  # fl32(β) = ±∞: every score ∞ or NaN
                return True
            # the run forms each low-rank weight W = A·B itself: Σ|A||B| bounds its products and partial sums
            sizes = [Xm, np.array([2 * params.factor_abs])]
            for i in range(params.WQ.shape[0]):
                Q, K, V = (
                    (np.abs(W[i]) + R[i]) @ Xm
                    for W, R in ((params.WQ, params.rQ), (params.WK, params.rK), (params.WV, params.rV))
                )
                U = (np.abs(params.WO[i]) + params.rO[i]) @ (2 * V)  # |h| ≤ (1+ε)·max|v| < 2 max|v|
                sizes += [
                    params.WQ[i],
                    params.WK[i],
                    params.WV[i],
                    params.WO[i],
                    Q,
                    K,
                    V,
                    (Q @ K) * 2,  # the run forms q·k before scaling it (|β| < 1 would hide its overflow)
                    abs(params.scale) * (Q @ K) * 2,
                    params.WO.shape[0] * U + Xm,
                ]
        elif stage == "ff":
            hid, out = params
            Sh = hid.abs_matvec(Xm) + np.abs(hid.b)
            if out_rows is None:
                So = out.abs_matvec(2 * Sh) + np.abs(out.b) + Xm
            else:
                So = np.abs(out.b) + Xm
                So[out_rows] += np.abs(out.W[out_rows]) @ (2 * Sh)
            sizes = [Sh, So]
        else:
            sizes = [params.absW @ Xm + np.abs(params.b)]
        return not all(np.all(np.isfinite(v)) and np.max(np.abs(v), initial=0.0) <= lim for v in sizes)

    def _overflow_excluded(self) -> bool:
        """True if no run of the model in its dtype, on any token sequence of any length ≤ max_len, has a product
        or partial sum above max/4 of the dtype: then the per-batch overflow checks are not needed.

        Proof. Let X_s (d,) bound |x| per coordinate at the input of stage s in every run, for every token. Each
        stage's check (`_stage_may_overflow`, the one the per-batch check runs on the batch's own maxima) is
        monotone in X_s, so passing it with X_s covers every batch. X_s is carried forward in float64 (a
        relative error below 1e-15, inside the factors of 2 below), every bound counting ``(1 + γ) < 2`` for
        a rounded sum, a term count times ETA for underflow, and ``(1 + u) < 2`` for one more rounding:

        * embedding: |fl(e_w + p_k)| ≤ 2 (max_w |E_w| + max_k |P_k|);
        * the weights themselves: a low-rank map W = A·B is formed by the run in its dtype, each entry a sum of
          rank products, every one of them and every partial sum below 2 Σ_k |A_ik||B_kj|;
        * attention, head i: the run forms q·k and then scales it, so both |q·k| ≤ 2 Q_i K_i and |β| 2 Q_i K_i
          are bounded (with |β| < 1 the unscaled product is the larger; Q_i, K_i as V_i below);
          |v| ≤ V_i = 2 (|W_V^i| + r_V^i) X + d η; every softmax weight lies in [0, 1 + ε]
          Σ_j p_j ≤ (1 + u) / (1 − γ_n) (each exp divided by a rounded sum of the same exps), so with
          γ_n < 1/2, |h_i| ≤ (1 + γ_n)(1 + u) / (1 − γ_n) max|v| < 4 V_i (the kernel forming
          exp(s − max − log Σ) gives weights summing to 1 + O(n u)); the update
          |Σ_i W_O^i h_i| ≤ 2 Σ_i (|W_O^i| + r_O^i) 4 V_i + h s η, and x + update ≤ 2 (X + that);
        * feed-forward: |z| ≤ Z = 2 (|W1| X + |b1|) + d η, relu(z) ≤ Z, the output sum
          ≤ 2 (|W2| Z + |b2|) + q η, and the residual x + y ≤ 2 (X + that).

        Refused (the per-batch checks run instead) when the model has no positional encoding (no max_len)
        or γ_{max_len} ≥ 1/2.
        """
        u, eta = self.u, self.eta
        bounds = self.a_priori_bounds = []  # (stage, bound on |output| per coordinate in every run), for tests
        n_max = self.P.shape[0] if self.P is not None else None
        if n_max is None or gamma(max(n_max, 1), u) >= 0.5:
            return False
        X = np.abs(self.E).max(axis=0, initial=0.0)
        if self.P is not None:
            X = X + np.abs(self.P).max(axis=0, initial=0.0)
        X = 2 * X
        bounds.append(("embed", X))
        if not np.all(np.isfinite(X)) or self._stage_may_overflow(X, "embed"):
            return False

        def ff(X, hid: _Linear, out: _Linear):
            if self._stage_may_overflow(X, "ff", (hid, out)):
                return None
            Z = 2 * (hid.abs_matvec(X) + np.abs(hid.b)) + X.size * eta
            return 2 * (X + 2 * (out.abs_matvec(Z) + np.abs(out.b)) + Z.size * eta)

        if self.input_ff is not None:
            X = ff(X, *self.input_ff)
            if X is None:
                return False
            bounds.append(("input_ff", X))
        for li, (att, hid, out) in enumerate(self.layers):
            if self._stage_may_overflow(X, "attention", att):
                return False
            upd = np.zeros_like(X)
            for i in range(att.WQ.shape[0]):
                V = 2 * ((np.abs(att.WV[i]) + att.rV[i]) @ X) + X.size * eta
                upd += (np.abs(att.WO[i]) + att.rO[i]) @ (4 * V)
            X = 2 * (X + 2 * upd + att.WO.shape[0] * att.WO.shape[2] * eta)
            bounds.append((f"attention {li}", X))
            X = ff(X, hid, out)
            if X is None or not np.all(np.isfinite(X)):
                return False
            bounds.append((f"ff {li}", X))
        return not self._stage_may_overflow(X, "readout", self.readout)

    def _ff_dense_chunked(self, x, r, hid, out):
        B, n, d = x.shape
        xf, rf = x.reshape(-1, d), r.reshape(-1, d)
        q = max(hid.W.shape[0], 1)
        step = max(1, int(2e7 // q))
        ys, rs = [], []
        for s in range(0, len(xf), step):
            y, ry = self.ff_dense(xf[s : s + step], rf[s : s + step], hid, out)
            ys.append(y)
            rs.append(ry)
        return np.concatenate(ys).reshape(B, n, d), np.concatenate(rs).reshape(B, n, d)


# ----------------------------------------------------------------------------------------------


def _encoding_of(model: Transformer, encoding: Encoding | dict | None) -> Encoding:
    """The encoding to certify under: ``encoding``, else the model's own. One given for a model that has its own must
    be that same encoding (`check_own_encoding`)."""
    own = getattr(model, "encoding", None)
    if encoding is None:
        encoding = own
    if encoding is None:
        raise InputError(
            "the model carries no token encoding (token → id, label list); compiled models store it in the "
            "model file's metadata under 'encoding' — pass encoding=... for other models"
        )
    if isinstance(encoding, dict):
        missing = [k for k in ("tokens", "labels") if not isinstance(encoding.get(k), (list, tuple))]
        if missing:
            raise InputError(
                f"encoding: a dict needs lists under 'tokens' and 'labels' (as Encoding.to_json() writes); "
                f"missing or not a list: {', '.join(repr(k) for k in missing)}"
            )
        encoding = Encoding(
            {t: i for i, t in enumerate(encoding["tokens"])}, {y: i for i, y in enumerate(encoding["labels"])}
        )
    if not isinstance(encoding, Encoding):
        raise TypeError(f"encoding must be a uatlab.Encoding or its JSON dict, not a {type(encoding).__name__}")
    check_own_encoding(encoding, own)
    return encoding


def _chunks(data: SequenceDataset, tokens_per_chunk: int) -> Iterator[tuple[int, SequenceDataset]]:
    """(first sequence's index, chunk of about ``tokens_per_chunk`` tokens) of ``data``, which the caller has just
    validated (`_check_dataset`): the chunks, made of the same sequences, are not validated again."""
    start, count = 0, 0
    for i, seq in enumerate(data.tokens):
        count += len(seq)
        if count >= tokens_per_chunk:
            yield start, data.subset(range(start, i + 1), validate=False)
            start, count = i + 1, 0
    if start < len(data):
        yield start, data.subset(range(start, len(data)), validate=False)


def certify(
    model: Transformer | str | os.PathLike,
    data: SequenceDataset | str | os.PathLike,
    encoding: Encoding | dict | None = None,
    *,
    chunk_tokens: int = 200_000,
    progress: Callable[[int, int], None] | None = None,
    max_examples: int = 20,
    exp_ulps: float = DEFAULT_EXP_ULPS,
    keep_margins: bool = True,
    unknown: str = "error",
) -> Certificate:
    """Prove, token by token, that ``model`` (in its parameters' dtype) predicts each token's label.

    Args:
        model: any uatlab Transformer with a token embedding and a readout (softmax attention), or the path
            of a saved uatlab model file (read with `uatlab.models.io.load`).
        data: the labelled sequences to check, or the path of a CoNLL or JSONL file (read with
            `uatlab.data.jsonl.read_sequences`: JSONL for .jsonl/.json, CoNLL otherwise; for a next-token model
            a JSONL file of ``{"tokens": [...], "label": ...}`` lines).
        encoding: token/label ids; default: ``model.encoding`` (set by the compiler and by loading a
            compiled model with `uatlab.constructions.paper_a.cor1_memorizer.load_compiled`).
        chunk_tokens: tokens processed at a time (memory ~ 1 kB per token), an integer ≥ 1.
        progress: callback(done_sequences, total_sequences).
        max_examples: uncertified tokens listed in the certificate.
        exp_ulps: the assumed error of the evaluator's exp, in ulps (normal range); see
            `uatlab.numerics.float_bounds` for measured kernels.
        keep_margins: keep every token's certified lower margin (``Certificate.margins``; 8 bytes a token).
        unknown: ``'error'`` (a word outside the vocabulary is an InputError naming it) or ``'unk'`` (it is read
            as the encoding's unknown-word token, e.g. a trained model's ``<unk>``; counted in
            ``Certificate.unknown_tokens``). The ceiling counts the words as written either way.

    Returns:
        A `Certificate`; ``certified`` is True iff every token that a perfect model can get right
        (the ceiling: majority label per identical input) is proven correct.

    Raises:
        InputError: unknown tokens or labels (naming sequence, position and file line), sequences longer
            than the model's positional encoding, unsupported models (mixed or non-float32/64 dtypes), a
            sequence whose all-pairs bounds would need more memory than the limit (`check_certify_memory`).
        ValueError: ``exp_ulps`` outside [0.5, 10^4].
        TypeError: ``model`` or ``data`` of another type (e.g. a list of token lists instead of a dataset), or an
            ``exp_ulps`` that is not a real number (a string, a bool).

    A seq2seq deep memorizer (Kajitsuka & Sato, ICLR 2025; ``uatlab compile --ff deep``, a module with a
    ``memo``) is certified by its exact-integer certificate instead
    (`uatlab.verify.seq2seq_deep.certify_seq2seq_dataset`), which returns a
    `uatlab.verify.seq2seq_deep.Seq2SeqCertificate` with the same token counts (``tokens``,
    ``ceiling_tokens``, ``certified_tokens``, ``certified``). A next-token memorizer (``compile_next_token``)
    takes a `uatlab.data.next_token.NextTokenData` and returns a
    `uatlab.verify.next_token.NextTokenCertificate` (`uatlab.verify.next_token.certify_next_token_model`).
    """
    from uatlab.constructions.paper_c.next_token_memorizer import NextTokenMemorizer
    from uatlab.constructions.paper_c.seq2seq_memorizer import Seq2SeqMemorizer

    if isinstance(chunk_tokens, bool) or not isinstance(chunk_tokens, (int, np.integer)) or chunk_tokens < 1:
        raise InputError(f"chunk_tokens must be an integer ≥ 1, got {chunk_tokens!r}")
    if isinstance(model, (str, os.PathLike)):
        from uatlab.models.io import load

        model = load(model)
    memo = getattr(model, "memo", None)
    if not isinstance(model, Transformer) and not isinstance(memo, (Seq2SeqMemorizer, NextTokenMemorizer)):
        raise TypeError(
            "certify() takes a uatlab Transformer, a seq2seq deep or next-token memorizer (uatlab.compile_*, "
            f"uatlab.load) or the path of a saved model file, not a {type(model).__name__}"
        )
    if isinstance(data, (str, os.PathLike)):
        if isinstance(memo, NextTokenMemorizer):
            from uatlab.data.next_token import read_next_token_jsonl

            data = read_next_token_jsonl(data)
        else:
            from uatlab.data.jsonl import read_sequences

            data = read_sequences(data)
    if unknown not in ("error", "unk"):
        raise InputError(f"unknown must be 'error' or 'unk', got {unknown!r}")
    if memo is not None and unknown == "unk":
        raise InputError(f"unknown='unk': a {type(memo).__name__} has no unknown-word token (every word must be known)")
    if isinstance(memo, Seq2SeqMemorizer):
        from uatlab.verify.seq2seq_deep import certify_seq2seq_dataset

        _check_dataset(data)
        return certify_seq2seq_dataset(model, data, encoding)  # type: ignore[return-value]
    if isinstance(memo, NextTokenMemorizer):  # one label per sequence
        from uatlab.verify.next_token import certify_next_token_model

        return certify_next_token_model(model, data, encoding)  # type: ignore[return-value]
    _check_dataset(data)
    if len(data) == 0:  # a certificate over no token would say "certified" about nothing
        raise InputError(f"{data.source}: no sequences to certify")
    return certify_chunks(
        model,
        _chunks(data, chunk_tokens),
        len(data),
        encoding,
        progress=progress,
        max_examples=max_examples,
        exp_ulps=exp_ulps,
        keep_margins=keep_margins,
        unknown=unknown,
    )


def _check_dataset(data: object) -> None:
    if not isinstance(data, SequenceDataset):
        raise TypeError(
            "certify() takes a uatlab.SequenceDataset (uatlab.read_jsonl, uatlab.read_conll or "
            f"SequenceDataset(tokens, labels)) or the path of a CoNLL or JSONL file, not a {type(data).__name__}"
        )
    data.validate()  # its lists may have been changed since it was made


@limit_as_of_now()  # every chunk's request against the memory available when the certificate began
def certify_chunks(
    model: Transformer,
    chunks: Iterable[tuple[int, SequenceDataset]],
    total: int | None = None,
    encoding: Encoding | dict | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
    max_examples: int = 20,
    spot_check_flops: float = 3e8,
    exp_ulps: float = DEFAULT_EXP_ULPS,
    keep_margins: bool = False,
    mapper: Callable[[Callable[..., Any], Iterable[tuple]], Iterable[Any]] | None = None,
    unknown: str = "error",
) -> Certificate:
    """`certify` over (start index, chunk) pairs, e.g. streamed from a file (constant memory unless
    ``keep_margins``); ``unknown`` as in `certify` (`EncodedChunk` chunks hold ids, with no unknown word).

    ``mapper(fn, items)`` runs ``fn(*item)`` per chunk and yields the results in order (e.g.
    `uatlab.experiments.executor.map_ordered` on Ray); default: in this process. Each chunk's result
    is reduced in data order, and the spot check's budget is split over the chunks in advance, so the
    certificate does not depend on where the chunks ran."""
    t0 = time.perf_counter()
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be a callable (done, total) or None, not a {type(progress).__name__}")
    if isinstance(max_examples, bool) or not isinstance(max_examples, numbers.Integral) or max_examples < 0:
        raise InputError(f"max_examples must be an integer ≥ 0, got {max_examples!r} ({type(max_examples).__name__})")
    bm = _BoundedModel(model, exp_ulps)  # validates exp_ulps and the model before any data is read
    enc = _encoding_of(model, encoding)
    if unknown not in ("error", "unk"):
        raise InputError(f"unknown must be 'error' or 'unk', got {unknown!r}")
    if unknown == "unk" and enc.unknown_token is None:
        raise InputError("unknown='unk' needs an encoding with an unknown-word token; this one has none")
    if bm.cfg.num_labels != len(enc.label_to_id):
        raise InputError(f"the model has {bm.cfg.num_labels} labels but its encoding lists {len(enc.label_to_id)}")
    counter = CeilingCounter()  # (input key, label) pairs → ceiling, spilled to disk past 4M tokens
    certified_tokens = correct = 0
    min_margin, min_at = np.inf, None
    max_err = 0.0
    reference_lost = unbounded = 0
    examples: list[dict[str, Any]] = []
    margins: dict[int, np.ndarray] | None = {} if keep_margins else None
    n_seq = n_tok = dense_units = unknown_tokens = 0
    # budget for the PyTorch spot check (multiply-adds of the dense forward pass), spent in data order
    cost_per_token = spot_check_cost_per_token(model)
    spot = {"tokens": 0, "certified": 0, "certified_but_wrong": 0, "torch_agrees_with_reference": 0}
    setup = _ChunkSetup(uuid.uuid4().hex, model, enc, exp_ulps, cost_per_token, max_examples, keep_margins, unknown)
    budgets = _spot_budgets(chunks, int(spot_check_flops), cost_per_token)
    _SETUP_CACHE.clear()
    _SETUP_CACHE[setup.token] = bm
    if mapper is None:
        parts = (_certify_chunk(setup, start, chunk, budget) for start, chunk, budget in budgets)
    else:
        parts = mapper(_certify_chunk, ((setup, start, chunk, budget) for start, chunk, budget in budgets))
    try:
        for part in parts:  # in data order: every reduction below is the sequential one
            counter.add(part["keys"], part["labels"], part["keys2"])
            n_seq += part["sequences"]
            n_tok += part["tokens"]
            unknown_tokens += part["unknown_tokens"]
            correct += part["correct"]
            certified_tokens += part["certified"]
            max_err = max(max_err, part["max_err"])
            reference_lost += part["reference_lost"]
            unbounded += part["unbounded"]
            dense_units = max(dense_units, part["dense_units"])
            if part["min_at"] is not None and part["min_margin"] < min_margin:
                min_margin, min_at = part["min_margin"], part["min_at"]
            examples += part["examples"][: max(0, max_examples - len(examples))]
            for k in spot:
                spot[k] += part["spot"][k]
            if margins is not None:
                margins.update(part["margins"])
            if progress is not None:
                progress(n_seq, total or n_seq)
    finally:
        _SETUP_CACHE.clear()
    ceiling = counter.ceiling()
    counter.close()
    if n_tok == 0:  # a certificate over no token would say "certified" about nothing
        raise InputError("no tokens to certify (the data has no sequences)")
    tokens = n_tok
    env = environment_checks(bm.dtype, bm.exp_ulps)
    # what voids the proof: a PyTorch run contradicting a certified token (the model that runs is not the one the
    # bounds describe), or a checkable assumption broken in this process (e.g. flush-to-zero: the bounds were
    # computed under it, and the runs they are about would be made under it). Then no token is proven
    invalidated_by = []
    if spot["certified_but_wrong"]:
        invalidated_by.append(
            f"PyTorch's own forward got {spot['certified_but_wrong']} of the {spot['certified']} certified tokens it "
            "ran wrong: the model that runs is not the one the bounds describe"
        )
    invalidated_by += void_reasons(environment_failures(env, bm.dtype))
    bound_certified_tokens = certified_tokens
    if invalidated_by:
        certified_tokens, min_at = 0, None
        if margins is not None:
            margins = {i: np.full_like(m, -np.inf) for i, m in margins.items()}
    # what the config names: a model loaded from a file whose config named another dtype than its tensors hold is
    # loaded in its tensors' dtype (`uatlab.models.io`), and keeps the file's in ``file_config_dtype``
    config_dtype = getattr(model, "file_config_dtype", None) or bm.cfg.dtype
    return Certificate(
        dtype=bm.dtype,
        config_dtype=config_dtype,
        exp_ulps=bm.exp_ulps,
        environment=env,
        margins=None if margins is None else [margins[i] for i in sorted(margins)],
        sequences=n_seq,
        tokens=tokens,
        ceiling_tokens=ceiling,
        conflict_tokens=tokens - ceiling,
        correct_tokens=correct,
        certified_tokens=certified_tokens,
        bound_certified_tokens=bound_certified_tokens,
        invalidated_by=invalidated_by,
        unknown_tokens=unknown_tokens,
        certified=certified_tokens >= ceiling and not invalidated_by,
        certified_fraction=certified_tokens / ceiling if ceiling else float(not invalidated_by),
        min_certified_margin=None if min_at is None else min_margin,
        min_margin_at=min_at,
        # no token with a valid bound: no finite bound holds anywhere (∞, null in JSON)
        max_logit_error_bound=max_err if unbounded < n_tok else math.inf,
        reference_lost_tokens=reference_lost,
        unbounded_tokens=unbounded,
        method="gated-sparse" if bm.gate is not None else "dense",
        dense_units=dense_units if bm.gate is not None else None,
        seconds=time.perf_counter() - t0,
        uncertified_examples=examples,
        torch_spot_check=spot,
        assumptions=[
            f"IEEE 754 round-to-nearest arithmetic in {bm.dtype} (u = {bm.u:.3e}), the dtype of the model's "
            f"parameters (its config says {config_dtype}); no overflow ("
            + ("excluded for every input by a bound from the weights" if bm.overflow_excluded else "checked per batch")
            + ")",
            "gradual underflow: subnormals neither flushed to zero nor read as zero (PyTorch's default; "
            "torch.set_flush_denormal(False)); checked in this process: environment['gradual_underflow']",
            f"exp accurate to {bm.exp_ulps:g} ulp for normal results (softmax rows that could underflow are not "
            f"certified); checked in this process on {EXP_CHECK_SAMPLES} sampled arguments per kernel in {bm.dtype}:"
            f" torch.exp {exp_error_text(env['exp_ulps_measured']['torch.exp'])}, the exp inside torch.softmax "
            f"{exp_error_text(env['exp_ulps_measured']['torch.softmax'])} (environment['exp_ulps_measured']; a sample "
            "maximum, a lower bound on the kernel's worst case)",
            "any summation order, blocking or FMA use; residual adds fused into the preceding GEMM; padding masks as "
            "uatlab's forward applies them (masked keys' values zeroed: a padding token adds exact zeros)",
            input_identity_assumption("this certificate"),
            "float32 matmul precision 'highest' (no TF32/bf16 reduced-precision modes): checked in this process, "
            "environment['float32_matmul_precision']; eager execution (torch.compile not covered, not checked)",
        ],
    )


@dataclass
class EncodedChunk:
    """Sequences already encoded under the model's encoding (token ids, label ids, input keys), e.g. a chunk of
    the `uatlab.data.token_store.TokenStore` a compile read: certified without parsing, encoding or
    hashing the words again. Certifies exactly like the `SequenceDataset` of the same sequences.

    Flat: sequence i is ``tok[offsets[i] : offsets[i + 1]]`` (likewise ``lab``, ``keys``)."""

    tok: np.ndarray  # (Σ n_i,) int64 token ids of the model's encoding, sequences one after another
    lab: np.ndarray  # (Σ n_i,) int64 label ids
    offsets: np.ndarray  # (sequences + 1,) int64, offsets[0] = 0
    keys: np.ndarray  # (Σ n_i,) int64 input keys (uatlab.data.keys.input_keys), in sequence order
    lines: np.ndarray  # (sequences,) int64 source line of each sequence
    token_lines: bool = False  # token k of sequence i is on line lines[i] + k (CoNLL; SequenceDataset.token_lines)

    @classmethod
    def from_lists(
        cls, tok_ids: list[np.ndarray], lab_ids: list[np.ndarray], keys: np.ndarray, lines, token_lines: bool = False
    ) -> EncodedChunk:
        """From one id array per sequence."""
        lengths = np.fromiter((len(t) for t in tok_ids), np.int64, len(tok_ids))
        cat = (
            (lambda a: np.concatenate(a).astype(np.int64, copy=False)) if tok_ids else (lambda a: np.zeros(0, np.int64))
        )
        lines = np.asarray(lines, np.int64)
        return cls(cat(tok_ids), cat(lab_ids), np.r_[0, np.cumsum(lengths)], keys, lines, token_lines)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def num_tokens(self) -> int:
        return int(self.offsets[-1])

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def rows(self, flat: np.ndarray, idx: np.ndarray, n: int) -> np.ndarray:
        """(len(idx), n): ``flat``'s entries of sequences ``idx``, all of length n."""
        return flat[self.offsets[idx][:, None] + np.arange(n)]


def _lengths(chunk: SequenceDataset | EncodedChunk) -> np.ndarray:
    if isinstance(chunk, EncodedChunk):
        return chunk.lengths()
    return np.array([len(t) for t in chunk.tokens])


def _line_at(chunk: SequenceDataset | EncodedChunk, si: int, k: int) -> int:
    """The line of token ``k`` of the chunk's sequence ``si`` (`uatlab.data.dataset.token_line`)."""
    return token_line(chunk.lines[si], k, chunk.token_lines)


def _token_at(chunk: SequenceDataset | EncodedChunk, enc: Encoding, si: int, k: int) -> str:
    if isinstance(chunk, EncodedChunk):
        return _id_lists(enc)[0][int(chunk.tok[chunk.offsets[si] + k])]
    return chunk.tokens[si][k]


def _label_at(chunk: SequenceDataset | EncodedChunk, enc: Encoding, si: int, k: int) -> str:
    if isinstance(chunk, EncodedChunk):
        return _id_lists(enc)[1][int(chunk.lab[chunk.offsets[si] + k])]
    return chunk.labels[si][k]


_ID_LISTS: dict[int, tuple[Encoding, list[str], list[str]]] = {}


def _id_lists(enc: Encoding) -> tuple[list[str], list[str]]:
    """The encoding's id → token and id → label lists, built once per encoding object."""
    got = _ID_LISTS.get(id(enc))
    if got is None or got[0] is not enc:
        _ID_LISTS.clear()
        got = _ID_LISTS[id(enc)] = (enc, enc.id_to_token, enc.id_to_label)
    return got[1], got[2]


@dataclass
class _ChunkSetup:
    """What every chunk's certification needs besides the chunk (shipped with each task)."""

    token: str  # names this certification run: a worker builds its bounded model once per token
    model: Transformer
    enc: Encoding
    exp_ulps: float
    cost_per_token: int
    max_examples: int
    keep_margins: bool
    unknown: str = "error"  # a word outside the vocabulary: an error, or read as the unknown-word token


# per process: the bounded model of the current run (by _ChunkSetup.token)
_SETUP_CACHE: dict[str, _BoundedModel] = {}


def spot_check_cost_per_token(model: Transformer) -> int:
    """Multiply-adds of PyTorch's forward pass per token, as the spot check's budget counts them: the model's
    2-D weight entries other than the token embedding (a lookup, no product); at least 1."""
    embedding = model.embed.weight.numel() if model.embed is not None else 0
    return max(1, sum(m.numel() for m in model.parameters() if m.dim() == 2) - embedding)


CERTIFY_BYTES_PER_PAIR = 80  # peak of the certificate per (query, key) pair of one long sequence: 68 measured


def check_certify_memory(n: int, where: str, skip: str = "") -> None:
    """Refuse (InputError, `uatlab.memory_guard`) to certify a sequence of ``n`` tokens whose all-pairs attention
    bounds would exceed the memory limit; ``where`` names the sequence, ``skip`` says how to do without the
    certificate (e.g. a command's option)."""
    check_memory(
        CERTIFY_BYTES_PER_PAIR * float(n) * n,
        f"certifying the sequence of {n} tokens at {where}",
        "attention bounds over all pairs of its tokens" + (f"; {skip}" if skip else ""),
    )


def _spot_budgets(
    chunks: Iterable[tuple[int, SequenceDataset]], budget: int, cost_per_token: int
) -> Iterator[tuple[int, SequenceDataset, int]]:
    """Each chunk with the spot-check budget left when it starts (as if the chunks ran one after another),
    after checking in this process, before the chunk is certified anywhere, that its longest sequence's
    attention bounds fit in memory (`check_certify_memory`)."""
    for start, chunk in chunks:
        chunk_lengths = _lengths(chunk)
        if len(chunk_lengths):
            si = int(np.argmax(chunk_lengths))
            if isinstance(chunk, SequenceDataset):  # its source and line, as the readers name a sequence
                where = chunk.where(si)
            else:
                where = f"sequence {start + si}" + (f" (line {int(chunk.lines[si])})" if si < len(chunk.lines) else "")
            check_certify_memory(int(chunk_lengths[si]), where)
        yield start, chunk, budget
        lengths, counts = np.unique(chunk_lengths, return_counts=True)
        _, budget = _spot_takes(lengths.tolist(), counts.tolist(), budget, cost_per_token)


def _spread_order(m: int) -> list[int]:
    """0 … m−1 in the order of the fractions 0, 1, 1/2, 1/4, 3/4, 1/8, 3/8, … of the range (each rounded to the
    nearest index, repeats dropped): the ends first, then ever finer midpoints, so every prefix of the order is
    spread over the whole range. Once the step 1/2^k is below 1/(m − 1) every index has been met."""
    order: list[int] = []
    seen: set[int] = set()
    fractions = [0.0, 1.0]
    k = 1
    while len(order) < m:
        for f in fractions:
            i = round(f * (m - 1))
            if i not in seen:
                seen.add(i)
                order.append(i)
        fractions = [j / 2**k for j in range(1, 2**k, 2)]
        k += 1
    return order


def _spot_takes(lengths: list[int], counts: list[int], budget: int, cost_per_token: int) -> tuple[list[int], int]:
    """Sequences the spot check takes of each length (``counts[i]`` of length ``lengths[i]``, lengths increasing)
    from ``budget`` multiply-adds, and the budget left: the first ones of each length, in rounds of one more per
    length while any budget is left (a sequence may overrun what is left). A round visits the lengths in a spread
    order (`_spread_order`: the shortest, the longest, the middle one, the quartiles, ...), so a budget smaller
    than one round still meets long sequences, whose attention has the most keys, and not only the shortest (a
    length-1 sequence's softmax is 1 whatever its scores)."""
    m = len(lengths)
    order = _spread_order(m)
    takes = [0] * m
    while budget > 0:
        live = [i for i in order if takes[i] < counts[i]]
        if not live:
            break
        round_cost = sum(lengths[i] for i in live) * cost_per_token
        full = min(budget // round_cost, min(counts[i] - takes[i] for i in live))
        if full >= 1:  # whole rounds at once
            for i in live:
                takes[i] += full
            budget -= full * round_cost
            continue
        for i in live:  # the last, partial round
            if budget <= 0:
                break
            takes[i] += 1
            budget -= lengths[i] * cost_per_token
    return takes, budget


def _word_salts(
    chunk: SequenceDataset, tok: np.ndarray, unknown: np.ndarray, table: np.ndarray, setup: _ChunkSetup
) -> np.ndarray:
    """(T,) uint64: per token of ``chunk`` (ids ``tok``), its id's value in the run's salt ``table``, or where
    ``unknown`` (a word outside the vocabulary, read as the unknown-word token) a BLAKE2b of the word keyed by
    the run's salt. Equal words get equal values in every chunk and worker, so the second keys
    (`uatlab.data.keys.salted_input_keys` over these values) tell inputs apart by the words as written, as the
    first keys do."""
    key = int(setup.token, 16).to_bytes(16, "little")
    words = list(itertools.chain.from_iterable(chunk.tokens))
    salts = table[tok]  # a gathered copy
    for i in np.flatnonzero(unknown).tolist():
        salts[i] = int.from_bytes(hashlib.blake2b(words[i].encode(), key=key, digest_size=8).digest(), "little")
    return salts


def _bounded_model(setup: _ChunkSetup) -> _BoundedModel:
    bm = _SETUP_CACHE.get(setup.token)
    if bm is None:  # in a worker: once per process and run
        _SETUP_CACHE.clear()
        bm = _SETUP_CACHE[setup.token] = _BoundedModel(setup.model, setup.exp_ulps)
    return bm


def _certify_chunk(
    setup: _ChunkSetup, start: int, chunk: SequenceDataset | EncodedChunk, spot_budget: int
) -> dict[str, Any]:
    """Certify one chunk (sequences ``start``…): its counts, smallest margin, examples, keys and labels."""
    bm = _bounded_model(setup)
    model, enc = setup.model, setup.enc
    unknown: np.ndarray | None = None  # (T,) bool: words read as the unknown-word token
    if isinstance(chunk, EncodedChunk):
        flat = chunk
    else:
        context = "prefix" if bm.cfg.causal else "sequence"
        # the ceiling's keys from the words as written: inputs that only unknown words tell apart stay apart
        keys = input_keys_of_words(chunk.tokens, context)
        if setup.unknown == "unk":
            known = enc.token_to_id
            unknown = np.fromiter((t not in known for t in itertools.chain.from_iterable(chunk.tokens)), bool)
        flat = EncodedChunk.from_lists(
            enc.encode_tokens(chunk, unknown=setup.unknown, start=start),
            enc.encode_labels(chunk, start=start),
            keys,
            chunk.lines,
            chunk.token_lines,
        )
    keys = flat.keys
    context = "prefix" if bm.cfg.causal else "sequence"
    vocabulary = max(bm.E.shape[0], int(flat.tok.max()) + 1 if len(flat.tok) else 0)  # a bad id is refused below
    table = salt_table(int(setup.token, 16), vocabulary)
    unknown_tokens = 0 if unknown is None else int(unknown.sum())
    if unknown_tokens:  # a word read as the unknown-word token keeps a salted value of its own text (below)
        keys2 = salted_input_keys(
            np.arange(len(flat.tok)), flat.offsets, _word_salts(chunk, flat.tok, unknown, table, setup), context
        )
    else:
        keys2 = salted_input_keys(flat.tok, flat.offsets, table, context)
    out: dict[str, Any] = {
        "sequences": len(chunk),
        "tokens": chunk.num_tokens,
        "unknown_tokens": unknown_tokens,
        "correct": 0,
        "certified": 0,
        "max_err": 0.0,
        "reference_lost": 0,
        "unbounded": 0,
        "min_margin": np.inf,
        "min_at": None,
        "examples": [],
        "keys": keys,
        "keys2": keys2,
        "labels": flat.lab,
        "spot": {"tokens": 0, "certified": 0, "certified_but_wrong": 0, "torch_agrees_with_reference": 0},
        "margins": {} if setup.keep_margins else None,
        "dense_units": 0,
    }
    spot = out["spot"]
    lengths = flat.lengths()
    uniq = np.unique(lengths)
    by_length = [np.flatnonzero(lengths == n) for n in uniq]
    # the PyTorch spot check: per length (in increasing order), the first `take` sequences of that length
    takes, _ = _spot_takes(uniq.tolist(), [len(idx) for idx in by_length], spot_budget, setup.cost_per_token)
    spot_rows: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in by_length]  # (pred, ok) of those
    # PyTorch's own forward on those sequences, run before the passes: its activations (one sequence × the FF
    # width) then do not add to the passes' arrays at the chunk's peak memory; compared after the passes
    torch_runs: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # per length group: PyTorch's argmax, logits finite
    if len(uniq):
        if bm.P is not None and int(uniq.max()) > bm.P.shape[0]:  # the first sequence too long, by its place
            i = int(np.flatnonzero(lengths > bm.P.shape[0])[0])
            at = chunk.where(i) if isinstance(chunk, SequenceDataset) else f"line {int(chunk.lines[i])}"
            raise InputError(
                f"{at}: sequence {start + i} has {int(lengths[i])} tokens; the model's positional encoding covers "
                f"{bm.P.shape[0]}"
            )
        bm.check_length(int(uniq.max()))  # the bounded model's error, before PyTorch's own
    for gi, take in enumerate(takes):
        if take:
            ids = flat.rows(flat.tok, by_length[gi][:take], int(uniq[gi]))
            with torch.no_grad():
                logits = model(torch.from_numpy(ids), max_activations=SPOT_ACTIVATIONS)
            torch_runs[gi] = logits.argmax(-1).numpy(), torch.isfinite(logits).all(-1).numpy()
            del logits
    for part in _passes(by_length, uniq.tolist(), max(1, PASS_ELEMENTS // bm.cfg.d_model)):
        batches = [flat.rows(flat.tok, idx, int(uniq[gi])) for gi, _, idx in part]  # (B, n) per piece
        counters: dict[str, int] = {}
        # the token-wise stages once over the pass's tokens, in the pieces' order (each row-major)
        L, rL, bad = bm.forward_bounds_flat(batches, counters)
        out["dense_units"] = max(out["dense_units"], counters.get("dense_units", 0))
        pieces = [(idx, int(uniq[gi])) for gi, _, idx in part]
        ys = np.concatenate([flat.rows(flat.lab, idx, n).reshape(-1) for idx, n in pieces])
        pred, ok = _reduce_pass(out, setup, chunk, enc, start, pieces, L, rL, bad, ys)
        for (gi, offset, idx), (p_pred, p_ok) in zip(part, _piece_views(pieces, pred, ok), strict=True):
            k = max(0, min(len(idx), takes[gi] - offset))
            if k:
                spot_rows[gi].append((p_pred[:k], p_ok[:k]))
    for gi, take in enumerate(takes):
        if take:  # PyTorch's own forward on a few sequences: certified tokens must be right
            idx = by_length[gi][:take]
            ys = flat.rows(flat.lab, idx, int(uniq[gi]))
            pred = np.concatenate([p for p, _ in spot_rows[gi]])
            ok = np.concatenate([o for _, o in spot_rows[gi]])
            run, finite = torch_runs[gi]
            spot["tokens"] += int(run.size)
            spot["certified"] += int(ok.sum())
            # logits that are not finite are no prediction (their argmax is an artefact of NaN ordering)
            spot["certified_but_wrong"] += int((ok & ((run != ys) | ~finite)).sum())
            spot["torch_agrees_with_reference"] += int(((run == pred) & finite).sum())
    return out


# hidden activations of the PyTorch spot check formed at a time (tokens × FF width: 32 MB in float64), so a wide
# layer's (n × width) array of one sequence does not set the certificate's peak memory
SPOT_ACTIVATIONS = 1 << 22

# (token, coordinate) values of one forward pass: length groups are packed together up to this many tokens × d
# (a longer group is split by sequences), which bounds the (tokens, d) arrays of the token-wise stages (32 MB; each
# pass costs a fixed O(FF width × d) for the gated layer's box, so fewer, larger passes are faster)
PASS_ELEMENTS = 1 << 22


def _passes(
    by_length: list[np.ndarray], lengths: list[int], budget: int
) -> Iterator[list[tuple[int, int, np.ndarray]]]:
    """Passes of at most ``budget`` tokens (one piece may exceed it if one sequence does): lists of (length
    group, offset of the piece in its group, the piece's sequence indices), in group order then data order."""
    part: list[tuple[int, int, np.ndarray]] = []
    size = 0
    for gi, (idx, n) in enumerate(zip(by_length, lengths, strict=True)):
        step = max(1, budget // max(n, 1))
        for s in range(0, len(idx), step):
            piece = idx[s : s + step]
            if part and size + len(piece) * n > budget:
                yield part
                part, size = [], 0
            part.append((gi, s, piece))
            size += len(piece) * n
    if part:
        yield part


def _reduce_pass(out, setup, chunk, enc, start, pieces, L, rL, bad, ys) -> tuple[np.ndarray, np.ndarray]:
    """Fold one pass's bounds into ``out``: its tokens in the pieces' order (``pieces``: (sequence indices of the
    chunk, length) each, row-major within a piece), L, rL (T, C), flags ``bad`` and labels ``ys`` (T,). Returns
    the reference's predictions and the certified flags (T,). Every figure is the one a fold piece by piece gives:
    counts add up, the largest radius is a maximum, the smallest margin is the first smallest in this order
    (pieces and passes come in the same order either way) and the examples are merged by data position."""
    examples, margins = out["examples"], out["margins"]
    C = L.shape[-1]
    Lc = np.take_along_axis(L, ys[:, None], axis=-1)  # (T, 1)
    rc = np.take_along_axis(rL, ys[:, None], axis=-1)
    with np.errstate(over="ignore", invalid="ignore"):
        # (T, C) certified lower bound of L_c − L_o. A difference of finite logits beyond the float64 range is
        # ±∞ (+∞ still a true lower bound when the radii are finite: L_c − L_o then exceeds every finite radius);
        # NaN (∞ − ∞, in a row without a valid bound) is replaced by −∞ below
        lower = Lc - L - 2 * (rc + rL) * RADIUS_SAFETY
    onehot = np.arange(C)[None, :] == ys[:, None]
    lower = np.where(onehot, np.inf, lower).min(axis=-1)
    lower = np.where(bad | np.isnan(lower), -np.inf, lower)
    # the reference's prediction, −1 where it has none (its logits are not finite: `forward_bounds_flat`)
    known = np.isfinite(L).all(axis=-1)
    pred = np.where(known, L.argmax(axis=-1), -1)
    out["correct"] += int((pred == ys).sum())
    out["reference_lost"] += int(known.size - np.count_nonzero(known))
    ok = lower > 0
    out["certified"] += int(ok.sum())
    # the largest radius among tokens whose bound holds (a flagged row's radius bounds nothing)
    out["unbounded"] += int(np.count_nonzero(bad))
    out["max_err"] = max(out["max_err"], float(rL[~bad].max(initial=0.0)))
    if ok.any():
        t = int(np.argmin(np.where(ok, lower, np.inf)))
        if lower[t] < out["min_margin"]:
            offsets = np.cumsum([0] + [len(idx) * n for idx, n in pieces])
            p, b, k = _piece_position(offsets, [n for _, n in pieces], t)
            si = int(pieces[p][0][b])
            out["min_margin"] = float(lower[t])
            out["min_at"] = {
                "sequence": start + si,
                "position": int(k),
                "token": _token_at(chunk, enc, si, k),
                "line": _line_at(chunk, si, int(k)),
                "reference_margin": float(Lc[t, 0] - np.where(onehot[t], -np.inf, L[t]).max()),
            }
    if margins is not None:
        for (idx, _), (rows,) in zip(pieces, _piece_views(pieces, lower), strict=True):
            for b, si in enumerate(idx):
                margins[start + int(si)] = rows[b].copy()
    if setup.max_examples > 0 and not ok.all():
        # the chunk's first max_examples uncertified tokens in data order (pieces come by length, so each piece's
        # first ones are merged in): the listed examples do not depend on how the data was cut into chunks
        for (idx, _), (piece_ok, piece_lower, piece_bad) in zip(
            pieces, _piece_views(pieces, ok, lower, bad), strict=True
        ):
            if piece_ok.all():
                continue
            rows, cols = np.nonzero(~piece_ok)  # row-major: data order within the piece (idx increases)
            new = []
            for b, k in zip(rows[: setup.max_examples].tolist(), cols[: setup.max_examples].tolist(), strict=True):
                si = int(idx[b])
                if len(examples) >= setup.max_examples and (start + si, k) > _example_key(examples[-1]):
                    break
                new.append(
                    {
                        "sequence": start + si,
                        "position": int(k),
                        "token": _token_at(chunk, enc, si, k),
                        "label": _label_at(chunk, enc, si, k),
                        "line": _line_at(chunk, si, int(k)),
                        "certified_margin_lower_bound": float(piece_lower[b, k]),
                        "softmax_range_exceeded": bool(piece_bad[b, k]),
                    }
                )
            examples[:] = sorted(examples + new, key=_example_key)[: setup.max_examples]
    return pred, ok


def _piece_views(pieces: list[tuple[np.ndarray, int]], *arrays: np.ndarray) -> list[tuple[np.ndarray, ...]]:
    """Per piece (its sequence indices and length n) of a pass's flat order: its rows of each flat array (T, ...),
    as (sequences, n, ...) views."""
    views, at = [], 0
    for idx, n in pieces:
        end = at + len(idx) * n
        views.append(tuple(a[at:end].reshape(len(idx), n, *a.shape[1:]) for a in arrays))
        at = end
    return views


def _piece_position(offsets: np.ndarray, lengths: list[int], t: int) -> tuple[int, int, int]:
    """Token ``t`` of a pass's flat order → (piece, row, position): pieces of ``lengths[p]`` tokens a row start at
    ``offsets[p]`` (``offsets[-1]``: the pass's token count)."""
    if not 0 <= t < int(offsets[-1]):
        raise IndexError(f"token {t} outside the pass's {int(offsets[-1])} tokens")
    p = int(np.searchsorted(offsets, t, side="right")) - 1
    b, k = divmod(t - int(offsets[p]), lengths[p])
    return p, b, k


def _example_key(example: dict[str, Any]) -> tuple[int, int]:
    return example["sequence"], example["position"]


def stream_chunks(
    records: Iterable[tuple[list[str], list[str], int]],
    source: str,
    tokens_per_chunk: int = 200_000,
    token_lines: bool = False,
) -> Iterator[tuple[int, SequenceDataset]]:
    """Group streamed (tokens, labels, line) records into (start index, SequenceDataset) chunks; ``token_lines``:
    the records have one token per line (CoNLL, `uatlab.data.dataset.SequenceDataset.token_lines`)."""
    buf: list = []
    start = count = 0
    for rec in records:
        buf.append(rec)
        count += len(rec[0])
        if count >= tokens_per_chunk:
            count = 0
            yield (
                start,
                SequenceDataset([b[0] for b in buf], [b[1] for b in buf], source, [b[2] for b in buf], token_lines),
            )
            start += len(buf)
            buf = []
    if buf:
        yield start, SequenceDataset([b[0] for b in buf], [b[1] for b in buf], source, [b[2] for b in buf], token_lines)


def store_chunks(store: Any, encoding: Encoding, tokens_per_chunk: int = 200_000) -> Iterator[tuple[int, EncodedChunk]]:
    """A `uatlab.data.token_store.TokenStore`'s sequences as (start index, `EncodedChunk`) pairs,
    cut where `stream_chunks` cuts the same records (so the certificate is the same one, bit for bit):
    the words' ids, labels and input keys come from the store, mapped to ``encoding``'s ids; nothing is parsed
    or hashed again."""
    if tokens_per_chunk < 1:
        raise ValueError(f"tokens_per_chunk must be at least 1, got {tokens_per_chunk}")
    tok_map = _id_map(list(store.token_to_id), encoding.token_to_id, "token")
    lab_map = _id_map(list(store.label_to_id), encoding.label_to_id, "label")
    token_lines = bool(getattr(store, "token_lines", False))  # one token per line in the source (CoNLL)
    carry: dict[str, np.ndarray] | None = None  # sequences read but not yet yielded (fewer than a chunk's tokens)
    start = 0
    for z in store.chunk_arrays(with_lines=True):
        cur = z if carry is None else {k: np.concatenate([carry[k], z[k]]) for k in _FLAT_FIELDS}
        off = np.r_[0, np.cumsum(cur["lengths"])]  # token offset of each sequence
        s = 0
        while True:
            # a chunk ends at the first sequence whose running count reaches tokens_per_chunk (as in stream_chunks)
            j = int(np.searchsorted(off[1:], off[s] + tokens_per_chunk, side="left"))
            if j >= len(cur["lengths"]):
                break
            yield start, _encoded(cur, off, s, j + 1, tok_map, lab_map, token_lines)
            start += j + 1 - s
            s = j + 1
        carry = {k: cur[k][off[s] :] if k in ("word", "label", "key") else cur[k][s:] for k in _FLAT_FIELDS}
    if carry is not None and len(carry["lengths"]):
        offsets = np.r_[0, np.cumsum(carry["lengths"])]
        yield start, _encoded(carry, offsets, 0, len(carry["lengths"]), tok_map, lab_map, token_lines)


_FLAT_FIELDS = ("lengths", "word", "label", "key", "lines")


def _encoded(
    flat: dict[str, np.ndarray], off: np.ndarray, a: int, b: int, tok_map, lab_map, token_lines: bool = False
) -> EncodedChunk:
    """Sequences a…b−1 of a store's flat arrays (token offsets ``off``) under the model's ids."""
    t0, t1 = int(off[a]), int(off[b])
    return EncodedChunk(
        tok_map[flat["word"][t0:t1]],
        lab_map[flat["label"][t0:t1]],
        off[a : b + 1] - t0,
        flat["key"][t0:t1],
        flat["lines"][a:b],
        token_lines,
    )


def _id_map(names: list[str], to_id: dict[str, int], what: str) -> np.ndarray:
    """(len(names),) int64: the id under ``to_id`` of each name (an InputError names one that has none)."""
    out = np.empty(len(names), dtype=np.int64)
    for i, name in enumerate(names):
        j = to_id.get(name)
        if j is None:
            raise InputError(f"the {what} {name!r} of the data is not in the model's encoding")
        out[i] = j
    return out


def logit_bounds(
    model: Transformer, ids: np.ndarray, exp_ulps: float = DEFAULT_EXP_ULPS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reference logits, radii and uncertifiable-row flags for token ids (B, n) of one length (NaN logits with an
    infinite radius where the float64 reference is not finite).

    For every run of ``model`` in its parameters' dtype and every token: |L_run − L_exact| ≤ radius, and the
    float64 reference obeys the same bound (the quantities `certify` compares).
    """
    if isinstance(ids, torch.Tensor):
        ids = ids.detach().cpu().numpy()
    try:
        raw = np.asarray(ids)
    except (TypeError, ValueError) as exc:  # ragged rows: say which argument and what it needs
        raise InputError(
            f"ids must be token ids (B, n) of one length n (certify() takes sequences of any length): {exc}"
        ) from None
    if raw.ndim != 2:
        raise InputError(f"ids must be token ids of shape (B, n), got shape {raw.shape}")
    if raw.size == 0:
        raise InputError(f"ids must hold at least one sequence of at least one token, got shape {raw.shape}")
    if not np.issubdtype(raw.dtype, np.integer):  # a float id is refused (as PyTorch's embedding does), never truncated
        raise InputError(f"ids must be integer token ids, got an array of {raw.dtype}")
    bm = _BoundedModel(model, exp_ulps)
    lo, hi = int(raw.min()), int(raw.max())  # in the ids' own dtype: a uint64 id past 2^63 is not wrapped first
    if lo < 0 or hi >= bm.E.shape[0]:
        raise InputError(f"token ids must lie in [0, {bm.E.shape[0]}), got {lo}…{hi}")
    return bm.forward_bounds(raw.astype(np.int64, copy=False))
