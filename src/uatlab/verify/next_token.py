"""Certificate for the next-token memorizer (Kajitsuka & Sato, ICLR 2025, next-token memorization).

The certificate proves, for every compiled sequence, that the model's prediction equals its label
(for rows whose label is the majority label of their sequence: the ceiling):

1. **Attention (exact).** The key of every position is 1 (second coordinate), so all logits of the
   last position's query are equal and the softmax weights are exactly 1/n' (exp(0) = 1); the head
   writes h = n'·Σ_j ν_j / n' = Σ_j ν_j, an integer computed here with Python integers.
2. **Feed-forward (exact).** The integer circuit is evaluated exactly (int64 where a bound proves no
   overflow, Python integers otherwise): y = label index.
3. **Readout.** logit_c = 2c·y − c², so logit_y − logit_c = (y − c)² ≥ 1: the argmax is y with margin ≥ 1.
4. **Floating point (float regimes).** If every weight and bias, every id h, and, for every unit and
   every point, Σ_i |W_ki u_i| + |b_k| is at most 2^p (p = 53 for float64, 24 for float32), then every
   partial sum of the forward pass is an integer of magnitude ≤ 2^p in any summation order, hence exactly
   representable, hence the floating-point forward pass equals the exact one. The same holds for the
   attention (n' a power of two, every partial sum of (1/n')ν_j a dyadic with numerator ≤ h ≤ 2^p) and
   the readout (|2cy| + c² ≤ 3C² ≤ 2^p). This step assumes exp(0) = 1 exactly in the float library.

'exact' regime: steps 1–3 (rational arithmetic is exact here; no floating point is involved).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np

from uatlab.constructions.paper_c.next_token_memorizer import NextTokenMemorizer
from uatlab.constructions.paper_c.relu_circuit import evaluate_exact, float_exactness_bound

MANTISSA_BITS = {"float64": 53, "float32": 24}


@dataclass
class NextTokenCertificate:
    regime: str
    rows: int
    distinct_sequences: int
    ceiling_rows: int
    correct_rows: int
    min_margin: int  # min over rows of logit_label − max other logit (exact)
    float_bound_bits: int | None  # bits of the largest Σ|w u| + |b| (float regimes)
    mantissa_bits: int | None
    certified: bool
    reason: str
    seconds: float

    def to_json(self) -> dict:
        return asdict(self)


def certify_next_token(
    memo: NextTokenMemorizer, tokens: np.ndarray, labels: np.ndarray, chunk: int = 8192
) -> NextTokenCertificate:
    """Certify that ``memo`` predicts every ceiling row of (tokens, labels) in its regime."""
    t0 = time.perf_counter()
    tokens = np.asarray(tokens, dtype=np.int64)
    labels = np.asarray(labels, dtype=np.int64)
    uniq, inv = np.unique(tokens, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    regime = memo.layout.regime
    p = MANTISSA_BITS.get(regime)
    ys, worst = [], 0
    for i in range(0, len(uniq), chunk):  # chunks bound the memory: every layer is (width, chunk)
        stream = memo.stream(uniq[i : i + chunk])
        if p is None:
            (y,) = evaluate_exact(memo.circuit, stream)
        else:
            w, _, (y,) = float_exactness_bound(memo.circuit, stream)
            worst = max(worst, int(w))
        ys.append(np.asarray([int(v) for v in y], dtype=np.int64))
    y = np.concatenate(ys)
    bound_bits = None if p is None else int(worst).bit_length()
    C = memo.C
    # exact readout margins without forming (rows, C) logits: logit_c = 2cy − c² = y² − (y − c)², so
    # logit_label − max_{c ≠ label} logit_c = min_{c ≠ label} (y − c)² − (y − label)²
    yy = y[inv]
    near = np.clip(yy, 0, C - 1)  # the class nearest to y
    alt = np.where(near == labels, np.where(near + 1 < C, near + 1, near - 1), near)
    alt2 = np.where(near == labels, np.where(near - 1 >= 0, near - 1, near + 1), near)
    d_other = np.minimum((yy - alt) ** 2, (yy - np.clip(alt2, 0, C - 1)) ** 2)
    margin = d_other - (yy - labels) ** 2
    correct = int((yy == labels).sum())
    from uatlab.constructions.paper_c.next_token_memorizer import dedupe

    _, _, _, ceiling = dedupe(tokens, labels)
    reasons = []
    if correct != ceiling:
        reasons.append(f"{ceiling - correct} ceiling rows predicted wrong")
    if p is not None:
        if bound_bits > p:
            reasons.append(f"a unit sums terms up to 2^{bound_bits} > 2^{p}: {regime} may round")
        if memo.circuit.max_weight_bits() > p:
            reasons.append(f"a weight has {memo.circuit.max_weight_bits()} bits > {p}")
        if int(max(memo.ids(uniq))).bit_length() > p or memo.layout.n_pad & (memo.layout.n_pad - 1):
            reasons.append("attention sum not exact in floating point")
        if 3 * C * C > 2**p:
            reasons.append("readout not exact in floating point")
    min_margin = int(margin[yy == labels].min()) if correct else 0
    return NextTokenCertificate(
        regime=regime,
        rows=len(labels),
        distinct_sequences=len(uniq),
        ceiling_rows=ceiling,
        correct_rows=correct,
        min_margin=min_margin,
        float_bound_bits=bound_bits,
        mantissa_bits=p,
        certified=not reasons,
        reason="; ".join(reasons) or "every ceiling row proven",
        seconds=time.perf_counter() - t0,
    )
