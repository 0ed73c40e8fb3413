"""The certificate's assumptions: the exp error is a parameter, the checkable ones are checked at run time,
a residual add fused into the preceding GEMM is covered, and the Certificate serialises to JSON text."""

import copy
import ctypes
import ctypes.util
import dataclasses
import json
import platform

import numpy as np
import pytest
import torch
from torch_settings import float32_matmul_precision

from uatlab.cli import main
from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset, save_compiled
from uatlab.data.jsonl import write_jsonl
from uatlab.data.synthetic import synthetic_dataset
from uatlab.errors import InputError
from uatlab.models.feedforward import FeedForward
from uatlab.numerics.float_bounds import DEFAULT_EXP_ULPS, gamma, unit_roundoff
from uatlab.verify.certificate import _BoundedModel, certify, logit_bounds
from uatlab.verify.environment import environment_checks

F32 = np.float32


@pytest.fixture(scope="module")
def compiled():
    data = synthetic_dataset(30, 6, 12, 3, seed=1)
    res = compile_dataset(data, dtype="float32", run_certificate=False)
    return res.model, data


def test_exp_ulps_is_recorded_and_widens_the_softmax_radii(compiled):
    model, data = compiled
    ids = np.stack(model.encoding.encode_tokens(data))
    _, r1, _ = logit_bounds(model, ids, exp_ulps=1.0)
    _, r5, _ = logit_bounds(model, ids, exp_ulps=5.0)
    _, r50, _ = logit_bounds(model, ids, exp_ulps=50.0)
    assert np.all(r1 <= r5) and np.all(r5 <= r50) and np.any(r1 < r50)
    cert = certify(model, data, exp_ulps=3.0)
    assert cert.exp_ulps == 3.0 and any("exp accurate to 3 ulp" in a for a in cert.assumptions)
    assert certify(model, data).exp_ulps == DEFAULT_EXP_ULPS
    for bad in (0.25, float("nan"), float("inf"), -1.0):
        with pytest.raises(ValueError, match="exp error"):
            certify(model, data, exp_ulps=bad)


