"""Integer ReLU circuits: deep, sparse feed-forward networks whose weights are exact integers.

The feed-forward part of the next-token memorizer (Kajitsuka & Sato, ICLR 2025, Theorem on next-token
memorization with Õ(√N) parameters) is a deep ReLU network that does integer arithmetic: comparisons,
mixed-radix digit extraction, one-hot selection. Every weight and bias is an integer (a Python int, so
the exact regime may hold words of thousands of bits), every unit value on the data is an integer.

Layer ℓ maps the previous layer's units u^(ℓ-1) (a vector of integers) to

    u^(ℓ)_k = ReLU( Σ_i W^(ℓ)_{k,i} u^(ℓ-1)_i + b^(ℓ)_k )        (last layer: ReLU too; values ≥ 0)

which is paper A's feed-forward map F^(FF) without the skip connection, applied to one token
(the last one) and stacked; the skip is not needed because every register the circuit keeps is
carried explicitly (a carried value x ≥ 0 passes as ReLU(x) = x, at the cost of one weight).

Two evaluations are provided:

- `evaluate_exact`: integer arithmetic (numpy int64 where a per-unit bound proves no overflow,
  Python ints otherwise). This is exact: the circuit's mathematical value on the data.
- `float_exactness_bound`: for each unit, max over the data of Σ_i |W_{k,i} u_i| + |b_k|. If every
  such bound, every weight and every bias is ≤ 2^53, then evaluating the circuit in IEEE float64 in
  *any* summation order gives exactly the integer values (every partial sum is an integer of magnitude
  ≤ 2^53, hence representable, hence every rounding is exact). This is the float64 certificate.

Parameters are counted as the number of nonzero weights plus nonzero biases (the stored numbers); a
dense implementation of the same layers would store more (see `Circuit.dense_size`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

_INT64_SAFE = 2**62


class Lin:
    """An integer linear combination of the current layer's units plus a constant: Σ c_i u_i + const."""

    __slots__ = ("terms", "const")

    def __init__(self, terms: dict[int, int] | None = None, const: int = 0) -> None:
        self.terms = {k: v for k, v in (terms or {}).items() if v != 0}
        self.const = int(const)

    def __add__(self, other: Lin | int) -> Lin:
        if isinstance(other, int):
            return Lin(self.terms, self.const + other)
        terms = dict(self.terms)
        for k, v in other.terms.items():
            terms[k] = terms.get(k, 0) + v
        return Lin(terms, self.const + other.const)

    __radd__ = __add__

    def __neg__(self) -> Lin:
        return Lin({k: -v for k, v in self.terms.items()}, -self.const)

    def __sub__(self, other: Lin | int) -> Lin:
        return self + (-other if isinstance(other, Lin) else -other)

    def __rsub__(self, other: int) -> Lin:
        return (-self) + other

    def __mul__(self, c: int) -> Lin:
        return Lin({k: v * c for k, v in self.terms.items()}, self.const * c)

    __rmul__ = __mul__


@dataclass
class Layer:
    """One ReLU layer in compressed sparse rows: unit k reads cols[ptr[k]:ptr[k+1]] with weights."""

    ptr: np.ndarray  # (width+1,) int64
    cols: np.ndarray  # (nnz,) int64
    weights: list[int]  # (nnz,) exact integers
    bias: list[int]  # (width,) exact integers

    @property
    def width(self) -> int:
        return len(self.bias)

    @property
    def nnz(self) -> int:
        return len(self.weights) + sum(1 for b in self.bias if b != 0)


@dataclass
class Circuit:
    """A stack of integer ReLU layers reading ``n_inputs`` integer inputs."""

    n_inputs: int
    layers: list[Layer] = field(default_factory=list)
    notes: dict[str, int] = field(default_factory=dict)  # named layer indices (e.g. where the words are)

    def inputs(self) -> list[Lin]:
        """The inputs as Lins (the 'current layer' before the first layer is added)."""
        return [Lin({i: 1}) for i in range(self.n_inputs)]

    @property
    def width(self) -> int:
        return self.layers[-1].width if self.layers else self.n_inputs

    def add_layer(self, units: list[Lin]) -> list[Lin]:
        """Append a layer whose unit k is ReLU(units[k]); returns the new units as Lins."""
        width_in = self.width
        ptr, cols, weights, bias = [0], [], [], []
        for u in units:
            for i in sorted(u.terms):
                if not 0 <= i < width_in:
                    raise ValueError(f"unit reads input {i}, previous layer has {width_in}")
                cols.append(i)
                weights.append(int(u.terms[i]))
            ptr.append(len(cols))
            bias.append(int(u.const))
        self.layers.append(Layer(np.asarray(ptr, dtype=np.int64), np.asarray(cols, dtype=np.int64), weights, bias))
        return [Lin({k: 1}) for k in range(len(units))]

    @property
    def parameters(self) -> int:
        """Nonzero weights + nonzero biases (the numbers the construction stores)."""
        return sum(layer.nnz for layer in self.layers)

    @property
    def depth(self) -> int:
        return len(self.layers)

    def dense_size(self) -> int:
        """Weights + biases of a dense implementation with the same layer widths."""
        total, w = 0, self.n_inputs
        for layer in self.layers:
            total += layer.width * (w + 1)
            w = layer.width
        return total

    def max_weight_bits(self) -> int:
        """Bits of the largest |weight| or |bias| (the bit complexity of the circuit)."""
        m = 0
        for layer in self.layers:
            for v in layer.weights:
                m = max(m, abs(v))
            for v in layer.bias:
                m = max(m, abs(v))
        return m.bit_length()


