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
    wrong_sequences: tuple[int, ...] = ()  # indices of the sequences with at least one wrong token

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


def entity_f1(gold: list[list[str]], pred: list[list[str]]) -> float | None:
    """Micro entity F1 by ``seqeval.metrics.f1_score`` (its default CoNLL mode); None if the labels are not IOB."""
    from seqeval.metrics import f1_score

    labels = {y for seq in gold for y in seq}
    if not labels or not all(_IOB.match(y) for y in labels) or labels == {"O"}:
        return None
    return float(f1_score(gold, pred))


def evaluate(
    model: torch.nn.Module, data: EncodedData, label_names: tuple[str, ...], with_f1: bool = True
) -> EvalResult:
    """One full pass over ``data``: see `EvalResult`."""
    preds, total_loss = predict(model, data)
    right = 0
    whole = 0
    wrong: list[int] = []
    for i, (p, y) in enumerate(zip(preds, data.targets, strict=True)):
        ok = int((p == y).sum())
        right += ok
        whole += int(ok == len(y))
        if ok != len(y):
            wrong.append(i)
    tokens = data.num_tokens
    f1 = None
    if with_f1:
        names = np.asarray(label_names, dtype=object)
        f1 = entity_f1([list(names[y]) for y in data.targets], [list(names[p]) for p in preds])
    return EvalResult(
        loss=total_loss / max(tokens, 1),
        accuracy=right / max(tokens, 1),
        errors=tokens - right,
        tokens=tokens,
        entity_f1=f1,
        sentence_accuracy=whole / max(len(data), 1),
        wrong_sequences=tuple(wrong),
    )
