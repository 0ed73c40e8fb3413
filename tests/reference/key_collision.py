"""Two different token sequences with equal `uatlab.data.keys.input_keys`, built on purpose (for tests of the
certificate's input identity)."""

from __future__ import annotations

import hashlib

from uatlab.data.keys import _MUL


def rolling_hash_collision(n: int = 50) -> tuple[list[str], list[str]]:
    """Two different n-token sequences whose `input_keys` agree everywhere (``context="sequence"``): the rolling
    hash Σ_i (h(t_i) + 1)·MUL^(n−1−i) mod 2^64 is linear, so a short vector c ∈ {−1, 0, 1}^n with
    Σ_i c_i w_i ≡ 0 (w_i = (h(a_i) − h(b_i))·MUL^(n−1−i)) found by LLL gives two sequences that differ where
    c ≠ 0 (a_i in one and b_i in the other) and have one hash."""
    from sympy import ZZ
    from sympy.polys.matrices import DomainMatrix

    def h(t: str) -> int:
        return int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little")

    M = 1 << 64
    a, b = [f"a{i}" for i in range(n)], [f"b{i}" for i in range(n)]
    w = [(h(a[i]) - h(b[i])) * pow(_MUL, n - 1 - i, M) % M for i in range(n)]
    # rows (e_i, W·w_i) and (0, W·2^64): a lattice vector with last coordinate 0 is a relation mod 2^64
    rows = [[int(i == j) for j in range(n)] + [w[i] << 20] for i in range(n)] + [[0] * n + [M << 20]]
    reduced = DomainMatrix([[ZZ(x) for x in r] for r in rows], (n + 1, n + 1), ZZ).lll().to_Matrix().tolist()
    c = next([int(x) for x in r[:n]] for r in reduced if r[n] == 0 and any(r[:n]) and all(abs(x) <= 1 for x in r[:n]))
    s1 = [a[i] if c[i] >= 0 else b[i] for i in range(n)]
    s2 = [b[i] if c[i] == 1 else a[i] for i in range(n)]
    return s1, s2
