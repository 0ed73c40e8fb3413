"""Claims about paper B's experiments (Hu et al. 2025, repository MAGICS-LAB/UAP_Attention).

Each check computes its figures (closed-form construction in the experiments' architecture, a
small corrected training run, the seq2seq baselines) and derives the verdict from them.
"""

from __future__ import annotations

import math

import torch

from uatlab.claims.registry import ClaimContext, ClaimResult, register_claim
from uatlab.experiments.measure import fit_loglog_slope
from uatlab.experiments.paper_b.closed_form import closed_form_model
from uatlab.experiments.paper_b.data import parity_truncated_linear_data
from uatlab.experiments.paper_b.models import TruncatedAttentionConfig, TruncatedAttentionModel
from uatlab.experiments.paper_b.sweeps import run_truncated_trial, trials_for
from uatlab.experiments.paper_b.train import evaluate_truncated
from uatlab.report.figures import plot_bars, plot_panels

PAPER = "Hu et al. 2025, arXiv 2504.15956 (paper B)"


@register_claim(
    id="B.exp.closed-form-rate-in-repo-architecture",
    statement=(
        "In the exact architecture that truncated.py trains (A + one multi-head attention layer, width 32, "
        "6,496 parameters at p = 60), the closed-form interpolation weights reach a target-channel sup error "
        "that falls as 1/H in the heads and as 1/m in the anchor tokens (log-log slopes in [-1.25, -0.75])."
    ),
    paper=PAPER,
    theorem="Thm 3.4 / 3.9 (v1 3.1 / 3.2); experiments of truncated.py",
)
def _closed_form_rates(ctx: ClaimContext) -> ClaimResult:
    torch.set_num_threads(1)
    data = parity_truncated_linear_data(1234)  # n = 50, d = 10, [a, b] = [-25, 25]
    heads = [1, 2, 4, 8, 16]
    head_err, mse32 = [], []
    for H in heads:
        model = TruncatedAttentionModel(TruncatedAttentionConfig(n_heads=H, head_dim=32 // H))
        closed_form_model(model, data.target, data.x_train, data.y_train)
        ev = evaluate_truncated(model, data.x_test, data.y_test)
        head_err.append(ev.sup_target)
        mse32.append(ev.mse_all_channels)
    anchors = [10, 20, 40, 70] if ctx.quick else [10, 20, 30, 40, 50, 60, 70]
    anchor_err = []
    for m in anchors:
        model = TruncatedAttentionModel(TruncatedAttentionConfig(n_anchors=m, n_heads=1, head_dim=32))
        closed_form_model(model, data.target, data.x_train, data.y_train)
        anchor_err.append(evaluate_truncated(model, data.x_test, data.y_test).sup_target)
    sh, sa = fit_loglog_slope(heads, head_err), fit_loglog_slope(anchors, anchor_err)
    ok = -1.25 <= sh <= -0.75 and -1.25 <= sa <= -0.75
    return ClaimResult(
        verdict="pass" if ok else "fail",
        figures={
            "params": TruncatedAttentionModel(TruncatedAttentionConfig()).num_parameters(),
            "heads": heads,
            "sup_error_vs_heads": [round(e, 5) for e in head_err],
            "slope_heads": round(sh, 3),
            "anchors": anchors,
            "sup_error_vs_anchors": [round(e, 5) for e in anchor_err],
            "slope_anchors": round(sa, 3),
            "repo_metric_mse32_vs_heads": [float(f"{e:.3g}") for e in mse32],
        },
        figure_files=[
            str(
                plot_panels(
                    [
                        {
                            "xs": heads,
                            "series": {
                                f"closed form (slope {sh:.2f})": head_err,
                                "1/H reference": [head_err[0] / h for h in heads],
                            },
                            "xlabel": "heads H (anchors m = 10)",
                            "ylabel": "sup error, target channel",
                            "logx": True,
                            "logy": True,
                        },
                        {
                            "xs": anchors,
                            "series": {
                                f"closed form (slope {sa:.2f})": anchor_err,
                                "1/m reference": [anchor_err[0] * anchors[0] / m for m in anchors],
                            },
                            "xlabel": "anchor tokens m (H = 1)",
                            "ylabel": "sup error, target channel",
                            "logx": True,
                            "logy": True,
                        },
                    ],
                    ctx.figure_path("B.exp.closed-form-rate-in-repo-architecture", "sup_error_rates.png"),
                    "closed-form weights in the trained architecture (Hu et al. 2025, Thm 3.4 / 3.9)",
                )
            )
        ],
        key_figure="slope_heads",
        note="Seed 1234's target; the repository's trained H=1 model scores 0.129 on its 32-channel MSE.",
    )


@register_claim(
    id="B.exp.trained-attention-fits-ramp",
    statement=(
        "One trained attention layer with appended anchor tokens (repository architecture, corrected protocol: "
        "target channel only, 25% of targets clipped, trained to convergence) fits the truncated linear target: "
        "test RMSE below 10% of the target's standard deviation."
    ),
    paper=PAPER,
    theorem="Thm 3.4 (trained counterpart)",
)
def _trained_fits(ctx: ClaimContext) -> ClaimResult:
    trial = [t for t in trials_for("heads", "quick", ("corrected",)) if t.params["value"] == 1][0]
    params = dict(trial.params, seeds=[1234 + ctx.seed])
    if not ctx.quick:
        params.update(n=20, n_samples=1000, epochs=200)
    row = run_truncated_trial(params)["per_seed"][0]
    rmse = math.sqrt(row["test_mse"])
    ratio = rmse / row["target_std"]
    return ClaimResult(
        verdict="pass" if ratio < 0.10 else "fail",
        figures={
            "n_tokens": params["n"],
            "rmse": round(rmse, 4),
            "target_std": round(row["target_std"], 4),
            "rmse_over_std": round(ratio, 4),
            "sup_error_trained": round(row["test_sup"], 4),
            "sup_error_closed_form_same_params": round(row["cf_sup"], 4),
            "params": row["n_params"],
            "clipped_fraction": round(row["clipped_fraction_test"], 3),
            "epochs": row["epochs_run"],
            "converged": row["converged"],
        },
        figure_files=[
            str(
                plot_bars(
                    {
                        "test RMSE": rmse,
                        "sup error, trained": row["test_sup"],
                        "sup error, closed form (same params)": row["cf_sup"],
                        "target std": row["target_std"],
                    },
                    ctx.figure_path("B.exp.trained-attention-fits-ramp", "errors.png"),
                    ylabel="error (target units)",
                    logy=True,
                    title=f"trained attention on the truncated linear target, n = {params['n']} (Hu et al. 2025)",
                    threshold=("pass threshold: 10% of the target std", 0.1 * row["target_std"]),
                )
            )
        ],
        key_figure="rmse_over_std",
    )
