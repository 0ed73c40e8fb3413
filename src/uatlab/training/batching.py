"""Vocabulary, encoding and length-bucketed batches with key-padding masks.

Ids: token id 0 is ``<unk>`` (unknown words at evaluation) and also fills padded positions (they
are masked as keys and ignored by the loss, so their embedding never matters). Label id
`IGNORE` (-100) marks padding in the targets.

Batch order is a pure function of ``(seed, epoch)`` (`epoch_batches`): a resumed run that
skips the first k batches of an epoch sees exactly the batches an uninterrupted run would.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from uatlab.data import Encoding, SequenceDataset
from uatlab.data.dataset import UNK
from uatlab.data.encoded import EncodedData
from uatlab.errors import InputError

IGNORE = -100


def fit_encoding(data: SequenceDataset) -> Encoding:
    """The training encoding: ``<unk>`` is token 0, then the tokens and labels of ``data`` in first-seen order."""
    return Encoding.fit(data, unknown_token=UNK)


def encode(data: SequenceDataset, vocab: Encoding, role: str = "training") -> EncodedData:
    """Encode ``data``; unknown words become the encoding's unknown-word token (id 0 if it has none, which
    the trainer warns about); an unknown label is an `InputError`.

    Raises:
        InputError: naming the file:line, sequence, position and label when a label is missing from
            the label set the model was trained with.
    """
    tok_ids, lab_ids = vocab.token_to_id, vocab.label_to_id
    unk = vocab.unknown_id if vocab.unknown_id is not None else 0
    ids, targets, unknown = [], [], 0
    for i, (toks, labs) in enumerate(data):
        row = np.fromiter((tok_ids.get(t, unk) for t in toks), dtype=np.int64, count=len(toks))
        unknown += int(sum(1 for t in toks if t not in tok_ids))
        tgt = np.empty(len(labs), dtype=np.int64)
        for k, lab in enumerate(labs):
            j = lab_ids.get(lab)
            if j is None:
                raise InputError(
                    f"{data.where(i, k)}: label {lab!r} (sequence {i}, position {k}) of the {role} data was never "
                    f"seen in training; the model knows only {vocab.id_to_label}"
                )
            tgt[k] = j
        ids.append(row)
        targets.append(tgt)
    lines = [data.lines[i] if i < len(data.lines) else i + 1 for i in range(len(data))]
    return EncodedData(vocab, ids, targets, lines, data.source, unknown_tokens=unknown)


@dataclass
class Batch:
    """One padded batch: ``inputs`` (B, n) ids, ``targets`` (B, n) with IGNORE on padding, ``mask`` (B, n)."""

    indices: np.ndarray  # (B,) positions in the data set
    inputs: torch.Tensor  # (B, n) int64
    targets: torch.Tensor  # (B, n) int64
    mask: torch.Tensor  # (B, n) bool, True for real tokens


def collate(data: EncodedData, indices: Sequence[int]) -> Batch:
    """Pad the sequences ``indices`` to their longest length."""
    idx = np.asarray(indices, dtype=np.int64)
    n = int(data.lengths[idx].max())
    inputs = np.zeros((len(idx), n), dtype=np.int64)  # (B, n)
    targets = np.full((len(idx), n), IGNORE, dtype=np.int64)  # (B, n)
    for r, i in enumerate(idx):
        m = int(data.lengths[i])
        inputs[r, :m] = data.ids[i]
        targets[r, :m] = data.targets[i]
    t_inputs = torch.from_numpy(inputs)
    t_targets = torch.from_numpy(targets)
    return Batch(idx, t_inputs, t_targets, t_targets != IGNORE)


def epoch_batches(lengths: np.ndarray, batch_size: int, seed: int, epoch: int) -> list[np.ndarray]:
    """The training batches of one epoch: length-bucketed, shuffled, a pure function of (seed, epoch).

    A random permutation is stably sorted by length (sentences of equal length stay in random
    order), cut into batches of ``batch_size`` similar-length sentences, and the batch order is
    shuffled. Padding is therefore small and every epoch sees different batch compositions.
    """
    g = torch.Generator().manual_seed(int(seed) * 1_000_003 + int(epoch))
    perm = torch.randperm(len(lengths), generator=g).numpy()  # (N,)
    perm = perm[np.argsort(lengths[perm], kind="stable")]
    chunks = [perm[i : i + batch_size] for i in range(0, len(perm), batch_size)]
    order = torch.randperm(len(chunks), generator=g).numpy()
    return [chunks[j] for j in order]


def with_replay(
    batches: list[np.ndarray], hard: Sequence[int], per_batch: int, seed: int, epoch: int
) -> list[np.ndarray]:
    """``batches`` with up to ``per_batch`` of the ``hard`` sequences appended to each (replay).

    The hard sequences (those the last full pass got wrong) are shuffled by (seed, epoch) and dealt
    round-robin: batch b gets hard[(b·per_batch + i) mod |hard|] for i < min(per_batch, |hard|), skipping
    any already in the batch. Each hard sequence is then trained on about len(batches)·per_batch/|hard|
    times per epoch instead of once, while every batch still holds its ordinary sequences. A pure
    function of its arguments, so resumption stays exact.
    """
    if per_batch <= 0 or len(hard) == 0:
        return batches
    g = torch.Generator().manual_seed(int(seed) * 1_000_003 + int(epoch) + 7_919)
    pool = np.asarray(hard, dtype=np.int64)[torch.randperm(len(hard), generator=g).numpy()]  # (H,)
    k = min(per_batch, len(pool))
    out = []
    for b, idx in enumerate(batches):
        extra = pool[(b * k + np.arange(k)) % len(pool)]
        extra = extra[~np.isin(extra, idx)]
        out.append(np.concatenate([idx, extra]) if len(extra) else idx)
    return out


def eval_batches(lengths: np.ndarray, max_tokens: int = 8192) -> Iterator[np.ndarray]:
    """Fixed evaluation batches (sorted by length, at most ``max_tokens`` padded tokens each)."""
    order = np.argsort(lengths, kind="stable")
    start = 0
    while start < len(order):
        stop = start + 1
        while stop < len(order) and (stop + 1 - start) * int(lengths[order[stop]]) <= max_tokens:
            stop += 1
        yield order[start:stop]
        start = stop
