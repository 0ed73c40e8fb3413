"""attn_map.py of paper B's repository: attention maps for several |b−a|, trained beside closed form.

Trained (parity): seed 1234 per r; d = 10, n = p = 30 (no extra tokens), 1000 samples
split 800/200; `.models.ManualKeyValueAttentionModel` (hidden 11, β = 25, key coordinate and
one value channel fixed to the anchor grid ``L = linspace(a, b, 30)``); Adam 1e-3, batch 32, 100
epochs; the maps of the first test samples. The value channel that holds the target is drawn with
Python's ``random.randint(0, 10)`` after seeding, as in the repository.

Closed form (Thm 3.9, token-wise A: the 30 tokens are the anchors): `.closed_form.write_interpolation_weights`
on a model with no anchor tokens, one head, for the *same* target and samples. Its map puts query
i's weight on the key k whose level ``L_k`` is nearest to ``y_i = w_i·x_i + t_i`` (clamped to [a, b]).
"""

from __future__ import annotations

import random
import time
from typing import Any

import numpy as np
import torch

from uatlab.experiments.paper_b.closed_form import write_interpolation_weights
from uatlab.experiments.paper_b.data import TruncatedLinearTarget, uniform_inputs
from uatlab.experiments.paper_b.models import (
    ManualKeyValueAttentionModel,
    TruncatedAttentionConfig,
    TruncatedAttentionModel,
)
from uatlab.experiments.paper_b.sweeps import git_revision
from uatlab.experiments.paper_b.train import evaluate_truncated, train_truncated

HEATMAP_RANGES = (0.5, 1.5, 3.0)


class _ChannelView(torch.nn.Module):
    """Puts the target channel of a multi-channel model first (for `evaluate_truncated`)."""

    def __init__(self, model: torch.nn.Module, channel: int) -> None:
        super().__init__()
        self.model, self.channel = model, channel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.model(x)  # (B, n, C)
        c = self.channel
        return torch.cat([out[..., c : c + 1], out[..., :c], out[..., c + 1 :]], dim=-1)


def run_heatmap_trial(params: dict[str, Any]) -> dict[str, Any]:
    """Train attn_map.py's model for one |b−a| and build the closed form; return both maps."""
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    r, seed, n, d = float(params["range"]), int(params["seed"]), int(params["n"]), int(params["d"])
    a, b = -r / 2, r / 2
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    x = uniform_inputs(int(params["n_samples"]), n, d)  # (N, n, d), repository order: X, w, t
    w = torch.randn(1, n, d)[0]
    t = torch.randn(1, n, 1)[0, :, 0]
    target = TruncatedLinearTarget(w, t, a, b)
    y = target(x)
    n_train = int(0.8 * x.shape[0])
    perm = torch.randperm(x.shape[0]).tolist()
    x_tr, y_tr, x_te, y_te = x[perm[:n_train]], y[perm[:n_train]], x[perm[n_train:]], y[perm[n_train:]]
    model = ManualKeyValueAttentionModel(d, n, a, b)
    model.value_channel = random.randint(0, model.hidden - 1)
    view = _ChannelView(model, model.value_channel)
    log = train_truncated(view, x_tr, y_tr, epochs=int(params["epochs"]), lr=1e-3, batch_size=32)
    trained = evaluate_truncated(view, x_te, y_te)
    k = int(params["num_examples"])
    with torch.no_grad():
        _, w_tr = model(x_te[:k], return_weights=True)  # (k, 1, n, n)
    closed = TruncatedAttentionModel(
        TruncatedAttentionConfig(n=n, d=d, n_anchors=0, width=d + 4, n_heads=1, head_dim=2, out_dim=1)
    )
    info = write_interpolation_weights(closed, target, sharpness=float(params.get("sharpness", 4.0)))
    cf = evaluate_truncated(closed, x_te, y_te)
    with torch.no_grad():
        _, w_cf = closed(x_te[:k], return_weights=True)  # (k, 1, n, n)

    def concentration(wts: torch.Tensor) -> float:
        return float(wts.max(-1).values.mean())  # mean over queries of the largest attention weight

    return {
        "git_rev": git_revision(),
        "n_params": sum(p.numel() for p in model.parameters()),
        "cf_n_params": closed.num_parameters(),
        "clipped_fraction_test": target.clipped_fraction(x_te),
        "value_channel": model.value_channel,
        **trained.as_dict("test_"),
        **cf.as_dict("cf_"),
        "cf_beta": info["beta"],
        "trained_max_weight": concentration(w_tr),
        "cf_max_weight": concentration(w_cf),
        "train_loss_curve": [round(v, 6) for v in log.train_loss],
        "trained_maps": w_tr[:, 0].tolist(),  # (k, n, n): [sample][query][key]
        "cf_maps": w_cf[:, 0].tolist(),
        "train_seconds": time.perf_counter() - t0,
    }
