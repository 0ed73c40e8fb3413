"""Compile a one-hidden-layer ReLU network on flattened sequences into softmax attention (paper B, Sec. 3.3).

Target (paper B's seq2seq experiment, the paper; Lemma 3.11):

    f(X) = reshape( W2 · ReLU(W1 · vec(X) + b1) + b2 )      X ∈ [lo, hi]^{n×d},  W1 ∈ R^{J×nd},  W2 ∈ R^{nd×J}

Construction (ours, following paper B's idea "every hidden unit is a truncated-linear head")
-------------------------------------------------------------------------------------------
For hidden unit j let u_j = W1_j·vec(X) + b1_j and [L_j, U_j] its exact range over the box (interval
arithmetic). For output coordinate (i, c) write W2[(i,c), j] = κ⁺ − κ⁻ with κ^± ≥ 0. Because ReLU is
positively homogeneous and ReLU(y) = Range_[0,K](y) whenever y ≤ K:

    κ·ReLU(u_j) = K · Range_[0,1](κ u_j / K)        for 0 ≤ κ ≤ K/U_j

Head h = (j, c, σ), σ ∈ {+, −}, gets K_h = max_i κ^σ_{(i,c),j} U_j and, at query token i, the
normalised input y'_{i,h} = κ^σ_{(i,c),j} u_j / K_h. All heads share m anchor tokens on [0, 1] (the
truncated-linear construction of `uatlab.constructions.paper_b.thm3_truncated_linear` with a = 0, b = 1), and
W_O^h = σ·K_h writes into output coordinate c. Summing the heads gives Σ_j W2[(i,c),j] ReLU(u_j);
the per-position output bias b2 is added as a positional encoding on the output.

So the network compiles into **one** attention layer. What it needs beyond a standard Transformer
(reported in `CompiledReluNetwork.nonstandard`):

* a linear map **across the sequence** (``seq_map``): y'_{i,h} depends on every token of X, with
  position-dependent coefficients; no token-wise layer can form it;
* **appended anchor tokens** (sequence-wise expansion of the input);
* a per-position output bias (a positional encoding, token-wise valid).

With these sequence-wise maps a second attention layer is unnecessary: paper B's two-layer form
exists because its maps between layers are restricted; we do not build it.

Error bound (proved from the truncated-linear bound, normalised spacing Δ' = 1/(m−1), x = βΔ'²):

    |g(X)_{i,c} − f(X)_{i,c}| ≤ Σ_{h active at (i,c)} K_h (Δ'/2 + T_in) + Σ_{h inactive} K_h (T_out + T_dead)

"active" heads have κ^σ_{(i,c),j} > 0; an inactive head has y' = 0 = L_0 and errs only by its tails.
The reported bound is the maximum over (i, c), plus the rounding estimate of the plan.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from uatlab._util import check_integer
from uatlab.constructions.contract import PAPER_B, Construction
from uatlab.constructions.paper_b.thm3_truncated_linear import (
    DEAD_SCORE,
    InterpolationPlan,
    plan_interpolation,
    tail_inside,
    tail_outside,
)
from uatlab.errors import InputError
from uatlab.models.attention_only import AttentionOnlyConfig, AttentionOnlyLayer, AttentionOnlyNetwork
from uatlab.numerics.float_bounds import unit_roundoff


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
        """From ``nn.Sequential(nn.Linear(n·d, J), nn.ReLU(), nn.Linear(J, n·d))`` (paper B, Lemma 3.11's target).

        The construction is exact only for this function, so the module's layers are checked, not just its
        ``Linear`` weights: after flattening nested ``nn.Sequential`` containers, the layers must be exactly
        ``Linear → ReLU → Linear``. Layers that compute the identity are skipped: ``nn.Identity``, and
        ``nn.Dropout`` (any of its variants) in eval mode or with p = 0. Anything else (another activation
        such as Tanh, Sigmoid or LeakyReLU, no activation, a trailing ReLU, dropout in training mode, a
        subclass with its own ``forward``, forward hooks) changes the function and is refused.

        Raises:
            InputError: naming the first unsupported layer and its index (its name in the Sequential), or the
                input width that does not match n·d.
        """
        if type(net).forward is not nn.Sequential.forward or not isinstance(net, nn.Sequential):
            raise InputError(
                f"only nn.Sequential(Linear, ReLU, Linear) compiles (paper B, Lemma 3.11); got a "
                f"{type(net).__name__}, whose forward cannot be read"
            )
        if net._forward_hooks or net._forward_pre_hooks:
            raise InputError("the Sequential has forward hooks, which change the function; remove them to compile")
        layers = list(_sequential_leaves(net, ""))
        want = [nn.Linear, nn.ReLU, nn.Linear]
        kept: list[tuple[str, nn.Module]] = []
        for name, m in layers:
            label = f"module {name} ({type(m).__name__})"
            if m._forward_hooks or m._forward_pre_hooks:
                raise InputError(f"{label} has forward hooks, which change the function; remove them to compile")
            if _is_identity_layer(m):
                continue
            if isinstance(m, nn.modules.dropout._DropoutNd):
                raise InputError(
                    f"{label} is dropout in training mode (p = {m.p}), a random function; call .eval() first"
                )
            pos = len(kept)
            if pos >= len(want):
                raise InputError(
                    f"{label} follows the output Linear; only Linear → ReLU → Linear compiles (paper B, Lemma 3.11)"
                )
            if type(m) is not want[pos]:
                raise InputError(
                    f"{label} is where a {want[pos].__name__} must be; only Linear → ReLU → Linear compiles "
                    f"(paper B, Lemma 3.11)"
                )
            kept.append((name, m))
        if len(kept) < len(want):
            raise InputError(
                f"the network has only {len(kept)} of the layers Linear → ReLU → Linear "
                f"(missing the {want[len(kept)].__name__}); only that form compiles (paper B, Lemma 3.11)"
            )
        lin = [kept[0][1], kept[2][1]]
        if lin[0].in_features != n * d:
            raise InputError(
                f"the network's input size {lin[0].in_features} does not match flattened sequences of {n}×{d} = {n * d}"
            )
        g = lambda t: t.detach().to(torch.float64).numpy()  # noqa: E731
        b1 = g(lin[0].bias) if lin[0].bias is not None else np.zeros(lin[0].out_features)
        b2 = g(lin[1].bias) if lin[1].bias is not None else np.zeros(lin[1].out_features)
        return cls(g(lin[0].weight), b1, g(lin[1].weight), b2, n, d)


def _sequential_leaves(net: nn.Sequential, prefix: str):
    """(name, layer) of a Sequential in call order, nested plain Sequentials flattened ("1.0" = child 0 of 1)."""
    for name, m in net.named_children():
        full = f"{prefix}{name}"
        if isinstance(m, nn.Sequential) and type(m).forward is nn.Sequential.forward:
            yield from _sequential_leaves(m, full + ".")
        else:
            yield full, m


def _is_identity_layer(m: nn.Module) -> bool:
    """True for layers that return their input unchanged: Identity, and dropout when off (eval mode or p = 0)."""
    if type(m) is nn.Identity:
        return True
    return isinstance(m, nn.modules.dropout._DropoutNd) and (not m.training or m.p == 0)


def random_relu_network(n: int = 20, d: int = 5, hidden: int = 10, seed: int = 0) -> ReluNetwork:
    """Paper B's seq2seq target generator: all weights N(0, 1)."""
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


class CompiledModelCalls:
    """Shared by the compiled ReLU-network results: non-zero parameter count and a batched float64 call.

    A subclass holds the torch ``model`` (input (B, n, d) float64 → output (B, n, d)) and may set
    ``eval_chunk``, the inputs per forward pass (smaller for wide models).
    """

    eval_chunk: ClassVar[int] = 64

    @property
    def params(self) -> int:
        """Non-zero parameters of the compiled model."""
        return int(sum(int((p != 0).sum()) for p in self.model.parameters()))  # type: ignore[attr-defined]

    def __call__(self, x: np.ndarray, chunk: int | None = None) -> np.ndarray:
        x = np.asarray(x, np.float64)
        step = chunk or self.eval_chunk
        out = []
        with torch.no_grad():
            for s in range(0, x.shape[0], step):
                out.append(self.model(torch.as_tensor(x[s : s + step])).numpy())  # type: ignore[attr-defined]
        return np.concatenate(out, axis=0)  # (B, n, d)


@dataclass
class CompiledReluNetwork(CompiledModelCalls):
    """The attention-only network, its interpolation plan and the proven sup-error bound."""

    model: AttentionOnlyNetwork
    net: ReluNetwork
    plan: InterpolationPlan
    bound: float
    heads: int
    domain: tuple[float, float]
    nonstandard: list[str] = field(default_factory=list)


def check_compile_request(
    domain: tuple[float, float], eps: float | None, anchors: int | None, name: str = "anchors", least: int = 2
) -> tuple[float, float]:
    """Validate a compile request shared by the ReLU compilers; return the box (lo, hi). ``anchors`` is the count
    the compiler takes instead of ``eps``, named ``name``, an integer ≥ ``least``."""
    lo, hi = (float(v) for v in domain)
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
        raise InputError(f"domain [{lo}, {hi}] is not a compact box: need finite lo < hi")
    if (eps is None) == (anchors is None):
        raise InputError(f"give exactly one of eps (target accuracy) or {name}")
    if eps is not None and not (eps > 0 and math.isfinite(eps)):
        raise InputError(f"eps must be a positive number, got {eps}")
    if anchors is not None:  # a fraction or a string is refused, not truncated or parsed
        check_integer(anchors, name, least, None)
    return lo, hi


def hidden_unit_ranges(net: ReluNetwork, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """Exact [L_j, U_j] of u_j = W1_j · vec X + b1_j over the box [lo, hi]^{nd} (interval arithmetic)."""
    pos, neg = np.maximum(net.W1, 0).sum(1), np.minimum(net.W1, 0).sum(1)  # (J,), (J,)
    return neg * hi + pos * lo + net.b1, pos * hi + neg * lo + net.b1


def live_hidden_units(net: ReluNetwork, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """`hidden_unit_ranges` and the units that are not identically 0 on the box (U_j > 0), in increasing order.

    Raises:
        InputError: every unit is inactive on the box (the network is constant there: nothing to compile).
    """
    Lw, U = hidden_unit_ranges(net, lo, hi)
    units = [int(j) for j in np.flatnonzero(U > 0)]
    if not units:
        raise InputError("every hidden unit is inactive on the domain: nothing to compile")
    return Lw, U, units


def as_relu_network(net: ReluNetwork | nn.Module, n: int | None, d: int | None) -> ReluNetwork:
    """``net`` itself, or an ``nn.Sequential(Linear, ReLU, Linear)`` read as a `ReluNetwork` of shape (n, d).

    Raises:
        InputError: ``n`` or ``d`` given and different from the `ReluNetwork`'s shape; a torch module without
            ``n`` and ``d``, or not of the form Linear → ReLU → Linear (`ReluNetwork.from_torch`).
    """
    if isinstance(net, ReluNetwork):
        for name, given, own in (("n", n, net.n), ("d", d, net.d)):
            if given is not None and given != own:
                raise InputError(f"{name}={given} was given but the ReLU network is for sequences of {net.n}×{net.d}")
        return net
    if not isinstance(net, nn.Module):
        raise InputError(f"expected a ReluNetwork or an nn.Sequential(Linear, ReLU, Linear), got {type(net).__name__}")
    if n is None or d is None:
        raise InputError("compiling a torch module needs the sequence shape: pass n= and d=")
    return ReluNetwork.from_torch(net, n, d)


def _plan_for_accuracy(
    anchors: int | None,
    eps: float | None,
    worst: float,
    bound_of: Callable[[InterpolationPlan], float],
    *,
    dtype: str,
    y_bound: float,
    n: int,
) -> InterpolationPlan:
    """The interpolation on [0, 1]: with ``anchors`` given, that many; else the fewest (growing by 10% from
    ⌈worst/eps⌉ + 1, since Δ'/2 · worst ≤ eps/2) whose proven ``bound_of(plan)`` ≤ eps (at most 10^6)."""
    if anchors is not None:
        return plan_interpolation(0.0, 1.0, anchors=anchors, dtype=dtype, y_bound=y_bound, n_dead=n)
    m = max(2, math.ceil(worst / eps) + 1)
    while True:
        plan = plan_interpolation(0.0, 1.0, anchors=m, dtype=dtype, y_bound=y_bound, n_dead=n)
        if bound_of(plan) <= eps or m > 10**6:
            return plan
        m = int(m * 1.1) + 1


def compile_relu_network(
    net: ReluNetwork | nn.Module,
    *,
    n: int | None = None,
    d: int | None = None,
    domain: tuple[float, float] = (0.0, 1.0),
    eps: float | None = None,
    anchors: int | None = None,
    dtype: str = "float64",
) -> Construction:
    """Compile f(X) = W2 ReLU(W1 vec X + b1) + b2 into one softmax attention layer (see module docstring).

    Args:
        net: a `ReluNetwork`, or an ``nn.Sequential(Linear, ReLU, Linear)`` with ``n``, ``d`` given.
        n, d: sequence shape (needed for a torch module; for a `ReluNetwork`, if given, they must equal its own).
        domain: inputs X ∈ [lo, hi]^{n×d} (compact box; the hidden ranges are computed on it).
        eps: target sup error per output coordinate; the anchor count is chosen so the proven bound ≤ eps.
        anchors: anchors m on the normalised interval [0, 1] instead of eps.
        dtype: "float64" (default) or "float32".

    Raises:
        InputError: a torch module that is not Linear → ReLU → Linear (naming the layer), n/d that differ
            from a `ReluNetwork`'s shape, wrong network input size, bad domain, eps ≤ 0, neither/both of eps
            and anchors.
        PrecisionError: the temperature overflows / loses the accuracy in ``dtype``.
    """
    net = as_relu_network(net, n, d)
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

    worst = float(((active * Ks).sum(-1)).max())  # Σ K over active heads at the worst coordinate
    plan = _plan_for_accuracy(anchors, eps, worst, bound_for, dtype=dtype, y_bound=y_bound, n=n)
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
    compiled = CompiledReluNetwork(
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
    return _as_construction(compiled, "Lemma 3.11 (one attention layer, a head per hidden unit)")


def _as_construction(compiled: CompiledReluNetwork, theorem: str) -> Construction:
    """The `Construction` of a compiled ReLU network (its ``detail`` is ``compiled``)."""
    facts = {
        "paper": PAPER_B,
        "theorem": theorem,
        "parameters": compiled.params,
        "parameters_counted": "non-zero entries",
        "heads": compiled.heads,
        "domain": compiled.domain,
        "nonstandard": list(compiled.nonstandard),
    }
    return Construction(
        model=compiled.model, guarantee={"sup_error_bound": compiled.bound}, facts=facts, detail=compiled
    )


# ==================================================================================================
# Two attention layers
#
# Compile a one-hidden-layer ReLU network into TWO softmax attention layers (paper B, Sec. 3.3 "Step 2").
#
# Target (paper B's seq2seq experiment, the paper item 4 and §6.6; Lemma 3.11):
#
#     f(X)_{i,c} = Σ_j W2[(i,c), j] · ReLU(u_j) + b2[(i,c)],   u_j = W1_j · vec(X) + b1_j,   X ∈ [lo, hi]^{n×d}
#
# Paper B (v2/ICLR Sec. 3.3, proof in App. G.5, eq. G.42) computes every hidden unit as a truncated-linear
# model with attention (layer 1) and lets a second attention layer combine the hidden units into the output
# tokens. The exact constants of the paper are not available; this is our derivation.
#
# Notation map (paper B → here)
# -----------------------------
# =====================================  ==========================================================
# paper B                                 here
# =====================================  ==========================================================
# w_j, t_j (hidden unit j)                ``net.W1[j]``, ``net.b1[j]``;  u_j = w_jᵀ vec(X) + t_j
# c_j (combination weight)                ``net.W2[(i,c), j]`` (per output coordinate (i, c))
# A1 (sequence-wise map before layer 1)   ``layers[0].seq_map`` + ``layers[0].anchors``  (non-standard)
# p (interpolation points)                ``anchors`` m of layer 1
# A2 (map before layer 2)                 ``layers[1].in_proj`` + ``layers[1].pos_bias`` (one-hot PE)
# β                                       ``layers[0].config.beta`` (layer 2 uses β = 1)
# =====================================  ==========================================================
#
# Layer 1: hidden units as truncated-linear heads (paper B Thm 3.4, sequence-wise A)
# -------------------------------------------------------------------------------------
# Let [L_j, U_j] be the exact range of u_j on the box (interval arithmetic). Units with U_j ≤ 0 are 0 on the
# whole domain and are dropped. For U_j > 0, since u_j ≤ U_j:
#
#     ReLU(u_j) = U_j · Range_[0,1](u_j / U_j) =: U_j · r_j
#
# Hidden unit j = g·(n−1) + k is placed at token k < n−1, channel g (G = ⌈J/(n−1)⌉ groups); the last token
# s = n−1 of every group holds no unit: the "sink" token used by layer 2. Layer 1 has G heads, head g is
# the sequence-wise truncated-linear construction of `uatlab.constructions.paper_b.thm3_truncated_linear` with
# a = 0, b = 1, m anchors appended to the sequence, and query input y'_{k,g} = u_{j(g,k)} / U_{j(g,k)} (0 for
# empty / dropped slots). Forming y'_{k,g} needs the whole sequence: ``seq_map`` (a linear map across
# positions). Its output at token k, channel g is r̂_{k,g} ≈ r_{j(g,k)}. By the truncated-linear bound
# (Δ' = 1/(m−1), x = βΔ'², n dead data keys):
#
#     |r̂ − r| ≤ ε₁ := Δ'/2 + T_in + T_dead + float₁          (every real unit: y' ≤ 1 always; y' < 0 is the
#                                                             clamp region, error ≤ ε₀ ≤ ε₁)
#     |r̂|     ≤ ε₀ := T_out + T_dead + float₁                 (y' = 0 = L_0, empty slots incl. the sink)
#
# Layer 2: positional-selector attention combining the hidden units (token-wise: only a PE is used)
# ---------------------------------------------------------------------------------------------------
# For output channel c, sign σ ∈ {+, −} and group g, head h = (c, σ, g) has the non-negative weights:
#
#     κ^h_{ik} = max(σ W2[(i,c), j(g,k)], 0) · U_{j(g,k)}     (0 for empty/dropped slots)
#     M^h = max_i Σ_k κ^h_{ik},   κ_min^h = e^{−60} M^h,   Z^h = 2 (M^h + n κ_min^h)
#
# and scores (β = 1) S^h_{ik} = log κ̃^h_{ik} with κ̃ = κ where κ > 0, κ̃ = κ_min on the other non-sink
# tokens, and κ̃_{is} = Z^h − Σ_{k≠s} κ̃_{ik} ≥ Z^h/2 on the sink. Then Σ_k κ̃_{ik} = Z^h for every i, so the
# softmax weights are exactly P^h_{ik} = κ̃^h_{ik} / Z^h. The score is a bilinear form of positions only:
# query_i = e_i (a one-hot positional encoding in ``pos_bias``), key_k = W_K^h e_k = (log κ̃^h_{·k}), so layer 2
# is a standard (token-wise) attention layer with a positional encoding. Values read channel g of layer 1
# (W_V^h), W_O^h = σ Z^h writes into output channel c. In exact arithmetic:
#
#     out_{i,c} = Σ_h σ Z^h Σ_k P^h_{ik} r̂_{k,g(h)} + b2[(i,c)]
#               = Σ_j W2[(i,c), j] U_j r̂_j + b2[(i,c)]  +  Σ_h σ(κ_min-floor terms + κ̃_{is} r̂_s)
#
# Error bound (layer-1 error propagated through layer 2's combination weights)
# -----------------------------------------------------------------------------
# Layer 2 introduces no interpolation error (its weights do not depend on the data). Subtracting
# f(X)_{i,c} = Σ_j W2[(i,c),j] U_j r_j + b2:
#
#     |g(X)_{i,c} − f(X)_{i,c}| ≤ ε₁ · Σ_j |W2[(i,c), j]| U_j⁺                         (propagated layer-1 error)
#                               + Σ_{h→c} [ n κ_min^h (1 + ε₁) + Z^h ε₀ + float₂^h ]    (floors, sink, rounding)
#
# with float₂^h = Z^h (1 + ε₁)(e^{2η} − 1 + 4nu), η = 4u·max|S^h| (an estimate of the softmax rounding, u the
# unit roundoff, not a proof; float₁ is the estimate of `plan_interpolation`). The reported ``bound`` is
# the maximum over (i, c).
#
# Non-standard maps this construction needs (listed in ``nonstandard``):
# layer 1's linear map across positions (``seq_map``) and its m appended anchor tokens. Layer 2 and the
# output bias b2 use only per-position biases (positional encodings), which a standard Transformer has.
#
# ==================================================================================================
#: relative weight e^{−FLOOR_GAP} given (via the score) to tokens a layer-2 head must ignore
FLOOR_GAP = 60.0


@dataclass
class CompiledReluNetworkTwoLayer(CompiledReluNetwork):
    """Two-layer compiled network (``model.layers`` has length 2). ``heads`` counts both layers.

    Extra attributes: ``heads_layer1`` / ``heads_layer2``, ``layer1_bound`` (ε₁, per normalised hidden unit)
    and ``propagated_bound`` (the ε₁ · Σ|W2|U part of ``bound``).
    """

    heads_layer1: int = 0
    heads_layer2: int = 0
    layer1_bound: float = math.nan
    propagated_bound: float = math.nan
    details: dict[str, float] = field(default_factory=dict)


def compile_relu_network_two_layer(
    net: ReluNetwork | nn.Module,
    *,
    n: int | None = None,
    d: int | None = None,
    domain: tuple[float, float] = (0.0, 1.0),
    eps: float | None = None,
    anchors: int | None = None,
    dtype: str = "float64",
) -> Construction:
    """Compile f(X) = W2 ReLU(W1 vec X + b1) + b2 into two softmax attention layers (module docstring).

    Args:
        net: a `ReluNetwork`, or an ``nn.Sequential(Linear, ReLU, Linear)`` with ``n``, ``d`` given.
        n, d: sequence shape (needed for a torch module; for a `ReluNetwork`, if given, they must equal its own).
        domain: inputs X ∈ [lo, hi]^{n×d}.
        eps: target sup error per output coordinate (the anchor count is chosen so the proven bound ≤ eps).
        anchors: layer-1 anchors m on [0, 1] instead of eps.
        dtype: "float64" (default) or "float32".

    Raises:
        InputError: a torch module that is not Linear → ReLU → Linear (naming the layer), n/d that differ
            from a `ReluNetwork`'s shape, wrong network input size, bad domain, eps ≤ 0, neither/both of eps
            and anchors, no active hidden unit.
        PrecisionError: the layer-1 temperature overflows / loses the accuracy in ``dtype``.
    """
    net = as_relu_network(net, n, d)
    lo, hi = check_compile_request(domain, eps, anchors)
    n, d, J = net.n, net.d, net.hidden
    if n < 2:
        raise InputError(f"the two-layer construction needs sequences of length n ≥ 2 (a sink token), got n={n}")
    G = math.ceil(J / (n - 1))  # groups of n − 1 unit slots; the last token n − 1 of every group is the sink
    sink = n - 1
    Lw, U, _ = live_hidden_units(net, lo, hi)  # (J,), (J,)
    live = U > 0  # (J,) units that are not identically 0 on the box
    Upos = np.where(live, U, 0.0)  # (J,)
    y_bound = max(1.0, float(np.max(np.abs(Lw[live]) / U[live])))

    # ---- layer-2 weights κ^h (independent of the layer-1 plan)
    W2 = net.W2.reshape(n, d, J)  # (n, d, J): W2[(i,c), j]
    slots = np.zeros((G, n), dtype=np.int64) - 1  # unit index held by (group, token), −1 = empty
    for j in range(J):
        slots[j // (n - 1), j % (n - 1)] = j
    heads2: list[tuple[int, int, int, np.ndarray]] = []  # (c, σ, g, κ (n, n) indexed [i, k])
    for c in range(d):
        for sign in (1, -1):
            for g in range(G):
                kappa = np.zeros((n, n))  # (query i, key k)
                for k in range(n):
                    j = slots[g, k]
                    if j >= 0 and live[j]:
                        kappa[:, k] = np.maximum(sign * W2[:, c, j], 0.0) * Upos[j]
                if kappa.sum() > 0:
                    heads2.append((c, sign, g, kappa))
    if not heads2:
        raise InputError("every hidden unit has zero output weights: nothing to compile")

    def bounds_for(plan: InterpolationPlan) -> tuple[float, float, float, float, dict[str, float]]:
        u = unit_roundoff(dtype)  # dtype checked by the plan (plan_interpolation)
        dl, x, m = plan.delta, plan.x, plan.anchors
        t_dead = n * math.exp(-DEAD_SCORE) * 4.0
        eps1 = dl / 2 + tail_inside(dl, x, m) + t_dead + plan.float_term
        eps0 = tail_outside(dl, x, m) + t_dead + plan.float_term
        prop = eps1 * (np.abs(W2) * Upos).sum(-1)  # (n, d)
        extra = np.zeros((n, d))
        for c, _s, _g, kappa in heads2:
            M = float(kappa.sum(1).max())
            kmin = math.exp(-FLOOR_GAP) * M
            Z = 2 * (M + n * kmin)
            s_max = abs(math.log(kmin)) + abs(math.log(Z))
            eta = 4 * u * s_max
            f2 = Z * (1 + eps1) * (math.expm1(2 * eta) + 4 * n * u)
            extra[:, c] += n * kmin * (1 + eps1) + Z * eps0 + f2
        tot = prop + extra
        return float(tot.max()), eps1, eps0, float(prop.max()), {"floor_sink_float": float(extra.max())}

    worst = float((np.abs(W2) * Upos).sum(-1).max())  # Σ_j |W2| U_j at the worst coordinate
    plan = _plan_for_accuracy(anchors, eps, worst, lambda p: bounds_for(p)[0], dtype=dtype, y_bound=y_bound, n=n)
    bound, eps1, eps0, prop, details = bounds_for(plan)
    m = plan.anchors

    # ---- layer 1: G sequence-wise truncated-linear heads on [0, 1]
    # lifted channels: 0 const | 1 key1 | 2 key2 (dead C for data tokens) | 3 value | 4 + g: y'_{k,g}
    cfg1 = AttentionOnlyConfig(
        d_in=d,
        d_model=4 + G,
        d_out=G,
        n_heads=G,
        head_dim=2,
        max_len=n,
        n_anchors=m,
        beta=plan.beta,
        positional_bias=True,
        sequence_map=True,
        residual=False,
        dtype=dtype,
    )
    layer1 = AttentionOnlyLayer(cfg1).zero_()
    dt = cfg1.torch_dtype
    kk = torch.arange(m, dtype=torch.float64)
    La = kk * plan.delta  # (m,) anchors L_k = kΔ' on [0, 1]
    W1 = torch.as_tensor(net.W1.reshape(J, n, d))  # (J, n, d)
    with torch.no_grad():
        layer1.pos_bias[:, 0] = 1.0
        layer1.pos_bias[:, 2] = DEAD_SCORE / plan.beta  # data tokens are dead keys: score −DEAD_SCORE
        layer1.anchors[:, 1] = La.to(dt)  # key1 = kΔ'
        layer1.anchors[:, 2] = (La * (La + La[0])).to(dt)  # key2 = kΔ'(L_k + L_0)
        layer1.anchors[:, 3] = La.to(dt)  # value = L_k
        for g in range(G):
            for k in range(n):
                j = int(slots[g, k])
                if j >= 0 and live[j]:
                    # y'_{k,g} = (W1_j · vec X + b1_j) / U_j: token k reads the WHOLE sequence (seq_map)
                    layer1.seq_map[k, 4 + g] = (W1[j] / float(U[j])).to(dt)  # (n, d)
                    layer1.pos_bias[k, 4 + g] = float(net.b1[j] / U[j])
            layer1.W_Q[g, 0, 4 + g] = 2.0  # query = β(2y', −1)
            layer1.W_Q[g, 1, 0] = -1.0
            layer1.W_K[g, 0, 1] = 1.0  # key = (kΔ', kΔ'(L_k + L_0)); data tokens (0, C)
            layer1.W_K[g, 1, 2] = 1.0
            layer1.W_V[g, 0, 3] = 1.0  # value = L_k (0 for data tokens)
            layer1.W_O[g, g, 0] = 1.0  # r̂_{k,g} into channel g

    # ---- layer 2: positional-selector heads, token-wise (one-hot PE), β = 1
    # lifted channels: 0..G−1: r̂ (copied by in_proj) | G + k: one-hot of position k (pos_bias)
    H2 = len(heads2)
    cfg2 = AttentionOnlyConfig(
        d_in=G,
        d_model=G + n,
        d_out=d,
        n_heads=H2,
        head_dim=n,
        max_len=n,
        n_anchors=0,
        beta=1.0,
        positional_bias=True,
        sequence_map=False,
        residual=False,
        dtype=dtype,
    )
    layer2 = AttentionOnlyLayer(cfg2).zero_()
    with torch.no_grad():
        layer2.in_proj[:G, :G] = torch.eye(G, dtype=dt)
        layer2.pos_bias[:, G:] = torch.eye(n, dtype=dt)  # one-hot positional encoding e_k
        for h, (c, sign, g, kappa) in enumerate(heads2):
            M = float(kappa.sum(1).max())
            kmin = math.exp(-FLOOR_GAP) * M
            Z = 2 * (M + n * kmin)
            s = sink
            kt = np.where(kappa > 0, kappa, kmin)  # (n, n) κ̃ on non-sink tokens
            kt[:, s] = 0.0
            kt[:, s] = Z - kt.sum(1)  # sink weight makes every row sum to Z (≥ Z/2 > 0)
            # score_{ik} = query_i · key_k = e_i · W_K[:, G + k] = log κ̃_{ik}
            layer2.W_Q[h, :, G:] = torch.eye(n, dtype=dt)  # query_i = e_i  (head_dim n)
            layer2.W_K[h, :, G:] = torch.as_tensor(np.log(kt)).to(dt)  # W_K[a, G + k] = log κ̃_{a k}
            layer2.W_V[h, 0, g] = 1.0  # value = r̂_{k,g}
            layer2.W_O[h, c, 0] = sign * Z  # σ Z^h into output channel c
    model = AttentionOnlyNetwork([layer1, layer2], output_bias=torch.as_tensor(net.b2.reshape(n, d)).to(dt))
    compiled = CompiledReluNetworkTwoLayer(
        model=model,
        net=net,
        plan=plan,
        bound=bound,
        heads=G + H2,
        domain=(lo, hi),
        nonstandard=[
            "layer 1 seq_map: a linear map across positions (token k reads the whole flattened sequence to form "
            "u_j / U_j)",
            f"layer 1 anchors: {m} anchor tokens appended to the sequence (dropped before layer 2)",
            "layer 2 pos_bias: a one-hot positional encoding (token-wise valid) selecting hidden-unit tokens",
            "output bias: per-position b2 (a positional encoding on the output, token-wise valid)",
        ],
        heads_layer1=G,
        heads_layer2=H2,
        layer1_bound=eps1,
        propagated_bound=prop,
        details={"eps0": eps0, **details},
    )
    return _as_construction(compiled, "Lemma 3.11 with two attention layers (Sec. 3.3, step 2)")
