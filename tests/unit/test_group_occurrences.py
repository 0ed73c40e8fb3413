"""Grouping tokens into (group, h) points with majority labels (paper A, Corollary 1: the points the feed-forward
layer interpolates), checked against a plain dictionary count; merging buckets against one sort."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from uatlab.constructions.paper_a.cor1_memorizer.contexts import group_occurrences, merge_occurrences
from uatlab.data.token_store import TokenTable


def _table(tokens: list[tuple[int, int, int]]) -> tuple[TokenTable, np.ndarray]:
    word = np.array([w for w, _, _ in tokens], dtype=np.int64)
    label = np.array([y for _, _, y in tokens], dtype=np.int64)
    h = np.array([float(x) / 4 for _, x, _ in tokens])
    T = len(tokens)
    key = word * 1000 + np.array([x for _, x, _ in tokens])  # same (word, h): same input
    z = np.zeros(T, dtype=np.int64)
    return TokenTable(word, label, key, np.arange(T), z, z + 1, h[:, None]), h


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 6), st.integers(0, 2)), min_size=1, max_size=80))
def test_points_and_majority_labels_match_a_dictionary_count(tokens):
    table, h = _table(tokens)
    occ = group_occurrences(table, h, [f"w{i}" for i in range(5)], ["a", "b", "c"], np.arange(len(tokens)))
    counts: dict[tuple[int, float], dict[int, list[int]]] = {}
    for i, (w, x, y) in enumerate(tokens):
        counts.setdefault((w, x / 4), {}).setdefault(y, []).append(i)
    points = sorted(counts)
    # majority label, ties to the label whose first token comes first
    win = {p: min(c, key=lambda y: (-len(c[y]), c[y][0])) for p, c in counts.items()}
    assert [(int(w), float(x)) for w, x in zip(occ.word, occ.h, strict=True)] == points
    assert occ.label.tolist() == [win[p] for p in points] and occ.label.dtype == np.int64
    assert occ.ceiling_tokens == sum(len(counts[p][win[p]]) for p in points)
    assert occ.tokens == len(tokens) and occ.collision_tokens == 0
    assert sum(sum(c["label_counts"].values()) for c in occ.conflicts) == sum(
        len(tokens_of) for p in points if len(counts[p]) > 1 for tokens_of in counts[p].values()
    )


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 6), st.integers(0, 2)), min_size=1, max_size=80))
def test_merged_buckets_are_sorted_like_one_table(tokens):
    # buckets of disjoint word sets (odd and even words), merged: the same points as grouping all at once
    table, h = _table(tokens)
    names, labels, lines = [f"w{i}" for i in range(10)], ["a", "b", "c"], np.arange(len(tokens))
    whole = group_occurrences(table, h, names, labels, lines)
    parts = []
    for parity in (1, 0):
        sub = [t for t in tokens if t[0] % 2 == parity]
        if sub:
            parts.append(group_occurrences(*_table(sub), names, labels, lines))
    merged = merge_occurrences(parts)
    for name in ("word", "h", "label", "group"):
        assert np.array_equal(getattr(merged, name), getattr(whole, name)), name
    assert merged.ceiling_tokens == whole.ceiling_tokens and merged.tokens == whole.tokens


def test_equal_keys_with_different_salted_keys_are_a_collision_not_a_conflict():
    # three tokens of one word at one h, equal rolling keys, labels a, b, b: one input (both keys agree) is an
    # inherent conflict; two inputs (the salted keys differ) are a collision the construction loses
    word, label, h = np.zeros(3, np.int64), np.array([0, 1, 1]), np.full(3, 0.5)
    z = np.zeros(3, dtype=np.int64)
    names, labels, lines = ["w"], ["a", "b"], np.arange(3)
    for key2, conflicts, collision in [(np.array([9, 9, 9]), 1, 0), (np.array([9, 8, 8]), 0, 1)]:
        table = TokenTable(word, label, np.full(3, 77), np.arange(3), z, z + 1, h[:, None], key2)
        occ = group_occurrences(table, h, names, labels, lines)
        assert (len(occ.conflicts), occ.collision_tokens) == (conflicts, collision)
        assert occ.label.tolist() == [1] and occ.ceiling_tokens == 2  # the point itself does not depend on keys
