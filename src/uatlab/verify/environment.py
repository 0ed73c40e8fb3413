"""Run-time checks, in the certifying process, of the assumptions a floating-point certificate rests on.

Every certificate of uatlab (the memorizer's interval bounds, `uatlab.verify.certificate`; the exact-integer
next-token and deep seq2seq certificates, `uatlab.verify.next_token` and `uatlab.verify.seq2seq_deep`) assumes
IEEE 754 round-to-nearest arithmetic with gradual underflow, full-precision float32 matmuls and, for softmax, an
exp accurate to a stated number of ulps. What of this can be observed in a process is checked here
(`environment_checks`); a failed check makes the proof void (`environment_failures`, `void_reasons`).
"""

from __future__ import annotations

from typing import Any

import torch

from uatlab.numerics.exp_accuracy import measured_exp_ulps


def environment_checks(dtype: str | None = None, exp_ulps: float | None = None) -> dict[str, Any]:
    """Run-time checks, in this process, of the certificate's checkable assumptions.

    * ``round_to_nearest``: float32 and float64 adds round to nearest (values just above and below a
      midpoint, both signs, land on the nearest neighbour; any directed rounding mode fails one of them).
    * ``gradual_underflow``: a product with a subnormal result and a product with a subnormal input stay
      non-zero in float32 and float64 (fails after ``torch.set_flush_denormal(True)``: flush-to-zero and
      denormals-are-zero).
    * ``float32_matmul_precision``: ``torch.get_float32_matmul_precision()`` is 'highest' (no TF32/bf16).
    * ``torch_compile``: not checkable from a model (a compiled callable is a different evaluator);
      the certificate covers eager evaluation and the rewrites listed in the module docstring.
    * with ``dtype``: ``exp_ulps_measured``, the largest error in ulps of ``torch.exp`` and of the exp inside
      ``torch.softmax`` (the kernels of uatlab's attention) in that dtype on sampled arguments
      (`uatlab.numerics.exp_accuracy.measured_exp_ulps`); with ``exp_ulps`` too, ``exp_within_assumed``: both
      are ≤ the assumed ``exp_ulps``. A larger measured error is a counterexample to the exp assumption.

    ``ok`` is True when every checkable assumption holds.
    """
    checks: dict[str, Any] = {}
    nearest = True
    for dt, eps in ((torch.float32, 2.0**-23), (torch.float64, 2.0**-52)):
        one = torch.tensor([1.0, -1.0], dtype=dt)
        up = one + torch.tensor([0.75 * eps, -0.75 * eps], dtype=dt)  # nearest: ±(1 + eps)
        down = one + torch.tensor([0.25 * eps, -0.25 * eps], dtype=dt)  # nearest: ±1
        nearest &= bool(torch.equal(up, one * (1 + eps))) and bool(torch.equal(down, one))
    checks["round_to_nearest"] = nearest
    gradual = True
    # bit patterns, so that neither building the tensors nor comparing them goes through the FPU (with
    # denormals-are-zero set, a comparison would see every subnormal as 0): inputs 2^-126 and 2^-130
    # (float32; 2^-1022 and 2^-1026 for float64) times 0.5 and 2 must give the subnormals 2^-127 and 2^-129
    for dt, it, bits_in, bits_out in (
        (torch.float32, torch.int32, [0x00800000, 0x00080000], [0x00400000, 0x00100000]),
        (
            torch.float64,
            torch.int64,
            [0x0010000000000000, 0x0001000000000000],
            [0x0008000000000000, 0x0002000000000000],
        ),
    ):
        t = torch.tensor(bits_in, dtype=it).view(dt)
        out = t * torch.tensor([0.5, 2.0], dtype=dt)  # a subnormal output; a subnormal input
        gradual &= bool((out.view(it) == torch.tensor(bits_out, dtype=it)).all())
    checks["gradual_underflow"] = gradual
    matmul = _float32_matmul_backends()
    try:
        precision = torch.get_float32_matmul_precision()
    except RuntimeError:  # the legacy getter refuses once the per-backend settings were mixed with it
        precision = "mixed per-backend settings: " + ", ".join(f"{k}={v}" for k, v in matmul.items())
    checks["float32_matmul_precision"] = precision
    checks["float32_matmul_backends"] = matmul
    checks["torch_compile"] = "not checked (not visible from the model): eager evaluation assumed"
    if dtype is not None:
        measured = measured_exp_ulps(dtype, EXP_CHECK_SAMPLES)
        checks["exp_ulps_measured"] = {"dtype": dtype, "samples": EXP_CHECK_SAMPLES, **measured}
        if exp_ulps is not None:  # an exp that could not be measured (None) does not pass
            checks["exp_within_assumed"] = all(v is not None and v <= exp_ulps for v in measured.values())
            checks["exp_ulps_assumed"] = exp_ulps
    checks["ok"] = not environment_failures(checks, "float32")
    return checks


#: sampled arguments per exp kernel in the certificate's run-time check (a few ms)
EXP_CHECK_SAMPLES = 8192


def environment_failures(env: dict[str, Any], dtype: str) -> list[str]:
    """The run-time checks of `environment_checks` that fail and that a proof in ``dtype`` rests on: rounding and
    gradual underflow always; the float32 matmul precision (legacy setting and every backend's) for float32 only,
    since reduced-precision modes (TF32, bf16) change float32 products alone."""
    failed = [k for k in ("round_to_nearest", "gradual_underflow") if not env[k]]
    reduced = env["float32_matmul_precision"] != "highest" or any(
        v != "ieee" for v in env["float32_matmul_backends"].values()
    )
    if dtype == "float32" and reduced:
        failed.append(f"float32_matmul_precision={env['float32_matmul_precision']}")
    if env.get("exp_within_assumed") is False:
        m = env["exp_ulps_measured"]
        failed.append(
            f"exp_within_assumed (assumed {env['exp_ulps_assumed']:g} ulp; measured in {m['dtype']}: torch.exp "
            f"{exp_error_text(m['torch.exp'])}, the exp inside torch.softmax {exp_error_text(m['torch.softmax'])})"
        )
    return failed


def void_reasons(failed: list[str]) -> list[str]:
    """``invalidated_by`` entries for the run-time checks in ``failed`` (`environment_failures`; none: [])."""
    return ["run-time checks of the assumptions failed in this process: " + ", ".join(failed)] if failed else []


def exp_error_text(value: float | None) -> str:
    """A measured exp error for a message: '0.795 ulp', or why there is none."""
    return "not measurable (softmax sums do not round to nearest)" if value is None else f"{value:.3g} ulp"


def _float32_matmul_backends() -> dict[str, str]:
    """The float32 matmul precision each backend uses ("ieee": full float32; "tf32", "bf16": reduced), from
    PyTorch's per-backend settings (``torch.backends.<backend>.matmul.fp32_precision``, which inherit from
    ``torch.backends.<backend>.fp32_precision`` and then ``torch.backends.fp32_precision`` while "none"); the
    legacy ``torch.set_float32_matmul_precision`` writes the same settings. Empty on a PyTorch without them."""
    backends = torch.backends
    out: dict[str, str] = {}
    for name in ("mkldnn", "cuda"):
        chain = [
            getattr(getattr(getattr(backends, name, None), "matmul", None), "fp32_precision", None),
            getattr(getattr(backends, name, None), "fp32_precision", None),
            getattr(backends, "fp32_precision", None),
        ]
        chain = [str(v) for v in chain if v is not None]
        if chain:
            out[name] = next((v for v in chain if v != "none"), "ieee")
    return out
