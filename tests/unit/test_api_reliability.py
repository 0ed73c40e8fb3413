"""The public Python API under misuse: flags that are not booleans, models re-typed after compiling, files that are
not models, encodings changed in place, data sets changed after they were made, and arguments of the wrong type.
Each is a clear uatlab error naming the argument or item, or the faithful result, never a silent other model."""

from __future__ import annotations

import copy
import json
import pickle
import re

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

import uatlab
from uatlab.data.synthetic import synthetic_dataset
from uatlab.errors import InputError


@pytest.fixture(scope="module")
def small():
    return uatlab.SequenceDataset([["the", "cat", "sat"], ["a", "dog", "ran"]], [["D", "N", "V"], ["D", "N", "V"]])


@pytest.fixture(scope="module")
def compiled():
    data = synthetic_dataset(40, 6, 12, 3, seed=1)
    return uatlab.compile_memorizer(data, certify=False).model, data


# ------------------------------------------------------------------ flags


@pytest.mark.parametrize("name", ["causal", "certify"])
@pytest.mark.parametrize("value", ["False", "no", 1, None])
def test_compile_memorizer_refuses_a_flag_that_is_not_a_boolean(small, name, value):
    with pytest.raises(TypeError, match=f"compile_memorizer\\(\\): {name} must be True or False, got {value!r}"):
        uatlab.compile_memorizer(small, **{name: value})


def test_compile_memorizer_takes_numpy_booleans(small):
    con = uatlab.compile_memorizer(small, causal=np.bool_(False), certify=np.bool_(False))
    assert con.model.config.causal is False and con.certificate is None


@pytest.mark.parametrize("name", ["causal", "readout_bias", "ff_bias", "scale_by_sqrt_head_dim"])
def test_config_refuses_a_flag_that_is_not_a_boolean(name):
    with pytest.raises(InputError, match=f"{name} must be True or False, got 'False'"):
        uatlab.TransformerConfig(d_model=4, **{name: "False"})
    text = json.loads(uatlab.TransformerConfig(d_model=4).to_json())
    text[name] = "False"  # a stored config is checked the same way
    with pytest.raises(InputError, match=f"{name} must be True or False"):
        uatlab.TransformerConfig.from_json(json.dumps(text))


@pytest.mark.parametrize("beta", ["big", None, [2.0], True, 10**400])
def test_compile_memorizer_names_beta_when_it_is_not_a_number(small, beta):
    with pytest.raises(InputError, match="beta must be 'auto' or a positive power of two"):
        uatlab.compile_memorizer(small, beta=beta, certify=False)


@pytest.mark.parametrize(
    ("dtype", "beta", "exponent"),
    [("float32", 2.0**200, 200), ("float32", 2.0**-150, -150), ("float64", 2.0**1023, 1023)],
)
def test_compile_memorizer_refuses_a_beta_whose_query_scale_leaves_the_dtype(small, dtype, beta, exponent):
    """β whose query scale 2β overflows (or β underflows) in the model's dtype is refused naming it, as `uatlab
    compile --beta` refuses it; the largest power of two allowed compiles to a finite model."""
    with pytest.raises(
        InputError, match=rf"beta {re.escape(f'{beta:g}')}: out of range for {dtype} \(2\^{exponent}; use a power"
    ):
        uatlab.compile_memorizer(small, dtype=dtype, beta=beta, certify=False)
    largest = 2.0 ** (127 if dtype == "float32" else 1023) / 2
    model = uatlab.compile_memorizer(small, dtype=dtype, beta=largest, certify=False).model
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_an_exp_error_out_of_range_is_an_input_error(small, compiled):
    with pytest.raises(InputError, match="between 0.5 ulp"):
        uatlab.compile_memorizer(small, exp_ulps=-1)
    model, data = compiled
    with pytest.raises(InputError, match="between 0.5 ulp"):
        uatlab.certify(model, data, exp_ulps=float("nan"))


