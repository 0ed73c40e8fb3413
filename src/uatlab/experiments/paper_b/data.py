"""Synthetic targets of paper B's experiments (Hu et al. 2025, repository MAGICS-LAB/UAP_Attention).

Two generators, both re-implemented from the description of paper B's experiments (Hu et al. 2025,
Section 6), not copied:

* `truncated_linear_data`: the per-token ramp target of Definition 3.1,
  ``y_i = Range_[a,b](w_i·x_i + t_i)`` with ``x_i ~ U[-5,5]^d``, ``w ~ N(0,1)^{n×d}``,
  ``t ~ N(0,1)^n``. ``parity=True`` consumes the torch RNG in the repository's order (re-seed, X,
  w, t, then a 800/200 ``random_split``), so a parity trial sees the same draws as truncated.py.
  The corrected mode draws the target (w, t) from a *fixed* target seed and chooses [a, b] so that
  a requested fraction of the targets is clipped (`range_for_clipped_fraction`).
* `relu_seq2seq_target` / `relu_seq2seq_data`: the random one-hidden-layer ReLU
  sequence-to-sequence target of seq2seq_data.py, ``Y = reshape(W2 ReLU(W1 vec X + b1) + b2)``
  with ``X ~ U[0,1]^{n×d}``, generated for whatever length ``n`` a run needs.

Layout: rows are tokens, ``X`` has shape (N, n, d) and ``y`` (N, n).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch

from uatlab.errors import InputError


@dataclass(frozen=True)
class TruncatedLinearTarget:
    """The ramp target ``y_i = clamp(w_i·x_i + t_i, a, b)`` for tokens i = 0..n-1.

    Attributes:
        w: (n, d) per-token weights (paper: w_i).
        t: (n,) per-token offsets (paper: t_i).
        a, b: the truncation interval [a, b] (paper: Range_[a,b]).
    """

    w: torch.Tensor  # (n, d)
    t: torch.Tensor  # (n,)
    a: float
    b: float

    def pre_activation(self, x: torch.Tensor) -> torch.Tensor:
        """(N, n, d) -> (N, n): the linear part w_i·x_i + t_i."""
        if x.shape[-2:] != self.w.shape:
            raise InputError(
                f"inputs of shape {tuple(x.shape)} do not match the target's (n, d) = {tuple(self.w.shape)}"
            )
        return (x * self.w).sum(-1) + self.t

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(N, n, d) -> (N, n): Range_[a,b](w_i·x_i + t_i)."""
        return torch.clamp(self.pre_activation(x), min=self.a, max=self.b)

    def clipped_fraction(self, x: torch.Tensor) -> float:
        """Fraction of the (sample, token) targets that lie outside [a, b] before clamping."""
        y = self.pre_activation(x)
        return float(((y < self.a) | (y > self.b)).double().mean())


@dataclass
class TruncatedLinearData:
    """Train / validation / test tensors of one truncated-linear run."""

    target: TruncatedLinearTarget
    x_train: torch.Tensor  # (N_train, n, d)
    y_train: torch.Tensor  # (N_train, n)
    x_val: torch.Tensor  # (N_val, n, d); empty in parity mode
    y_val: torch.Tensor  # (N_val, n)
    x_test: torch.Tensor  # (N_test, n, d)
    y_test: torch.Tensor  # (N_test, n)


