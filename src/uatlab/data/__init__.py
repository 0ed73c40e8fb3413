"""Data: labelled token sequences, CoNLL and JSONL readers, conflicts, ceilings and baselines."""

from uatlab.data.analysis import CeilingReport, Conflict, baselines, ceiling_report, majority_targets
from uatlab.data.conll import detect_scheme, iob1_to_iob2, iter_conll, read_conll, write_conll
from uatlab.data.dataset import Encoding, SequenceDataset, from_lists
from uatlab.data.hf import load_conll2003_hf
from uatlab.data.jsonl import iter_jsonl, read_jsonl, read_sequences, write_jsonl

__all__ = [
    "CeilingReport",
    "Conflict",
    "Encoding",
    "SequenceDataset",
    "baselines",
    "ceiling_report",
    "detect_scheme",
    "from_lists",
    "iob1_to_iob2",
    "iter_conll",
    "iter_jsonl",
    "load_conll2003_hf",
    "majority_targets",
    "read_conll",
    "read_jsonl",
    "read_sequences",
    "write_conll",
    "write_jsonl",
]
