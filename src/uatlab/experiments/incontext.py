"""In-context regression beyond least squares: paper B's constructions and a trained attention-only model.

Two tasks, each with a closed-form solution (Hu et al. 2025, App. B, extended):

* ``ridge``: y = wᵀx + σξ, the closed form ŷ_q = x_qᵀ(XᵀX + NλI)^{-1}Xᵀy;
* ``relu-features``: y = wᵀφ(x) + σξ with φ(x) = (x, ReLU(x)) (a piecewise-linear function of x with a
  kink at 0 per coordinate), the closed form is ridge on the features
  (`uatlab.constructions.paper_b.appB_incontext_features`).

x ~ U[−1, 1]^d, w ~ N(0, I_p), ξ ~ N(0, 1). With λ = σ²/N the closed form is the posterior mean of
y_q given the context (Bayes-optimal under this prior), so a model trained on the labels y_q has the
closed form as its population optimum: E(f − y_q)² = E(f − ŷ_q)² + E(ŷ_q − y_q)².

Beside the closed-form constructions, `train_attention_only` trains an attention-only network
(`uatlab.models.attention_only.AttentionOnlyNetwork`: softmax heads, no feed-forward layer, a
few trainable anchor tokens) on fresh tasks, on the labels only. Both are measured against the closed
form on the same held-out tasks: relative sup error max|f − ŷ| / max|ŷ| and relative RMS error
‖f − ŷ‖/‖ŷ‖. Baselines: the zero predictor (relative RMS 1) and, for ``relu-features``, linear ridge on x.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from uatlab.constructions.paper_b.appB_incontext_features import (
    build_incontext_features,
    feature_ridge_closed_form,
    relu_features,
)
from uatlab.constructions.paper_b.appB_incontext_ridge import (
    build_incontext_ridge,
    predict_ridge,
    ridge_closed_form,
    ridge_gd,
)
from uatlab.errors import InputError
from uatlab.models.attention_only import AttentionOnlyConfig, AttentionOnlyLayer, AttentionOnlyNetwork

TASKS = ("ridge", "relu-features")


@dataclass(frozen=True)
class TaskSpec:
    """One in-context regression problem: task, input dimension d, context N, label noise σ."""

    task: str = "relu-features"
    d: int = 2
    context: int = 16
    noise: float = 1.0

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise InputError(f"task must be one of {TASKS}, got {self.task!r}")
        if self.d < 1 or self.context < 1:
            raise InputError(f"d and context must be positive, got d={self.d}, context={self.context}")
        if not (self.noise > 0 and math.isfinite(self.noise)):
            raise InputError(f"noise must be a positive number, got {self.noise}")

    @property
    def lam(self) -> float:
        """λ = σ²/N: the ridge parameter whose closed form is the posterior mean under w ~ N(0, I)."""
        return self.noise**2 / self.context

    def features(self, x: np.ndarray) -> np.ndarray:
        return relu_features(x) if self.task == "relu-features" else np.asarray(x, np.float64)


def sample_tasks(spec: TaskSpec, batch: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """x_ctx (B, N, d), y_ctx (B, N), x_q (B, d), y_q (B,) for ``batch`` fresh tasks (float64)."""
    x = rng.uniform(-1.0, 1.0, (batch, spec.context + 1, spec.d))
    phi = spec.features(x)  # (B, N+1, p)
    w = rng.standard_normal((batch, phi.shape[-1]))
    y = np.einsum("bnp,bp->bn", phi, w) + spec.noise * rng.standard_normal((batch, spec.context + 1))
    return x[:, :-1], y[:, :-1], x[:, -1], y[:, -1]


def closed_form(spec: TaskSpec, x_ctx: np.ndarray, y_ctx: np.ndarray, x_q: np.ndarray) -> np.ndarray:
    """The closed-form ridge prediction of the task (on x or on φ(x)), (B,)."""
    if spec.task == "relu-features":
        return feature_ridge_closed_form(x_ctx, y_ctx, x_q, spec.lam)
    return ridge_closed_form(x_ctx, y_ctx, x_q, spec.lam)


def relative_errors(pred: np.ndarray, exact: np.ndarray) -> dict[str, float]:
    """max|f − ŷ|/max|ŷ| and ‖f − ŷ‖/‖ŷ‖."""
    pred, exact = np.asarray(pred, np.float64), np.asarray(exact, np.float64)
    return {
        "rel_sup": float(np.abs(pred - exact).max() / np.abs(exact).max()),
        "rel_rms": float(np.linalg.norm(pred - exact) / np.linalg.norm(exact)),
    }


def gd_step_size(spec: TaskSpec, x_ctx: np.ndarray) -> float:
    """η = 1/(L + λ) with L the largest eigenvalue of ΦᵀΦ/N over the batch (GD converges for every task)."""
    phi = spec.features(x_ctx)
    L = float(np.max(np.linalg.eigvalsh(np.einsum("bnp,bnq->bpq", phi, phi) / spec.context)))
    return 1.0 / (L + spec.lam)


def construction_errors(
    spec: TaskSpec, x_ctx, y_ctx, x_q, steps: int, anchors: int = 33, heads: int = 4
) -> dict[str, Any]:
    """The k-layer construction against the closed form, with its parts (feature error, GD remainder)."""
    exact = closed_form(spec, x_ctx, y_ctx, x_q)
    eta = gd_step_size(spec, x_ctx)
    t0 = time.process_time()
    if spec.task == "relu-features":
        c = build_incontext_features(spec.d, spec.context, spec.lam, steps=steps, lr=eta, anchors=anchors, heads=heads)
        pred = c.detail.predict(x_ctx, y_ctx, x_q)
        phi_ctx, phi_q = c.detail.features(x_ctx, x_q)
        feature_err = float(max(np.abs(phi_ctx - relu_features(x_ctx)).max(), np.abs(phi_q - relu_features(x_q)).max()))
        extra = {"feature_sup_error": feature_err, "feature_bound": c.guarantee["feature_sup_error_bound"]}
    else:
        c = build_incontext_ridge(spec.d, spec.context, spec.lam, steps=steps, lr=eta)
        pred = predict_ridge(c, x_ctx, y_ctx, x_q, spec.lam)
        extra = {}
    gd = ridge_gd(spec.features(x_ctx), y_ctx, spec.features(x_q), spec.lam, eta, steps)
    return {
        "steps": steps,
        "layers": steps + (1 if spec.task == "relu-features" else 0),
        "parameters": int(c.facts["parameters"]),
        "gd_remainder_rel_sup": relative_errors(gd, exact)["rel_sup"],
        **relative_errors(pred, exact),
        **extra,
        "cpu_seconds": time.process_time() - t0,
    }


# ---------------------------------------------------------------------------------------- trained model
def icl_tokens(x_ctx: torch.Tensor, y_ctx: torch.Tensor, x_q: torch.Tensor) -> torch.Tensor:
    """Tokens (x_i, y_i) for the context and (x_q, 0) for the query (last): (B, N+1, d+1)."""
    B, N, d = x_ctx.shape
    tok = torch.zeros(B, N + 1, d + 1, dtype=x_ctx.dtype)
    tok[:, :N, :d] = x_ctx
    tok[:, :N, d] = y_ctx
    tok[:, N, :d] = x_q
    return tok


def attention_only_model(
    d: int, context: int, layers: int = 3, width: int = 32, heads: int = 4, anchors: int = 2, seed: int = 0
) -> AttentionOnlyNetwork:
    """An attention-only network for in-context regression: layer 1 lifts (x, y) to ``width``, the middle
    layers are residual, the last writes one channel (the prediction, read at the query position)."""
    if layers < 2:
        raise InputError(f"the trained model needs at least 2 layers, got {layers}")
    torch.manual_seed(seed)
    head_dim = max(2, width // heads)
    stack = []
    for i in range(layers):
        d_in = d + 1 if i == 0 else width
        d_out = 1 if i == layers - 1 else width
        cfg = AttentionOnlyConfig(
            d_in=d_in,
            d_model=width,
            d_out=d_out,
            n_heads=heads,
            head_dim=head_dim,
            max_len=context + 1,
            n_anchors=anchors,
            positional_bias=True,
            residual=(d_in == d_out),
            dtype="float32",
        )
        stack.append(AttentionOnlyLayer(cfg))
    return AttentionOnlyNetwork(stack)


def predict_trained(model: AttentionOnlyNetwork, x_ctx, y_ctx, x_q) -> np.ndarray:
    """The trained model's prediction at the query position, (B,) float64."""
    with torch.no_grad():
        tok = icl_tokens(*(torch.as_tensor(np.asarray(a), dtype=torch.float32) for a in (x_ctx, y_ctx, x_q)))
        return model(tok)[:, -1, 0].double().numpy()


