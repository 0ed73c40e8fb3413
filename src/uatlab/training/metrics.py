"""Full evaluation passes: loss, token accuracy, errors left and entity F1 (seqeval).

Accuracy here is always measured by a separate pass over the whole data set with the current
weights (not a running average over the epoch's batches), excluding padding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from uatlab.data.encoded import EncodedData
from uatlab.training.batching import IGNORE, collate, eval_batches

_IOB = re.compile(r"^(O|[BIES]-.+)$")


@dataclass
class EvalResult:
    """Figures of one full pass: mean token loss, accuracy, errors, entity F1 (None if not IOB)."""

    loss: float
    accuracy: float
    errors: int
    tokens: int
    entity_f1: float | None
    sentence_accuracy: float

    def as_dict(self, prefix: str) -> dict[str, float | int | None]:
        return {
            f"{prefix}_loss": self.loss,
            f"{prefix}_accuracy": self.accuracy,
            f"{prefix}_errors": self.errors,
            f"{prefix}_entity_f1": self.entity_f1,
            f"{prefix}_sentence_accuracy": self.sentence_accuracy,
        }


def predict(model: torch.nn.Module, data: EncodedData, max_tokens: int = 8192) -> tuple[list[np.ndarray], float]:
    """Predicted label ids per sequence and the summed cross-entropy over all tokens."""
    preds: list[np.ndarray | None] = [None] * len(data)
    total_loss = 0.0
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for idx in eval_batches(data.lengths, max_tokens):
            b = collate(data, idx)
            logits = model(b.inputs, attend_mask=b.mask)  # (B, n, num_labels)
            total_loss += float(
                F.cross_entropy(
                    logits.reshape(-1, logits.shape[-1]).double(),
                    b.targets.reshape(-1),
                    ignore_index=IGNORE,
                    reduction="sum",
                )
            )
            arg = logits.argmax(dim=-1).numpy()  # (B, n)
            for r, i in enumerate(idx):
                preds[i] = arg[r, : int(data.lengths[i])]
    model.train(was_training)
    return preds, total_loss  # type: ignore[return-value]


def _end_of_chunk(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    if prev_tag in ("E", "S"):
        return True
    if prev_tag in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return prev_tag not in ("O", ".") and prev_type != type_


def _start_of_chunk(prev_tag: str, tag: str, prev_type: str, type_: str) -> bool:
    if tag in ("B", "S"):
        return True
    if prev_tag in ("E", "S", "O") and tag in ("E", "I"):
        return True
    return tag not in ("O", ".") and prev_type != type_


def entity_spans(labels: list[str]) -> set[tuple[str, int, int]]:
    """Entities (type, first, last) of one sentence, by conlleval's rules (seqeval's default mode).

    An ill-formed span (an ``I-X`` after ``O``) starts an entity, as in conlleval and seqeval.
    """
    chunks = set()
    prev_tag, prev_type, begin = "O", "", 0
    for i, lab in enumerate([*labels, "O"]):
        tag = lab[0]
        type_ = lab[1:].split("-", maxsplit=1)[-1] or "_"
        if _end_of_chunk(prev_tag, tag, prev_type, type_):
            chunks.add((prev_type, begin, i - 1))
        if _start_of_chunk(prev_tag, tag, prev_type, type_):
            begin = i
        prev_tag, prev_type = tag, type_
    return chunks


def entity_f1(gold: list[list[str]], pred: list[list[str]]) -> float | None:
    """Micro entity F1 (equal to ``seqeval.metrics.f1_score`` in its default mode; tested against it).

    Returns None when the labels are not an IOB scheme. Computed per sentence (seqeval flattens
    the sentences with an ``O`` between them, which gives the same entities), ~10x faster than
    seqeval, which matters when it runs on 200k tokens after every epoch.
    """
    labels = {y for seq in gold for y in seq}
    if not labels or not all(_IOB.match(y) for y in labels) or labels == {"O"}:
        return None
    n_true = n_pred = n_both = 0
    for g, p in zip(gold, pred, strict=True):
        eg, ep = entity_spans(g), entity_spans(p)
        n_true += len(eg)
        n_pred += len(ep)
        n_both += len(eg & ep)
    return _f1(n_true, n_pred, n_both)


def _f1(n_true: int, n_pred: int, n_both: int) -> float:
    if n_both == 0:
        return 0.0
    precision, recall = n_both / n_pred, n_both / n_true
    return 2 * precision * recall / (precision + recall)


def evaluate(
    model: torch.nn.Module, data: EncodedData, label_names: tuple[str, ...], with_f1: bool = True
) -> EvalResult:
    """One full pass over ``data``: see :class:`EvalResult`."""
    preds, total_loss = predict(model, data)
    right = 0
    whole = 0
    for p, y in zip(preds, data.targets, strict=True):
        ok = int((p == y).sum())
        right += ok
        whole += int(ok == len(y))
    tokens = data.num_tokens
    f1 = None
    if with_f1 and all(_IOB.match(y) for y in label_names) and set(label_names) != {"O"}:
        if data.gold_spans is None:  # the targets never change: extract their entities once
            data.gold_spans = [entity_spans([label_names[j] for j in y]) for y in data.targets]
        n_true = n_pred = n_both = 0
        for p, y, eg in zip(preds, data.targets, data.gold_spans, strict=True):
            ep = eg if np.array_equal(p, y) else entity_spans([label_names[j] for j in p])
            n_true += len(eg)
            n_pred += len(ep)
            n_both += len(eg & ep)
        f1 = _f1(n_true, n_pred, n_both)
    return EvalResult(
        loss=total_loss / max(tokens, 1),
        accuracy=right / max(tokens, 1),
        errors=tokens - right,
        tokens=tokens,
        entity_f1=f1,
        sentence_accuracy=whole / max(len(data), 1),
    )
