"""Certificate for the seq2seq deep memorizer (Kajitsuka & Sato, ICLR 2025, sequence-to-sequence memorization).

For every distinct input (the sentence and the position) the certificate proves the model's prediction, in the
model's dtype, and counts the input's tokens whose label it is: the proof covers every ceiling token when the
count reaches the ceiling (per input, the count of its majority label), i.e. every input predicts a majority
label (of tied labels any one, so the count does not depend on the order of the examples):

1. **Attention (exact).** Every key is 1 (second coordinate), so all logits are equal and the softmax
   weights are exactly 1/n' (exp(0) = 1, n' a power of two); the head writes S = n'·Σ_i ν_i / n' and the
   token id k_j = μ_j + S (an integer), recomputed here with int64 arithmetic (k < h_max ≤ 2^50).
2. **Feed-forward (exact).** The integer circuit is evaluated exactly: its two gate layers on every
   distinct (k, v[word]) pair, the rest on every distinct gated id g: y_ret; the prediction is
   y = y_ret + v − 1.
3. **Readout.** logit_c = 2c·y − c² = y² − (y − c)²: the argmax over c ∈ {0, …, C−1} is the class nearest the
   integer y, clip(y, 0, C − 1) (y itself on the compiled data; on other data y may fall outside the classes),
   and every other class is at least one step farther, so its logit is lower by ≥ (d + 1)² − d² ≥ 1.
4. **Floating point.** If every weight and bias, every id (< h_max), and, for every unit and every point,
   Σ_i |W_ki u_i| + |b_k| is ≤ 2^p (p = 53 for float64, 24 for float32), every partial sum of the forward
   pass is an integer (attention: a dyadic with numerator ≤ h_max) of magnitude ≤ 2^p in any summation
   order, hence exact: the floating-point forward pass equals the exact one. The readout's
   2(C − 1)·max|y| + 2C + C² ≤ 2^p (max over the certified data's y) is checked too. Assumes IEEE
   round-to-nearest arithmetic in the dtype, float32 products at full precision, and a softmax that subtracts
   the row maximum with exp(0) = 1 exactly (so that the weights are exactly 1/n'): the certificate lists these
   in ``assumptions`` and checks them in the certifying process (``environment``,
   `uatlab.verify.uniform_attention`); a failed check voids the proof (``invalidated_by``, no token proven).

`certify_seq2seq_dataset` runs the same certificate for a (loaded) model on labelled token strings, encoded
with the model's encoding: on the data it was compiled from it gives the compile-time figures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from uatlab.constructions.paper_c.layout import MANTISSA_BITS
from uatlab.constructions.paper_c.relu_circuit import Circuit, float_exactness_bound
from uatlab.constructions.paper_c.seq2seq_memorizer import GATE_LAYERS, Seq2SeqData, Seq2SeqMemorizer, prepare
from uatlab.errors import InputError


@dataclass
class Seq2SeqCertificate:
    regime: str
    tokens: int
    ceiling_tokens: int
    certified_tokens: int  # tokens proven correct (0 when a floating-point condition fails or the proof is void)
    correct_tokens: int  # tokens right in exact arithmetic (at most the ceiling: one prediction per input)
    min_margin: int  # min over correct tokens of logit_label − max other logit (exact)
    float_bound_bits: int  # bits of the largest Σ|w u| + |b|
    mantissa_bits: int
    certified: bool  # every ceiling token proven and the proof not void (invalidated_by empty)
    reason: str
    seconds: float
    #: the assumptions the proof rests on, in words (`uatlab.verify.uniform_attention.assumptions`)
    assumptions: list[str] = field(default_factory=list)
    #: run-time checks of the checkable ones in the certifying process (`uatlab.verify.environment.environment_checks`
    #: and the uniform softmax check); ``environment["ok"]`` is False if one fails
    environment: dict[str, Any] = field(default_factory=dict)
    #: why the proof is void (a run-time check it rests on failed), empty if it stands
    invalidated_by: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)

    def to_dict(self) -> dict:
        """The fields as a dict (the same as `to_json`)."""
        return asdict(self)

    @property
    def conflict_tokens(self) -> int:
        """Tokens no model can get right (an identical input with another majority label): tokens − ceiling."""
        return self.tokens - self.ceiling_tokens

    @property
    def certified_at_ceiling(self) -> bool:
        return self.certified and self.certified_tokens == self.ceiling_tokens


def token_ids_and_words(memo: Seq2SeqMemorizer, data: Seq2SeqData) -> tuple[np.ndarray, np.ndarray]:
    """(T,) exact token ids k and (T,) v[word] of every token of the data."""
    k_sent = memo.token_ids(data.ids)  # (U, n')
    k = k_sent[data.sentence_of[data.token_sentence], data.token_pos]
    return k.astype(np.int64), memo.v[data.token_word].astype(np.int64)


#: progress callback of `certify_seq2seq`: (stage, done, total); the stages count distinct points
ProgressFn = Callable[[str, int, int | None], None]
GATE_STAGE = "certify gate"  # distinct (token id, word value) pairs through the gate's layers
RETRIEVAL_STAGE = "certify retrieval"  # distinct gated ids through the rest of the circuit


def certify_seq2seq(
    memo: Seq2SeqMemorizer, data: Seq2SeqData, chunk: int = 16384, progress: ProgressFn | None = None
) -> Seq2SeqCertificate:
    """Certify that ``memo`` predicts every ceiling token of ``data`` in its regime (module docstring).

    ``progress(stage, done, total)`` is told after every chunk of points of `GATE_STAGE` and `RETRIEVAL_STAGE`;
    it does not change the result."""
    t0 = time.perf_counter()

    def report(stage: str, done: int, total: int) -> None:
        if progress is not None:
            progress(stage, done, total)

    regime = memo.layout.regime
    p = MANTISSA_BITS[regime]
    k, v = token_ids_and_words(memo, data)
    pairs, inv = np.unique(np.stack([k, v], axis=1), axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    # the gate (the circuit's first GATE_LAYERS layers) on every distinct (k, v); the rest on every distinct
    # gated id g (all unambiguous words' tokens share g = 0): the same units on the same values, fewer points
    front = Circuit(n_inputs=2, layers=memo.circuit.layers[:GATE_LAYERS])
    back = Circuit(n_inputs=1, layers=memo.circuit.layers[GATE_LAYERS:])
    worst, (g,) = 0, ([],)
    report(GATE_STAGE, 0, len(pairs))
    for i in range(0, len(pairs), chunk):
        w, _, (gi,) = float_exactness_bound(front, [pairs[i : i + chunk, 0], pairs[i : i + chunk, 1]])
        worst = max(worst, int(w))
        g.extend(int(t) for t in gi)
        report(GATE_STAGE, min(i + chunk, len(pairs)), len(pairs))
    g_u, g_inv = np.unique(np.asarray(g, dtype=np.int64), return_inverse=True)
    ys = []
    report(RETRIEVAL_STAGE, 0, len(g_u))
    for i in range(0, len(g_u), chunk):  # chunks bound the memory: every layer is (width, chunk)
        w, _, (y,) = float_exactness_bound(back, [g_u[i : i + chunk]])
        worst = max(worst, int(w))
        ys.append(np.asarray([int(t) for t in y], dtype=np.int64))
        report(RETRIEVAL_STAGE, min(i + chunk, len(g_u)), len(g_u))
    y_ret = np.concatenate(ys)[g_inv.reshape(-1)][inv]
    y = y_ret + v - 1
    ceiling = int(data.ceiling.sum())  # per distinct input, the count of its majority label (whichever of a tie)
    lab = data.token_label
    C = memo.C
    # the argmax of the readout (module docstring, step 3) is one label per distinct input (sentence, position):
    # its tokens with that label are right, at most the majority count, so the total reaches the ceiling exactly
    # when every input predicts a majority label (of a tie, any one: the count does not depend on data order)
    correct = int((np.clip(y, 0, C - 1) == lab).sum())
    # margin of a right token: ≥ 1 over every other class, = 1 for the neighbour of y (C ≥ 2)
    min_margin = 1 if correct else 0
    reasons = []
    if correct < ceiling:
        reasons.append(f"{ceiling - correct} ceiling tokens predicted wrong")
    bound_bits = int(worst).bit_length()
    if bound_bits > p:
        reasons.append(f"a unit sums terms up to 2^{bound_bits} > 2^{p}: {regime} may round")
    if memo.circuit.max_weight_bits() > p:
        reasons.append(f"a weight has {memo.circuit.max_weight_bits()} bits > {p}")
    if int(memo.h_max).bit_length() > p or memo.context & (memo.context - 1) or int(k.max()) >= memo.h_max:
        reasons.append("attention sum not exact in floating point")
    y_max = int(np.abs(y).max(initial=0))
    if int(memo.v.max()) >= 2**p or (2 * (C - 1) * y_max + 2 * C + C * C) > 2**p:
        reasons.append("readout not exact in floating point")
    float_ok = not [r for r in reasons if "predicted wrong" not in r]
    from uatlab.verify.environment import void_reasons
    from uatlab.verify.uniform_attention import assumptions, certificate_environment

    env, failed = certificate_environment(regime, memo.context)
    invalidated_by = void_reasons(failed)
    return Seq2SeqCertificate(
        regime=regime,
        tokens=len(lab),
        ceiling_tokens=ceiling,
        certified_tokens=correct if float_ok and not invalidated_by else 0,
        correct_tokens=correct,
        min_margin=min_margin,
        float_bound_bits=bound_bits,
        mantissa_bits=p,
        certified=not reasons and not invalidated_by,
        reason="; ".join(reasons + invalidated_by) or "every ceiling token proven",
        seconds=time.perf_counter() - t0,
        assumptions=assumptions(regime, memo.context, "Seq2SeqDeepModel"),
        environment=env,
        invalidated_by=invalidated_by,
    )


def certify_seq2seq_dataset(
    model: Any, data: Any, encoding: Any = None, progress: ProgressFn | None = None
) -> Seq2SeqCertificate:
    """`certify_seq2seq` for a `uatlab.constructions.paper_c.seq2seq_model.Seq2SeqDeepModel` (``model.memo``)
    on a `uatlab.data.SequenceDataset` of token and label strings.

    ``encoding``: default ``model.encoding``. Raises InputError naming file:line, sequence and position for an
    unknown word or label, and the sequence and its length when it is longer than the model's context n'.
    ``progress`` as for `certify_seq2seq`."""
    from uatlab.data.dataset import Encoding, check_own_encoding

    memo: Seq2SeqMemorizer = model.memo
    mismatch = model.construction_mismatch() if hasattr(model, "construction_mismatch") else None
    if mismatch is not None:
        raise InputError(
            f"the model's {mismatch} differs from the construction it was compiled as (edited or cast after "
            "compiling): the certificate proves the construction, so it would not cover this module. Certify the "
            "saved model file, or compile again"
        )
    own = getattr(model, "encoding", None)
    enc = encoding if encoding is not None else own
    if isinstance(enc, dict):
        enc = Encoding.from_json(enc)
    if enc is None:
        enc = Encoding.of_ids(memo.V, memo.C)
    check_own_encoding(enc, own)
    if len(data) == 0:
        raise InputError(f"{data.source}: no sequences to certify")
    tokens = enc.encode_tokens(data, unknown="error")
    labels = enc.encode_labels(data)
    if len(enc.token_to_id) != memo.V:
        raise InputError(f"the encoding lists {len(enc.token_to_id)} tokens, the model reads V = {memo.V}")
    if len(enc.label_to_id) > memo.C:
        raise InputError(f"the encoding lists {len(enc.label_to_id)} labels, the model has C = {memo.C}")
    for i, row in enumerate(tokens):
        if len(row) > memo.context:
            raise InputError(
                f"{data.where(i)}: sequence {i} has {len(row)} tokens; the model's context covers {memo.context}"
            )
    # padded to the model's context n' (the forward pass pads every sentence to it), not to this data's longest
    return certify_seq2seq(memo, prepare(tokens, labels, memo.V, n_pad=memo.context), progress=progress)
