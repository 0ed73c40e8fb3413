"""Optional loader of CoNLL-2003 through the Hugging Face ``datasets`` library.

Never required and never used by the tests against the network: uatlab's own readers
(`uatlab.data.read_conll`) work offline on the column files. This loader is for users who have
``datasets`` installed (``pip install 'uatlab[datasets]'``) and can reach the Hub or have it cached.

The Hub's ``eriktks/conll2003`` (formerly ``conll2003``) stores ``tokens`` and integer ``ner_tags`` in
IOB2 with the class names in the split's ``features["ner_tags"].feature.names``
(O, B-PER, I-PER, B-ORG, I-ORG, B-LOC, I-LOC, B-MISC, I-MISC); they are mapped back to strings so the
result is the same `SequenceDataset` that `read_conll` returns.
"""

from __future__ import annotations

from typing import Any

from uatlab.data.dataset import SequenceDataset
from uatlab.errors import UatlabError

HUB_NAMES = ("eriktks/conll2003", "conll2003")


def dataset_from_hf_split(split: Any, source: str) -> SequenceDataset:
    """Convert a ``datasets`` split with ``tokens`` and ``ner_tags`` columns into a SequenceDataset."""
    try:
        names = list(split.features["ner_tags"].feature.names)
    except (KeyError, AttributeError):
        raise UatlabError(f"{source}: the split has no ner_tags class names") from None
    tokens, labels = [], []
    for i, row in enumerate(split):
        toks, tags = list(row["tokens"]), list(row["ner_tags"])
        if not toks:
            continue  # the Hub files keep empty -DOCSTART- rows; the column reader skips them too
        bad = [t for t in tags if not 0 <= int(t) < len(names)]
        if bad:
            raise UatlabError(f"{source}: row {i} has tag id {bad[0]} outside the {len(names)} classes")
        tokens.append([str(t) for t in toks])
        labels.append([names[int(t)] for t in tags])
    return SequenceDataset(tokens, labels, source=source)


def load_conll2003_hf(split: str = "train", name: str | None = None) -> SequenceDataset:
    """Load one split ('train', 'validation', 'test') of CoNLL-2003 through ``datasets``.

    Needs the optional ``datasets`` package (``pip install 'uatlab[datasets]'``) and the Hub, or the split in
    the ``datasets`` cache. The result is a `SequenceDataset` as `read_conll` gives for the column files (the tag
    ids mapped to their class names, empty ``-DOCSTART-`` rows dropped), its ``source`` ``'hf:NAME/SPLIT'``.

    Args:
        split: the split to load: 'train', 'validation' or 'test'.
        name: the dataset's name on the Hub; None tries ``eriktks/conll2003``, then ``conll2003``.

    Raises:
        UatlabError: when ``datasets`` is not installed or the data cannot be reached, saying what to do.
    """
    try:
        import datasets
    except ImportError:
        raise UatlabError(
            "the Hugging Face loader needs the optional 'datasets' package: pip install 'uatlab[datasets]' "
            "(or read the CoNLL column files with uatlab.data.read_conll)"
        ) from None
    errors = []
    for hub_name in (name,) if name else HUB_NAMES:
        try:
            ds = datasets.load_dataset(hub_name, split=split)
        except Exception as exc:  # network, missing dataset, script-based loader refused...
            errors.append(f"{hub_name}: {type(exc).__name__}: {exc}")
            continue
        return dataset_from_hf_split(ds, source=f"hf:{hub_name}/{split}")
    raise UatlabError("could not load CoNLL-2003 through datasets (" + "; ".join(errors) + ")")
