"""The optional Hugging Face loader, on an in-memory stand-in for a ``datasets`` split (no network)."""

import sys
import types

import pytest

from uatlab.data.hf import dataset_from_hf_split, load_conll2003_hf
from uatlab.errors import UatlabError

NAMES = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]


class FakeSplit(list):
    features = {"ner_tags": types.SimpleNamespace(feature=types.SimpleNamespace(names=NAMES))}


def rows():
    return FakeSplit(
        [
            {"tokens": [], "ner_tags": []},
            {"tokens": ["Zorbia", "praises", "Quarkish"], "ner_tags": [3, 0, 7]},
            {"tokens": ["Alva", "Kestrel"], "ner_tags": [1, 2]},
        ]
    )


def test_split_becomes_a_sequence_dataset():
    ds = dataset_from_hf_split(rows(), source="fake")
    assert ds.tokens == [["Zorbia", "praises", "Quarkish"], ["Alva", "Kestrel"]]
    assert ds.labels == [["B-ORG", "O", "B-MISC"], ["B-PER", "I-PER"]]


def test_tag_ids_outside_the_classes_are_named():
    bad = rows()
    bad[2]["ner_tags"] = [1, 42]
    with pytest.raises(UatlabError, match="row 2 has tag id 42"):
        dataset_from_hf_split(bad, source="fake")


def test_loader_uses_datasets_and_reports_failures(monkeypatch):
    calls = []

    def load_dataset(name, split):
        calls.append((name, split))
        if name == "eriktks/conll2003":
            raise ConnectionError("offline")
        return rows()

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=load_dataset))
    ds = load_conll2003_hf("validation")
    assert calls == [("eriktks/conll2003", "validation"), ("conll2003", "validation")]
    assert ds.source == "hf:conll2003/validation" and len(ds) == 2

    def always_fail(name, split):
        raise ConnectionError("offline")

    monkeypatch.setitem(sys.modules, "datasets", types.SimpleNamespace(load_dataset=always_fail))
    with pytest.raises(UatlabError, match="ConnectionError: offline"):
        load_conll2003_hf()


def test_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` raise ImportError
    with pytest.raises(UatlabError, match=r"pip install 'uatlab\[datasets\]'"):
        load_conll2003_hf()
