"""What a data set allows: inherent conflicts, the accuracy ceiling, and context-free baselines.

An **inherent conflict** is a set of token occurrences with identical model input but different
labels; no deterministic model can get all of them right. What counts as identical input depends on
what the model sees:

* ``"sequence"`` (a model with positional encoding and full attention): the whole sequence and the
  position;
* ``"prefix"`` (causal attention): the prefix up to and including the position.

The **ceiling** is the number of tokens a perfect model gets right: for each identical input, the
count of its most frequent label.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field

from uatlab.data.dataset import SequenceDataset


@dataclass
class Conflict:
    """One input seen with several labels: where, which token, and the label counts."""

    sequences: list[int]
    position: int
    token: str
    label_counts: dict[str, int]
    majority: str


@dataclass
class CeilingReport:
    tokens: int
    ceiling_tokens: int
    conflict_tokens: int
    distinct_inputs: int
    duplicate_sequences: int
    conflicts: list[Conflict] = field(default_factory=list)

    @property
    def ceiling_accuracy(self) -> float:
        return self.ceiling_tokens / self.tokens if self.tokens else 1.0


def ceiling_report(data: SequenceDataset, context: str = "sequence") -> CeilingReport:
    """Conflicts and ceiling for ``context='sequence'`` or ``'prefix'`` (see module doc).

    Ties between equally frequent labels pick the label seen first, deterministically.
    """
    if context not in ("sequence", "prefix"):
        raise ValueError(f"context must be 'sequence' or 'prefix', got {context!r}")
    # An input is (context id, position): the context id names the whole sequence ("sequence") or the
    # prefix up to the position ("prefix", a trie node), so each token costs O(1) hashing, not O(n).
    groups: dict[tuple[int, int], dict[str, int]] = defaultdict(dict)  # input -> label -> count (ordered)
    where: dict[tuple[int, int], list[int]] = defaultdict(list)
    token_at: dict[tuple[int, int], str] = {}
    seq_seen: Counter = Counter()
    seq_ids: dict[tuple, int] = {}
    prefix_ids: dict[tuple[int, str], int] = {}
    for i, (toks, labs) in enumerate(data):
        key_seq = tuple(toks)
        seq_seen[key_seq] += 1
        sid = seq_ids.setdefault(key_seq, len(seq_ids))
        node = -1
        for k, lab in enumerate(labs):
            if context == "sequence":
                key = (sid, k)
            else:
                node = prefix_ids.setdefault((node, toks[k]), len(prefix_ids))
                key = (node, k)
            counts = groups[key]
            counts[lab] = counts.get(lab, 0) + 1
            if len(where[key]) < 16:
                where[key].append(i)
            token_at.setdefault(key, toks[k])
    ceiling = 0
    conflicts = []
    for key, counts in groups.items():
        best = max(counts.values())
        ceiling += best
        if len(counts) > 1:
            majority = next(lab for lab, c in counts.items() if c == best)
            conflicts.append(Conflict(where[key], key[1], token_at[key], dict(counts), majority))
    total = data.num_tokens
    return CeilingReport(
        tokens=total,
        ceiling_tokens=ceiling,
        conflict_tokens=total - ceiling,
        distinct_inputs=len(groups),
        duplicate_sequences=sum(c - 1 for c in seq_seen.values()),
        conflicts=conflicts,
    )


def majority_targets(data: SequenceDataset, context: str = "sequence") -> list[list[str]]:
    """The label a ceiling-reaching model predicts for every token (the majority per identical input)."""
    groups: dict[tuple[int, int], Counter] = defaultdict(Counter)
    first: dict[tuple[int, int], dict[str, int]] = defaultdict(dict)
    keys = _input_keys(data, context)
    for (_, labs), seq_keys in zip(data, keys, strict=True):
        for key, lab in zip(seq_keys, labs, strict=True):
            groups[key][lab] += 1
            first[key].setdefault(lab, len(first[key]))
    best = {}
    for key, cnt in groups.items():
        top = max(cnt.values())
        best[key] = min((lab for lab, c in cnt.items() if c == top), key=lambda lab: first[key][lab])
    return [[best[key] for key in seq_keys] for seq_keys in keys]


def _input_keys(data: SequenceDataset, context: str) -> list[list[tuple[int, int]]]:
    """Per token a hashable id of its input, (context id, position), in O(1) hashing per token."""
    seq_ids: dict[tuple, int] = {}
    prefix_ids: dict[tuple[int, str], int] = {}
    out = []
    for toks, _ in data:
        if context == "sequence":
            sid = seq_ids.setdefault(tuple(toks), len(seq_ids))
            out.append([(sid, k) for k in range(len(toks))])
        else:
            node, row = -1, []
            for k, t in enumerate(toks):
                node = prefix_ids.setdefault((node, t), len(prefix_ids))
                row.append((node, k))
            out.append(row)
    return out


def baselines(data: SequenceDataset, majority_label: str | None = None) -> dict[str, float]:
    """Token accuracies of the context-free baselines and the ceiling.

    * ``all_majority_label``: predict the most frequent label everywhere (all-O on CoNLL);
    * ``per_word_majority``: predict each word's most frequent label, ignoring context;
    * ``ceiling``: the best any sequence-level model can do.
    """
    label_counts = Counter(lab for seq in data.labels for lab in seq)
    top_label = majority_label or label_counts.most_common(1)[0][0]
    per_word: dict[str, Counter] = defaultdict(Counter)
    for toks, labs in data:
        for t, y in zip(toks, labs, strict=True):
            per_word[t][y] += 1
    total = data.num_tokens
    word_right = sum(c.most_common(1)[0][1] for c in per_word.values())
    rep = ceiling_report(data)
    return {
        "tokens": total,
        "all_majority_label": label_counts[top_label] / total,
        "majority_label": top_label,
        "per_word_majority": word_right / total,
        "ceiling": rep.ceiling_accuracy,
    }