def test_cli_records_exp_ulp_and_rejects_a_bad_value(compiled, tmp_path, capsys):
    model, data = compiled
    path, model_path = tmp_path / "d.jsonl", tmp_path / "m.safetensors"
    write_jsonl(data, path)
    save_compiled(model, model_path)
    assert main(["certify", str(model_path), str(path), "--json", "--exp-ulp", "7.5"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["exp_ulps"] == 7.5 and out["environment"]["ok"] is True and out["certified"] is True
    assert main(["certify", str(model_path), str(path), "--exp-ulp", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "error: --exp-ulp" in err and "Traceback" not in err
    assert main(["compile", str(path), "--exp-ulp", "nan", "--out", str(tmp_path / "x.safetensors")]) == 2
    assert "error: --exp-ulp" in capsys.readouterr().err and not (tmp_path / "x.safetensors.work").exists()


def test_environment_checks_detect_reduced_matmul_precision():
    assert environment_checks()["ok"]  # PyTorch's defaults satisfy every checkable assumption
    with float32_matmul_precision("high"):
        env = environment_checks()
    assert env["float32_matmul_precision"] == "high" and env["ok"] is False
    assert environment_checks()["ok"]


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="flush-to-zero switch of x86 SSE")
def test_environment_checks_detect_flush_to_zero():
    assert torch.set_flush_denormal(True)  # x86 with SSE3 supports it
    try:
        env = environment_checks()
        assert env["gradual_underflow"] is False and env["ok"] is False
    finally:
        torch.set_flush_denormal(False)
    assert environment_checks()["gradual_underflow"] is True


@pytest.mark.skipif(platform.system() != "Linux" or platform.machine() != "x86_64", reason="x86-64 fenv constants")
def test_environment_checks_detect_a_directed_rounding_mode():
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    FE_TONEAREST, FE_UPWARD = 0x000, 0x800  # glibc x86-64 <fenv.h>
    assert libm.fesetround(FE_UPWARD) == 0
    try:
        env = environment_checks()
    finally:
        libm.fesetround(FE_TONEAREST)
    assert env["round_to_nearest"] is False and env["ok"] is False
    assert environment_checks()["round_to_nearest"] is True


def test_a_residual_fused_into_the_gemm_is_covered():
    # x = 2^20 plus 100 terms 0.3 in float32. Separately: Σ = 30.0000x (tiny error), then one add (≤ ulp/2 =
    # 0.0625). Fused, accumulator starting at x: each add of 0.3 to ~2^20 rounds to a multiple of 0.125,
    # losing ~0.05 each time, all in one direction: an error of ~5, far beyond the separate evaluation's
    # bound γ_n S + u(|x| + |y|) but within γ_{n+1}(|x| + S).
    bm = object.__new__(_BoundedModel)
    bm.dtype, bm.u, bm.eta = "float32", unit_roundoff("float32"), 2.0**-149
    x, t, n = F32(2.0**20), F32(0.3), 100
    exact = float(x) + n * float(t)
    acc = x
    for _ in range(n):
        acc = F32(acc + t)  # the fused accumulation, in order
    fused_error = abs(float(acc) - exact)
    u, S = bm.u, n * float(t)
    separate_bound = gamma(n, u) * S + u * (float(x) + S)
    assert fused_error > 10 * separate_bound  # the premise: the separate form's bound does not cover it
    y, ry = bm._residual(np.array([float(x)]), np.zeros(1), np.array([S]), np.zeros(1), np.array([S]), np.array([n]))
    assert y[0] == exact and fused_error <= ry[0]
    # torch.addmm fuses it too (its blocking may differ from the in-order sum): also within the radius
    run = torch.addmm(torch.tensor([[x]]), torch.full((1, n), float(t)), torch.ones(n, 1))
    assert abs(float(run) - exact) <= ry[0]


def test_certificate_to_json_is_json_text_with_per_token_margins(compiled):
    model, data = compiled
    cert = certify(model, data)
    text = cert.to_json()
    assert isinstance(text, str)
    back = json.loads(text)
    assert back["certified_tokens"] == cert.certified_tokens and "margins" not in back
    assert back == cert.to_dict()
    with_margins = json.loads(cert.to_json(margins=True))["margins"]
    assert [len(m) for m in with_margins] == [len(t) for t in data.tokens]
    flat = np.concatenate(cert.margins)
    assert int((flat > 0).sum()) == cert.certified_tokens
    assert cert.min_certified_margin == pytest.approx(flat[flat > 0].min(), rel=0, abs=0)
    assert cert.margin(0, 1) == with_margins[0][1]
    streamed = certify(model, data, keep_margins=False)
    with pytest.raises(ValueError, match="kept no per-token margins"):
        streamed.margin(0, 0)


def test_a_broken_assumption_in_this_process_means_not_certified(compiled):
    model, data = compiled
    baseline = certify(model, data)
    assert baseline.certified
    with float32_matmul_precision("medium"):
        cert = certify(model, data)
    assert cert.environment["ok"] is False and not cert.certified
    assert cert.bound_certified_tokens == baseline.certified_tokens  # what the bounds give: void in this process
    assert cert.certified_tokens == 0 and cert.certified_fraction == 0.0
    assert cert.invalidated_by == [
        "run-time checks of the assumptions failed in this process: float32_matmul_precision=medium"
    ]


class _Doubled(FeedForward):
    """A feed-forward layer whose forward is not uatlab's (same tensors, other computation)."""

    def __init__(self, ff):
        super().__init__(ff.d_model, ff.width, dtype=ff.hidden.weight.dtype, bias=ff.hidden.bias is not None)
        self.load_state_dict(ff.state_dict())

    def forward(self, x, max_activations=None):
        return 2 * super().forward(x, max_activations)


def test_a_global_forward_hook_is_refused(compiled):
    model, data = compiled
    handle = torch.nn.modules.module.register_module_forward_hook(lambda mod, args, out: out)
    try:
        with pytest.raises(InputError, match="global forward hook"):
            certify(model, data)
    finally:
        handle.remove()
    assert certify(model, data).certified


def test_a_full_matrix_set_beside_low_rank_factors_is_the_one_bounded(compiled):
    """`LowRankLinearMaps.weight` (the forward) uses ``full`` whenever it is set: so must the bounds."""
    model, data = compiled
    edited = copy.deepcopy(model)
    maps = edited.blocks[0].attn.W_Q
    with torch.no_grad():
        maps.full = torch.nn.Parameter(maps.left @ maps.right * (1 + 2.0**-10))
    ids = np.stack(edited.encoding.encode_tokens(data))
    L, rL, bad = logit_bounds(edited, ids)
    with torch.no_grad():
        run = edited(torch.from_numpy(ids)).double().numpy()
    assert not bad.all()
    ok = ~bad[..., None]
    assert (np.abs(run - L) <= rL)[np.broadcast_to(ok, L.shape)].all()


def _edited(model, edit):
    clone = copy.deepcopy(model)
    edit(clone)
    return clone


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda m: setattr(m, "config", dataclasses.replace(m.config, causal=True)), "layer 0.*causal=False"),
        (lambda m: setattr(m.blocks[0].attn, "attention", "hardmax"), "layer 0's attention is 'hardmax'"),
        (lambda m: setattr(m, "config", dataclasses.replace(m.config, attention="hardmax")), "config says 'hardmax'"),
        (lambda m: setattr(m.blocks[0].attn, "causal", True), "layer 0.*causal=True"),
        (lambda m: setattr(m.embed, "max_norm", 1.0), "max_norm=1.0"),
        (lambda m: setattr(m, "config", dataclasses.replace(m.config, num_labels=7)), "num_labels=7"),
        (lambda m: m.readout.register_forward_hook(lambda mod, args, out: -out), "readout has a forward hook"),
        (lambda m: m.blocks[0].attn.register_forward_pre_hook(lambda mod, args: None), "blocks.0.attn has a forward"),
        (lambda m: setattr(m.blocks[0].ff, "forward", lambda x, *a: x), "blocks.0.ff has its forward replaced"),
        (lambda m: setattr(m.blocks[0], "ff", _Doubled(m.blocks[0].ff)), "blocks.0.ff is a .*_Doubled"),
        (lambda m: setattr(m, "hidden_states", lambda *a, **k: 3 * type(m).hidden_states(m, *a, **k)), "hidden_states"),
    ],
    ids=[
        "config-says-causal",
        "module-hardmax",
        "config-hardmax",
        "module-causal",
        "embedding-max-norm",
        "config-labels",
        "forward-hook",
        "pre-hook",
        "instance-forward",
        "subclass",
        "instance-method",
    ],
)
def test_modules_that_disagree_with_the_config_are_refused(compiled, edit, message):
    """The ceiling reads the config (one input = whole sequence, or prefix if causal); the bounds read the modules:
    a model whose modules compute something else than its config describes is not certified against either."""
    model, data = compiled
    with pytest.raises(InputError, match=message):
        certify(_edited(model, edit), data)


