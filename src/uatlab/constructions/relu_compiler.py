"""Compile a one-hidden-layer ReLU network on flattened sequences into softmax attention (paper B, Sec. 3.3).

Target (paper B's seq2seq experiment, spec ATTENTION_ONLY_APPROXIMATION.md §6.6; Lemma 3.11)::

    f(X) = reshape( W2 · ReLU(W1 · vec(X) + b1) + b2 )      X ∈ [lo, hi]^{n×d},  W1 ∈ R^{J×nd},  W2 ∈ R^{nd×J}

Construction (ours, following paper B's idea "every hidden unit is a truncated-linear head")
-------------------------------------------------------------------------------------------
For hidden unit j let u_j = W1_j·vec(X) + b1_j and [L_j, U_j] its exact range over the box (interval
arithmetic). For output coordinate (i, c) write W2[(i,c), j] = κ⁺ − κ⁻ with κ^± ≥ 0. Because ReLU is
positively homogeneous and ReLU(y) = Range_[0,K](y) whenever y ≤ K::

    κ·ReLU(u_j) = K · Range_[0,1](κ u_j / K)        for 0 ≤ κ ≤ K/U_j

Head h = (j, c, σ), σ ∈ {+, −}, gets K_h = max_i κ^σ_{(i,c),j} U_j and, at query token i, the
normalised input y'_{i,h} = κ^σ_{(i,c),j} u_j / K_h. All heads share m anchor tokens on [0, 1] (the
truncated-linear construction of :mod:`uatlab.constructions.truncated_linear` with a = 0, b = 1), and
W_O^h = σ·K_h writes into output coordinate c. Summing the heads gives Σ_j W2[(i,c),j] ReLU(u_j);
the per-position output bias b2 is added as a positional encoding on the output.

So the network compiles into **one** attention layer. What it needs beyond a standard Transformer
(reported in :attr:`CompiledReluNetwork.nonstandard`; paper B's reviewer R3 flags the same thing):

* a linear map **across the sequence** (``seq_map``): y'_{i,h} depends on every token of X, with
  position-dependent coefficients; no token-wise layer can form it;
* **appended anchor tokens** (sequence-wise expansion of the input);
* a per-position output bias (a positional encoding, token-wise valid).

With these sequence-wise maps a second attention layer is unnecessary: paper B's two-layer form
exists because its maps between layers are restricted; we do not build it.

Error bound (proved from the truncated-linear bound, normalised spacing Δ' = 1/(m−1), x = βΔ'²)::

    |g(X)_{i,c} − f(X)_{i,c}| ≤ Σ_{h active at (i,c)} K_h (Δ'/2 + T_in) + Σ_{h inactive} K_h (T_out + T_dead)

"active" heads have κ^σ_{(i,c),j} > 0; an inactive head has y' = 0 = L_0 and errs only by its tails.
The reported bound is the maximum over (i, c), plus the rounding estimate of the plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from uatlab.constructions.truncated_linear import (
    DEAD_SCORE,
    InterpolationPlan,
    plan_interpolation,
    tail_inside,
    tail_outside,
)
from uatlab.errors import InputError
from uatlab.models.attention_only import AttentionOnlyConfig, AttentionOnlyLayer, AttentionOnlyNetwork


@dataclass
class ReluNetwork:
    """f(X) = reshape(W2 ReLU(W1 vec(X) + b1) + b2) on sequences X ∈ R^{n×d} (row-major vec)."""

    W1: np.ndarray  # (J, n·d)
    b1: np.ndarray  # (J,)
    W2: np.ndarray  # (n·d, J)
    b2: np.ndarray  # (n·d,)
    n: int
    d: int

    def __post_init__(self) -> None:
        self.W1, self.b1 = np.asarray(self.W1, np.float64), np.asarray(self.b1, np.float64).reshape(-1)
        self.W2, self.b2 = np.asarray(self.W2, np.float64), np.asarray(self.b2, np.float64).reshape(-1)
        nd = self.n * self.d
        J = self.W1.shape[0]
        if self.W1.shape != (J, nd) or self.b1.shape != (J,) or self.W2.shape != (nd, J) or self.b2.shape != (nd,):
            raise InputError(
                f"ReLU network shapes do not fit sequences of {self.n}×{self.d}: W1 {self.W1.shape} (want (J, {nd})), "
                f"b1 {self.b1.shape}, W2 {self.W2.shape} (want ({nd}, J)), b2 {self.b2.shape}"
            )
        for name in ("W1", "b1", "W2", "b2"):
            if not np.isfinite(getattr(self, name)).all():
                raise InputError(f"ReLU network parameter {name} contains NaN or infinite values")

    @property
    def hidden(self) -> int:
        return self.W1.shape[0]

    @property
    def params(self) -> int:
        return self.W1.size + self.b1.size + self.W2.size + self.b2.size

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """x: (B, n, d) → (B, n, d)."""
        x = np.asarray(x, np.float64)
        if x.ndim != 3 or x.shape[1:] != (self.n, self.d):
            raise InputError(f"the network takes sequences of shape (batch, {self.n}, {self.d}), got {x.shape}")
        h = np.maximum(x.reshape(x.shape[0], -1) @ self.W1.T + self.b1, 0.0)  # (B, J)
        return (h @ self.W2.T + self.b2).reshape(x.shape)

    @classmethod
    def from_torch(cls, net: nn.Module, n: int, d: int) -> ReluNetwork:
        """From ``nn.Sequential(nn.Linear(n·d, J), nn.ReLU(), nn.Linear(J, n·d))``."""
        lin = [m for m in net.modules() if isinstance(m, nn.Linear)]
        if len(lin) != 2:
            raise InputError(f"expected a network with exactly two Linear layers, found {len(lin)}")
        if lin[0].in_features != n * d:
            raise InputError(
                f"the network's input size {lin[0].in_features} does not match flattened sequences of {n}×{d} = {n * d}"
            )
        g = lambda t: t.detach().to(torch.float64).numpy()  # noqa: E731
        b1 = g(lin[0].bias) if lin[0].bias is not None else np.zeros(lin[0].out_features)
        b2 = g(lin[1].bias) if lin[1].bias is not None else np.zeros(lin[1].out_features)
        return cls(g(lin[0].weight), b1, g(lin[1].weight), b2, n, d)


def random_relu_network(n: int = 20, d: int = 5, hidden: int = 10, seed: int = 0) -> ReluNetwork:
    """Paper B's seq2seq target generator (spec §6.6): all weights N(0, 1)."""
    rng = np.random.default_rng(seed)
    nd = n * d
    return ReluNetwork(
        rng.standard_normal((hidden, nd)),
        rng.standard_normal(hidden),
        rng.standard_normal((nd, hidden)),
        rng.standard_normal(nd),
        n,
        d,
    )


