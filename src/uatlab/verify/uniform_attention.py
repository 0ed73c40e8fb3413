"""What the certificates of the averaging-attention memorizers assume, and its run-time checks.

The next-token memorizer and the seq2seq deep memorizer (Kajitsuka & Sato, "On the Optimal Memorization
Capacity of Transformers", ICLR 2025) attend with equal logits at all n' positions (n' a power of two), so
their certificates (`uatlab.verify.next_token`, `uatlab.verify.seq2seq_deep`) prove exact integer forward
passes: the attention weights are exactly 1/n' only if the softmax subtracts the row maximum and exp(0) = 1
exactly (with exp(s)/Σ exp(s) unshifted, e/(n'·e) rounds), and every product and sum is exact only in IEEE
round-to-nearest arithmetic with float32 products at full precision. `certificate_environment` records the
run-time checks of `uatlab.verify.environment.environment_checks` (called with the dtype alone: these proofs
take no exp error bound) plus `uniform_softmax_check`, and names the failures that void a proof;
`assumptions` states the assumptions in words.
"""

from __future__ import annotations

from typing import Any

import torch

from uatlab.verify.environment import environment_checks, environment_failures

#: the equal logit every query gives every key in both constructions (W_Q = W_K = e_1 and coordinate 1 is 1)
ATTENTION_LOGIT = 1.0


def uniform_softmax_check(dtype: str, n: int) -> dict[str, Any]:
    """In this process and in ``dtype``: ``exp_zero_is_one``, torch.exp(0) is exactly 1; ``softmax_uniform_exact``,
    torch.softmax of a constant row of length ``n`` (the constructions' logit 1, and 0) is exactly 1/n everywhere
    (bit-compared)."""
    tdt = getattr(torch, dtype)
    exp0 = torch.exp(torch.zeros(1, dtype=tdt))
    rows = torch.tensor([[ATTENTION_LOGIT], [0.0]], dtype=tdt).expand(2, n)
    a = torch.softmax(rows, dim=-1)
    return {
        "dtype": dtype,
        "n": n,
        "exp_zero_is_one": bool(torch.equal(exp0, torch.ones(1, dtype=tdt))),
        "softmax_uniform_exact": bool(torch.equal(a, torch.full((2, n), 1.0 / n, dtype=tdt))),
    }


def certificate_environment(regime: str, n: int) -> tuple[dict[str, Any], list[str]]:
    """The run-time checks (``environment``) of a proof in ``regime`` over n' = ``n`` attention positions, and
    the failed checks the proof rests on (any one voids it). 'exact' evaluates with integers: the checks are
    recorded, none voids the proof."""
    if regime == "exact":
        env = environment_checks()
        env["uniform_softmax"] = "not used: the exact regime evaluates the attention with integers"
        return env, []
    env = environment_checks(regime)
    soft = uniform_softmax_check(regime, n)
    env["uniform_softmax"] = soft
    failed = environment_failures(env, regime)
    if not (soft["exp_zero_is_one"] and soft["softmax_uniform_exact"]):
        failed.append(
            f"uniform_softmax (exp(0) = 1: {soft['exp_zero_is_one']}; torch.softmax of a constant row of {n} is "
            f"1/{n}: {soft['softmax_uniform_exact']})"
        )
    env["ok"] = bool(env.pop("ok")) and not failed  # last, as in environment_checks
    return env, failed


def assumptions(regime: str, n: int, module: str) -> list[str]:
    """The assumptions of an exact-integer proof in ``regime`` over n' = ``n`` attention positions, in words;
    ``module`` names the module class whose forward pass the proof is about."""
    if regime == "exact":
        return [
            f"exact regime: the model is evaluated with exact integer arithmetic ({module}: Python integers, the "
            "logits 2c·y − c² small integers), so no floating-point format, rounding mode, softmax kernel or matmul "
            "precision is involved; the proof does not cover evaluating these weights in floating point (they need "
            "not fit any float's mantissa). Run-time checks are recorded in environment; none of them voids it",
            "the module evaluated is the construction certified (its integers, as uatlab.load reads them)",
        ]
    from uatlab.constructions.paper_c.layout import MANTISSA_BITS

    p = MANTISSA_BITS[regime]
    out = [
        f"IEEE 754 round-to-nearest arithmetic in {regime} (p = {p}): every weight, id and partial sum of the forward "
        f"pass is an integer (a multiple of 1/{n} in the attention) of magnitude ≤ 2^{p}, hence exact in any "
        "summation order, blocking or FMA use; checked in this process: environment['round_to_nearest']",
        f"the softmax subtracts the row maximum and exp(0) = 1 exactly, so the {n} equal attention logits give weights "
        f"exactly 1/{n} (torch.softmax does; exp(s)/Σ exp(s) without the shift need not); checked in this process "
        f"in {regime}: environment['uniform_softmax'] (torch.exp(0) and torch.softmax of a constant row of {n})",
        "gradual underflow (PyTorch's default; torch.set_flush_denormal(False)): the proof's values stay far from "
        "the subnormal range, but a process in flush-to-zero or denormals-are-zero mode is not certified; checked "
        "in this process: environment['gradual_underflow']",
    ]
    if regime == "float32":
        out.append(
            "float32 matrix products at full precision (float32 matmul precision 'highest': no TF32/bf16 "
            "reduced-precision modes) in the forward pass's float32 matrix products; checked in this process: "
            "environment['float32_matmul_precision']"
        )
    out.append(
        f"eager evaluation of {module}'s forward pass as uatlab runs it, with the construction's tensors "
        "(torch.compile not covered, not checked)"
    )
    return out