def test_a_per_backend_float32_precision_is_checked_and_does_not_crash_the_certificate(compiled):
    """PyTorch's per-backend settings (torch.backends.mkldnn.matmul.fp32_precision) lower the CPU's float32
    matmul precision too, and make the legacy getter raise once mixed with it."""
    model, data = compiled
    leaf = torch.backends.mkldnn.matmul
    previous = leaf.fp32_precision
    leaf.fp32_precision = "bf16"
    try:
        env = environment_checks()
        cert = certify(model, data)
    finally:
        leaf.fp32_precision = previous
    assert env["float32_matmul_backends"]["mkldnn"] == "bf16" and env["ok"] is False
    assert cert.environment["ok"] is False and not cert.certified
    assert environment_checks()["ok"]


def test_cli_says_a_void_proof_proves_nothing(compiled, tmp_path, capsys):
    model, data = compiled
    path, model_path = tmp_path / "d.jsonl", tmp_path / "m.safetensors"
    write_jsonl(data, path)
    save_compiled(model, model_path)
    assert main(["certify", str(model_path), str(path), "--json"]) == 0
    baseline = json.loads(capsys.readouterr().out)
    with float32_matmul_precision("medium"):
        assert main(["certify", str(model_path), str(path), "--json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["certified"] is False and out["certified_tokens"] == 0
    assert out["bound_certified_tokens"] == baseline["certified_tokens"] and out["invalidated_by"]
    assert "the proof is void, no token is proven" in captured.err


def test_a_float32_matmul_mode_does_not_void_a_float64_proof():
    """TF32/bf16 modes change float32 products only: a float64 model's proof does not rest on them."""
    data = synthetic_dataset(20, 5, 10, 3, seed=4)
    model = compile_dataset(data, dtype="float64", run_certificate=False).model
    with float32_matmul_precision("high"):
        cert = certify(model, data)
    assert cert.environment["ok"] is False  # the process does break it (for float32 runs)
    assert cert.certified and not cert.invalidated_by and cert.certified_tokens == cert.ceiling_tokens


def test_an_exp_assumption_below_pytorchs_measured_error_voids_the_proof(compiled, tmp_path, capsys):
    """The exp error is checked on samples of the kernels uatlab's attention runs: assuming a correctly rounded
    exp (0.5 ulp) is contradicted by torch.softmax's measured error, so that proof is void; the default is not."""
    model, data = compiled
    cert = certify(model, data)
    measured = cert.environment["exp_ulps_measured"]
    assert measured["dtype"] == "float32" and cert.environment["exp_within_assumed"] is True and cert.certified
    assert max(measured["torch.exp"], measured["torch.softmax"]) > 0.5  # PyTorch's kernels are not correctly rounded
    low = certify(model, data, exp_ulps=0.5)
    assert low.environment["exp_within_assumed"] is False and low.environment["ok"] is False
    assert not low.certified and low.certified_tokens == 0 and low.bound_certified_tokens == cert.certified_tokens
    assert any("exp_within_assumed (assumed 0.5 ulp" in why for why in low.invalidated_by)
    path, model_path = tmp_path / "d.jsonl", tmp_path / "m.safetensors"
    write_jsonl(data, path)
    save_compiled(model, model_path)
    assert main(["certify", str(model_path), str(path), "--exp-ulp", "0.5"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "the proof is void" in err and "torch.softmax" in err
    # said before the data is read too: the warning comes first
    assert err.index("warning: --exp-ulp 0.5 is below the exp error measured") < err.index("the proof is void")
    assert main(["compile", str(path), "--dtype", "float32", "--exp-ulp", "0.5", "--out", str(tmp_path / "c.st")]) == 0
    assert "warning: --exp-ulp 0.5 is below the exp error measured in this process (float32" in " ".join(
        capsys.readouterr().err.split()
    )
    assert main(["certify", str(model_path), str(path)]) == 0  # the default: no such warning
    assert "below the exp error" not in capsys.readouterr().err


@pytest.mark.skipif(platform.system() != "Linux" or platform.machine() != "x86_64", reason="x86-64 fenv constants")
def test_a_directed_rounding_mode_voids_the_proof_and_does_not_crash_the_exp_check(compiled):
    """Rounding upward, softmax sums do not round to 1, so the exp inside torch.softmax cannot be isolated: the
    exp check then fails (no figure), alongside round_to_nearest, and the certificate says so instead of raising."""
    model, data = compiled
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    FE_TONEAREST, FE_UPWARD = 0x000, 0x800  # glibc x86-64 <fenv.h>
    assert libm.fesetround(FE_UPWARD) == 0
    try:
        env = environment_checks("float64", DEFAULT_EXP_ULPS)
        cert = certify(model, data)
    finally:
        libm.fesetround(FE_TONEAREST)
    assert env["exp_ulps_measured"]["torch.softmax"] is None and env["exp_within_assumed"] is False
    assert not cert.certified and cert.certified_tokens == 0
    assert any("round_to_nearest" in why and "not measurable" in why for why in cert.invalidated_by)
    assert environment_checks("float64", DEFAULT_EXP_ULPS)["exp_within_assumed"] is True  # measured anew
