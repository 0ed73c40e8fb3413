"""The accuracy ceiling of a stream of (input key, label) pairs, in bounded memory.

The ceiling of a labelled data set is the number of tokens a perfect classifier can get right: for every
distinct input (a token in its context, identified by a 64-bit key, see
`uatlab.data.keys.input_keys`) the count of its majority label. Counting it with a dict keyed by
input costs ~200 bytes per distinct input, i.e. per token on natural data. `CeilingCounter` keeps
(key, label) pairs as int64 arrays (16 bytes a token) and, past ``max_pairs`` pairs, spills them to
``buckets`` files on disk partitioned by key (a key's pairs all land in one bucket), so the final count
reads one bucket at a time: memory is bounded by ``max_pairs`` plus the largest bucket.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np

from uatlab.data.token_store import append_partitioned

PAIR = np.dtype([("key", "<i8"), ("label", "<i8")])


class CeilingCounter:
    """Accumulate (key, label) pairs; `ceiling` returns Σ over keys of the majority-label count."""

    def __init__(self, max_pairs: int = 4_000_000, buckets: int = 64, work_dir: Path | None = None) -> None:
        self.max_pairs = max_pairs
        self.buckets = buckets
        self._keys: list[np.ndarray] = []
        self._labels: list[np.ndarray] = []
        self._held = 0
        self._work_dir = work_dir
        self._spill_dir: Path | None = None
        self.pairs = 0

    def add(self, keys: np.ndarray, labels: np.ndarray) -> None:
        """Add the pairs of one chunk: ``keys`` (T,) int64, ``labels`` (T,) int."""
        self._keys.append(np.asarray(keys, dtype=np.int64))
        self._labels.append(np.asarray(labels, dtype=np.int64))
        self._held += len(keys)
        self.pairs += len(keys)
        if self._held > self.max_pairs:
            self._spill()

    def _spill(self) -> None:
        if self._spill_dir is None:
            self._spill_dir = Path(tempfile.mkdtemp(prefix="uatlab-ceiling-", dir=self._work_dir))
        rec = np.empty(self._held, dtype=PAIR)
        rec["key"] = np.concatenate(self._keys)
        rec["label"] = np.concatenate(self._labels)
        append_partitioned(rec, rec["key"] % self.buckets, self.buckets, lambda b: self._spill_dir / f"{b}.bin")
        self._keys, self._labels, self._held = [], [], 0

    @staticmethod
    def _majority_total(keys: np.ndarray, labels: np.ndarray) -> int:
        if len(keys) == 0:
            return 0
        order = np.lexsort((labels, keys))
        k, y = keys[order], labels[order]
        new_pair = np.r_[True, (k[1:] != k[:-1]) | (y[1:] != y[:-1])]
        starts = np.flatnonzero(new_pair)
        counts = np.diff(np.r_[starts, len(k)])  # per (key, label)
        pair_key = k[starts]
        new_key = np.r_[True, pair_key[1:] != pair_key[:-1]]
        return int(np.maximum.reduceat(counts, np.flatnonzero(new_key)).sum())

    def ceiling(self) -> int:
        """Σ over distinct keys of the count of the key's most frequent label."""
        if self._spill_dir is None:
            keys = np.concatenate(self._keys) if self._keys else np.zeros(0, np.int64)
            labels = np.concatenate(self._labels) if self._labels else np.zeros(0, np.int64)
            return self._majority_total(keys, labels)
        if self._held:
            self._spill()
        total = 0
        for b in range(self.buckets):
            path = self._spill_dir / f"{b}.bin"
            if path.is_file():
                rec = np.fromfile(path, dtype=PAIR)
                total += self._majority_total(rec["key"], rec["label"])
        return total

    def close(self) -> None:
        """Delete the spill files (if any)."""
        if self._spill_dir is not None:
            shutil.rmtree(self._spill_dir, ignore_errors=True)
            self._spill_dir = None

    def __del__(self) -> None:  # best effort: never leave spill files behind
        try:
            self.close()
        except Exception:
            pass
