"""Input keys: one 63-bit hash per token position identifying the model's input there.

Two tokens have the same key exactly when the model sees the same input at them (the whole sequence and the
position, or the prefix up to the position for a causal model), up to hash collisions of probability ~2^-63
per pair of inputs that were not chosen to collide. Keys count inherent conflicts (identical inputs, different
labels) without holding the inputs. The rolling hash is linear mod 2^64, so inputs *can* be chosen to collide;
the certificate therefore also requires `salted_input_keys` (non-linear, over values drawn from a random salt
per certificate or run, `fresh_salt`) to agree before it takes two tokens for one input, and so does every
other figure that counts identical inputs (the compile report's ceiling, conflicts and label information,
`uatlab.data.information`).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import uuid
from collections.abc import Iterable

import numpy as np

# distinct words remembered per process: a word seen before (in this pass or an earlier one, e.g. the
# certificate's pass after compile's read) is not hashed again; past this many words the least recent go
TOKEN_HASH_CACHE = 1 << 20


@functools.lru_cache(maxsize=TOKEN_HASH_CACHE)
def _token_hash(tok: str) -> int:
    return int.from_bytes(hashlib.blake2b(tok.encode("utf-8"), digest_size=8).digest(), "little")


_MASK64 = (1 << 64) - 1
_MUL = 0x9E3779B97F4A7C15  # odd 64-bit multiplier of the rolling hash


def input_keys(tokens: list[str], context: str) -> list[int]:
    """One 63-bit key per position identifying the model's input there (sequence+position or prefix).

    Deterministic across processes (BLAKE2b of each token, combined by a rolling hash mod 2^64), so keys
    stored in a checkpoint stay valid after ``--resume``. Equal inputs always get equal keys; different
    inputs collide with probability ~2^-63 per pair (keys are only used to count conflicts).
    """
    acc, prefix = 0, []
    for tok in tokens:
        acc = (acc * _MUL + _token_hash(tok) + 1) & _MASK64
        prefix.append(acc >> 1)
    if context == "prefix":
        return prefix
    base = prefix[-1] if prefix else 0
    # positions enter through a large odd multiplier, so keys of one sequence stay distinct after >> 1
    return [((base * _MUL + (k + 1) * 0xC2B2AE3D27D4EB4F) & _MASK64) >> 1 for k in range(len(tokens))]


def token_hashes(tokens: Iterable[str]) -> np.ndarray:
    """(V,) uint64: the per-token hash `input_keys` combines, for each token (cached per distinct word)."""
    return np.fromiter((_token_hash(t) for t in tokens), dtype=np.uint64)


def input_keys_of_ids(word: list[np.ndarray], token_hash: np.ndarray, context: str) -> np.ndarray:
    """`input_keys` of many sequences at once, from their token ids (``token_hash[i]``: the hash of token i,
    `token_hashes`): the keys of all sequences concatenated (int64), equal to `input_keys` of each one."""
    if not word:
        return np.zeros(0, dtype=np.int64)
    lengths = np.array([len(w) for w in word], dtype=np.int64)
    return _rolling_keys(token_hash[np.concatenate(word)], lengths, context)


def input_keys_of_words(sequences: list[list[str]], context: str) -> np.ndarray:
    """`input_keys` of every sequence of words, concatenated (int64): each word's hash from the per-process cache
    of `_token_hash` (a word seen before is not hashed again), the rolling hash in numpy (`_rolling_keys`)."""
    lengths = np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))
    total = int(lengths.sum())
    th = np.fromiter(map(_token_hash, itertools.chain.from_iterable(sequences)), dtype=np.uint64, count=total)
    return _rolling_keys(th, lengths, context)


def _rolling_keys(th: np.ndarray, lengths: np.ndarray, context: str) -> np.ndarray:
    """The keys of `input_keys` from ``th`` (T,) uint64, the hash of every token, sequences concatenated, of
    ``lengths`` (N,) tokens each: (T,) int64.

    The rolling hash runs over all sequences together, one step per position (sequences sorted by length, the
    ones still running a prefix), in uint64 arithmetic, which wraps mod 2^64 exactly as the Python version's
    ``& _MASK64``. Every array is flat, one entry per token (or per sequence): O(tokens) memory whatever the
    spread of lengths.
    """
    n = len(lengths)
    if n == 0 or len(th) == 0:
        return np.zeros(len(th), dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    T, n_max = int(offsets[-1]), int(lengths.max())
    order = np.argsort(-lengths, kind="stable")  # longest first: the sequences still running are a prefix
    Ls = lengths[order]
    start = offsets[:-1][order]
    acc = np.zeros(n, dtype=np.uint64)  # per sequence in `order`: its prefix's rolling hash
    prefix = np.empty(T, dtype=np.uint64) if context == "prefix" else None
    mul, one = np.uint64(_MUL), np.uint64(1)
    active = n
    for k in range(n_max):
        while active and Ls[active - 1] <= k:
            active -= 1
        at = start[:active] + k
        a = acc[:active]
        a *= mul
        a += th[at]
        a += one
        if prefix is not None:
            prefix[at] = a >> one
    if prefix is not None:
        return prefix.view(np.int64)
    # positions enter through a large odd multiplier (see input_keys)
    base = np.empty(n, dtype=np.uint64)
    base[order] = acc >> one  # the whole sequence's key, data order
    pos = np.arange(1, T + 1, dtype=np.uint64) - np.repeat(offsets[:-1], lengths).astype(np.uint64)  # k + 1
    keys = np.repeat(base, lengths) * mul + pos * np.uint64(0xC2B2AE3D27D4EB4F)
    keys >>= one
    return keys.view(np.int64)


def _mix(z: np.ndarray) -> np.ndarray:
    """The SplitMix64 finalizer (a bijection of uint64 whose output bits each depend on every input bit), in
    place on ``z`` (uint64), which it returns."""
    z ^= z >> np.uint64(30)
    z *= np.uint64(0xBF58476D1CE4E5B9)
    z ^= z >> np.uint64(27)
    z *= np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return z


def fresh_salt() -> int:
    """A salt for `salt_table` drawn at random when called (``uuid4``, as the certificate's): data written before
    the call cannot depend on it."""
    return uuid.uuid4().int


def freshly_salted_input_keys(tok: np.ndarray, lengths: np.ndarray, context: str) -> np.ndarray:
    """`salted_input_keys` of the sequences ``tok`` (T,) token ids, concatenated, of ``lengths`` (N,) tokens, under
    a salt drawn now (`fresh_salt`): the second key of one run that has no salt of its own to share."""
    tok = np.asarray(tok, dtype=np.int64)
    offsets = np.r_[0, np.cumsum(np.asarray(lengths, dtype=np.int64))].astype(np.int64)
    vocabulary = int(tok.max()) + 1 if len(tok) else 0
    return salted_input_keys(tok, offsets, salt_table(fresh_salt(), vocabulary), context)


def input_identity_assumption(salted_for: str) -> str:
    """The assumption under which a ceiling counted with both keys (`input_keys` and `salted_input_keys`) is
    the true one, worded for the figures it qualifies (``salted_for``: "this certificate", "this run")."""
    return (
        "the ceiling counts two tokens as one input (whose minority labels no model can get right) only if two "
        "64-bit keys of their inputs agree: the data's rolling hash and a non-linear one salted at random for "
        f"{salted_for}, which data written without knowing the salt makes collide with probability about "
        "2^-64 per pair of different inputs"
    )


@functools.lru_cache(maxsize=2)
def salt_table(salt: int, vocabulary: int) -> np.ndarray:
    """(vocabulary,) uint64, read-only: one value per token id, drawn from ``salt`` (`salted_input_keys`). The
    latest tables are kept (per process): every chunk of a run, in any worker, asks for the same one."""
    rng = np.random.default_rng(salt)
    table = rng.integers(0, np.iinfo(np.uint64).max, size=vocabulary, dtype=np.uint64, endpoint=True)
    table.flags.writeable = False
    return table


def salted_input_keys(tok: np.ndarray, offsets: np.ndarray, table: np.ndarray, context: str) -> np.ndarray:
    """A second key per token, independent of `input_keys`, that data chosen without knowing ``table`` cannot
    make collide: ``tok`` (T,) token ids of sequences concatenated, sequence i at ``offsets[i]:offsets[i+1]``;
    ``table`` (V,) uint64 values per id drawn from a random salt (`salt_table`). Returns (T,) int64.

    The rolling hash of `input_keys` is linear mod 2^64, so two different inputs with equal keys can be
    constructed on purpose (a lattice reduction over the token hashes finds 50-token pairs in milliseconds).
    This key chains a non-linear bijection instead, acc_k = mix(acc_{k−1} ⊕ table[t_k]) (`_mix`), over values
    the data's author cannot know; for a causal model the key of position k is acc_k, otherwise
    mix(acc_n ⊕ mix(k + 1)). Equal inputs get equal keys; two different inputs are taken for one only if both
    64-bit keys agree. Tokens are grouped by length as in `input_keys_of_ids`.
    """
    tok = np.asarray(tok, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    lengths = np.diff(offsets)
    out = np.empty(len(tok), dtype=np.uint64)
    if len(tok) == 0:
        return out.view(np.int64)
    B, n_max = len(lengths), int(lengths.max())
    order = np.argsort(-lengths, kind="stable")  # longest first: the sequences still running are a prefix
    Ls = lengths[order]
    start = offsets[:-1][order]
    acc = np.zeros(B, dtype=np.uint64)
    active = B
    for k in range(n_max):
        while active and Ls[active - 1] <= k:
            active -= 1
        a = acc[:active]
        a ^= table[tok[start[:active] + k]]
        _mix(a)
        if context == "prefix":
            out[start[:active] + k] = a
    if context != "prefix":
        seq = np.repeat(np.arange(B), Ls)  # in `order`'s sequence order
        pos = np.arange(len(seq)) - np.repeat(np.cumsum(Ls) - Ls, Ls)
        out[start[seq] + pos] = _mix(acc[seq] ^ _mix(pos.astype(np.uint64) + np.uint64(1)))
    return out.view(np.int64)
