"""What the certificate is given besides the model's own tensors: token ids for `logit_bounds`, an encoding for
`certify`, a model file whose config names another dtype than its tensors. Each is refused with an InputError
or reported as given, never used silently."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

import uatlab
from uatlab.data.dataset import Encoding, SequenceDataset
from uatlab.errors import InputError
from uatlab.verify.certificate import logit_bounds

TOKENS = [["a", "b", "c"], ["b", "a"], ["c", "c", "a"], ["a", "c"]]
LABELS = [["X", "Y", "X"], ["Y", "Y"], ["X", "X", "Y"], ["Y", "X"]]


@pytest.fixture(scope="module")
def compiled():
    return uatlab.compile_memorizer(SequenceDataset(TOKENS, LABELS), dtype="float32")


@pytest.mark.parametrize("shape", [(0, 3), (2, 0)])
def test_logit_bounds_refuses_ids_without_a_token(compiled, shape):
    with pytest.raises(InputError, match=rf"at least one sequence of at least one token, got shape \({shape[0]}, "):
        logit_bounds(compiled.model, np.zeros(shape, dtype=np.int64))


def test_logit_bounds_refuses_fractional_ids_and_takes_integer_tensors(compiled):
    with pytest.raises(InputError, match="ids must be integer token ids, got an array of float64"):
        logit_bounds(compiled.model, [[1.9, 2.7]])
    ids = np.array([[0, 1, 2], [2, 2, 0]])
    want = logit_bounds(compiled.model, ids)
    for given in (torch.from_numpy(ids), ids.astype(np.int32), ids.tolist()):
        got = logit_bounds(compiled.model, given)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a, b)


def test_logit_bounds_names_an_out_of_range_id_as_given(compiled):
    V = compiled.model.config.vocab_size
    big = np.array([[2**63 + 1, 1, 2]], dtype=np.uint64)  # would wrap to a negative int64
    with pytest.raises(InputError, match=rf"must lie in \[0, {V}\), got 1…9223372036854775809"):
        logit_bounds(compiled.model, big)
    with pytest.raises(InputError, match=rf"must lie in \[0, {V}\), got -1…{V}"):
        logit_bounds(compiled.model, [[-1, V]])


def _swapped_labels(enc: Encoding) -> Encoding:
    labels = enc.id_to_label
    return Encoding.from_lists(enc.id_to_token, [labels[1], labels[0], *labels[2:]])


def test_certify_refuses_an_encoding_that_is_not_the_models_own(compiled):
    data = SequenceDataset(TOKENS, LABELS)
    own = compiled.model.encoding
    swapped = _swapped_labels(own)
    relabelled = SequenceDataset(TOKENS, [[{"X": "Y", "Y": "X"}[y] for y in seq] for seq in LABELS])
    second = own.id_to_label[1]  # the first name of the encoding given
    with pytest.raises(
        InputError,
        match=rf"not the model's own encoding \(label '{second}' is id 0 in the encoding given, 1 in the model's\)",
    ):
        uatlab.certify(compiled.model, relabelled, encoding=swapped)
    with pytest.raises(InputError, match="not the model's own encoding"):
        uatlab.certify(compiled.model, relabelled, encoding=swapped.to_json())
    # the model's own encoding, as a copy or as its JSON, is the same encoding: certified as without it
    for same in (Encoding.from_json(own.to_json()), own.to_json(), None):
        assert uatlab.certify(compiled.model, data, encoding=same).certified


def test_a_model_without_an_encoding_takes_the_one_given(compiled):
    bare = uatlab.Transformer(compiled.model.config)
    bare.load_state_dict(compiled.model.state_dict())
    assert bare.encoding is None
    cert = uatlab.certify(bare, SequenceDataset(TOKENS, LABELS), encoding=compiled.model.encoding)
    assert cert.certified


def test_config_dtype_is_what_the_files_config_names(compiled, tmp_path):
    good = uatlab.save(compiled.model, tmp_path / "m.safetensors")
    with safe_open(str(good), framework="pt") as f:
        meta, tensors = dict(f.metadata()), {k: f.get_tensor(k) for k in f.keys()}
    config = json.loads(meta["uatlab_config"])
    assert config["dtype"] == "float32"
    config["dtype"] = "float64"  # a config naming float64 over float32 tensors
    edited = tmp_path / "edited.safetensors"
    save_file(tensors, str(edited), metadata={**meta, "uatlab_config": json.dumps(config)})
    data = SequenceDataset(TOKENS, LABELS)
    cert = uatlab.certify(edited, data)
    assert (cert.dtype, cert.config_dtype) == ("float32", "float64")  # the proof follows the tensors
    assert "in float32" in cert.assumptions[0] and "its config says float64" in cert.assumptions[0]
    plain = uatlab.certify(good, data)
    assert (plain.dtype, plain.config_dtype) == ("float32", "float32")
    assert plain.certified_tokens == cert.certified_tokens


def test_the_deep_seq2seq_certificate_refuses_an_encoding_that_is_not_the_models_own(tmp_path):
    built = uatlab.compile_seq2seq_deep(
        [np.array([1, 0]), np.array([0, 2])], [np.array([0, 1]), np.array([1, 1])], V=3, C=2
    )
    model = uatlab.load(uatlab.save(built.model, tmp_path / "d.safetensors", encoding=Encoding.of_ids(3, 2)))
    data = SequenceDataset([["1", "0"], ["0", "2"]], [["0", "1"], ["1", "1"]])
    assert uatlab.certify(model, data).certified
    with pytest.raises(InputError, match=r"not the model's own encoding \(token '1' is id 0 in the encoding given, 1"):
        uatlab.certify(model, data, encoding=Encoding.from_lists(["1", "0", "2"], ["0", "1"]))
