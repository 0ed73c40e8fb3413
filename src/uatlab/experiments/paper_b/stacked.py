"""Train S independent copies of `.models.TruncatedAttentionModel` (one per seed) in one pass.

A sweep point is run for all its seeds at once: the S models' parameters are stacked along a
leading axis and the forward pass uses batched matrix products, so the per-step Python/autograd
overhead (which dominates these ~6k-parameter models on a CPU) is paid once instead of S times.

The result equals S separate runs:

* each seed's data, initialisation and shuffling order are drawn exactly as the single run draws
  them (`prepare_seed` runs the same code with the same generator, then the epochs' batch
  orders are taken from a real ``DataLoader(shuffle=True)``, which consumes the generator the same way);
* the loss is the *sum* of the S per-seed mean-squared errors, so seed s's gradient is exactly
  the gradient of its own loss;
* Adam is elementwise, and is implemented here with a per-seed learning rate (so a per-seed
  "halve on plateau" schedule and per-seed early stopping are possible), matching
  ``torch.optim.Adam`` (β = (0.9, 0.999), ε = 1e-8, bias correction).

Floating-point sums are ordered differently from ``nn.Linear``, so results agree with single runs
to rounding, not bit for bit (the unit test checks the agreement).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch.utils.data import DataLoader, TensorDataset

from uatlab.experiments.paper_b.models import TruncatedAttentionConfig, TruncatedAttentionModel

_NAMES = (
    "mapping_A.token_proj.weight",
    "mapping_A.token_proj.bias",
    "mapping_A.modulation",
    "mapping_A.anchors",
    "attn.q_proj.weight",
    "attn.q_proj.bias",
    "attn.k_proj.weight",
    "attn.k_proj.bias",
    "attn.v_proj.weight",
    "attn.v_proj.bias",
    "attn.out_proj.weight",
    "attn.out_proj.bias",
)


class StackedTruncatedAttention(torch.nn.Module):
    """S models with the same config; parameter ``k`` has shape (S, *shape of the single model's k)."""

    def __init__(self, models: list[TruncatedAttentionModel]) -> None:
        super().__init__()
        self.config: TruncatedAttentionConfig = models[0].config
        self.S = len(models)
        states = [dict(m.named_parameters()) for m in models]
        self.params = torch.nn.ParameterList(
            torch.nn.Parameter(torch.stack([st[name].detach().clone() for st in states])) for name in _NAMES
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(S, B, n, d) -> (S, B, n, out_dim)."""
        Wp, bp, mod, anc, Wq, bq, Wk, bk, Wv, bv, Wo, bo = self.params
        c = self.config
        S, B = x.shape[:2]
        tok = (torch.einsum("sbnd,swd->sbnw", x, Wp) + bp[:, None, None]) * mod[:, None]  # (S, B, n, w)
        z = torch.cat([tok, anc[:, None].expand(S, B, -1, -1)], dim=2)  # (S, B, p, w)
        p = z.shape[2]

        def proj(W, b):  # (S, B, p, w) -> (S, B, H, p, s)
            return (
                (torch.einsum("sbpw,siw->sbpi", z, W) + b[:, None, None])
                .view(S, B, p, c.n_heads, c.head_dim)
                .transpose(2, 3)
            )

        q, k, v = proj(Wq, bq), proj(Wk, bk), proj(Wv, bv)
        weights = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(c.head_dim), dim=-1)  # (S, B, H, p, p)
        heads = (weights @ v).transpose(2, 3).reshape(S, B, p, c.n_heads * c.head_dim)  # (S, B, p, H·s)
        out = torch.einsum("sbpi,soi->sbpo", heads, Wo) + bo[:, None, None]  # (S, B, p, out)
        return out[:, :, : c.n]

    def unstack(self, s: int) -> TruncatedAttentionModel:
        """Seed s's model as an ordinary `TruncatedAttentionModel`."""
        model = TruncatedAttentionModel(self.config)
        with torch.no_grad():
            named = dict(model.named_parameters())
            for name, p in zip(_NAMES, self.params, strict=True):
                named[name].copy_(p[s])
        return model


@dataclass
class SeedRun:
    """What one seed contributes: its model at initialisation, its data and its batch orders."""

    model: TruncatedAttentionModel
    x_train: torch.Tensor  # (N, n, d)
    y_full: torch.Tensor  # (N, n, out_dim) target in channel 0
    orders: list[torch.Tensor] = field(default_factory=list)  # per epoch, (N,) permutation


def batch_orders(n_train: int, epochs: int, batch_size: int) -> list[torch.Tensor]:
    """The shuffling a ``DataLoader(shuffle=True)`` would use for ``epochs`` epochs (global generator)."""
    loader = DataLoader(TensorDataset(torch.arange(n_train)), batch_size=batch_size, shuffle=True)
    return [torch.cat([idx for (idx,) in loader]) for _ in range(epochs)]


def train_stacked(
    runs: list[SeedRun],
    *,
    epochs: int,
    lr: float,
    batch_size: int = 32,
    validate: Callable[[StackedTruncatedAttention], torch.Tensor] | None = None,
    patience: int = 20,
    rel_tol: float = 0.01,
    lr_decay: bool = False,
    on_epoch: Callable[[int, StackedTruncatedAttention], None] | None = None,
) -> dict[str, list]:
    """Adam on the summed per-seed MSE; optional per-seed convergence criterion (see train.py).

    ``validate(model) -> (S,)`` validation losses enables the criterion: per seed, stop when the
    best validation loss has not improved by ``rel_tol`` for ``patience`` epochs (the seed's
    parameters are then frozen at its best state), halving its learning rate after
    ``patience // 4`` stalled epochs when ``lr_decay``. Returns per-seed epochs, convergence flags
    and loss curves; ``model`` (key "model") holds each seed's best state.
    """
    S = len(runs)
    model = StackedTruncatedAttention([r.model for r in runs])
    params = list(model.params)
    m1 = [torch.zeros_like(p) for p in params]
    m2 = [torch.zeros_like(p) for p in params]
    b1, b2, eps = 0.9, 0.999, 1e-8
    lrs = torch.full((S,), float(lr))
    active = torch.ones(S, dtype=torch.bool)
    best = torch.full((S,), math.inf)
    since = torch.zeros(S, dtype=torch.long)
    stall = torch.zeros(S, dtype=torch.long)
    best_state = [p.detach().clone() for p in params]
    epochs_run = [epochs] * S
    converged = [False] * S
    curves: list[list[float]] = [[] for _ in range(S)]
    val_curves: list[list[float]] = [[] for _ in range(S)]
    x_all = torch.stack([r.x_train for r in runs])  # (S, N, n, d)
    y_all = torch.stack([r.y_full for r in runs])  # (S, N, n, C)
    n_train = x_all.shape[1]
    step = 0
    ar = torch.arange(S)[:, None]
    for epoch in range(1, epochs + 1):
        orders = torch.stack([r.orders[epoch - 1] for r in runs])  # (S, N)
        tot = torch.zeros(S)
        for start in range(0, n_train, batch_size):
            idx = orders[:, start : start + batch_size]  # (S, b)
            xb, yb = x_all[ar, idx], y_all[ar, idx]  # (S, b, n, d), (S, b, n, C)
            per_seed = ((model(xb) - yb) ** 2).mean(dim=(1, 2, 3))  # (S,)
            for p in params:
                p.grad = None
            per_seed.sum().backward()
            step += 1
            with torch.no_grad():
                for p, a1, a2 in zip(params, m1, m2, strict=True):
                    g = p.grad
                    a1.mul_(b1).add_(g, alpha=1 - b1)
                    a2.mul_(b2).addcmul_(g, g, value=1 - b2)
                    denom = (a2 / (1 - b2**step)).sqrt_().add_(eps)
                    scale = (lrs * active / (1 - b1**step)).view(S, *([1] * (p.dim() - 1)))
                    p.sub_(scale * a1 / denom)
            tot += per_seed.detach() * idx.shape[1]
        for s in range(S):
            if active[s]:
                curves[s].append(float(tot[s]) / n_train)
        if on_epoch is not None:
            on_epoch(epoch, model)
        if validate is None:
            continue
        with torch.no_grad():
            val = validate(model)  # (S,)
        for s in range(S):
            if not active[s]:
                continue
            v = float(val[s])
            val_curves[s].append(v)
            if v < best[s] * (1 - rel_tol):
                best[s], since[s], stall[s] = v, 0, 0
                for bs, p in zip(best_state, params, strict=True):
                    bs[s] = p.detach()[s]
            else:
                since[s] += 1
                stall[s] += 1
                if v < best[s]:
                    best[s] = v
                    for bs, p in zip(best_state, params, strict=True):
                        bs[s] = p.detach()[s]
                if lr_decay and stall[s] >= max(1, patience // 4):
                    lrs[s] *= 0.5
                    stall[s] = 0
                if since[s] >= patience or not math.isfinite(v):
                    active[s] = False
                    converged[s] = math.isfinite(v)
                    epochs_run[s] = epoch
        if not bool(active.any()):
            break
    if validate is not None:
        with torch.no_grad():
            for bs, p in zip(best_state, params, strict=True):
                p.copy_(bs)
    return {"model": model, "epochs": epochs_run, "converged": converged, "train_loss": curves, "val_loss": val_curves}
