"""A data set's report: sizes, duplicates, inherent conflicts, ceiling, baselines and bit budgets.

Bit budgets are empirical entropies times the token count:

* ``H(tag)``: the label entropy per token (what a model without any input would have to store);
* ``H(tag | word)``: the conditional entropy given the word (what context must resolve);
* ``log2(#labels)`` per token: the uniform bound (random labels carry exactly this).

They are orders of magnitude to set against parameter counts (2 bits/parameter, Allen-Zhu & Li;
3.6 bits/parameter, Morris et al.), not Kolmogorov complexities.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any

from uatlab.data.analysis import baselines, ceiling_report
from uatlab.data.conll import detect_scheme
from uatlab.data.dataset import SequenceDataset


def entropy_bits(counts: Counter) -> float:
    """Shannon entropy (bits) of the empirical distribution ``counts``."""
    total = sum(counts.values())
    return -sum(c / total * math.log2(c / total) for c in counts.values() if c) if total else 0.0


def bit_budgets(data: SequenceDataset) -> dict[str, float]:
    """Total bits: ``tokens·H(tag)``, ``tokens·H(tag|word)`` and ``tokens·log2(#labels)``."""
    labels = Counter(y for seq in data.labels for y in seq)
    per_word: dict[str, Counter] = defaultdict(Counter)
    for toks, labs in data:
        for t, y in zip(toks, labs, strict=True):
            per_word[t][y] += 1
    n = data.num_tokens
    h_cond = sum(sum(c.values()) / n * entropy_bits(c) for c in per_word.values()) if n else 0.0
    h = entropy_bits(labels)
    return {
        "H_tag_bits_per_token": h,
        "H_tag_given_word_bits_per_token": h_cond,
        "bits_H_tag": h * n,
        "bits_H_tag_given_word": h_cond * n,
        "bits_uniform": math.log2(max(len(labels), 1)) * n,
    }


def data_report(data: SequenceDataset, max_conflicts: int = 10) -> dict[str, Any]:
    """Everything ``uatlab data-report`` prints, as one JSON-able dict."""
    rep = ceiling_report(data)
    lengths = sorted(len(t) for t in data.tokens)
    label_counts = Counter(y for seq in data.labels for y in seq)
    n_seq = len(data)
    base = baselines(data)
    return {
        "source": data.source,
        "sequences": n_seq,
        "unique_sequences": len({tuple(t) for t in data.tokens}),
        "duplicate_sequences": rep.duplicate_sequences,
        "tokens": data.num_tokens,
        "vocabulary": len(data.vocabulary()),
        "labels": dict(label_counts.most_common()),
        "scheme": detect_scheme(data.labels),
        "length_max": lengths[-1],
        "length_mean": data.num_tokens / n_seq,
        "length_median": lengths[n_seq // 2] if n_seq % 2 else (lengths[n_seq // 2 - 1] + lengths[n_seq // 2]) / 2,
        "conflict_tokens": rep.conflict_tokens,
        # (sentence, position) inputs with several labels; "conflicts" lists the first max_conflicts
        "conflict_inputs": len(rep.conflicts),
        "ceiling_tokens": rep.ceiling_tokens,
        "ceiling_accuracy": rep.ceiling_accuracy,
        "baseline_all_majority_label": base["all_majority_label"],
        "majority_label": base["majority_label"],
        "baseline_per_word_majority": base["per_word_majority"],
        "conflicts": [
            {
                "where": [data.where(i, c.position) for i in c.sequences[:4]],
                "position": c.position,
                "token": c.token,
                "label_counts": c.label_counts,
                "majority": c.majority,
            }
            for c in rep.conflicts[:max_conflicts]
        ],
        "sqrt_N": math.sqrt(n_seq),
        "sqrt_nN": math.sqrt(data.num_tokens),
        **bit_budgets(data),
    }
