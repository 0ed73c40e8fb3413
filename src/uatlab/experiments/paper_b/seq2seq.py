"""seq2seq.py of paper B's repository, at parity and corrected, with baselines.

Target (seq2seq_data.py): a random one-hidden-layer ReLU network on the flattened
sequence, n = 20 tokens, d = 5, 10 hidden units, X ~ U[0,1] (`.data.relu_seq2seq_problem`,
the repository's own draws at n = 20, generated here for whatever n a run needs).

* ``mode="parity"``: the repository's heads experiment: width 32, p = n (no anchor tokens), head size
  32/H, Adam 1e-3, batch 32, 3 epochs, unnormalised targets, test = the last 20 % of the training file.
* ``mode="attention"`` (corrected): the two-layer attention-only model trained on normalised targets
  (per-coordinate z-scores from the training split) until the validation loss stops improving
  (1 % / ``patience`` epochs, learning rate halved on stalls), evaluated on the separate test set.
* ``mode="feedforward"``: the same trunk with a ReLU feed-forward layer (with skip) after each
  attention layer instead of A₂, its width chosen so that the parameter count matches.
* baselines (computed once per run, on the same split): the mean predictor and the linear
  least-squares fit of vec(Y) on [vec(X), 1].

All MSEs are reported on the repository's unnormalised scale.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from uatlab.errors import InputError
from uatlab.experiments.executor import Trial
from uatlab.experiments.paper_b.data import relu_seq2seq_problem
from uatlab.experiments.paper_b.models import FeedForwardTransformerBaseline, TwoLayerAttentionModel
from uatlab.experiments.paper_b.sweeps import RUN_COLUMNS, git_revision
from uatlab.experiments.paper_b.train import PlateauStop, train_epoch

SEQ2SEQ_MODES = ("parity", "attention", "feedforward", "closed-form", "closed-form-2layer")
CLOSED_FORM_MODES = ("closed-form", "closed-form-2layer")


def linear_baselines(x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, y_test: torch.Tensor):
    """Test MSE of the mean predictor and of least squares on [vec X, 1] (float64)."""
    N, M = x_train.shape[0], x_test.shape[0]
    Xf = torch.cat([x_train.reshape(N, -1), torch.ones(N, 1)], 1).double()  # (N, n·d+1)
    Yf = y_train.reshape(N, -1).double()  # (N, n·d_out)
    Xt = torch.cat([x_test.reshape(M, -1), torch.ones(M, 1)], 1).double()
    Yt = y_test.reshape(M, -1).double()
    coef = torch.linalg.lstsq(Xf, Yf).solution  # (n·d+1, n·d_out)
    return {
        "mean_predictor_mse": float(((Yt - Yf.mean(0)) ** 2).mean()),
        "least_squares_mse": float(((Xt @ coef - Yt) ** 2).mean()),
    }


def ff_width_for_budget(
    n: int, d: int, width: int, heads: int, head_dim: int, anchors: int, budget: int, output_modulation: bool
) -> int:
    """The feed-forward width whose baseline has the parameter count closest to ``budget``."""
    best, best_gap = 1, math.inf
    for q in range(1, 4 * width + 1):
        count = FeedForwardTransformerBaseline(
            n, d, d, width, heads, head_dim, anchors, q, output_modulation
        ).num_parameters()
        if abs(count - budget) < best_gap:
            best, best_gap = q, abs(count - budget)
        if count > budget:
            break
    return best


def build_seq2seq_model(params: dict[str, Any]) -> nn.Module:
    n, d, w, H, s, m = (int(params[k]) for k in ("n", "d", "width", "n_heads", "head_dim", "n_anchors"))
    om = bool(params.get("output_modulation", False))
    if params["mode"] in ("parity", "attention"):
        return TwoLayerAttentionModel(n, d, d, w, H, s, m, om)
    if params["mode"] == "feedforward":
        budget = TwoLayerAttentionModel(n, d, d, w, H, s, m, om).num_parameters()
        q = ff_width_for_budget(n, d, w, H, s, m, budget, om)
        return FeedForwardTransformerBaseline(n, d, d, w, H, s, m, q, om)
    raise InputError(f"unknown seq2seq mode {params['mode']!r}: use one of {SEQ2SEQ_MODES}")


@torch.no_grad()
def _mse(model: nn.Module, x: torch.Tensor, y: torch.Tensor, mu: torch.Tensor, sd: torch.Tensor) -> float:
    """MSE on the unnormalised scale of a model that predicts normalised targets."""
    model.eval()
    tot = 0.0
    for i in range(0, x.shape[0], 1000):
        pred = model(x[i : i + 1000]) * sd + mu  # (b, n, d_out)
        tot += float(((pred.double() - y[i : i + 1000].double()) ** 2).sum())
    model.train()
    return tot / y.numel()


def run_seq2seq_trial(params: dict[str, Any]) -> dict[str, Any]:
    """Train one seq2seq model; report its test MSE beside the mean and least-squares baselines."""
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    seed, n, d = int(params["seed"]), int(params["n"]), int(params["d"])
    target, x_all, y_all, x_test, y_test = relu_seq2seq_problem(
        n=n, d=d, hidden=int(params["hidden_units"]), num_train=int(params["num_train"]), num_test=2000
    )
    parity = params["mode"] == "parity"
    n_fit = int(0.8 * x_all.shape[0])
    torch.manual_seed(seed)
    if parity:  # the repository: random 80/20 split of the training file, no separate test set
        perm = torch.randperm(x_all.shape[0])
        x_tr, y_tr = x_all[perm[:n_fit]], y_all[perm[:n_fit]]
        x_te, y_te = x_all[perm[n_fit:]], y_all[perm[n_fit:]]
        x_val = y_val = None
        mu, sd = torch.zeros(1, n, d), torch.ones(1, n, d)  # no normalisation
    else:
        x_tr, y_tr, x_val, y_val = x_all[:n_fit], y_all[:n_fit], x_all[n_fit:], y_all[n_fit:]
        x_te, y_te = x_test, y_test
        mu, sd = y_tr.mean(0, keepdim=True), y_tr.std(0, keepdim=True)  # (1, n, d) per-coordinate z-score
    model = build_seq2seq_model(params)
    loader = DataLoader(TensorDataset(x_tr, (y_tr - mu) / sd), batch_size=int(params["batch_size"]), shuffle=True)
    opt = torch.optim.Adam(model.parameters(), lr=float(params["lr"]))
    patience = int(params.get("patience", 10))
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=max(1, patience // 4))
    loss_fn = nn.MSELoss()
    curve, val_curve = [], []
    stop, epoch = PlateauStop(patience, rel_tol=0.01), 0
    cap = params.get("max_seconds")  # opt-in wall-time cap; None: stop by epochs / convergence only
    max_seconds = math.inf if cap is None else float(cap)
    cap_fired = False
    for epoch in range(1, int(params["epochs"]) + 1):
        curve.append(train_epoch(model, loader, opt, loss_fn))
        if parity:
            continue
        val = _mse(model, x_val, y_val, mu, sd)
        val_curve.append(val)
        if params.get("verbose"):
            print(
                f"epoch {epoch} train {curve[-1]:.4f} val_mse {val:.4f} lr {opt.param_groups[0]['lr']:.1e}", flush=True
            )
        if math.isfinite(val):
            sched.step(val)
        if stop.update(val, model):
            break
        if epoch < int(params["epochs"]) and time.perf_counter() - t0 > max_seconds:
            cap_fired = True  # the result now depends on the machine's speed and load, not only on the seed
            break
    stop.restore_best(model)
    converged = stop.converged
    base = linear_baselines(x_tr, y_tr, x_te, y_te)
    return {
        "git_rev": git_revision(),
        "n_params": model.num_parameters(),
        "test_mse": _mse(model, x_te, y_te, mu, sd),
        "test_sup": float(
            max(
                (model(x_te[i : i + 1000]).detach() * sd + mu - y_te[i : i + 1000]).abs().max()
                for i in range(0, x_te.shape[0], 1000)
            )
        ),
        **base,
        "epochs_run": epoch,
        "converged": converged,
        "wall_cap_fired": cap_fired,
        "train_seconds": time.perf_counter() - t0,
        "train_loss_curve": [round(v, 5) for v in curve],
        "val_mse_curve": [round(v, 5) for v in val_curve],
    }


def run_compiled_trial(params: dict[str, Any]) -> dict[str, Any]:
    """The closed forms on the same target, evaluated on the same test set as the trained models.

    * ``mode="closed-form"``: `uatlab.constructions.paper_b.lem3_11_relu_network.compile_relu_network`, one softmax
      attention layer with ``n_anchors`` anchor tokens and a sequence-wise input map (paper B Sec. 3.3; not a
      standard Transformer layer).
    * ``mode="closed-form-2layer"``: `uatlab.constructions.paper_b.lem3_11_relu_network.compile_relu_network_two_layer`,
      two attention layers (truncated-linear heads, then an exact positional combination) with ``n_anchors``
      layer-1 anchors: the architecture the trained attention-only model has, in closed form.

    The parameter count is the number of non-zero parameters.
    """
    torch.set_num_threads(1)
    from uatlab.constructions.paper_b.lem3_11_relu_network import (
        ReluNetwork,
        compile_relu_network,
        compile_relu_network_two_layer,
    )

    n, d = int(params["n"]), int(params["d"])
    target, _, _, x_test, y_test = relu_seq2seq_problem(
        n=n, d=d, hidden=int(params["hidden_units"]), num_train=int(params["num_train"]), num_test=2000
    )
    net = ReluNetwork(*(t.double().numpy() for t in (target.W1, target.b1, target.W2, target.b2)), n, d)
    compile_fn = compile_relu_network if params["mode"] == "closed-form" else compile_relu_network_two_layer
    compiled = compile_fn(net, anchors=int(params["n_anchors"])).detail
    pred = torch.as_tensor(compiled(x_test.double().numpy()))  # (N, n, d)
    err = pred - y_test.double()
    return {
        "git_rev": git_revision(),
        "n_params": compiled.params,
        "test_mse": float((err**2).mean()),
        "test_sup": float(err.abs().max()),
        "bound": compiled.bound,
        "heads": compiled.heads,
        "nonstandard": compiled.nonstandard,
        "epochs_run": 0,
        "converged": True,
        "wall_cap_fired": False,
    }


def run_seq2seq_any(params: dict[str, Any]) -> dict[str, Any]:
    """Dispatch: the closed form or a trained model."""
    return run_compiled_trial(params) if params["mode"] in CLOSED_FORM_MODES else run_seq2seq_trial(params)


def seq2seq_trials(
    scale: str, modes: tuple[str, ...] = SEQ2SEQ_MODES, n_seeds: int | None = None, max_seconds: float | None = None
) -> list[Trial]:
    """The seq2seq trials; ids ``[quick-]<mode>-H=<heads>-seed=<seed>`` (default and full share ids).

    ``n_seeds`` keeps the first that many seeds of the scale; ``max_seconds`` sets a wall-time cap on the
    corrected trials (their ids then end in ``-cap=<seconds>``, so capped and uncapped results never mix).

    Corrected runs (attention-only and feed-forward) stop by the convergence criterion (validation MSE not
    improved by 1 % for ``patience`` epochs) or after ``epochs`` epochs, so the same seed gives the same
    result on any machine. Only with ``max_seconds`` may a wall-time cap stop them earlier; a trial records
    ``wall_cap_fired`` (its result then depends on the machine's load) and ``converged``.
    """
    if scale == "quick":
        compiled_anchors = (5, 9)
        two_layer_anchors = (9, 33)
        common = {"n": 6, "num_train": 3000, "hidden_units": 10, "d": 5}
        parity_heads, heads, seeds, p_seeds = (2,), (4,), (1234,), (1237,)
        corrected = {
            "width": 32,
            "head_dim": 8,
            "n_anchors": 4,
            "epochs": 30,
            "patience": 6,
            "batch_size": 64,
            "lr": 3e-3,
            "max_seconds": None,
            "output_modulation": True,
        }
    elif scale in ("default", "full"):
        compiled_anchors = (9, 17, 33, 65)
        two_layer_anchors = (9, 17, 33, 65, 129, 257)
        common = {"n": 20, "num_train": 25000, "hidden_units": 10, "d": 5}
        full = scale == "full"
        parity_heads = (1, 2, 4, 8, 16, 32) if full else (1, 8, 32)
        heads = (4,)
        seeds = (1234, 1235, 1236) if full else (1234, 1235)
        p_seeds = tuple(range(1237, 1244)) if full else (1237,)
        corrected = {
            "width": 64,
            "head_dim": 16,
            "n_anchors": 8,
            "epochs": 400,
            "patience": 12,
            "batch_size": 64,
            "lr": 2e-3,
            "max_seconds": None,
            "output_modulation": True,
        }
    else:
        raise InputError(f"unknown scale {scale!r}")
    if n_seeds is not None:
        if n_seeds < 1:
            raise InputError(f"n_seeds must be a positive integer, got {n_seeds}")
        if n_seeds > max(len(seeds), len(p_seeds)):  # more would silently run fewer than asked
            raise InputError(
                f"n_seeds (--seeds) = {n_seeds}: the {scale} scale has {len(seeds)} seed(s) ({len(p_seeds)} for the parity "
                f"runs); ask for at most {max(len(seeds), len(p_seeds))}"
            )
        seeds, p_seeds = seeds[:n_seeds], p_seeds[:n_seeds]
    cap = ""
    if max_seconds is not None:
        if not (max_seconds > 0 and math.isfinite(max_seconds)):
            raise InputError(f"max_seconds must be a positive number, got {max_seconds}")
        corrected = {**corrected, "max_seconds": float(max_seconds)}
        cap = f"-cap={max_seconds:g}"
    prefix = "quick-" if scale == "quick" else ""
    trials = []
    for mode in modes:
        if mode in CLOSED_FORM_MODES:
            for m in compiled_anchors if mode == "closed-form" else two_layer_anchors:
                params = {
                    "experiment": "attention-seq2seq",
                    "mode": mode,
                    "scale": scale,
                    "seed": 0,
                    "value": m,
                    "n_anchors": m,
                    **common,
                }
                trials.append(Trial(id=f"{prefix}{mode}-m={m}", params=params))
            continue
        for H in parity_heads if mode == "parity" else heads:
            for seed in p_seeds if mode == "parity" else seeds:
                if mode == "parity":  # the repository: 40k/10k split of 50k samples, 3 epochs, unnormalised
                    p = {
                        "width": 32,
                        "n_heads": H,
                        "head_dim": 32 // H,
                        "n_anchors": 0,
                        "epochs": 3,
                        "batch_size": 32,
                        "lr": 1e-3,
                        "num_train": common["num_train"] if scale == "quick" else 50000,
                    }
                else:
                    p = {**corrected, "n_heads": H}
                params = {
                    "experiment": "attention-seq2seq",
                    "mode": mode,
                    "scale": scale,
                    "seed": seed,
                    "value": H,
                    **common,
                    **p,
                }
                suffix = cap if mode != "parity" else ""
                trials.append(Trial(id=f"{prefix}{mode}-H={H}-seed={seed}{suffix}", params=params))
    return trials


def stored_trial_conflict(record: dict[str, Any], params: dict[str, Any]) -> str | None:
    """Why a stored trial ``record`` may not stand for a trial with ``params`` (``field: old → new``), or None.

    A record is reused only when every parameter equals the trial's. One exception keeps finished work: a
    record run under a wall-time cap that did not stop it (it converged or ran all its epochs, or it says
    ``wall_cap_fired: false``) equals the uncapped run, since the cap changes nothing but where training stops.
    """
    for key, new in params.items():
        old = record.get(key)
        if json.dumps(old, sort_keys=True, default=str) == json.dumps(new, sort_keys=True, default=str):
            continue
        if key == "max_seconds" and new is None:
            fired = record.get("wall_cap_fired")
            if fired is None:
                fired = not record.get("converged") and int(record.get("epochs_run", 0)) < int(params["epochs"])
            if not fired:
                continue
            return f"max_seconds: {old} → none (the wall-time cap stopped that trial)"
        return f"{key}: {old} → {new}"
    return None


SEQ2SEQ_CSV_COLUMNS = [
    *RUN_COLUMNS,
    "test_mse",
    "test_sup",
    "bound",
    "mean_predictor_mse",
    "least_squares_mse",
    "epochs_run",
    "converged",
    "wall_cap_fired",
    "n",
    "d",
    "width",
    "n_heads",
    "head_dim",
    "n_anchors",
    "num_train",
    "lr",
    "batch_size",
]