def uniform_inputs(num: int, n: int, d: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """X ~ U[-5, 5]^{num×n×d} (float32), drawn as ``10·rand − 5`` like the repository."""
    return 10 * torch.rand(num, n, d, generator=generator) - 5  # (num, n, d)


def parity_truncated_linear_data(
    seed: int, n: int = 50, d: int = 10, a: float = -25.0, b: float = 25.0, num_samples: int = 1000
) -> TruncatedLinearData:
    """The repository's data of one trial, drawn in its RNG order.

    truncated.py seeds torch/numpy/random with the run seed, re-seeds inside the data set, draws
    X, then w, then t from the global torch generator, and splits 80/20 with ``random_split``
    (which consumes the same global generator). The model built afterwards continues from the
    same generator state, as in the repository.
    """
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    x = uniform_inputs(num_samples, n, d)  # (N, n, d)
    w = torch.randn(1, n, d)[0]  # (n, d)
    t = torch.randn(1, n, 1)[0, :, 0]  # (n,)
    target = TruncatedLinearTarget(w=w, t=t, a=float(a), b=float(b))
    y = target(x)  # (N, n)
    n_train = int(0.8 * num_samples)
    perm = torch.randperm(num_samples).tolist()  # what random_split draws
    tr, te = perm[:n_train], perm[n_train:]
    empty_x = x[:0]
    return TruncatedLinearData(target, x[tr], y[tr], empty_x, y[:0], x[te], y[te])


def range_for_clipped_fraction(
    w: torch.Tensor, t: torch.Tensor, clipped_fraction: float, width: float | None = None, probe: int = 20000
) -> tuple[float, float]:
    """An interval [a, b] that clips the requested fraction of the targets.

    Without ``width`` the interval is symmetric in probability: a and b are the
    ``f/2`` and ``1 − f/2`` quantiles of ``w_i·x_i + t_i`` pooled over tokens (X ~ U[-5,5]),
    estimated on ``probe`` fresh samples from a fixed generator. With ``width`` the interval is
    centred on the median and has that width (then the clipped fraction follows from it).
    """
    if not 0.0 <= clipped_fraction < 1.0:
        raise InputError(f"clipped fraction must be in [0, 1), got {clipped_fraction}")
    g = torch.Generator().manual_seed(987654321)
    x = uniform_inputs(probe, *w.shape, generator=g)  # (probe, n, d)
    y = ((x * w).sum(-1) + t).flatten().double()  # (probe·n,)
    if width is not None:
        mid = float(y.median())
        return mid - width / 2, mid + width / 2
    lo = float(torch.quantile(y, clipped_fraction / 2))
    hi = float(torch.quantile(y, 1 - clipped_fraction / 2))
    return lo, hi


def corrected_truncated_linear_data(
    n: int = 50,
    d: int = 10,
    clipped_fraction: float = 0.3,
    target_seed: int = 0,
    data_seed: int = 1,
    n_train: int = 800,
    n_val: int = 200,
    n_test: int = 2000,
    interval: tuple[float, float] | None = None,
) -> TruncatedLinearData:
    """Corrected data: (w, t) fixed by ``target_seed``, [a, b] set by the clipped fraction.

    The samples are drawn from ``data_seed`` (fixed across optimisation seeds too, so that the
    spread over seeds is optimisation variance only). ``interval`` overrides [a, b].
    """
    g = torch.Generator().manual_seed(int(target_seed))
    w = torch.randn(n, d, generator=g)  # (n, d)
    t = torch.randn(n, generator=g)  # (n,)
    a, b = interval if interval is not None else range_for_clipped_fraction(w, t, clipped_fraction)
    target = TruncatedLinearTarget(w=w, t=t, a=float(a), b=float(b))
    gd = torch.Generator().manual_seed(int(data_seed))
    x = uniform_inputs(n_train + n_val + n_test, n, d, generator=gd)  # (N, n, d)
    y = target(x)
    s1, s2 = n_train, n_train + n_val
    return TruncatedLinearData(target, x[:s1], y[:s1], x[s1:s2], y[s1:s2], x[s2:], y[s2:])


# --------------------------------------------------------------------------- seq2seq target
@dataclass(frozen=True)
class ReluSeq2SeqTarget:
    """Y = reshape(W2·ReLU(W1·vec(X) + b1) + b2): a random one-hidden-layer ReLU network.

    Every output token depends on every input token (paper B §3.3 proof strategy). Shapes:
    W1 (hidden, n·d), b1 (hidden,), W2 (n·d_out, hidden), b2 (n·d_out,), all N(0, 1) entries.
    """

    W1: torch.Tensor
    b1: torch.Tensor
    W2: torch.Tensor
    b2: torch.Tensor
    n: int
    d: int
    d_out: int

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        """(N, n, d) -> (N, hidden) post-ReLU activations."""
        return torch.relu(x.reshape(x.shape[0], -1) @ self.W1.T + self.b1)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(N, n, d) -> (N, n, d_out)."""
        return (self.hidden(x) @ self.W2.T + self.b2).reshape(x.shape[0], self.n, self.d_out)


def relu_seq2seq_problem(
    n: int = 20, d: int = 5, hidden: int = 10, num_train: int = 50000, num_test: int = 2000, seed: int = 42
) -> tuple[ReluSeq2SeqTarget, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """seq2seq_data.py's target and data for sequence length ``n``, in its RNG order (float32).

    One generator seeded with ``seed`` draws W1, b1, W2, b2 (N(0,1)), then the training inputs,
    then a *separate* test set (X ~ U[0,1]); at n = 20 these are the repository's draws.
    Returns (target, X_train, Y_train, X_test, Y_test) with X (N, n, d) and Y (N, n, d).
    """
    g = torch.Generator().manual_seed(int(seed))
    W1 = torch.randn(hidden, n * d, generator=g)  # (hidden, n·d)
    b1 = torch.randn(hidden, generator=g)
    W2 = torch.randn(n * d, hidden, generator=g)  # (n·d, hidden)
    b2 = torch.randn(n * d, generator=g)
    target = ReluSeq2SeqTarget(W1, b1, W2, b2, n, d, d)
    x_train = torch.rand(num_train, n, d, generator=g)  # (N, n, d)
    x_test = torch.rand(num_test, n, d, generator=g)
    return target, x_train, target(x_train), x_test, target(x_test)
