"""An on-disk, chunked, resumable store of encoded labelled sequences (for out-of-core compiling).

``uatlab compile`` streams a data set once into a work directory and never holds all of it in memory:

* **encode pass** (`TokenStore.read`): records (tokens, labels, line) are turned into integer ids
  (token, label, input key) and written as chunk files of about ``chunk_tokens`` tokens each
  (``chunk_00000.npz`` …). In memory: one chunk, the vocabulary, and one line number per sequence.
* **bucket pass** (`TokenStore.bucketize`): per chunk a caller-supplied function computes float
  columns per token (the compiler's Boltzmann contexts h for each candidate β); the token records
  (word, label, key, second key, sequence, position, columns) are appended to ``buckets`` files partitioned by
  word id, so that every occurrence of a word lands in one bucket. The second key is
  `uatlab.data.keys.salted_input_keys` under a salt drawn at random when the pass runs: two tokens are one
  input only if both keys agree (the rolling key alone can be made to collide by data built for it).
* **group pass** (`TokenStore.bucket_tables`): one bucket at a time as a `TokenTable`.

Memory is bounded by the chunk size plus the largest bucket (at least the most frequent word's
occurrences), not by the data set. Disk: ~30 bytes a token for chunks, 44 + 8·K for buckets.

**Nothing computed is lost on an error.** A data error (malformed line, ragged or empty sequence) flushes
the sequences read so far as a chunk and records them in ``manifest.json``; ``resume=True`` reopens the
store, rebuilds the vocabulary from the chunks, checks that the records' first sequences are the stored ones
and continues with the next sequence. A finished bucket pass
is recorded too and is reused by a resumed run with the same parameters.

**Nothing stored is reused unchecked.** The manifest records every chunk and bucket file's size and BLAKE2b
digest as it is written; a chunk is verified (size, digest, and its sequence and token counts re-derived
from its arrays) when a resumed store reopens it and before every pass reads it, a bucket file before the
group pass reads it. A missing, truncated, replaced or edited file, or a manifest whose counts disagree with
the arrays, is an `InputError` naming the file and what differs: a resumed run reuses exactly what the first
run wrote, or stops. A work directory written by an older store version (without digests) is not resumed.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from uatlab.data import keys as _keys
from uatlab.errors import InputError
from uatlab.io_safety import (
    MARKER,
    interrupts_deferred,
    leftover_temps,
    new_work_id,
    owns,
    prefix_identity,
    read_marker,
    write_marker,
    write_text_atomic,
)

MANIFEST = "manifest.json"
STORE_VERSION = 2  # 2: sizes and BLAKE2b digests of every chunk and bucket file (1 had none)
CHUNK_NAME = re.compile(r"chunk_\d{5}\.npz")  # the only files a manifest's chunk list may name
DIGEST_BYTES = 32  # BLAKE2b-256


def digest_file(path: Path) -> tuple[int, str]:
    """(size in bytes, BLAKE2b-256 hex digest) of a file, read in blocks."""
    h = hashlib.blake2b(digest_size=DIGEST_BYTES)
    size = 0
    with open(path, "rb") as fh:
        while block := fh.read(1 << 22):
            h.update(block)
            size += len(block)
    return size, h.hexdigest()


def start_over(work: Path) -> str:
    """The advice when an earlier run's work directory cannot be resumed: a run without --resume refuses it too
    (`TokenStore`: it holds what that run kept), so it is removed first."""
    return f"remove the work directory {work} (or give another --work-dir) and start again without --resume"


def stored_file_error(path: Path, what: str, work: Path) -> InputError:
    """The error for a file of work directory ``work`` that is not what the run that wrote it recorded
    (``what`` says how)."""
    return InputError(f"{path}: {what}; the work directory {work} cannot be reused: {start_over(work)}")


def _check_digest(path: Path, now: str, entry: dict[str, Any], work: Path) -> None:
    if now != entry.get("blake2b"):
        raise stored_file_error(
            path,
            f"damaged: its content differs from what was written (BLAKE2b {now[:12]}…, recorded "
            f"{str(entry.get('blake2b'))[:12]}…)",
            work,
        )


def check_stored_file(path: Path, entry: dict[str, Any], work: Path, record_bytes: int = 1, digest: bool = True) -> int:
    """Check a file of work directory ``work`` against its manifest entry (``bytes``, ``blake2b``): present,
    its size a whole number of ``record_bytes``-byte records and the recorded one, and (if ``digest``) the
    recorded digest. Returns the size; an entry of 0 bytes stands for a file never written (absent or empty)."""
    expected = int(entry["bytes"])
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        if expected == 0:
            return 0
        raise stored_file_error(path, f"missing (it held {expected} bytes when written)", work) from None
    if size % record_bytes:
        raise stored_file_error(path, f"damaged: {size} bytes, not a whole number of {record_bytes}-byte records", work)
    if size != expected:
        raise stored_file_error(path, f"damaged: {size} bytes, {expected} when written", work)
    if digest and size:
        _check_digest(path, digest_file(path)[1], entry, work)
    return size


def read_stored_file(path: Path, entry: dict[str, Any], work: Path, record_bytes: int) -> bytearray | None:
    """The bytes of a stored file after `check_stored_file` (one read: the digest is of the bytes returned);
    None for a file never written."""
    size = check_stored_file(path, entry, work, record_bytes, digest=False)
    if size == 0:
        return None
    raw = bytearray(size)
    with open(path, "rb") as fh:
        got = fh.readinto(raw)
    if got != size:  # shrunk since its size was checked
        raise stored_file_error(path, f"damaged: {got} bytes read, {size} when written", work)
    _check_digest(path, hashlib.blake2b(raw, digest_size=DIGEST_BYTES).hexdigest(), entry, work)
    return raw


class _AppendTally:
    """Size and BLAKE2b digest of the bytes appended to one file (as `append_partitioned` writes them)."""

    def __init__(self) -> None:
        self.bytes = 0
        self.hash = hashlib.blake2b(digest_size=DIGEST_BYTES)

    def update(self, data: np.ndarray) -> None:
        self.bytes += data.nbytes
        self.hash.update(data)

    def entry(self) -> dict[str, Any]:
        return {"bytes": self.bytes, "blake2b": self.hash.hexdigest()}


@dataclass
class TokenTable:
    """Flat per-token arrays of a set of sequences (a bucket of words, or a whole in-memory data set)."""

    word: np.ndarray  # (T,) int64 token id
    label: np.ndarray  # (T,) int64 label id
    key: np.ndarray  # (T,) int64 input key (`uatlab.data.keys.input_keys`: identical inputs have equal keys)
    seq: np.ndarray  # (T,) int64 global sequence index
    pos: np.ndarray  # (T,) int64 position in the sequence
    length: np.ndarray  # (T,) int64 length of the token's sequence
    h: np.ndarray  # (T, K) float64 per-token columns (e.g. one Boltzmann context per candidate β)
    # (T,) int64 second input key (`uatlab.data.keys.salted_input_keys`, salted at random per run) or None:
    # two tokens are one input only if ``key`` and ``key2`` both agree (`uatlab.data.information.input_groups`)
    key2: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.word)

    @classmethod
    def from_sequences(
        cls,
        word: list[np.ndarray],
        label: list[np.ndarray],
        key: list[np.ndarray],
        first_sequence: int,
        h: np.ndarray,
        key2: np.ndarray | None = None,
    ) -> TokenTable:
        """Flatten per-sequence id arrays (global index of the first sequence given) with their (T, K) columns
        and (T,) second keys ``key2`` (already flat, if given)."""
        lengths = np.array([len(w) for w in word], dtype=np.int64)
        T = int(lengths.sum())
        if h.shape[0] != T:
            raise ValueError(f"{h.shape[0]} rows of columns for {T} tokens")
        starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
        return cls(
            np.concatenate(word),
            np.concatenate(label),
            np.concatenate(key),
            np.repeat(first_sequence + np.arange(len(word)), lengths),
            np.arange(T) - starts,
            np.repeat(lengths, lengths),
            h,
            None if key2 is None else np.asarray(key2, dtype=np.int64),
        )


def append_partitioned(
    rec: np.ndarray, bucket: np.ndarray, count: int, path_of: Callable[[int], Path], hashers: list | None = None
) -> None:
    """Append the records ``rec`` to ``count`` files, record i to ``path_of(bucket[i])``, keeping their order;
    ``hashers[b]`` (if given) is updated with the bytes appended to file b."""
    order = np.argsort(bucket, kind="stable")  # stable: data order inside a bucket
    rec, bucket = rec[order], bucket[order]
    cuts = np.searchsorted(bucket, np.arange(count + 1))
    for b in range(count):
        if cuts[b + 1] > cuts[b]:
            part = rec[cuts[b] : cuts[b + 1]]  # contiguous: its bytes are what tofile writes
            with open(path_of(b), "ab") as fh:
                part.tofile(fh)
            if hashers is not None:
                hashers[b].update(part.view(np.uint8))


def chunk_records(
    z: dict[str, Any],
    columns: Callable[[list[np.ndarray]], np.ndarray],
    num_columns: int,
    salt: int,
    vocabulary: int,
    context: str,
) -> tuple[int, np.ndarray]:
    """One chunk's token records with their columns and second, salted input keys
    (`uatlab.data.keys.salted_input_keys` over ``salt_table(salt, vocabulary)``, ``context`` as the store's):
    the map step of the bucket pass; returns (sequences, records)."""
    lengths = np.asarray(z["lengths"], dtype=np.int64)
    cuts = np.cumsum(lengths)[:-1]
    word = np.split(z["word"], cuts)
    key2 = _keys.salted_input_keys(z["word"], np.r_[0, np.cumsum(lengths)], _keys.salt_table(salt, vocabulary), context)
    table = TokenTable.from_sequences(
        word, np.split(z["label"], cuts), np.split(z["key"], cuts), z["first_sequence"], columns(word), key2
    )
    if table.h.shape[1] != num_columns:
        raise ValueError(f"columns() returned {table.h.shape[1]} columns, expected {num_columns}")
    rec = np.empty(len(table), dtype=record_dtype(num_columns))
    for name in ("word", "label", "key", "key2", "seq", "pos", "length", "h"):
        rec[name] = getattr(table, name)
    return len(word), rec


def record_dtype(columns: int) -> np.dtype:
    return np.dtype(
        [
            ("word", "<i8"),
            ("label", "<i4"),
            ("key", "<i8"),
            ("key2", "<i8"),
            ("seq", "<i8"),
            ("pos", "<i4"),
            ("length", "<i4"),
            ("h", "<f8", (columns,)),
        ]
    )


@dataclass
class Chunk:
    """One chunk of encoded sequences."""

    first_sequence: int  # global index of its first sequence
    word: list[np.ndarray]  # per sequence (n,) int64
    label: list[np.ndarray]
    key: list[np.ndarray]
    lines: np.ndarray  # (sequences,) int64 source line of each sequence


def encode_sequence(
    tokens: list[str], labels: list[str], where: str, token_to_id: dict[str, int], label_to_id: dict[str, int]
) -> tuple[np.ndarray, np.ndarray]:
    """Token and label ids of one sequence, adding new strings to the vocabularies; ``where`` (file:line)
    names the sequence in the InputError raised for an empty or ragged sequence."""
    if len(tokens) == 0:
        raise InputError(f"{where}: empty sequence")
    if len(tokens) != len(labels):
        raise InputError(f"{where}: {len(tokens)} tokens but {len(labels)} labels (ragged)")
    t2i, l2i = token_to_id, label_to_id
    word = np.fromiter((t2i.setdefault(t, len(t2i)) for t in tokens), np.int64, len(tokens))
    label = np.fromiter((l2i.setdefault(y, len(l2i)) for y in labels), np.int64, len(labels))
    return word, label


def _ids_equal(names: list[str], to_id: dict[str, int], stored: np.ndarray) -> bool:
    """True if the strings ``names`` have the ids ``stored`` under ``to_id`` (an unknown string: never)."""
    return len(names) == len(stored) and all(to_id.get(x, -1) == y for x, y in zip(names, stored.tolist(), strict=True))


def load_chunk(
    path: Path, names: tuple[str, ...] | None = None, raw: bytes | bytearray | None = None
) -> dict[str, np.ndarray]:
    """The arrays ``names`` of a stored chunk (default: every one), read eagerly, so a damaged file is found
    here, not mid-pass; from ``raw`` (the file's bytes, already read) if given, else from ``path``.

    A truncated or otherwise damaged file is an InputError naming it; a missing one stays an OSError (the
    CLI names the file).
    """
    import io
    import zipfile
    import zlib

    try:
        with open(path, "rb") if raw is None else io.BytesIO(raw) as fh, np.load(fh) as z:  # closed even on error
            return {k: z[k] for k in (z.files if names is None else names)}
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, KeyError, OSError) as exc:
        raise InputError(f"{path}: damaged ({exc}); {start_over(path.parent)}") from None


def _holds_nothing(manifest: dict[str, Any]) -> bool:
    """A work directory's manifest that records no stored sequence: a run stopped (killed) before its first chunk
    was written, which left nothing to resume."""
    return not manifest.get("chunks") and not manifest.get("sequences") and not manifest.get("complete")


class TokenStore:
    """Chunked on-disk encoding of a labelled data set (see the module docstring)."""

    def __init__(
        self,
        work_dir: str | Path,
        source: str,
        context: str,
        chunk_tokens: int = 1_000_000,
        resume: bool = False,
        token_lines: bool = False,
    ) -> None:
        if chunk_tokens < 1:
            raise InputError(f"chunk_tokens must be ≥ 1, got {chunk_tokens}")
        self.dir = Path(work_dir)
        self.source = source
        # the source has one token per line (CoNLL): a token's line is its sequence's line plus its position
        self.token_lines = bool(token_lines)
        self.context = context
        self.chunk_tokens = int(chunk_tokens)
        self.token_to_id: dict[str, int] = {}
        self.label_to_id: dict[str, int] = {}
        self.lines = np.zeros(0, dtype=np.int64)
        self.label_counts = np.zeros(0, dtype=np.int64)
        manifest = self.dir / MANIFEST
        if resume:
            self.m = self._load_manifest(manifest)
            if self.m.get("version") != STORE_VERSION:
                raise InputError(
                    f"--resume: {manifest} was written by another uatlab version (work directory format "
                    f"{self.m.get('version')!r}; this one reads {STORE_VERSION}, which records the size and digest "
                    f"of every stored file: older ones did not, so their files cannot be verified); "
                    f"{start_over(self.dir)}"
                )
            if self.m.get("context") != context:
                raise InputError(
                    f"{self.dir}: the stored run used context={self.m.get('context')!r} (store version "
                    f"{self.m.get('version')}); it cannot be resumed with context={context!r}"
                )
            self._check_manifest()
            self._check_same_input()
            self._load_vocabulary()
        else:
            # creating the folder and writing the new marker and manifest is one step for Ctrl-C: a folder left
            # between them would hold files no manifest proves to be uatlab's
            with interrupts_deferred():
                self._start_fresh(context, source)

    def _start_fresh(self, context: str, source: str) -> None:
        """Create the work directory (or use an existing empty folder) and write a new marker and manifest."""
        created = not self.dir.exists()
        if not created:
            # an existing empty folder is used as it is and kept afterwards; an earlier run's work directory, or
            # anything else, is refused (never cleared)
            if not self.dir.is_dir():
                raise InputError(f"work directory {self.dir} is an existing file, not a folder")
            old = self._owned_manifest()
            if old is not None and _holds_nothing(old):  # a run killed before it stored a sequence: nothing to
                created = bool((read_marker(self.dir) or {}).get("created_folder"))  # keep; reused as it was made
                self.m = old
                self._remove_own_files()
                (self.dir / MARKER).unlink(missing_ok=True)
                old = None
            if old is not None:  # an earlier run's data, kept for --resume or by --keep-work: the user's now
                what = "all" if old.get("complete") else f"{old.get('sequences', 0)} sequences"
                resumable = "add --resume to continue from it, or " if old.get("version") == STORE_VERSION else ""
                raise InputError(
                    f"work directory {self.dir} holds {what} of {old.get('source', '?')} read by an earlier run "
                    f"(kept for --resume, or by --keep-work): {resumable}remove it yourself (or give another "
                    "--work-dir) to start again"
                )
            if any(self.dir.iterdir()):
                raise InputError(
                    f"work directory {self.dir} exists and is not a uatlab work directory (no {MARKER} "
                    "marker matching its manifest); choose another --work-dir or empty it yourself"
                )
        self.dir.mkdir(parents=True, exist_ok=True)
        work_id = new_work_id()
        write_marker(self.dir, work_id, created)
        self.m = {
            "version": STORE_VERSION,
            "work_id": work_id,
            "source": source,
            "context": context,
            "chunks": [],
            "sequences": 0,
            "tokens": 0,
            "max_len": 0,
            "complete": False,
            "buckets": None,
            "input": None,
        }
        self._save_manifest()

    def _load_manifest(self, manifest: Path) -> dict[str, Any]:
        if not manifest.is_file():
            raise InputError(f"--resume: no work directory {self.dir} (with {MANIFEST}) to resume from")
        try:
            m = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"--resume: {manifest} is not a uatlab work manifest ({exc})") from None
        if not isinstance(m, dict) or not owns(self.dir, m.get("work_id")):
            raise InputError(
                f"--resume: {self.dir} is not a uatlab work directory (no {MARKER} marker matching "
                f"{MANIFEST}); start again without --resume and another --work-dir"
            )
        return m

    def _owned_manifest(self) -> dict[str, Any] | None:
        try:
            m = json.loads((self.dir / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return m if isinstance(m, dict) and owns(self.dir, m.get("work_id")) else None

    def _check_manifest(self) -> None:
        """Refuse a manifest whose own bookkeeping does not add up (hand-edited, or not written by this
        version), before any file it names is opened."""
        path = self.dir / MANIFEST

        def bad(what: str) -> InputError:
            return InputError(f"--resume: {path}: {what}; {start_over(self.dir)}")

        chunks = self.m.get("chunks")
        if not isinstance(chunks, list):
            raise bad("it holds no list of chunks")
        sequences = tokens = 0
        for i, c in enumerate(chunks):
            ints = ("first_sequence", "sequences", "tokens", "bytes")
            if (
                not isinstance(c, dict)
                or c.get("file") != f"chunk_{i:05d}.npz"
                or not all(type(c.get(k)) is int and c[k] >= 0 for k in ints)
                or not isinstance(c.get("blake2b"), str)
            ):
                raise bad(f"chunk entry {i} is not one uatlab writes: {json.dumps(c)[:200]}")
            if c["first_sequence"] != sequences:
                raise bad(f"chunk {c['file']} starts at sequence {c['first_sequence']}, after {sequences} stored")
            sequences += c["sequences"]
            tokens += c["tokens"]
        for key, total in (("sequences", sequences), ("tokens", tokens)):
            if self.m.get(key) != total:
                raise bad(f"it records {self.m.get(key)!r} {key} in all, its chunks {total}")
        ident = self.m.get("input")
        if self.m.get("complete") and not (isinstance(ident, dict) and ident.get("lines") is None):
            raise bad("it says the data was read completely but records reading only part of the input")

    def _check_same_input(self) -> None:
        """Refuse to resume from another input file than the one whose sequences are stored."""
        ident = self.m.get("input")
        if not ident:  # nothing was recorded: the stored source was not a regular file (e.g. a data set name)
            return
        if not Path(self.source).is_file():  # it was a file when stored: its contents must be checked again
            raise InputError(
                f"--resume: {self.source} is not a regular file now (missing, or a pipe or device), so it cannot be "
                f"checked to be the data this work directory was made from ({self.m.get('source')!r}, "
                f"{ident['bytes']} bytes); give that file again, or {start_over(self.dir)}"
            )
        now = prefix_identity(self.source, ident["lines"])
        if now["sha256"] != ident["sha256"] or now["bytes"] != ident["bytes"]:
            what = "the file differs" if ident["lines"] is None else f"its first {ident['lines']} lines differ"
            raise InputError(
                f"--resume: {self.source} is not the data this work directory was made from ({what} from "
                f"{self.m.get('source')!r} as read: {ident['bytes']} bytes, sha256 {ident['sha256'][:12]}…); "
                f"{start_over(self.dir)}"
            )

    def _record_input(self, lines: int | None) -> None:
        """Remember size and hash of what was read (the first ``lines`` lines, or the whole file)."""
        if Path(self.source).is_file():
            self.m["input"] = prefix_identity(self.source, lines)

    # ------------------------------------------------------------------ bookkeeping
    @property
    def sequences(self) -> int:
        return int(self.m["sequences"])

    @property
    def tokens(self) -> int:
        return int(self.m["tokens"])

    @property
    def max_len(self) -> int:
        return int(self.m["max_len"])

    @property
    def complete(self) -> bool:
        return bool(self.m["complete"])

    def _save_manifest(self) -> None:
        """Atomically (`write_text_atomic`): a crash, a full disk or Ctrl-C leaves the old manifest or the new."""
        write_text_atomic(self.dir / MANIFEST, json.dumps(self.m, indent=1))

    def _read_chunk(self, c: dict[str, Any], names: tuple[str, ...]) -> dict[str, np.ndarray]:
        """The arrays ``names`` of the chunk of manifest entry ``c``, after checking its size and digest;
        its sequence and token counts are re-derived from the arrays read and compared with the entry. The file
        is read once: the digest is of the bytes the arrays are loaded from."""
        path = self.dir / c["file"]
        raw = read_stored_file(path, c, self.dir, 1)
        if raw is None:  # a chunk file is never empty: an entry of 0 bytes is not one the store wrote
            raise stored_file_error(path, "missing or empty (a chunk file never is)", self.dir)
        z = load_chunk(path, names, raw)
        recorded = {"sequences": int(c["sequences"]), "tokens": int(c["tokens"])}
        found = []  # (what, count re-derived from an array read)
        if "lengths" in z:
            found += [("sequences", len(z["lengths"])), ("tokens", int(z["lengths"].sum()))]
        if "lines" in z:
            found.append(("sequences", len(z["lines"])))
        found += [("tokens", len(z[k])) for k in ("word", "label", "key") if k in z]
        if "label_counts" in z:
            found.append(("tokens", int(z["label_counts"].sum())))
        for what, count in found:
            if count != recorded[what]:
                raise InputError(
                    f"{self.dir / MANIFEST}: chunk {path} holds {count} {what}, the manifest records "
                    f"{recorded[what]}; the work directory {self.dir} cannot be reused: {start_over(self.dir)}"
                )
        return z

    def _load_vocabulary(self) -> None:
        lines = []
        longest = 0
        for c in self.m["chunks"]:
            z = self._read_chunk(c, ("lengths", "new_tokens", "new_labels", "lines", "label_counts"))
            longest = max(longest, int(z["lengths"].max(initial=0)))
            for t in json.loads(str(z["new_tokens"])):
                self.token_to_id[t] = len(self.token_to_id)
            for y in json.loads(str(z["new_labels"])):
                self.label_to_id[y] = len(self.label_to_id)
            lines.append(z["lines"])
            counts = z["label_counts"]
            if len(counts) > len(self.label_counts):
                self.label_counts = np.r_[self.label_counts, np.zeros(len(counts) - len(self.label_counts), np.int64)]
            self.label_counts[: len(counts)] += counts
        self.lines = np.concatenate(lines) if lines else np.zeros(0, np.int64)
        if longest != self.max_len:
            raise InputError(
                f"--resume: {self.dir / MANIFEST}: it records max_len = {self.max_len}, the longest stored sequence "
                f"has {longest} tokens; {start_over(self.dir)}"
            )

    # ------------------------------------------------------------------ encode pass
    def read(
        self,
        records: Iterable[tuple[list[str], list[str], int]],
        input_keys: Callable[[list[str], str], list[int]],
        progress: Callable[[int], None] | None = None,
    ) -> None:
        """Encode ``records`` into chunks, after checking that the first ones are the sequences already
        stored (resume: same tokens, labels and lines, else an InputError naming the first that differs).

        Raises InputError naming ``source:line`` on an empty or ragged sequence (or whatever the record
        iterator raises); the sequences before it are stored first and the message says how to resume. When
        none was stored, the store removes its files (and the folder, if it created it) and the error is
        raised as it came: there is nothing to resume.
        """
        records = iter(records)
        skip = self.sequences
        if skip:
            self._check_stored_records(records, skip)
        seen = skip
        buf_w: list[np.ndarray] = []
        buf_l: list[np.ndarray] = []
        buf_k: list[np.ndarray] = []
        buf_lines: list[int] = []
        n_tok = 0
        vocab_mark, label_mark = len(self.token_to_id), len(self.label_to_id)
        t2i, l2i = self.token_to_id, self.label_to_id
        # the standard keys are formed per chunk from the token ids (`input_keys_of_ids`: the same keys, one
        # hash per distinct word); any other key function per sequence
        by_ids = input_keys is _keys.input_keys
        hashes = np.zeros(0, dtype=np.uint64)  # per token id

        def flush() -> None:
            nonlocal buf_w, buf_l, buf_k, buf_lines, n_tok, vocab_mark, label_mark, hashes
            if not buf_w:
                return
            if by_ids:  # before the buffers are taken: an interrupt here leaves them to the handler's flush
                if len(hashes) < len(t2i):
                    hashes = np.concatenate([hashes, _keys.token_hashes(itertools.islice(t2i, len(hashes), None))])
                flat = _keys.input_keys_of_ids(buf_w, hashes, self.context)
                buf_k = np.split(flat, np.cumsum([len(w) for w in buf_w])[:-1])
            # take the buffers first: an interrupt while the chunk is written must not make the handler below
            # write the same sequences (and their new tokens, which would then get a second id) again
            pending = (buf_w, buf_l, buf_k, buf_lines, vocab_mark, label_mark)
            buf_w, buf_l, buf_k, buf_lines, n_tok = [], [], [], [], 0
            vocab_mark, label_mark = len(t2i), len(l2i)
            self._write_chunk(*pending)

        try:
            for tokens, labels, line in records:
                seen += 1
                # encode the whole sequence first, then append: the four buffers always agree
                w, lab = encode_sequence(tokens, labels, f"{self.source}:{line}", t2i, l2i)
                if not by_ids:
                    buf_k.append(np.array(input_keys(tokens, self.context), dtype=np.int64))
                buf_w.append(w)
                buf_l.append(lab)
                buf_lines.append(int(line))
                n_tok += len(tokens)
                if progress is not None:
                    progress(1)
                if n_tok >= self.chunk_tokens:
                    flush()
            flush()  # the last chunk: a failure writing it (disk full) is handled as one while reading
        except InputError as exc:
            flush()
            if self.sequences == 0:  # nothing to resume: leave no work behind (`remove`: only what is ours)
                self.remove()
                raise
            self._record_input(int(self.lines[-1]) if len(self.lines) else 0)
            self._save_manifest()
            done = self.sequences
            raise InputError(
                f"{exc}; {done} sequence{'s' * (done != 1)} read before the error {'are' if done != 1 else 'is'} "
                f"stored in {self.dir}: fix the data and re-run "
                f"with --resume to continue from sequence {done + 1}"
            ) from None
        except BaseException:  # interrupted or failed: keep what was read (whole sequences only)
            flush()
            if self.sequences == 0:  # nothing to resume (disk full at the first chunk): leave no work behind
                self.remove()
                raise
            self._record_input(int(self.lines[-1]) if len(self.lines) else 0)
            self._save_manifest()
            raise
        self.m["complete"] = True
        self._record_input(None)
        self._save_manifest()

    def _check_stored_records(self, records: Iterator[tuple[list[str], list[str], int]], count: int) -> None:
        """Consume the first ``count`` records, each checked against the stored sequence of the same index
        (token and label ids under the stored vocabulary, source line): a resumed run continues only the data
        its work directory was made from, whatever the manifest recorded about the input (a run killed before
        recording it, or a change inside the last stored sequence that a prefix of lines does not cover)."""
        t2i, l2i = self.token_to_id, self.label_to_id
        seen = 0
        for c, z in zip(self.m["chunks"], self.chunk_arrays(with_lines=True), strict=True):
            off = np.r_[0, np.cumsum(z["lengths"])]  # token offset of each stored sequence
            for i in range(len(z["lengths"])):
                rec = next(records, None)
                if rec is None:
                    raise InputError(
                        f"--resume: {self.source} now holds {seen} sequences, {count} are stored in {self.dir}: the "
                        f"data changed since the work directory was made; {start_over(self.dir)}"
                    )
                tokens, labels, line = rec
                seen += 1
                a, b = off[i], off[i + 1]
                differs = [
                    what
                    for what, ok in (
                        ("line", int(line) == int(z["lines"][i])),
                        ("tokens", _ids_equal(tokens, t2i, z["word"][a:b])),
                        ("labels", _ids_equal(labels, l2i, z["label"][a:b])),
                    )
                    if not ok
                ]
                if differs:
                    raise InputError(
                        f"--resume: {self.source}:{line}: sequence {seen} is not the one stored in "
                        f"{self.dir / c['file']} (its {' and '.join(differs)} differ: stored from line "
                        f"{int(z['lines'][i])}); the data changed since the work directory was made: "
                        f"{start_over(self.dir)}"
                    )

    def _write_chunk(self, w, lab, k, lines, vocab_mark: int, label_mark: int) -> None:
        i = len(self.m["chunks"])
        name = f"chunk_{i:05d}.npz"
        lengths = np.array([len(x) for x in w], dtype=np.int64)
        labels = np.concatenate(lab)
        counts = np.bincount(labels, minlength=len(self.label_to_id)).astype(np.int64)
        new_tokens = list(itertools.islice(self.token_to_id, vocab_mark, None))
        new_labels = list(itertools.islice(self.label_to_id, label_mark, None))
        tmp = self.dir / (name + ".tmp.npz")
        try:
            np.savez(
                tmp,
                lengths=lengths,
                word=np.concatenate(w),
                label=labels,
                key=np.concatenate(k),
                lines=np.array(lines, dtype=np.int64),
                label_counts=counts,
                new_tokens=np.array(json.dumps(new_tokens)),
                new_labels=np.array(json.dumps(new_labels)),
            )
            size, digest = digest_file(tmp)  # of the bytes on disk (the page cache: no second read from the device)
            tmp.replace(self.dir / name)
        except BaseException:  # disk full, Ctrl-C: a partial chunk is of no use to anyone (it is never resumed)
            tmp.unlink(missing_ok=True)
            raise
        entry = {
            "file": name,
            "first_sequence": self.sequences,
            "sequences": len(w),
            "tokens": int(lengths.sum()),
            "bytes": size,
            "blake2b": digest,
        }
        update = {
            "chunks": [*self.m["chunks"], entry],
            "sequences": self.sequences + len(w),
            "tokens": self.tokens + int(lengths.sum()),
            "buckets": None,  # new data invalidates any bucket pass
        }
        if int(lengths.max()) > self.max_len:  # the longest sequence and its line, for memory estimates
            update["max_len"] = int(lengths.max())
            update["max_len_line"] = int(lines[int(lengths.argmax())])
        self.m.update(update)  # one call: an interrupt leaves the manifest before or after this chunk, not between
        self.lines = np.r_[self.lines, np.array(lines, dtype=np.int64)]
        if len(counts) > len(self.label_counts):
            self.label_counts = np.r_[self.label_counts, np.zeros(len(counts) - len(self.label_counts), np.int64)]
        self.label_counts[: len(counts)] += counts
        self._save_manifest()

    def chunk_arrays(self, with_lines: bool = False) -> Iterator[dict[str, Any]]:
        """The stored chunks in data order as flat arrays (lengths, word, label, key, and lines if asked) with
        their first sequence index."""
        names = ("lengths", "word", "label", "key", "lines") if with_lines else ("lengths", "word", "label", "key")
        for c in self.m["chunks"]:
            yield {"first_sequence": c["first_sequence"], **self._read_chunk(c, names)}

    def chunks(self) -> Iterator[Chunk]:
        """The stored chunks in data order."""
        for c in self.m["chunks"]:
            z = self._read_chunk(c, ("lengths", "word", "label", "key", "lines"))
            cuts = np.cumsum(z["lengths"])[:-1]
            yield Chunk(
                c["first_sequence"],
                np.split(z["word"], cuts),
                np.split(z["label"], cuts),
                np.split(z["key"], cuts),
                z["lines"],
            )

    # ------------------------------------------------------------------ bucket pass
    def bucketize(
        self,
        columns: Callable[[list[np.ndarray]], np.ndarray],
        num_columns: int,
        signature: dict[str, Any],
        progress: Callable[[int], None] | None = None,
        mapper: Callable[[Callable[..., Any], Iterator[tuple]], Iterable[Any]] | None = None,
    ) -> int:
        """Compute ``columns(words_of_chunk) -> (T, K)`` per chunk and partition token records by word.

        ``mapper(fn, items)`` runs the per-chunk work (`chunk_records`) elsewhere and yields the results
        in chunk order (e.g. `uatlab.experiments.executor.map_ordered`); default: in this process.

        ``signature`` describes the columns (e.g. β candidates, seed); a finished pass with the same signature
        (and records of this layout) is reused, with the second input keys its run salted. Otherwise every
        token's second input key (`uatlab.data.keys.salted_input_keys`) is formed under a salt drawn at random
        now (`uatlab.data.keys.fresh_salt`), after the data was read. Returns the number of buckets.
        """
        if not self.complete:
            raise InputError(f"{self.dir}: the data has not been read completely; cannot bucket it")
        done = self.m.get("buckets")
        same_records = done is not None and done.get("record") == list(record_dtype(num_columns).names)
        if same_records and done.get("signature") == signature and done.get("columns") == num_columns:
            self._check_bucket_files(digest=False)  # present, whole and of their sizes; digests as they are read
            return int(done["count"])
        bdir = self.dir / "buckets"
        if done is not None:  # no record of a pass while its files change: a crash mid-pass leaves none
            self.m["buckets"] = None
            self._save_manifest()
        self._remove_buckets()
        bdir.mkdir(exist_ok=True)
        B = max(1, math.ceil(self.tokens / self.chunk_tokens))
        tallies = [_AppendTally() for _ in range(B)]
        salt, vocabulary = _keys.fresh_salt(), len(self.token_to_id)
        items = ((z, columns, num_columns, salt, vocabulary, self.context) for z in self.chunk_arrays())
        recs = mapper(chunk_records, items) if mapper is not None else (chunk_records(*i) for i in items)
        for sequences, rec in recs:  # in chunk order: every bucket file holds its tokens in data order
            append_partitioned(rec, rec["word"] % B, B, self._bucket_path, tallies)
            if progress is not None:
                progress(sequences)
        self.m["buckets"] = {
            "count": B,
            "columns": num_columns,
            "record": list(record_dtype(num_columns).names),  # a pass of an older layout is not reused
            "signature": signature,
            "files": [t.entry() for t in tallies],  # per bucket: bytes appended (0: no file) and their digest
        }
        self._check_bucket_files(digest=False)  # every append reached the disk whole
        self._save_manifest()
        return B

    def _bucket_path(self, b: int) -> Path:
        return self.dir / "buckets" / f"bucket_{b:05d}.bin"

    def _bucket_files(self) -> tuple[list[dict[str, Any]], int]:
        """The recorded bucket pass's file entries and record size (an InputError if its record is malformed)."""
        info = self.m.get("buckets")
        if info is None:
            raise InputError(f"{self.dir}: no bucket pass recorded")
        files = info.get("files")
        if not (
            isinstance(files, list)
            and len(files) == info.get("count")
            and all(isinstance(f, dict) and type(f.get("bytes")) is int for f in files)
        ):
            raise InputError(
                f"{self.dir / MANIFEST}: its bucket pass records no size and digest of each of its "
                f"{info.get('count')} files; {start_over(self.dir)}"
            )
        return files, record_dtype(int(info["columns"])).itemsize

    def _check_bucket_files(self, digest: bool) -> None:
        files, itemsize = self._bucket_files()
        for b, entry in enumerate(files):
            check_stored_file(self._bucket_path(b), entry, self.dir, itemsize, digest)

    @property
    def bucket_count(self) -> int:
        """Number of buckets of the last `bucketize` pass (0 before it)."""
        info = self.m.get("buckets")
        return int(info["count"]) if info else 0

    def bucket_tables(self) -> Iterator[TokenTable]:
        """The buckets of the last `bucketize`, one `TokenTable` at a time (tokens in data order)."""
        files, _ = self._bucket_files()
        dt = record_dtype(int(self.m["buckets"]["columns"]))
        for b, entry in enumerate(files):
            raw = read_stored_file(self._bucket_path(b), entry, self.dir, dt.itemsize)  # size and digest checked
            if raw is None:  # no word of the data falls in this bucket: the pass wrote no file
                continue
            rec = np.frombuffer(raw, dtype=dt)  # writable: backed by the bytearray
            yield TokenTable(
                rec["word"].astype(np.int64),
                rec["label"].astype(np.int64),
                rec["key"],
                rec["seq"],
                rec["pos"].astype(np.int64),
                rec["length"].astype(np.int64),
                rec["h"].reshape(len(rec), -1),
                rec["key2"],
            )

    def remove(self) -> None:
        """Delete the files this store wrote, and the folder if this store created it (proved by its marker)."""
        if not owns(self.dir, self.m.get("work_id")):
            return
        created = bool((read_marker(self.dir) or {}).get("created_folder"))
        with interrupts_deferred():  # Ctrl-C here would leave files without the manifest that proves them ours
            self._remove_own_files()
            (self.dir / MARKER).unlink(missing_ok=True)
            if created:
                try:
                    self.dir.rmdir()  # only if nothing else was put there
                except OSError:
                    pass

    def _remove_own_files(self) -> None:
        chunks = self.m.get("chunks")
        for c in chunks if isinstance(chunks, list) else []:
            name = c.get("file") if isinstance(c, dict) else None
            if isinstance(name, str) and CHUNK_NAME.fullmatch(name):  # never a path a hand edit put there
                (self.dir / name).unlink(missing_ok=True)
        for p in self.dir.glob("chunk_*.tmp.npz"):
            p.unlink(missing_ok=True)
        self._remove_buckets()
        (self.dir / MANIFEST).unlink(missing_ok=True)
        # a killed run's partial manifest (`write_text_atomic`'s temporary; an older version's name last)
        for p in [*leftover_temps(self.dir / MANIFEST), self.dir / (MANIFEST + ".tmp")]:
            p.unlink(missing_ok=True)

    def _remove_buckets(self) -> None:
        bdir = self.dir / "buckets"
        if bdir.is_dir():
            for p in bdir.glob("bucket_*.bin"):
                p.unlink()
            try:
                bdir.rmdir()
            except OSError:
                pass