@dataclass
class CompiledReluNetwork:
    """The attention-only network, its interpolation plan and the proven sup-error bound."""

    model: AttentionOnlyNetwork
    net: ReluNetwork
    plan: InterpolationPlan
    bound: float
    heads: int
    domain: tuple[float, float]
    nonstandard: list[str] = field(default_factory=list)

    @property
    def params(self) -> int:
        """Non-zero parameters of the compiled model."""
        return int(sum(int((p != 0).sum()) for p in self.model.parameters()))

    def __call__(self, x: np.ndarray, chunk: int = 64) -> np.ndarray:
        x = np.asarray(x, np.float64)
        out = []
        with torch.no_grad():
            for s in range(0, x.shape[0], chunk):
                out.append(self.model(torch.as_tensor(x[s : s + chunk])).numpy())  # (chunk, n, d)
        return np.concatenate(out, axis=0)


def check_compile_request(
    domain: tuple[float, float], eps: float | None, anchors: int | None
) -> tuple[float, float]:
    """Validate a compile request shared by both ReLU compilers; return the box (lo, hi)."""
    lo, hi = (float(v) for v in domain)
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
        raise InputError(f"domain [{lo}, {hi}] is not a compact box: need finite lo < hi")
    if (eps is None) == (anchors is None):
        raise InputError("give exactly one of eps (target accuracy) or anchors")
    if eps is not None and not (eps > 0 and math.isfinite(eps)):
        raise InputError(f"eps must be a positive number, got {eps}")
    return lo, hi


