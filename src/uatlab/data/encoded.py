"""A labelled data set as integer ids, in memory (the on-disk, streamable counterpart is
`uatlab.data.token_store.TokenStore`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from uatlab.data.dataset import Encoding, SequenceDataset, split_flat
from uatlab.data.keys import input_keys_of_words


@dataclass
class EncodedData:
    """N sequences as id arrays under one `Encoding`.

    Attributes:
        encoding: the string ↔ id maps the ids refer to.
        ids: ``ids[i]`` (n_i,) int64 token ids of sequence i.
        targets: ``targets[i]`` (n_i,) int64 label ids.
        lines: ``lines[i]`` the source line where sequence i starts.
        source: where the data came from (a path or a description).
        keys: ``keys[i]`` (n_i,) int64 input keys (`uatlab.data.keys.input_keys`), or None.
        unknown_tokens: tokens outside the encoding's vocabulary (mapped to its unknown-word token).
        token_lines: token k of sequence i is on line ``lines[i] + k`` (CoNLL,
            `uatlab.data.dataset.SequenceDataset.token_lines`).
    """

    encoding: Encoding
    ids: list[np.ndarray]
    targets: list[np.ndarray]
    lines: list[int]
    source: str = "<memory>"
    keys: list[np.ndarray] | None = None
    unknown_tokens: int = 0
    token_lines: bool = False
    lengths: np.ndarray = field(init=False)  # (N,) int64

    def __post_init__(self) -> None:
        self.lengths = np.array([len(r) for r in self.ids], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"EncodedData({len(self)} sequences, {self.num_tokens} tokens, source={self.source!r})"

    @property
    def num_tokens(self) -> int:
        return int(self.lengths.sum())


def encode_dataset(
    data: SequenceDataset, encoding: Encoding | None = None, context: str | None = None, unknown: str = "error"
) -> EncodedData:
    """Encode ``data`` under ``encoding`` (default: fitted on ``data``, first-seen order).

    ``context`` (``"sequence"`` or ``"prefix"``) also computes the input keys; ``unknown`` is the
    unknown-word policy of `Encoding.encode_tokens`.
    """
    enc = Encoding.fit(data) if encoding is None else encoding
    ids = enc.encode_tokens(data, unknown=unknown)
    unknown_tokens = 0
    if unknown == "unk":
        unknown_tokens = sum(1 for toks in data.tokens for t in toks if t not in enc.token_to_id)
    keys = None
    if context is not None:
        flat = input_keys_of_words(data.tokens, context)
        keys = split_flat(flat, np.fromiter(map(len, data.tokens), np.int64, count=len(data)))
    lines = [data.lines[i] if i < len(data.lines) else i + 1 for i in range(len(data))]
    labels = enc.encode_labels(data)
    return EncodedData(enc, ids, labels, lines, data.source, keys, unknown_tokens, data.token_lines)