@pytest.mark.parametrize("value", [2.5, -1, "3", True])
def test_certify_refuses_max_examples_that_is_not_a_count(compiled, value):
    model, data = compiled
    with pytest.raises(InputError, match=f"max_examples must be an integer ≥ 0, got {value!r}"):
        uatlab.certify(model, data, max_examples=value)


# ------------------------------------------------------------------ save and load


def test_save_never_replaces_a_file_that_is_not_a_model(compiled, tmp_path):
    model, _ = compiled
    notes = tmp_path / "notes.txt"
    notes.write_text("precious\n")
    other = tmp_path / "x.safetensors"
    save_file({"w": torch.zeros(2)}, str(other))  # a safetensors file, not a uatlab model
    before = other.read_bytes()
    with pytest.raises(InputError, match="notes.txt exists and is not a uatlab model file"):
        uatlab.save(model, notes)
    with pytest.raises(InputError, match="x.safetensors exists and is not a uatlab model file"):
        uatlab.save(model, other)
    assert notes.read_text() == "precious\n" and other.read_bytes() == before
    path = uatlab.save(model, tmp_path / "m.safetensors")  # a model file is replaced, as asked
    uatlab.save(model, path)
    assert uatlab.load(path).config == model.config


def test_a_model_retyped_after_compiling_is_saved_and_loaded_as_it_is(compiled, tmp_path):
    model, data = compiled
    m32 = copy.deepcopy(model).to(torch.float32)  # the tensors are float32, the config still says float64
    assert m32.config.dtype == "float64"
    loaded = uatlab.load(uatlab.save(m32, tmp_path / "m32.safetensors"))
    assert loaded.config.dtype == "float32"
    assert all(t.dtype == torch.float32 for t in loaded.state_dict().values() if t.is_floating_point())
    for name, t in m32.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], t)
    mine, theirs = uatlab.certify(m32, data), uatlab.certify(loaded, data)
    assert mine.dtype == theirs.dtype == "float32"
    assert mine.certified_tokens == theirs.certified_tokens
    assert mine.min_certified_margin == theirs.min_certified_margin


def test_a_file_whose_header_says_another_dtype_than_its_tensors_loads_as_its_tensors(compiled, tmp_path):
    """A file written before save() recorded the tensors' dtype: float32 tensors under a float64 header."""
    model, _ = compiled
    path = uatlab.save(model, tmp_path / "m.safetensors")
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k).to(torch.float32) for k in f.keys()}
    assert json.loads(meta["uatlab_config"])["dtype"] == "float64"
    legacy = tmp_path / "legacy.safetensors"
    save_file(tensors, str(legacy), metadata=meta)
    loaded = uatlab.load(legacy)
    assert loaded.config.dtype == "float32"
    assert all(t.dtype == torch.float32 for t in loaded.state_dict().values() if t.is_floating_point())


@pytest.mark.parametrize(
    ("retype", "why"),
    [
        (lambda k, t: t.to(torch.float16), r"is not float32 or float64 \(.* is float16\)"),
        (lambda k, t: t.to(torch.bfloat16), r"is not float32 or float64 \(.* is bfloat16\)"),
        (lambda k, t: t.to(torch.float32) if k.startswith("readout") else t, r"mixes parameter dtypes \(.*readout"),
    ],
)
def test_a_file_of_half_precision_or_mixed_tensors_is_refused_not_cast(compiled, tmp_path, retype, why):
    """Cast to the header's dtype, such tensors would be another model than the file holds, and the certificate
    would prove that one: the file is refused, by `load` and by the CLI's certify, naming a tensor."""
    from uatlab.cli import main
    from uatlab.errors import ModelFileError

    model, data = compiled
    path = uatlab.save(model, tmp_path / "m.safetensors")
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
        tensors = {k: retype(k, f.get_tensor(k)) for k in f.keys()}
    bad = tmp_path / "bad.safetensors"
    save_file(tensors, str(bad), metadata=meta)
    with pytest.raises(ModelFileError, match=f"bad.safetensors: the file {why}"):
        uatlab.load(bad)
    jsonl = tmp_path / "d.jsonl"
    uatlab.data.write_jsonl(data, jsonl)
    assert main(["certify", str(bad), str(jsonl), "--json"]) == 2