def hidden_unit_ranges(net: ReluNetwork, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact [L_j, U_j] of u_j = W1_j · vec X + b1_j over the box [lo, hi]^{nd} (interval arithmetic)."""
    pos, neg = np.maximum(net.W1, 0).sum(1), np.minimum(net.W1, 0).sum(1)  # (J,), (J,)
    return neg * hi + pos * lo + net.b1, pos * hi + neg * lo + net.b1


def compile_relu_network(
    net: ReluNetwork | nn.Module,
    *,
    n: int | None = None,
    d: int | None = None,
    domain: tuple[float, float] = (0.0, 1.0),
    eps: float | None = None,
    anchors: int | None = None,
    dtype: str = "float64",
) -> CompiledReluNetwork:
    """Compile f(X) = W2 ReLU(W1 vec X + b1) + b2 into one softmax attention layer (see module docstring).

    Args:
        net: a :class:`ReluNetwork`, or an ``nn.Sequential(Linear, ReLU, Linear)`` with ``n``, ``d`` given.
        n, d: sequence shape (needed for a torch module).
        domain: inputs X ∈ [lo, hi]^{n×d} (compact box; the hidden ranges are computed on it).
        eps: target sup error per output coordinate; the anchor count is chosen so the proven bound ≤ eps.
        anchors: anchors m on the normalised interval [0, 1] instead of eps.
        dtype: "float64" (default) or "float32".

    Raises:
        InputError: wrong network input size, bad domain, eps ≤ 0, neither/both of eps and anchors.
        PrecisionError: the temperature overflows / loses the accuracy in ``dtype``.
    """
    if not isinstance(net, ReluNetwork):
        if n is None or d is None:
            raise InputError("compiling a torch module needs the sequence shape: pass n= and d=")
        net = ReluNetwork.from_torch(net, n, d)
    lo, hi = check_compile_request(domain, eps, anchors)
    n, d, J = net.n, net.d, net.hidden
    W2 = net.W2.reshape(n, d, J)  # (n, d, J): W2[(i,c), j]
    # exact range of u_j over the box: interval arithmetic on an affine function
    Lw, U = hidden_unit_ranges(net, lo, hi)  # (J,), (J,)
    heads: list[tuple[int, int, int, np.ndarray, float]] = []  # (j, c, sign, κ over positions (n,), K)
    for j in range(J):
        if U[j] <= 0:
            continue  # the unit is 0 on the whole domain
        for c in range(d):
            for sign in (1, -1):
                kappa = np.maximum(sign * W2[:, c, j], 0.0)  # (n,)
                K = float(kappa.max() * U[j])
                if K > 0:
                    heads.append((j, c, sign, kappa, K))
    if not heads:
        raise InputError("every hidden unit is inactive (or has zero output weights) on the domain: nothing to compile")
    Ks = np.array([h[4] for h in heads])
    active = np.zeros((n, d, len(heads)), dtype=bool)
    for h, (_j, c, _s, kappa, _K) in enumerate(heads):
        active[:, c, h] = kappa > 0
    # normalised query range: y' ∈ [κ L_j/K, 1]
    y_bound = max(1.0, max(float(kappa.max() * abs(Lw[j]) / K) for (j, _c, _s, kappa, K) in heads))

    def bound_for(plan: InterpolationPlan) -> float:
        dl, x, m = plan.delta, plan.x, plan.anchors
        t_dead = n * math.exp(-DEAD_SCORE) * 4.0
        per_active = dl / 2 + tail_inside(dl, x, m) + t_dead
        per_inactive = tail_outside(dl, x, m) + t_dead
        tot = (active * Ks).sum(-1) * per_active + ((~active) * Ks).sum(-1) * per_inactive  # (n, d)
        return float(tot.max()) + plan.float_term * float(Ks.sum())  # rounding estimate, every head

    if anchors is not None:
        plan = plan_interpolation(0.0, 1.0, anchors=anchors, dtype=dtype, y_bound=y_bound, n_dead=n)
    else:
        worst = float(((active * Ks).sum(-1)).max())  # Σ K over active heads at the worst coordinate
        m = max(2, math.ceil(worst / eps) + 1)  # Δ'/2 · worst ≤ eps/2
        while True:
            plan = plan_interpolation(0.0, 1.0, anchors=m, dtype=dtype, y_bound=y_bound, n_dead=n)
            if bound_for(plan) <= eps or m > 10**6:
                break
            m = int(m * 1.1) + 1
    bound = bound_for(plan)
    m, H = plan.anchors, len(heads)
    # lifted channels: 0 const | 1 key1 | 2 key2 (dead C for data tokens) | 3 value | 4 + h: y'_h
    d_model = 4 + H
    cfg = AttentionOnlyConfig(
        d_in=d,
        d_model=d_model,
        d_out=d,
        n_heads=H,
        head_dim=2,
        max_len=n,
        n_anchors=m,
        beta=plan.beta,
        positional_bias=True,
        sequence_map=True,
        residual=False,
        dtype=dtype,
    )
    layer = AttentionOnlyLayer(cfg).zero_()
    dt = cfg.torch_dtype
    k = torch.arange(m, dtype=torch.float64)
    L = k * plan.delta  # anchors on [0, 1]
    W1 = torch.as_tensor(net.W1.reshape(J, n, d))  # (J, n, d)
    with torch.no_grad():
        layer.pos_bias[:, 0] = 1.0
        layer.pos_bias[:, 2] = DEAD_SCORE / plan.beta  # data tokens are dead keys
        layer.anchors[:, 1] = (k * plan.delta).to(dt)  # key1 = kΔ'
        layer.anchors[:, 2] = (k * plan.delta * (L + L[0])).to(dt)  # key2 = kΔ'(L_k + L_0)
        layer.anchors[:, 3] = L.to(dt)  # value = L_k
        for h, (j, c, sign, kappa, K) in enumerate(heads):
            scale = torch.as_tensor(kappa / K)  # (n,) per query position
            # y'_{i,h} = (κ_i/K)(Σ_{j',c'} W1[j, j', c'] x_{j',c'} + b1_j): a linear map ACROSS positions
            layer.seq_map[:, 4 + h, :, :] = (scale[:, None, None] * W1[j][None]).to(dt)  # (n, n, d)
            layer.pos_bias[:, 4 + h] = (scale * float(net.b1[j])).to(dt)
            layer.W_Q[h, 0, 4 + h] = 2.0  # query = β(2y', −1)
            layer.W_Q[h, 1, 0] = -1.0
            layer.W_K[h, 0, 1] = 1.0
            layer.W_K[h, 1, 2] = 1.0
            layer.W_V[h, 0, 3] = 1.0
            layer.W_O[h, c, 0] = sign * K  # σ K_h into output coordinate c
    model = AttentionOnlyNetwork([layer], output_bias=torch.as_tensor(net.b2.reshape(n, d)).to(dt))
    return CompiledReluNetwork(
        model=model,
        net=net,
        plan=plan,
        bound=bound,
        heads=H,
        domain=(lo, hi),
        nonstandard=[
            "seq_map: a linear map across positions (each hidden unit reads the whole flattened sequence)",
            f"anchors: {m} anchor tokens appended to the sequence",
        ],
    )


def measure_compiled(compiled: CompiledReluNetwork, samples: int = 200, seed: int = 0) -> dict[str, float]:
    """Sup error of the compiled model against the network on random inputs plus the box corners' midpoints."""
    rng = np.random.default_rng(seed)
    lo, hi = compiled.domain
    n, d = compiled.net.n, compiled.net.d
    x = rng.uniform(lo, hi, size=(samples, n, d))
    x[0] = lo
    x[1 % samples] = hi
    y = compiled.net(x)
    g = compiled(x)
    err = np.abs(g - y)
    out_range = float(y.max() - y.min())
    return {
        "sup_error": float(err.max()),
        "mean_abs_error": float(err.mean()),
        "output_range": out_range,
        "relative_sup_error": float(err.max() / out_range) if out_range > 0 else math.nan,
    }
