"""A three-table retrieval structure over Z_C, solved by hypergraph peeling.

Given keys i = 1..N with three slots (s1_i, s2_i, s3_i), one in each of three tables, and labels
y_i ∈ {0, …, C-1}, find tables T1, T2, T3 with entries in Z_C such that

    T1[s1_i] + T2[s2_i] + T3[s3_i] ≡ y_i   (mod C)        for every i.

This is the static-function ("retrieval") data structure of Botelho, Pagh & Ziviani (2007) and
Dietzfelbinger & Pagh (2008): with random slots and total table size ≥ 1.23 N, the 3-uniform hypergraph
whose edges are the keys is peelable with high probability (the orientability threshold of random
3-hypergraphs is 1/1.222), and peeling solves the system in linear time. It stores ≈ 1.23 N log2 C bits
and never stores the keys themselves, which is what lets the memorizer approach the information floor
N log2 C instead of paying ~log2 N bits per key to store identifiers (as Vardi, Yehudai & Shamir 2022's
bit-extraction memorizer, used by Kajitsuka & Sato 2025, does).
"""

from __future__ import annotations

import numpy as np


def solve_retrieval(
    slots: np.ndarray, labels: np.ndarray, sizes: tuple[int, int, int], C: int
) -> list[np.ndarray] | None:
    """Tables T1, T2, T3 (int64 arrays of the given sizes) solving the system, or None if not peelable.

    slots: (N, 3) int64, slots[i, t] ∈ [0, sizes[t]); labels: (N,) int64 in [0, C).
    Unused slots are 0. Keys with identical slot triples and different labels make the system
    unsolvable (and are never peelable): None is returned.
    """
    N = len(labels)
    off = np.array([0, sizes[0], sizes[0] + sizes[1]], dtype=np.int64)
    verts = slots + off[None, :]  # (N, 3) global vertex ids
    n_v = int(sum(sizes))
    deg = np.bincount(verts.ravel(), minlength=n_v).astype(np.int64)
    # xor of incident edge ids per vertex: when deg == 1, it *is* the remaining edge
    x = np.zeros(n_v, dtype=np.int64)
    for t in range(3):
        np.bitwise_xor.at(x, verts[:, t], np.arange(N, dtype=np.int64))
    stack_e, stack_v = [], []
    queue = list(np.flatnonzero(deg == 1))
    removed = np.zeros(N, dtype=bool)
    vl = verts.tolist()
    degl, xl = deg.tolist(), x.tolist()
    while queue:
        v = queue.pop()
        if degl[v] != 1:
            continue
        e = xl[v]
        if removed[e]:
            continue
        removed[e] = True
        stack_e.append(e)
        stack_v.append(v)
        for u in vl[e]:
            degl[u] -= 1
            xl[u] ^= e
            if degl[u] == 1:
                queue.append(u)
    if len(stack_e) != N:
        return None
    T = np.zeros(n_v, dtype=np.int64)
    lab = labels.tolist()
    for e, v in zip(reversed(stack_e), reversed(stack_v), strict=True):
        s = sum(T[u] for u in vl[e] if u != v)
        T[v] = (lab[e] - s) % C
    return [T[off[t] : off[t] + sizes[t]] for t in range(3)]


def lookup(tables: list[np.ndarray], slots: np.ndarray, C: int) -> np.ndarray:
    """(T1[s1] + T2[s2] + T3[s3]) mod C for each row of slots."""
    return (tables[0][slots[:, 0]] + tables[1][slots[:, 1]] + tables[2][slots[:, 2]]) % C
