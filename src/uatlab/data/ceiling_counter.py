"""The accuracy ceiling of a stream of (input key, label) pairs, in bounded memory.

The ceiling of a labelled data set is the number of tokens a perfect classifier can get right: for every
distinct input (a token in its context, identified by a 64-bit key, see
`uatlab.data.keys.input_keys`, and optionally by a second, salted one, `uatlab.data.keys.salted_input_keys`:
two tokens are one input only if both keys agree) the count of its majority label. Counting it with a dict keyed by
input costs ~200 bytes per distinct input, i.e. per token on natural data. `CeilingCounter` keeps
(key, second key, label) triples as int64 arrays (24 bytes a token) and, past ``max_pairs`` pairs, spills them to
``buckets`` files on disk partitioned by key (a key's pairs all land in one bucket), so the final count
reads one bucket at a time: memory is bounded by ``max_pairs`` plus the largest bucket.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np

from uatlab.data.token_store import append_partitioned

PAIR = np.dtype([("key", "<i8"), ("key2", "<i8"), ("label", "<i8")])


class CeilingCounter:
    """Accumulate (key, label) pairs; `ceiling` returns Σ over keys of the majority-label count."""

    def __init__(self, max_pairs: int = 4_000_000, buckets: int = 64, work_dir: Path | None = None) -> None:
        self.max_pairs = max_pairs
        self.buckets = buckets
        self._keys: list[np.ndarray] = []
        self._keys2: list[np.ndarray] = []
        self._labels: list[np.ndarray] = []
        self._held = 0
        self._work_dir = work_dir
        self._spill_dir: Path | None = None
        self.pairs = 0

    def add(self, keys: np.ndarray, labels: np.ndarray, keys2: np.ndarray | None = None) -> None:
        """Add the pairs of one chunk: ``keys`` (T,) int64, ``labels`` (T,) int, ``keys2`` (T,) int64 a second
        key of each input (default: none, i.e. 0)."""
        self._keys.append(np.asarray(keys, dtype=np.int64))
        self._keys2.append(np.zeros(len(keys), np.int64) if keys2 is None else np.asarray(keys2, dtype=np.int64))
        if len(self._keys2[-1]) != len(keys):
            raise ValueError(f"{len(self._keys2[-1])} second keys for {len(keys)} keys")
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
        rec["key2"] = np.concatenate(self._keys2)
        rec["label"] = np.concatenate(self._labels)
        append_partitioned(rec, rec["key"] % self.buckets, self.buckets, lambda b: self._spill_dir / f"{b}.bin")
        self._keys, self._keys2, self._labels, self._held = [], [], [], 0

    @staticmethod
    def _majority_total(keys: np.ndarray, keys2: np.ndarray, labels: np.ndarray) -> int:
        """Σ over distinct (key, key2) inputs of their majority-label count. A token whose key no other token
        has is an input of its own and counts 1; only the tokens of shared keys are sorted by all three fields
        (one sort of the keys instead of a three-key sort of every token: most keys are unique)."""
        if len(keys) == 0:
            return 0
        order = np.argsort(keys)
        k = keys[order]
        same = k[1:] == k[:-1]  # sorted neighbours with one key
        if not same.any():
            return len(keys)
        shared = np.r_[same, False] | np.r_[False, same]  # (sorted) tokens whose key another token has
        sel = order[shared]
        alone = len(keys) - len(sel)
        k, k2, y = k[shared], keys2[sel], labels[sel]  # k ascending
        fast = CeilingCounter._one_input_per_key_total(k, k2, y)
        if fast is not None:
            return alone + fast
        return alone + CeilingCounter._sorted_majority_total(k, k2, y)

    @staticmethod
    def _one_input_per_key_total(k: np.ndarray, k2: np.ndarray, y: np.ndarray) -> int | None:
        """The majority total of tokens sorted by key ``k`` when every key holds one input (its tokens agree on
        ``k2``: the common case, a second key differs under one first key only if the first keys collided), else
        None. One sort of the int64 values (key's rank)·L + label, which comes nearly sorted (the ranks ascend),
        instead of a three-key sort: the same (input, label) counts."""
        brk = k[1:] != k[:-1]
        inside = ~brk
        if len(y) == 0 or not np.array_equal(k2[1:][inside], k2[:-1][inside]) or int(y.min()) < 0:
            return None
        L = int(y.max()) + 1
        rank = np.zeros(len(k), dtype=np.int64)
        np.cumsum(brk, out=rank[1:])
        if (int(rank[-1]) + 1) * L >= 2**62:
            return None
        pair = rank * L + y
        pair.sort(kind="stable")
        starts = np.flatnonzero(np.r_[True, pair[1:] != pair[:-1]])
        counts = np.diff(np.r_[starts, len(pair)])  # per (input, label)
        run = pair[starts] // L
        return int(np.maximum.reduceat(counts, np.flatnonzero(np.r_[True, run[1:] != run[:-1]])).sum())

    @staticmethod
    def _sorted_majority_total(keys: np.ndarray, keys2: np.ndarray, labels: np.ndarray) -> int:
        order = np.lexsort((labels, keys2, keys))
        k, k2, y = keys[order], keys2[order], labels[order]
        same_input = np.r_[False, (k[1:] == k[:-1]) & (k2[1:] == k2[:-1])]
        new_pair = ~same_input | np.r_[True, y[1:] != y[:-1]]
        starts = np.flatnonzero(new_pair)
        counts = np.diff(np.r_[starts, len(k)])  # per (input, label)
        new_key = ~same_input[starts]
        return int(np.maximum.reduceat(counts, np.flatnonzero(new_key)).sum())

    def ceiling(self) -> int:
        """Σ over distinct inputs (equal key and second key) of the count of the input's most frequent label."""
        if self._spill_dir is None:
            keys, keys2, labels = (
                np.concatenate(a) if a else np.zeros(0, np.int64) for a in (self._keys, self._keys2, self._labels)
            )
            return self._majority_total(keys, keys2, labels)
        if self._held:
            self._spill()
        total = 0
        for b in range(self.buckets):
            path = self._spill_dir / f"{b}.bin"
            if path.is_file():
                rec = np.fromfile(path, dtype=PAIR)
                total += self._majority_total(rec["key"], rec["key2"], rec["label"])
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
