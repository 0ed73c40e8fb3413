"""The harness of the certificate stress tests: certify a model, then evaluate its certified tokens with
`numpy_forward` (which imports numpy only) under many evaluations and count violations."""

from __future__ import annotations

import numpy as np
from numpy_forward import Evaluation, Layer, Weights, forward, low_rank, shift_for

from uatlab.models import Transformer
from uatlab.numerics.float_bounds import DEFAULT_EXP_ULPS
from uatlab.verify.certificate import _encoding_of, certify, logit_bounds

NP = {"float32": np.float32, "float64": np.float64}


def plain_weights(model: Transformer) -> Weights:
    """The model's tensors as numpy arrays in its parameters' dtype (effective low-rank maps formed there)."""
    sd = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    dt = sd["embed.weight"].dtype.type
    layers = []
    for i, block in enumerate(model.blocks):
        p = f"blocks.{i}."
        maps = {}
        for name in ("W_Q", "W_K", "W_V", "W_O"):
            full = sd.get(f"{p}attn.{name}.full")
            maps[name] = (
                full if full is not None else low_rank(sd[f"{p}attn.{name}.left"], sd[f"{p}attn.{name}.right"], dt)
            )
        W1, W2 = sd[f"{p}ff.hidden.weight"], sd[f"{p}ff.output.weight"]
        # a bias-free FF (ff_bias=False) adds nothing: zeros here are exact
        b1 = sd.get(f"{p}ff.hidden.bias", np.zeros(W1.shape[0], dt))
        b2 = sd.get(f"{p}ff.output.bias", np.zeros(W2.shape[0], dt))
        layers.append(
            Layer(maps["W_Q"], maps["W_K"], maps["W_V"], maps["W_O"], float(block.attn.score_scale), W1, b1, W2, b2)
        )
    b = sd.get("readout.bias")
    return Weights(
        sd["embed.weight"],
        sd.get("pos"),
        layers,
        sd["readout.weight"],
        b if b is not None else np.zeros(sd["readout.weight"].shape[0], dt),
        bool(model.config.causal),
        dt,
    )


def evaluations(dtype: str, exp_ulps: float) -> list[Evaluation]:
    k = shift_for(exp_ulps, NP[dtype])
    return [
        Evaluation("forward"),
        Evaluation("reversed", exp_ulps=k),
        Evaluation("reversed", fused_residual=True, exp_ulps=-k, reciprocal=True),
        Evaluation("random", seed=1, fused_residual=True, exp_ulps=k),
        Evaluation("random", seed=2, exp_ulps=-k, reciprocal=True),
        Evaluation("random", seed=3, fused_residual=True, exp_ulps=k, exp_random_sign=True),
        Evaluation("random", seed=4, exp_ulps=k, exp_random_sign=True, reciprocal=True),
        Evaluation("forward", fused_residual=True, exp_ulps=k, reciprocal=True),
    ]


def observed_margins(logits: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """L_label − max_{o ≠ label} L_o, in float64 (exact for float32 and float64 logits up to one rounding
    of the difference, which only matters at margins of one ulp of the logits)."""
    L = logits.astype(np.float64)
    own = np.take_along_axis(L, ys[..., None], axis=-1)[..., 0]
    other = np.where(np.arange(L.shape[-1]) == ys[..., None], -np.inf, L).max(axis=-1)
    return own - other


def stress(
    model: Transformer, data, encoding=None, exp_ulps: float = DEFAULT_EXP_ULPS, cert=None, sequences=None
) -> dict:
    """Certify ``model`` on ``data`` (unless ``cert`` is given), then run every evaluation on the sequences
    holding certified tokens (only those in ``sequences``, if given). Counts: certified tokens evaluated,
    runs (tokens × evaluations), misclassified runs, runs below the certified margin, and the largest
    |L_run − L_reference| / radius seen."""
    cert = cert if cert is not None else certify(model, data, encoding=encoding, exp_ulps=exp_ulps)
    enc = _encoding_of(model, encoding)
    w = plain_weights(model)
    tok_ids, lab_ids = enc.encode_tokens(data), enc.encode_labels(data)
    out = {
        "certified": cert.certified_tokens,
        "tokens": 0,
        "runs": 0,
        "wrong": 0,
        "below_bound": 0,
        "variants_differ": False,
        "worst_fraction_of_radius": 0.0,
        "cert": cert,
    }
    lengths = np.array([len(t) for t in tok_ids])
    for n in np.unique(lengths):
        idx = np.flatnonzero(lengths == n)
        if sequences is not None:
            idx = np.intersect1d(idx, sequences)
            if len(idx) == 0:
                continue
        ids, ys = np.stack([tok_ids[i] for i in idx]), np.stack([lab_ids[i] for i in idx])
        lower = np.stack([cert.margins[i] for i in idx])  # (B, n) certified lower margins
        ok = lower > 0
        if not ok.any():
            continue
        keep = ok.any(axis=1)
        ids, ys, lower, ok = ids[keep], ys[keep], lower[keep], ok[keep]
        L_ref, rL, _ = logit_bounds(model, ids, exp_ulps)  # the certificate's reference and radii
        first = None
        for ev in evaluations(cert.dtype, exp_ulps):
            logits = forward(w, ids, ev)
            m = observed_margins(logits, ys)
            out["runs"] += int(ok.sum())
            out["wrong"] += int((ok & (logits.argmax(-1) != ys)).sum())
            out["below_bound"] += int((ok & (m < lower)).sum())
            frac = np.abs(logits.astype(np.float64) - L_ref) / np.where(rL > 0, rL, np.inf)
            out["worst_fraction_of_radius"] = max(out["worst_fraction_of_radius"], float(frac[ok].max()))
            if first is None:
                first = logits
            elif not np.array_equal(first, logits):
                out["variants_differ"] = True
        out["tokens"] += int(ok.sum())
    return out
