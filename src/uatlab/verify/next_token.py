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
   the readout (|2cy| + c² ≤ 3C² ≤ 2^p). This step assumes IEEE round-to-nearest arithmetic in the dtype,
   float32 products at full precision, and a softmax that subtracts the row maximum with exp(0) = 1 exactly
   (so that the weights are exactly 1/n'; exp(s)/Σ exp(s) without the shift need not be): the certificate
   lists these in ``assumptions`` and checks them in the certifying process (``environment``,
   `uatlab.verify.uniform_attention`); a failed check voids the proof (``invalidated_by``, nothing proven).

'exact' regime: steps 1–3 (rational arithmetic is exact here; no floating point is involved).

**What the proof assumes** (`check_assumptions`, run first; InputError naming the row, position or entry
otherwise). The construction guarantees each of these (ν drawn from [0, R) with a zero pad column, labels
from [0, C)); a memorizer edited in memory or read from a tampered file need not, and without the check the
certificate would prove a prediction the model does not make:

* **regime ∈ {exact, float64, float32}.** Step 4 needs the mantissa width p of the forward pass; an unknown
  name would skip step 4 although the module computes in floating point.
* **ν ≥ 0.** Step 4 bounds every partial sum of the attention by h. With a negative entry that fails: ν = +M
  at one position and −M at another leave h small while the partial sums reach M and round.
* **ν[j, V] = 0 for every position j (V = the pad id).** Step 1 sums ν over the window's own positions; the
  head averages over all n' positions, the left pads included, so the two agree only if pads add 0.
* **ν has n' rows of V + 1 entries and token ids lie in [0, V].** An id outside would not index ν or, if
  negative, would wrap around to another column.
* **windows of at most n' tokens.** The head has n' positions; a longer window has none for its first tokens
  (the forward pass cannot run it, and the index j − n' < 0 would wrap around in step 1).
* **labels in [0, C).** Step 3 proves argmax = y for y = label; the readout has C classes, so a label ≥ C (or
  < 0) would count as proven while the argmax is another class.
* **at least one row**, tokens (rows, n) and labels (rows,) of equal length, **integer ids**: a fractional id
  is refused, not truncated (the certificate would otherwise speak of another window).

References: Kajitsuka & Sato, "On the Optimal Memorization Capacity of Transformers", ICLR 2025 (next-token
memorization; the construction is `uatlab.constructions.paper_c.next_token_memorizer`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from uatlab.constructions.paper_c.layout import MANTISSA_BITS
from uatlab.constructions.paper_c.next_token_memorizer import NextTokenMemorizer
from uatlab.constructions.paper_c.relu_circuit import evaluate_exact, float_exactness_bound
from uatlab.data.ids import check_next_token_ids
from uatlab.errors import InputError


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
    certified: bool  # every ceiling row proven and the proof not void (invalidated_by empty)
    reason: str
    seconds: float
    #: the assumptions the proof rests on, in words (`uatlab.verify.uniform_attention.assumptions`)
    assumptions: list[str] = field(default_factory=list)
    #: run-time checks of the checkable ones in the certifying process (`uatlab.verify.environment.environment_checks`
    #: and the uniform softmax check); ``environment["ok"]`` is False if one fails
    environment: dict[str, Any] = field(default_factory=dict)
    #: why the proof is void (a run-time check it rests on failed), empty if it stands
    invalidated_by: list[str] = field(default_factory=list)
    #: rows proven correct: ``correct_rows`` unless a floating-point condition fails or the proof is void (then 0)
    certified_rows: int = 0

    def to_json(self) -> dict:
        return asdict(self)

    def to_dict(self) -> dict:
        """The fields as a dict (the same as `to_json`)."""
        return asdict(self)


def check_assumptions(memo: NextTokenMemorizer, tokens: object, labels: object) -> tuple[np.ndarray, np.ndarray]:
    """Tokens (rows, n) and labels (rows,) as int64 once every assumption of the proof (module docstring)
    holds for ``memo`` and them; InputError naming the offending row, position or table entry otherwise."""
    regime, V, C, n_pad = memo.layout.regime, memo.V, memo.C, memo.layout.n_pad
    if regime != "exact" and regime not in MANTISSA_BITS:
        raise InputError(f"the memorizer's regime {regime!r} is not one of exact, float32, float64")
    if C < 1:
        raise InputError(f"the memorizer's readout has C = {C} classes")
    from uatlab.constructions.paper_c.integer_tensors import token_table_problem  # (imports torch)

    problem = token_table_problem(memo.nu, V, rows=n_pad)
    if problem is not None:
        raise InputError(f"the memorizer's {problem}")
    # the pad may come anywhere: a pad adds 0 to h (ν[j, V] = 0, checked above), so the proof holds for any window
    toks, labs = check_next_token_ids(
        tokens, labels, V, C, left_padded=False, classes=f"the readout has C = {C} classes"
    )
    if toks.shape[1] > n_pad:
        raise InputError(f"windows of {toks.shape[1]} tokens, the model's context is n' = {n_pad} positions")
    return toks, labs


def certify_next_token(
    memo: NextTokenMemorizer, tokens: np.ndarray, labels: np.ndarray, chunk: int = 8192
) -> NextTokenCertificate:
    """Certify that ``memo`` predicts every ceiling row of (tokens, labels) in its regime.

    tokens: (rows, n) ids in [0, V] (V = pad, for left-padded shorter windows), n ≤ n'; labels: (rows,) in
    [0, C). Raises InputError when the memorizer or the data break an assumption of the proof (module
    docstring)."""
    t0 = time.perf_counter()
    tokens, labels = check_assumptions(memo, tokens, labels)
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
    from uatlab.verify.environment import void_reasons
    from uatlab.verify.uniform_attention import assumptions, certificate_environment

    float_ok = not [r for r in reasons if "predicted wrong" not in r]
    env, failed = certificate_environment(regime, memo.layout.n_pad)
    invalidated_by = void_reasons(failed)
    return NextTokenCertificate(
        regime=regime,
        rows=len(labels),
        distinct_sequences=len(uniq),
        ceiling_rows=ceiling,
        correct_rows=correct,
        min_margin=min_margin,
        float_bound_bits=bound_bits,
        mantissa_bits=p,
        certified=not reasons and not invalidated_by,
        reason="; ".join(reasons + invalidated_by) or "every ceiling row proven",
        seconds=time.perf_counter() - t0,
        assumptions=assumptions(regime, memo.layout.n_pad, "ExactNextTokenModule" if p is None else "NextTokenModel"),
        environment=env,
        invalidated_by=invalidated_by,
        certified_rows=correct if float_ok and not invalidated_by else 0,
    )


def check_module_matches(model: object) -> NextTokenMemorizer:
    """The construction ``model.memo`` once the module's own tensors are shown to be exactly its weights.

    The proof above is about the integers of ``model.memo``; the forward pass of a
    `uatlab.constructions.paper_c.model.NextTokenModel` reads its buffers (ν, the attention and readout
    weights) and its circuit layers in the module's dtype. A module edited after it was built (a buffer
    changed, ``load_state_dict``, ``.float()``) computes something else, so a module is certified only if a
    module rebuilt from ``model.memo`` in the regime's dtype has the same dtype and bit-identical tensors
    (the rebuild converts integers of ≤ p bits, so equal floats mean equal integers). The exact-regime module
    evaluates ``model.memo`` itself. InputError names the first tensor that differs."""
    from uatlab.constructions.paper_c.model import (
        REGIME_DTYPES,
        ExactNextTokenModule,
        NextTokenModel,
        first_tensor_difference,
    )

    memo = getattr(model, "memo", None)
    if not isinstance(memo, NextTokenMemorizer):
        raise InputError(f"{type(model).__name__} has no next-token construction (model.memo)")
    if isinstance(model, ExactNextTokenModule):
        return memo
    if not isinstance(model, NextTokenModel):
        raise InputError(f"{type(model).__name__} is not a next-token memorizer module (NextTokenModel)")
    dtype = REGIME_DTYPES.get(memo.layout.regime)
    if dtype is None or model.dtype != dtype:
        raise InputError(f"the module computes in {model.dtype}, its construction's regime is {memo.layout.regime!r}")
    ref = NextTokenModel(memo, dtype)
    for attr in ("n", "n_pad", "V"):
        if getattr(model, attr) != getattr(ref, attr):
            raise InputError(
                f"the module's {attr} = {getattr(model, attr)}, its construction (model.memo) has {getattr(ref, attr)}"
            )
    if any(True for _ in model.parameters()):
        raise InputError("the module has trainable parameters; the construction (model.memo) has none")
    mine = dict(model.named_buffers())
    theirs = dict(ref.named_buffers()) | {
        f"circuit layer {i} {part}": t
        for i, layer in enumerate(ref._layers)
        for part, t in zip(("rows", "cols", "weights", "bias"), layer, strict=True)
    }
    if len(model._layers) != len(ref._layers):
        raise InputError(f"the module has {len(model._layers)} circuit layers, its construction {len(ref._layers)}")
    mine |= {
        f"circuit layer {i} {part}": t
        for i, layer in enumerate(model._layers)
        for part, t in zip(("rows", "cols", "weights", "bias"), layer, strict=True)
    }
    diff = first_tensor_difference((name, mine.get(name), t) for name, t in theirs.items())
    if diff is not None:
        name, got, t = diff
        was = "missing" if got is None else f"{got.dtype} {tuple(got.shape)}"
        raise InputError(
            f"the module's tensor {name} ({was}) differs from the construction it was built from "
            f"(model.memo: {t.dtype} {tuple(t.shape)}): the certificate proves the construction, so rebuild "
            f"the module from it or recompile"
        )
    return memo


def certify_next_token_model(model: object, data: object, encoding: object = None) -> NextTokenCertificate:
    """`uatlab.certify` for a next-token memorizer module: its own tensors (`check_module_matches`) on
    ``data``, a `uatlab.data.next_token.NextTokenData` (one label per sequence).

    Token and label strings are mapped through ``model.token_vocab`` / ``model.label_vocab`` (set by
    `uatlab.load`; default: token i is ``str(i)``, label c is ``str(c)``). InputError names the example of an
    unknown token, an unknown label or a window longer than the model reads."""
    from uatlab.constructions.paper_c.model_file import encode_sequences
    from uatlab.data.next_token import NextTokenData

    if encoding is not None:
        raise InputError(
            "a next-token model maps strings with model.token_vocab and model.label_vocab; pass no encoding"
        )
    if not isinstance(data, NextTokenData):
        raise InputError(
            f"a next-token model is certified on one label per sequence: pass a uatlab.data.next_token.NextTokenData "
            f"(read_next_token_jsonl, read_text_windows), not a {type(data).__name__}, or call "
            f"uatlab.verify.next_token.certify_next_token(model.memo, tokens, labels) with ids"
        )
    memo = check_module_matches(model)
    token_vocab = getattr(model, "token_vocab", None) or [str(i) for i in range(memo.V)]
    label_vocab = getattr(model, "label_vocab", None) or [str(c) for c in range(memo.C)]
    tokens, data_labels = data.checked_ids()
    where = [f"{data.source} example {i}" for i in range(len(data_labels))]
    names, pad = data.token_vocab, data.pad_id
    seqs = [[names[t] for t in row if t != pad] for row in tokens.tolist()]
    ids = encode_sequences(memo, token_vocab, seqs, where)
    index = {y: c for c, y in enumerate(label_vocab)}
    labels = []
    for i, y in enumerate(data_labels.tolist()):
        name = data.label_vocab[y]
        if name not in index:
            raise InputError(f"{where[i]}: label {name!r} is not one the model outputs")
        labels.append(index[name])
    return certify_next_token(memo, ids, np.asarray(labels, dtype=np.int64))
