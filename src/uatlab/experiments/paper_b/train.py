"""Training loops: the repository's fixed-epoch schedule and a stated convergence criterion.

Convergence criterion (corrected runs): Adam, evaluate the validation loss after every epoch,
keep the best weights, and stop when the best validation loss has not improved by at least
``rel_tol`` (1 %) for ``patience`` epochs, or at ``max_epochs``. The trial records whether it
stopped by the criterion (``converged = True``) or hit the cap.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


@dataclass
class ErrorFigures:
    """Errors of a truncated-linear model on one split."""

    mse_all_channels: float  # the repository's metric: MSE over all output channels (zeros off channel 0)
    mse_target: float  # MSE on the target channel only
    sup_target: float  # max |error| on the target channel over samples and tokens (the theorem's norm)

    def as_dict(self, prefix: str) -> dict[str, float]:
        return {
            f"{prefix}mse_all_channels": self.mse_all_channels,
            f"{prefix}mse": self.mse_target,
            f"{prefix}sup": self.sup_target,
        }


def embed_target(y: torch.Tensor, out_dim: int) -> torch.Tensor:
    """(B, n) -> (B, n, out_dim): the target in channel 0, zeros elsewhere (the repository's layout)."""
    full = torch.zeros(*y.shape, out_dim, dtype=y.dtype)
    full[..., 0] = y
    return full


@torch.no_grad()
def evaluate_truncated(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 200) -> ErrorFigures:
    """MSE over all channels, MSE and sup-norm on channel 0, for ``model(x) ≈ y`` (x (N,n,d), y (N,n))."""
    was = model.training
    model.eval()
    sq_all, sq_t, sup, count = 0.0, 0.0, 0.0, 0
    for i in range(0, x.shape[0], batch):
        out = model(x[i : i + batch])  # (b, n, C)
        err = out - embed_target(y[i : i + batch], out.shape[-1])  # (b, n, C)
        sq_all += float(err.double().pow(2).mean()) * out.shape[0]
        sq_t += float(err[..., 0].double().pow(2).mean()) * out.shape[0]
        sup = max(sup, float(err[..., 0].abs().max()))
        count += out.shape[0]
    model.train(was)
    return ErrorFigures(sq_all / count, sq_t / count, sup)


def train_epoch(model: nn.Module, loader: DataLoader, opt: torch.optim.Optimizer, loss_fn: nn.Module) -> float:
    """One pass over ``loader``; returns the sample-weighted mean training loss."""
    total, count = 0.0, 0
    for xb, yb in loader:
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        total += float(loss.detach()) * xb.shape[0]
        count += xb.shape[0]
    return total / count


class PlateauStop:
    """The convergence criterion of the module docstring, in one place.

    `update` takes each epoch's validation loss: a value below ``best·(1 − rel_tol)`` resets the
    count, any other epoch adds one (a smaller value is still kept as the best weights); after
    ``patience`` such epochs the run has converged. A non-finite loss stops the run, not converged.
    """

    def __init__(self, patience: int, rel_tol: float = 0.01) -> None:
        self.patience, self.rel_tol = patience, rel_tol
        self.best, self.since, self.best_state, self.converged = math.inf, 0, None, False

    def update(self, val: float, model: nn.Module) -> bool:
        """Record ``val``; True when training should stop."""
        if not math.isfinite(val):
            return True
        if val < self.best * (1 - self.rel_tol):
            self.since = 0
        else:
            self.since += 1
        if val < self.best:
            self.best, self.best_state = val, copy.deepcopy(model.state_dict())
        self.converged = self.since >= self.patience
        return self.converged

    def restore_best(self, model: nn.Module) -> None:
        """Load the best weights seen (if any)."""
        if self.best_state is not None:
            model.load_state_dict(self.best_state)


@dataclass
class TrainLog:
    epochs: int = 0
    converged: bool = False
    train_loss: list[float] = field(default_factory=list)  # per-epoch mean training loss
    val_loss: list[float] = field(default_factory=list)  # per-epoch validation loss (converge mode)
    snapshots: dict[int, dict[str, float]] = field(default_factory=dict)  # epoch -> test figures


def train_truncated(
    model: nn.Module,
    x_train: torch.Tensor,
    y_train: torch.Tensor,
    *,
    epochs: int = 50,
    lr: float = 1e-3,
    batch_size: int = 32,
    x_val: torch.Tensor | None = None,
    y_val: torch.Tensor | None = None,
    converge: bool = False,
    patience: int = 20,
    rel_tol: float = 0.01,
    snapshot_epochs: tuple[int, ...] = (),
    x_test: torch.Tensor | None = None,
    y_test: torch.Tensor | None = None,
    lr_decay: bool = False,
) -> TrainLog:
    """Adam on MSE over the model's output channels (target in channel 0).

    ``converge=False``: exactly ``epochs`` epochs (the parity schedule). ``converge=True``: the
    criterion of the module docstring with ``epochs`` as the cap (``lr_decay`` halves the learning
    rate when the validation loss stalls for ``patience // 4`` epochs); the best-validation weights are
    restored at the end. Test figures are recorded at each of ``snapshot_epochs`` (e.g. 50, to put
    the parity schedule beside the converged point). Shuffling uses the global torch generator, as
    the repository's DataLoader does.
    """
    out_dim = model(x_train[:1]).shape[-1]
    loader = DataLoader(TensorDataset(x_train, embed_target(y_train, out_dim)), batch_size=batch_size, shuffle=True)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    # optional: halve the learning rate when the validation loss stalls (patience // 4 epochs)
    sched = (
        torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=max(1, patience // 4))
        if lr_decay
        else None
    )
    loss_fn = nn.MSELoss()
    log = TrainLog()
    stop = PlateauStop(patience, rel_tol)
    model.train()
    for epoch in range(1, epochs + 1):
        log.train_loss.append(train_epoch(model, loader, opt, loss_fn))
        log.epochs = epoch
        if epoch in snapshot_epochs and x_test is not None:
            log.snapshots[epoch] = evaluate_truncated(model, x_test, y_test).as_dict("")
        if converge:
            val = evaluate_truncated(model, x_val, y_val).mse_all_channels
            log.val_loss.append(val)
            if sched is not None and math.isfinite(val):
                sched.step(val)
            if stop.update(val, model):
                break
    if converge:
        log.converged = stop.converged
        stop.restore_best(model)
    model.eval()
    return log