def _layer_apply(layer: Layer, x: list[np.ndarray], bounds: list[int], absolute: bool) -> tuple[list, list[int]]:
    """Apply one layer to per-unit value vectors x (each shape (P,)), exactly; returns values and bounds."""
    out, out_bounds = [], []
    for k in range(layer.width):
        lo, hi = int(layer.ptr[k]), int(layer.ptr[k + 1])
        b = layer.bias[k]
        bound = abs(b) + sum(abs(layer.weights[j]) * bounds[int(layer.cols[j])] for j in range(lo, hi))
        use_int = bound < _INT64_SAFE and all(x[int(layer.cols[j])].dtype == np.int64 for j in range(lo, hi))
        acc = None
        for j in range(lo, hi):
            w = layer.weights[j]
            xi = x[int(layer.cols[j])]
            if absolute:
                w = abs(w)
            term = xi * np.int64(w) if use_int else xi.astype(object) * w
            acc = term if acc is None else acc + term
        n = len(x[0]) if x else 0
        if acc is None:
            acc = np.zeros(n, dtype=np.int64 if use_int else object)
        bb = abs(b) if absolute else b
        acc = acc + (np.int64(bb) if use_int else bb)
        if not absolute:
            acc = np.where(acc > 0, acc, 0) if use_int else np.array([v if v > 0 else 0 for v in acc], dtype=object)
        if use_int:
            acc = acc.astype(np.int64)
            vmax = int(acc.max()) if len(acc) else 0
        else:
            acc = np.asarray(acc, dtype=object)
            vmax = max(acc.tolist()) if len(acc) else 0
            if vmax < _INT64_SAFE and (min(acc.tolist()) if len(acc) else 0) > -_INT64_SAFE:
                acc = acc.astype(np.int64)
        out.append(acc)
        out_bounds.append(int(vmax))
    return out, out_bounds


def _layer_apply_int64(layer: Layer, X: np.ndarray, bounds: list[int], absolute: bool) -> tuple[np.ndarray, list[int]]:
    """The same for an int64 block X (width_in, P) when every unit's bound is < 2^62 (no overflow)."""
    from scipy.sparse import csr_matrix

    w = np.asarray(layer.weights, dtype=np.int64)
    b = np.asarray(layer.bias, dtype=np.int64)
    if absolute:
        w, b = np.abs(w), np.abs(b)
    W = csr_matrix((w, layer.cols, layer.ptr), shape=(layer.width, X.shape[0]))
    Y = np.asarray(W @ X) + b[:, None]
    if not absolute:
        np.maximum(Y, 0, out=Y)
    return Y, [int(v) for v in (Y.max(axis=1) if Y.shape[1] else np.zeros(layer.width, dtype=np.int64))]


def _int64_safe(layer: Layer, bounds: list[int]) -> bool:
    acc = [abs(b) for b in layer.bias]
    for k in range(layer.width):
        for j in range(int(layer.ptr[k]), int(layer.ptr[k + 1])):
            acc[k] += abs(layer.weights[j]) * bounds[int(layer.cols[j])]
        if acc[k] >= _INT64_SAFE:
            return False
    return True


def _run(circuit: Circuit, inputs: list, with_bound: bool) -> tuple[list[np.ndarray], int, int]:
    x: list[np.ndarray] | np.ndarray = _as_columns(inputs)
    bounds = [max((abs(int(v)) for v in col), default=0) for col in x]
    worst, where = max(bounds, default=0), -1
    for li, layer in enumerate(circuit.layers):
        is_block = isinstance(x, np.ndarray)
        if not is_block and all(c.dtype == np.int64 for c in x) and _int64_safe(layer, bounds):
            x, is_block = np.stack(x) if len(x) else np.zeros((0, 0), dtype=np.int64), True
        if is_block and not _int64_safe(layer, bounds):
            x, is_block = list(x), False
        if is_block:
            if with_bound:
                S, _ = _layer_apply_int64(layer, x, bounds, absolute=True)
                m = int(S.max()) if S.size else 0
                if m > worst:
                    worst, where = m, li
            x, bounds = _layer_apply_int64(layer, x, bounds, absolute=False)
        else:
            if with_bound:
                absx = [np.abs(c) if c.dtype == np.int64 else np.asarray([abs(v) for v in c], dtype=object) for c in x]
                s, _ = _layer_apply(layer, absx, bounds, absolute=True)
                for col in s:
                    m = int(col.max()) if col.dtype == np.int64 else max(col.tolist())
                    if m > worst:
                        worst, where = m, li
            x, bounds = _layer_apply(layer, x, bounds, absolute=False)
    return list(x), worst, where


def _as_columns(inputs: np.ndarray | list) -> list[np.ndarray]:
    cols = []
    for col in inputs:
        vals = list(col)
        if all(abs(int(v)) < _INT64_SAFE for v in vals):
            cols.append(np.asarray([int(v) for v in vals], dtype=np.int64))
        else:
            cols.append(np.asarray([int(v) for v in vals], dtype=object))
    return cols


def evaluate_exact(circuit: Circuit, inputs: list) -> list[np.ndarray]:
    """Exact integer outputs of the last layer: inputs[i] is the column of input i over P points."""
    return _run(circuit, inputs, with_bound=False)[0]


def float_exactness_bound(circuit: Circuit, inputs: list) -> tuple[int, int, list[np.ndarray]]:
    """(max over units and points of Σ_i |W_ki u_i| + |b_k|, the layer where it occurs, exact outputs).

    Computed alongside the exact evaluation, with the exact (nonnegative) unit values.
    """
    out, worst, where = _run(circuit, inputs, with_bound=True)
    return worst, where, out