def test_save_refuses_half_precision_and_mixed_dtypes(compiled, tmp_path):
    model, _ = compiled
    with pytest.raises(InputError, match=r"is not float32 or float64 \(.* is float16\)"):
        uatlab.save(copy.deepcopy(model).to(torch.float16), tmp_path / "h.safetensors")
    mixed = copy.deepcopy(model)
    mixed.readout.float()
    with pytest.raises(InputError, match="mixes parameter dtypes"):
        uatlab.save(mixed, tmp_path / "mixed.safetensors")
    assert not list(tmp_path.iterdir())  # nothing written


# ------------------------------------------------------------------ encodings


def test_an_encodings_mappings_cannot_be_changed_in_place(small):
    enc = uatlab.compile_memorizer(small, certify=False).model.encoding
    labels = enc.label_to_id
    for change in (
        lambda: labels.__setitem__("N", 2),
        lambda: labels.pop("N"),
        lambda: labels.update({"N": 2}),
        lambda: labels.setdefault("X", 3),
        lambda: labels.clear(),
        lambda: enc.token_to_id.__delitem__("cat"),
    ):
        with pytest.raises(TypeError, match="cannot be changed"):
            change()
    assert enc.id_to_label == ["D", "N", "V"] and [enc.label_to_id[y] for y in enc.id_to_label] == [0, 1, 2]
    # still a dict for reading, JSON, pickling and copies
    assert json.loads(json.dumps(enc.label_to_id)) == {"D": 0, "N": 1, "V": 2}
    for clone in (pickle.loads(pickle.dumps(enc)), copy.deepcopy(enc)):
        assert clone == enc and clone.label_to_id == enc.label_to_id
    mine = labels.copy()
    mine["X"] = 3  # a copy is the caller's own
    assert "X" not in enc.label_to_id


def test_an_encoding_keeps_its_own_copy_of_the_dicts_it_was_given():
    tokens = {"a": 0, "b": 1}
    enc = uatlab.Encoding(tokens, {"X": 0})
    tokens["c"] = 2
    assert enc.id_to_token == ["a", "b"]


@pytest.mark.parametrize("args", [(None, None), ({"a": 0}, ["X"])])
def test_an_encoding_of_something_else_than_dicts_is_an_input_error(args):
    with pytest.raises(InputError, match="must be a dict of"):
        uatlab.Encoding(*args)


# ------------------------------------------------------------------ data sets and sentences


@pytest.mark.parametrize(
    ("tokens", "labels", "message"),
    [
        (None, None, "tokens must be a list of sequences .* not a NoneType"),
        (5, 5, "tokens must be a list of sequences .* not a int"),
        ([["a"]], None, "labels must be a list of sequences .* not a NoneType"),
        ([None], [None], "sequence 0: tokens must be a list of strings, not a NoneType"),
        ([["a"], 7], [["X"], ["Y"]], "sequence 1: tokens must be a list of strings, not a int"),
    ],
)
def test_a_data_set_of_something_else_than_lists_is_an_input_error(tokens, labels, message):
    with pytest.raises(InputError, match=message):
        uatlab.SequenceDataset(tokens, labels)


def test_a_data_set_changed_after_it_was_made_is_checked_again(small):
    model = uatlab.compile_memorizer(small, certify=False).model
    short = uatlab.SequenceDataset([list(t) for t in small.tokens], [list(y) for y in small.labels])
    short.labels[1].pop()
    with pytest.raises(InputError, match="sequence 1 has 3 tokens but 2 labels"):
        uatlab.compile_memorizer(short)
    with pytest.raises(InputError, match="sequence 1 has 3 tokens but 2 labels"):
        uatlab.certify(model, short)
    extra = uatlab.SequenceDataset([list(t) for t in small.tokens], [list(y) for y in small.labels])
    extra.tokens.append(["a"])
    with pytest.raises(InputError, match="3 token sequences but 2 label sequences"):
        uatlab.certify(model, extra)
    none = uatlab.SequenceDataset([list(t) for t in small.tokens], [list(y) for y in small.labels])
    none.tokens[1][0] = None
    with pytest.raises(InputError, match="sequence 1, position 0: the token None is a NoneType"):
        uatlab.compile_memorizer(none)