def train_attention_only(
    spec: TaskSpec,
    steps: int = 2000,
    batch: int = 128,
    lr: float = 3e-3,
    layers: int = 3,
    width: int = 32,
    heads: int = 4,
    anchors: int = 2,
    seed: int = 0,
) -> tuple[AttentionOnlyNetwork, dict[str, Any]]:
    """Adam on fresh tasks each step, MSE to the labels y_q (warm-up then cosine decay). Deterministic per seed."""
    torch.set_num_threads(1)
    model = attention_only_model(spec.d, spec.context, layers, width, heads, anchors, seed)
    rng = np.random.default_rng(seed + 1000)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps))
    )
    t0 = time.process_time()
    losses = []
    for _ in range(steps):
        x_ctx, y_ctx, x_q, y_q = (torch.as_tensor(a, dtype=torch.float32) for a in sample_tasks(spec, batch, rng))
        pred = model(icl_tokens(x_ctx, y_ctx, x_q))[:, -1, 0]  # (B,)
        loss = torch.mean((pred - y_q) ** 2)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    info = {
        "train_steps": steps,
        "batch": batch,
        "parameters": model.num_parameters(),
        "layers": layers,
        "heads": heads,
        "width": width,
        "anchors": anchors,
        "final_train_loss": float(np.mean(losses[-max(1, steps // 20) :])),
        "train_cpu_seconds": time.process_time() - t0,
    }
    return model, info


def incontext_table(
    specs: list[TaskSpec],
    gd_steps: list[int],
    train_steps: int,
    test_tasks: int = 256,
    seed: int = 0,
    anchors: int = 33,
    heads: int = 4,
    model_size: dict[str, int] | None = None,
) -> list[dict[str, Any]]:
    """Per task: the construction at each k, the trained model and the baselines, all against the closed form."""
    rows: list[dict[str, Any]] = []
    for spec in specs:
        x_ctx, y_ctx, x_q, y_q = sample_tasks(spec, test_tasks, np.random.default_rng(seed))
        exact = closed_form(spec, x_ctx, y_ctx, x_q)
        base = {"task": spec.task, "d": spec.d, "context": spec.context, "lam": spec.lam, "noise": spec.noise}
        for k in gd_steps:
            e = construction_errors(spec, x_ctx, y_ctx, x_q, k, anchors=anchors, heads=heads)
            rows.append({**base, "model": f"construction k={k}", **e})
        model, info = train_attention_only(spec, steps=train_steps, seed=seed, **(model_size or {}))
        pred = predict_trained(model, x_ctx, y_ctx, x_q)
        rows.append(
            {
                **base,
                "model": "trained attention-only",
                **relative_errors(pred, exact),
                "parameters": info["parameters"],
                "layers": info["layers"],
                "label_mse": float(np.mean((pred - y_q) ** 2)),
                "closed_form_label_mse": float(np.mean((exact - y_q) ** 2)),
                "cpu_seconds": info["train_cpu_seconds"],
                "train_steps": info["train_steps"],
            }
        )
        rows.append({**base, "model": "zero predictor", **relative_errors(np.zeros_like(exact), exact)})
        if spec.task == "relu-features":
            lin = ridge_closed_form(x_ctx, y_ctx, x_q, spec.lam)
            rows.append({**base, "model": "linear ridge on x", **relative_errors(lin, exact)})
    return rows
