"""Why paper B's ReLU-network compiler needs a second STANDARD attention layer (Hu et al. 2025, Sec. 3.3).

A standard attention layer (token-wise linear maps, softmax over the n keys, positional encoding P)
computes, at position i:

    out_i = R (x_i W_E + P_i) + Σ_h W_O^h Σ_k softmax_k(q^h_i · k^h_k) (x_k W_E + P_k) W_V^h,
    q^h_i = (x_i W_E + P_i) W_Q^h,   k^h_k = (x_k W_E + P_k) W_K^h                              (*)

Two facts, both proved here and checked by `one_layer_limits`:

1. **Paper B's interpolation cannot act on a hidden unit in one standard layer.** The mechanism of Thm 3.4 /
   3.9 scores −β(y − L_k)² with y in the QUERY; by (*) every query is affine in ONE token (x_i and its
   position), while a hidden unit u_j = Σ_k W1[j, k]·x_k + b1_j of the benchmark nets depends on every
   token with position-dependent weights. So y = u_j must first be gathered into the tokens — one
   layer (the exact gather of `uatlab.constructions.paper_b.lem3_11_standard_attention`) — or formed
   by a linear map across positions (the non-standard ``seq_map``).
2. **Without data in the scores, one standard layer is affine in X.** If the scores do not depend on the
   data (only on positions: the gather layer's case), the softmax weights are constants and (*) is an
   affine function of X, whatever the number of heads. Its sup error over the box is then at least the
   midpoint defect of f: for box points A, B and t ∈ (0, 1), every affine a has
   f(P_t) − (1−t)f(A) − t f(B) = e(P_t) − (1−t)e(A) − t e(B) with e = f − a, so
   max|e| ≥ |f(P_t) − (1−t)f(A) − t f(B)| / 2 (P_t = (1−t)A + tB). The largest defect over sampled
   (A, B, t) and output coordinates is a rigorous lower bound; divided by an UPPER bound on the output
   range over the box (a linear program with the triangle relaxation of each ReLU, so at least the true
   range), it bounds the relative sup error from below.

3. **Scores that read the query's data and the keys' POSITIONS only are no better** (the lemma of
   docs/theory/paper-b-one-layer-standard.md). If every key z_k W_K^h reads only the positional channels
   (W_E W_K^h = 0; the query may read x_i, the values may carry positional constants acting as anchor
   values, and any number of extra positions with fixed content may be appended), the softmax weights at
   query i are functions of x_i alone, so for every FIXED x_i the output out_i is affine in the other
   tokens X_{−i} — whatever the number of heads, the width, the head dimension or the positional
   encoding. The midpoint defect of fact 2, taken over pairs A, B that SHARE token i and read at the
   outputs of position i, is then a rigorous lower bound on the sup error of every such layer
   (`positional_key_error_lower_bound`); `positional_key_layer` builds a random layer of this class (and,
   for contrast, one whose keys read the data) to check the affinity numerically.

Keys that read the data are treated in `uatlab.experiments.paper_b.one_layer_data_keys`: for n ≥ 3 tokens
and d ≥ 2 channels every one-layer standard form has symmetric cross-Hessian blocks (so no size reaches the
benchmark nets), while for n = 2 one such layer is universal
(`uatlab.constructions.paper_b.lem3_11_standard_two_tokens`). The price of the route that works is the
second layer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from uatlab.constructions.paper_b.lem3_11_relu_network import ReluNetwork, hidden_unit_ranges


def output_range_upper_bound(net: ReluNetwork, lo: float = 0.0, hi: float = 1.0) -> float:
    """An upper bound on max_o sup f_o − min_o inf f_o over the box [lo, hi]^{n·d}.

    Linear programs over (x, h) with the triangle relaxation of h_j = ReLU(u_j): h ≥ 0, h ≥ u,
    h ≤ U(u − L)/(U − L) (for L < 0 < U), h ≤ max(U, 0); every true (x, ReLU(u)) is feasible, so each LP
    optimum bounds the true extreme from outside (HiGHS, two LPs per output coordinate).
    """
    from scipy.optimize import linprog

    L, U = hidden_unit_ranges(net, lo, hi)
    J, p = net.W1.shape
    rows, rhs = [], []
    for j in range(J):
        r = np.zeros(p + J)
        r[:p], r[p + j] = net.W1[j], -1.0  # u_j − h_j ≤ −b1_j
        rows.append(r)
        rhs.append(-net.b1[j])
        if L[j] < 0 < U[j]:
            s = U[j] / (U[j] - L[j])
            r = np.zeros(p + J)
            r[:p], r[p + j] = -s * net.W1[j], 1.0  # h_j − s u_j ≤ s (b1_j − L_j)
            rows.append(r)
            rhs.append(s * (net.b1[j] - L[j]))
    A_ub, b_ub = np.array(rows), np.array(rhs)
    bounds = [(lo, hi)] * p + [(0.0, max(float(u), 0.0)) for u in U]
    top, bottom = -np.inf, np.inf
    for o in range(net.W2.shape[0]):
        c = np.r_[np.zeros(p), net.W2[o]]
        up = linprog(-c, A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs")
        down = linprog(c, A_ub=A_ub, b_ub=b_ub, bounds=bounds, method="highs")
        if up.status != 0 or down.status != 0:
            raise RuntimeError(f"range LP failed for output {o}: {up.message} / {down.message}")
        top, bottom = max(top, -up.fun + net.b2[o]), min(bottom, down.fun + net.b2[o])
    return float(top - bottom)


def affine_error_lower_bound(
    net: ReluNetwork, pairs: int = 1000, ts: int = 19, seed: int = 0, lo: float = 0.0, hi: float = 1.0
) -> dict[str, Any]:
    """max over sampled (A, B, t, o) of |f_o(P_t) − (1−t)f_o(A) − t f_o(B)| / 2 (module docstring, fact 2).

    Half of the pairs are antipodal box corners (A, 1 − A), half uniform points.
    """
    rng = np.random.default_rng(seed)
    n, d = net.n, net.d
    half = max(1, pairs // 2)
    corners = lo + (hi - lo) * rng.integers(0, 2, (half, n * d)).astype(np.float64)
    sets = [(corners, lo + hi - corners), (rng.uniform(lo, hi, (half, n * d)), rng.uniform(lo, hi, (half, n * d)))]
    best = {"lower_bound": 0.0}
    for A, B in sets:
        fa, fb = (net(P.reshape(-1, n, d)).reshape(len(P), -1) for P in (A, B))  # (half, n·d)
        for t in np.linspace(0, 1, ts + 2)[1:-1]:
            ft = net(((1 - t) * A + t * B).reshape(-1, n, d)).reshape(len(A), -1)
            defect = np.abs(ft - (1 - t) * fa - t * fb) / 2
            k = int(np.argmax(defect))
            if defect.flat[k] > best["lower_bound"]:
                best = {"lower_bound": float(defect.flat[k]), "output": k % defect.shape[1], "t": float(t)}
    return best


def positional_key_error_lower_bound(
    net: ReluNetwork, pairs: int = 400, ts: int = 19, seed: int = 0, lo: float = 0.0, hi: float = 1.0
) -> dict[str, Any]:
    """max over sampled (A, B, i, t, c) of |f_{i,c}(P_t) − (1−t)f_{i,c}(A) − t f_{i,c}(B)| / 2 with A_i = B_i.

    Fact 3 of the module docstring: every one-layer standard form whose keys read positions only is, for a
    fixed token i, affine in the other tokens, so this defect bounds its sup error from below. For each
    pair and each position i, B's token i is replaced by A's (half antipodal box corners, half uniform).
    """
    rng = np.random.default_rng(seed)
    n, d = net.n, net.d
    half = max(1, pairs // 2)
    corners = lo + (hi - lo) * rng.integers(0, 2, (half, n, d)).astype(np.float64)
    sets = [(corners, lo + hi - corners), (rng.uniform(lo, hi, (half, n, d)), rng.uniform(lo, hi, (half, n, d)))]
    best: dict[str, Any] = {"lower_bound": 0.0}
    for A, B in sets:
        fa = net(A)  # (half, n, d)
        for i in range(n):
            Bi = B.copy()
            Bi[:, i] = A[:, i]  # token i shared: the segment keeps x_i fixed
            fa_i, fb_i = fa[:, i], net(Bi)[:, i]  # (half, d)
            for t in np.linspace(0, 1, ts + 2)[1:-1]:
                ft_i = net((1 - t) * A + t * Bi)[:, i]
                defect = np.abs(ft_i - (1 - t) * fa_i - t * fb_i) / 2  # (half, d)
                k = int(np.argmax(defect))
                if defect.flat[k] > best["lower_bound"]:
                    row = k // d
                    best = {
                        "lower_bound": float(defect.flat[k]),
                        "position": i,
                        "channel": k % d,
                        "t": float(t),
                        "A": A[row].copy(),  # (n, d) the witness pair: A_i = B_i
                        "B": Bi[row].copy(),
                    }
    return best


def error_at_witness(model: Callable[[np.ndarray], np.ndarray], net: ReluNetwork, witness: dict[str, Any]) -> float:
    """max(|e(A)|, |e(B)|, |e(P_t)|) at output (i, c) of a witness from `positional_key_error_lower_bound`.

    For every positional-key layer this is ≥ the witness's lower bound (fact 3); ``model`` maps (B, n, d)
    arrays to (B, n, d) arrays.
    """
    A, B, t = witness["A"], witness["B"], witness["t"]
    pts = np.stack([A, B, (1 - t) * A + t * B])  # (3, n, d)
    e = np.abs(model(pts) - net(pts))[:, witness["position"], witness["channel"]]
    return float(e.max())


class TrainableStandardAttention(nn.Module):
    """Standard multi-head attention layers with residuals and a token-wise readout: the trained counterpart.

        z⁰_k = x_k W_E + P_k,   zˡ_i = zˡ⁻¹_i + Σ_h Σ_k softmax_k(q^h_i · k^h_k) zˡ⁻¹_k W_V^h W_O^h,   out = z^L W_R + b_R,
        q^h_i = zˡ⁻¹_i W_Q^h,   k^h_k = zˡ⁻¹_k W_K^h  (``keys="data"``)  or  P_k W_K^h  (``keys="positions"``).

    With ``layers=1`` and ``keys="positions"`` this is the class of fact 3 (the keys ignore the data;
    queries and values read it); ``layers=2`` is the two-layer control.
    """

    def __init__(
        self,
        n: int,
        d: int,
        *,
        layers: int = 1,
        width: int = 32,
        heads: int = 8,
        head_dim: int = 8,
        value_dim: int = 4,
        keys: str = "data",
        seed: int = 0,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        if keys not in ("data", "positions"):
            raise ValueError(f"keys must be 'data' or 'positions', got {keys!r}")
        self.keys = keys
        g = torch.Generator().manual_seed(seed)

        def param(*shape: int, std: float = 0.3) -> nn.Parameter:
            return nn.Parameter(torch.randn(*shape, generator=g, dtype=dtype) * std)

        self.W_E, self.P = param(d, width), param(n, width)  # (d, D), (n, D)
        self.W_Q = nn.ParameterList([param(width, heads, head_dim) for _ in range(layers)])  # (D, h, s)
        self.W_K = nn.ParameterList([param(width, heads, head_dim) for _ in range(layers)])
        self.W_V = nn.ParameterList([param(width, heads, value_dim) for _ in range(layers)])  # (D, h, v)
        self.W_O = nn.ParameterList([param(heads, value_dim, width, std=0.1) for _ in range(layers)])
        self.W_R, self.b_R = param(width, d), param(d)  # (D, d), (d,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = x.to(self.W_E.dtype) @ self.W_E + self.P  # (B, n, D)
        for W_Q, W_K, W_V, W_O in zip(self.W_Q, self.W_K, self.W_V, self.W_O, strict=True):
            q = torch.einsum("bnD,Dhs->bhns", z, W_Q)  # (B, h, n, s)
            if self.keys == "data":
                k = torch.einsum("bnD,Dhs->bhns", z, W_K)  # (B, h, n, s)
            else:
                k = torch.einsum("nD,Dhs->hns", self.P, W_K).unsqueeze(0)  # (1, h, n, s): positions only
            v = torch.einsum("bnD,Dhv->bhnv", z, W_V)  # (B, h, n, v)
            att = torch.softmax(q @ k.transpose(-1, -2), dim=-1)  # (B, h, n_query, n_key)
            z = z + torch.einsum("bhqk,bhkv,hvD->bqD", att, v, W_O)
        return z @ self.W_R + self.b_R


def train_standard_attention(
    net: ReluNetwork,
    *,
    heads: int = 8,
    keys: str = "data",
    layers: int = 1,
    steps: int = 300,
    batch: int = 128,
    lr: float = 1e-2,
    test: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Fit ``layers`` standard attention layers to ``net`` by Adam (one-cycle schedule, squared error, fresh uniform batches).

    Returns the float64 model as a numpy map and its sup / RMS error on ``test`` uniform inputs (the range is
    that of the test outputs, as in `uatlab.experiments.measure.measure_compiled`).
    """
    import torch

    torch.manual_seed(seed)
    t0 = time.process_time()
    model = TrainableStandardAttention(net.n, net.d, layers=layers, heads=heads, keys=keys, seed=seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=steps)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        x = rng.uniform(0.0, 1.0, (batch, net.n, net.d))  # (batch, n, d)
        y = torch.as_tensor(net(x), dtype=torch.float32)
        loss = ((model(torch.as_tensor(x, dtype=torch.float32)) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    model = model.double().eval()

    def run(x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return model(torch.as_tensor(np.asarray(x, np.float64))).numpy()

    xt = np.random.default_rng(seed + 1).uniform(0.0, 1.0, (test, net.n, net.d))
    yt = net(xt)
    err = np.abs(run(xt) - yt)
    out_range = float(yt.max() - yt.min())
    return {
        "run": run,
        "sup_error": float(err.max()),
        "rms_error": float(np.sqrt((err**2).mean())),
        "output_range": out_range,
        "relative_sup_error": float(err.max()) / out_range,
        "params": int(sum(p.numel() for p in model.parameters())),
        "cpu_seconds": time.process_time() - t0,
    }


def positional_key_layer(n: int, d: int, heads: int, seed: int = 0, keys_read_data: bool = False):
    """A random one-layer `StandardAttentionNetwork` of fact 3's class (keys read positions only), as a check.

    Width D = d + n: channels x (W_E = identity) and a one-hot position (P); queries, values, W_O and the
    readout read every channel; the keys read only the positional channels unless ``keys_read_data``.
    Scores are of order 3 so the softmax is far from uniform.
    """
    import torch

    from uatlab.constructions.paper_b.lem3_11_standard_attention import StandardAttentionNetwork

    g = torch.Generator().manual_seed(seed)
    D = d + n
    model = StandardAttentionNetwork(n, d, D, d, heads=[heads], head_dims=[4])
    with torch.no_grad():
        model.W_E.copy_(torch.eye(d, D, dtype=torch.float64))  # (d, D): x into channels 0..d−1
        model.P.copy_(torch.cat([torch.zeros(n, d, dtype=torch.float64), torch.eye(n, dtype=torch.float64)], 1))
        model.W_Q[0].copy_(torch.randn(heads, 4, D, generator=g, dtype=torch.float64))
        W_K = torch.randn(heads, 4, D, generator=g, dtype=torch.float64)  # (h, s, D)
        if not keys_read_data:
            W_K[:, :, :d] = 0.0  # keys read positions only
        model.W_K[0].copy_(W_K)
        model.W_V[0].copy_(torch.randn(heads, 1, D, generator=g, dtype=torch.float64))
        model.W_O[0].copy_(torch.randn(heads, D, generator=g, dtype=torch.float64))
        model.W_R.copy_(torch.randn(D, d, generator=g, dtype=torch.float64))
    return model


def affinity_defect(model, n: int, d: int, pairs: int = 64, seed: int = 0, fix_token: bool = True) -> float:
    """Largest |g_i(P_t) − (1−t)g_i(A) − t g_i(B)| of a model over random pairs, t = 1/3, every position i.

    With ``fix_token`` B's token i equals A's (fact 3: zero up to rounding for a positional-key layer).
    """
    import torch

    rng = np.random.default_rng(seed)
    A, B = rng.uniform(0, 1, (pairs, n, d)), rng.uniform(0, 1, (pairs, n, d))
    worst, t = 0.0, 1.0 / 3.0
    with torch.no_grad():
        run = lambda x: model(torch.as_tensor(x)).numpy()  # noqa: E731  (B, n, d)
        ga = run(A)
        for i in range(n):
            Bi = B.copy()
            if fix_token:
                Bi[:, i] = A[:, i]
            gt, gb = run((1 - t) * A + t * Bi), run(Bi)
            worst = max(worst, float(np.abs(gt[:, i] - (1 - t) * ga[:, i] - t * gb[:, i]).max()))
    return worst


def one_layer_limits(net: ReluNetwork, pairs: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Facts 1 and 2 of the module docstring for one benchmark net, measured (see the module docstring)."""
    t0 = time.process_time()
    n, d = net.n, net.d
    per_token = np.abs(net.W1.reshape(net.W1.shape[0], n, d)).sum(-1)  # (J, n)
    tokens_per_unit = (per_token > 0).sum(1)  # (J,)
    low = affine_error_lower_bound(net, pairs=pairs, seed=seed)
    r_ub = output_range_upper_bound(net)
    return {
        "min_tokens_per_hidden_unit": int(tokens_per_unit.min()),
        "sequence_length": n,
        "affine_sup_error_lower_bound": low["lower_bound"],
        "output_range_upper_bound": r_ub,
        "rel_sup_lower_bound": low["lower_bound"] / r_ub,
        "pairs": pairs,
        "cpu_seconds": time.process_time() - t0,
    }