def test_sequences_added_to_a_data_set_in_memory_are_numbered_and_certified(small):
    model = uatlab.compile_memorizer(small, certify=False).model
    grown = uatlab.SequenceDataset([list(t) for t in small.tokens], [list(y) for y in small.labels])
    grown.tokens.append(["the", "dog", "sat"])
    grown.labels.append(["D", "N", "V"])
    cert = uatlab.certify(model, grown)
    assert grown.lines == [1, 2, 3] and cert.sequences == 3 and cert.tokens == 9
    with pytest.raises(InputError, match="1 line numbers for 2 sequences"):
        uatlab.SequenceDataset([["a"], ["b"]], [["X"], ["Y"]], lines=[3])
    read = uatlab.SequenceDataset([["a"], ["b"]], [["X"], ["Y"]], lines=[3, 9])  # lines of a file: not renumbered
    read.tokens.append(["a"])
    read.labels.append(["X"])
    with pytest.raises(InputError, match="2 line numbers for 3 sequences"):
        uatlab.certify(model, read)


@pytest.mark.parametrize(
    ("sentences", "message"),
    [
        (None, "got a NoneType"),
        (5, "got a int"),
        ([None], "sentence 0 is a NoneType"),
        ([["the"], 3], "sentence 1 is a int"),
    ],
)
def test_predict_names_what_is_not_a_list_of_sentences(small, sentences, message):
    model = uatlab.compile_memorizer(small, certify=False).model
    with pytest.raises(InputError, match=f"sentences must be a list of token lists.*{message}"):
        model.predict(sentences)
    assert model.predict(s for s in [["a", "dog"]]) == [["D", "N"]]  # any iterable of sentences


# ------------------------------------------------------------------ paper C builders


def test_seq2seq_deep_refuses_fractional_ids_instead_of_truncating_them():
    with pytest.raises(InputError, match="sentence 0: token ids must be integers: position 0 holds 1.9"):
        uatlab.compile_seq2seq_deep([np.array([1.9, 0.2])], [np.array([0, 1])], V=3, C=2)
    with pytest.raises(InputError, match="sentence 1: label ids must be integers: position 1 holds 1.2"):
        uatlab.compile_seq2seq_deep([[1, 0], [0, 2]], [[0, 1], np.array([1.0, 1.2])], V=3, C=2)
    with pytest.raises(InputError, match="sentence 0: the token ids must be one row"):
        uatlab.compile_seq2seq_deep([[[1, 0]]], [[0, 1]], V=3, C=2)
    ok = uatlab.compile_seq2seq_deep([np.array([1.0, 0.0])], [np.array([0.0, 1.0])], V=3, C=2)  # integral floats
    assert ok.certificate.certified_tokens == 2


@pytest.mark.parametrize("seed", [-1, 2**32, 1.5, "0"])
def test_paper_c_builders_name_a_bad_seed(seed):
    error = TypeError if not isinstance(seed, int) else InputError
    with pytest.raises(error, match="seed must be an integer"):
        uatlab.compile_seq2seq_deep([[1, 0]], [[0, 1]], V=3, C=2, seed=seed)
    with pytest.raises(error, match="seed must be an integer"):
        uatlab.compile_next_token(np.array([[1, 0]]), np.array([1]), V=3, C=2, seed=seed)


def test_a_seq2seq_deep_model_cast_to_another_dtype_is_refused_by_name():
    model = uatlab.compile_seq2seq_deep([[1, 0], [0, 2]], [[0, 1], [1, 0]], V=3, C=2).model
    assert model.predict([["1", "0"]]) == [["0", "1"]]
    model.to(torch.float32)
    with pytest.raises(InputError, match="tensor nu is float32, but it computes in float64"):
        model.predict([["1", "0"]])
