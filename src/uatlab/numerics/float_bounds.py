"""A-priori floating-point error bounds (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.).

Model of arithmetic (IEEE 754, round to nearest, gradual underflow): for each basic operation
``fl(a op b) = (a op b)(1 + δ) + η`` with ``|δ| ≤ u``, u the unit roundoff (2^-53 for float64, 2^-24 for
float32), η = 0 for additions and ``|η| ≤ ETA`` (`UNDERFLOW_ETA`) for products that underflow.
A fused multiply-add rounds once, which only helps, so every bound below also holds with FMAs.

Bounds used by `uatlab.verify.certificate` (all hold for **any** summation order, i.e. for whatever
blocking or vectorisation PyTorch/BLAS picks):

* dot product of n terms (Higham Lemma 3.1 / eq. 3.5): ``|fl(xᵀy) − xᵀy| ≤ γ_n Σ|x_i y_i| + n·ETA`` with
  ``γ_n = n u / (1 − n u)`` (the n·ETA, from underflowing products, is ~1e-43 or less). Terms that are exactly zero (a zero weight, a ReLU that is exactly off) add
  nothing and cost no rounding, so n may be taken as the number of terms that can be non-zero.
* propagation of input errors through an exact linear map: ``|W x̂ − W x| ≤ |W| |x̂ − x|``.
* ``exp``: we **assume** the evaluator's ``exp`` has error at most ``k`` units in the last place for results
  in the normal range, ``k`` a parameter of the certificate (default `DEFAULT_EXP_ULPS`). Since
  ulp(y) ≤ 2u|y|, this is a relative error ≤ 2ku. Measured maxima on CPU (`uatlab.numerics.exp_accuracy`,
  which the token certificate runs on samples of PyTorch's two CPU kernels, in the model's dtype, in the
  certifying process): ``torch.exp`` 0.56 ulp (float32) and
  0.68 (float64), the exp inside ``torch.softmax`` 0.96 and 0.83, numpy's float32 ``exp`` 2.4–2.54, the exp
  inside PyTorch's CPU
  ``scaled_dot_product_attention`` 2.8–4.6 for results down to e^-84 (and far larger just above the
  underflow threshold, which that kernel does not cover); CUDA's ``expf`` is documented at 2 ulp. The
  default of 5 ulp covers all of these in their normal range. This is the one assumption on a function that
  IEEE 754 does not specify; it is reported in every certificate.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from uatlab.errors import InputError

UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24}
#: smallest positive normal number per dtype (below it relative-error bounds do not hold)
TINY = {"float64": float(np.finfo(np.float64).tiny), "float32": float(np.finfo(np.float32).tiny)}
#: default ulps of error assumed for exp (see module docstring): covers torch.exp (0.56), torch.softmax
#: (0.99), numpy float32 exp (2.54), CUDA expf (2) and PyTorch's CPU SDPA kernel in its normal range (≤ 4.6)
DEFAULT_EXP_ULPS = 5.0
#: absolute error bound of one multiplication whose result underflows (Higham §2.1: fl(xy) = xy(1+δ) + η,
#: |η| ≤ half the smallest subnormal); we use the whole smallest subnormal (exactly representable).
#: Additions whose result is subnormal are exact, so a dot product of n terms costs at most n·ETA more.
UNDERFLOW_ETA = {"float64": 2.0**-1074, "float32": 2.0**-149}


def underflow_eta(dtype: str) -> float:
    """Absolute error a single product may add through gradual underflow (subnormals not flushed)."""
    return UNDERFLOW_ETA[dtype]


def unit_roundoff(dtype: str) -> float:
    """u for 'float64' or 'float32'."""
    return UNIT_ROUNDOFF[dtype]


def gamma(n: int | np.ndarray, u: float) -> float | np.ndarray:
    """γ_n = n u / (1 − n u) (Higham eq. 3.8); n may be an array of term counts."""
    n_arr = np.asarray(n, dtype=np.float64)
    nu = n_arr * u
    if np.any(nu >= 0.5):
        raise ArithmeticError(f"γ_n is only meaningful for n·u < 1/2 (n = {int(np.max(n_arr))}, u = {u})")
    out = nu / (1.0 - nu)
    return float(out) if out.ndim == 0 else out


def check_exp_ulps(ulps: float) -> float:
    """Validate an assumed exp error in ulps: a real number (not a string or a bool: TypeError naming
    ``exp_ulps``), finite, ≥ 0.5 (a correctly rounded exp) and ≤ 10^4 (InputError, a ValueError)."""
    if isinstance(ulps, bool) or not isinstance(ulps, numbers.Real):
        raise TypeError(f"exp_ulps (the exp error in ulps) must be a real number, got {ulps!r} ({type(ulps).__name__})")
    value = float(ulps)
    if not math.isfinite(value) or value < 0.5 or value > 1e4:
        raise InputError(f"the exp error must be between 0.5 ulp (correctly rounded) and 10000 ulp, got {ulps!r}")
    return value


def exp_relative_error(u: float, ulps: float) -> float:
    """Bound on |log(fl(exp t)/exp t)| for normal results when exp errs by at most ``ulps`` ulp.

    An error of k ulp is a relative error δ ≤ 2ku (ulp(y) ≤ 2u|y|), and |log(1 + δ)| ≤ δ/(1 − δ) ≤ 1.01 δ
    while δ ≤ 0.0099 (float32 with k ≤ 10^4: δ ≤ 1.2e-3).
    """
    delta = 2.0 * check_exp_ulps(ulps) * u
    if delta > 0.0099:
        raise ArithmeticError(f"an exp error of {ulps} ulp with u = {u} is too large for this bound")
    return delta * 1.01


def exp_underflow_threshold(dtype: str) -> float:
    """t such that exp(−t') stays a normal number for every t' ≤ t (with a margin of 1)."""
    return -math.log(TINY[dtype]) - 1.0


def is_power_of_two(x: float) -> bool:
    """True for ±2^k (scaling by it is exact barring overflow/underflow)."""
    if x == 0 or not math.isfinite(x):
        return False
    m, _ = math.frexp(abs(x))
    return m == 0.5


def representable(values: np.ndarray, dtype: str) -> bool:
    """True if every float64 value is exactly representable in ``dtype``."""
    values = np.asarray(values, dtype=np.float64)
    if dtype == "float64":
        return True
    return bool(np.all(values.astype(np.float32).astype(np.float64) == values))


def product_radius(left: np.ndarray, right: np.ndarray, dtype: str) -> np.ndarray:
    """Bound on |fl(left @ right) − left @ right| for the stored factors of a low-rank weight.

    ``left``: (h, rows, r), ``right``: (h, r, cols) in float64 holding the stored values. With r = 1 every
    entry is a single product: it is exact when it is exactly representable in the model's dtype (for
    float32 factors the float64 product is exact, so this is decidable) or when a factor is ±2^k or 0.
    Otherwise the bound is γ_r(u) |left| @ |right|.
    """
    u = unit_roundoff(dtype)
    bound = gamma(left.shape[-1], u) * (np.abs(left) @ np.abs(right)) + left.shape[-1] * underflow_eta(dtype)
    if left.shape[-1] != 1:
        return bound
    prod = left @ right
    if dtype == "float32":
        exact = prod.astype(np.float32).astype(np.float64) == prod
    else:
        pow2 = np.vectorize(lambda v: v == 0 or is_power_of_two(float(v)), otypes=[bool])
        zero = np.broadcast_to(left == 0, prod.shape) | np.broadcast_to(right == 0, prod.shape)
        # scaling by ±2^k is exact only while the product stays normal (no underflow)
        exact = zero | (
            (np.broadcast_to(pow2(left), prod.shape) | np.broadcast_to(pow2(right), prod.shape))
            & (np.abs(prod) >= TINY[dtype])
        )
    return np.where(exact, 0.0, bound)
