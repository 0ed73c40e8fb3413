"""Input keys: one 63-bit hash per token position identifying the model's input there.

Two tokens have the same key exactly when the model sees the same input at them (the whole sequence and the
position, or the prefix up to the position for a causal model), up to hash collisions of probability ~2^-63
per pair. Keys count inherent conflicts (identical inputs, different labels) without holding the inputs.
"""

from __future__ import annotations

import functools
import hashlib

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
