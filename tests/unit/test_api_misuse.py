"""The Python API on misuse: empty data, corrupt model files, bad argument values and types. Each is a
clear `uatlab.errors` exception (or TypeError) naming the argument, never a vacuous result or a raw error
from deep inside."""

from __future__ import annotations

import math
import re

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

import uatlab
from uatlab.data.dataset import SequenceDataset, from_lists
from uatlab.errors import InputError, ModelFileError

TOKENS = [["a", "b", "c"], ["b", "a"], ["c", "c", "a"]]
LABELS = [["X", "Y", "X"], ["Y", "Y"], ["X", "X", "Y"]]


@pytest.fixture(scope="module")
def compiled():
    return uatlab.compile_memorizer(SequenceDataset(TOKENS, LABELS))


def test_certify_refuses_an_empty_data_set(compiled):
    with pytest.raises(InputError, match="no sequences to certify"):
        uatlab.certify(compiled.model, from_lists([], []))


def test_certify_chunks_refuses_no_chunks(compiled):
    from uatlab.verify.certificate import certify_chunks

    with pytest.raises(InputError, match="no tokens to certify"):
        certify_chunks(compiled.model, iter([]), 0)


def test_certify_names_a_malformed_encoding_dict(compiled):
    with pytest.raises(
        InputError, match="encoding: a dict needs lists under 'tokens' and 'labels'.*'tokens', 'labels'"
    ):
        uatlab.certify(compiled.model, SequenceDataset(TOKENS, LABELS), encoding={"a": 1})
    with pytest.raises(TypeError, match="encoding must be a uatlab.Encoding .* not a list"):
        uatlab.certify(compiled.model, SequenceDataset(TOKENS, LABELS), encoding=["a"])


def _tampered(src, dst, name, value, index=(0, 0), dtype=None):
    with safe_open(str(src), framework="pt") as f:
        meta = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    t = tensors[name].clone() if dtype is None else tensors[name].to(dtype)
    t[index] = value
    tensors[name] = t
    save_file(tensors, str(dst), metadata=meta)
    return dst


@pytest.mark.parametrize(("name", "value"), [("readout.weight", float("nan")), ("embed.weight", float("inf"))])
def test_load_refuses_non_finite_weights_naming_the_tensor(compiled, tmp_path, name, value):
    path = uatlab.save(compiled.model, tmp_path / "m.safetensors")
    bad = _tampered(path, tmp_path / "bad.safetensors", name, value)
    with pytest.raises(ModelFileError, match=f"bad.safetensors: tensor {name} has 1 non-finite entry"):
        uatlab.load(bad)
    from uatlab.models.io import load_model

    with pytest.raises(ModelFileError, match=f"tensor {name} has 1 non-finite"):
        load_model(bad)


def test_save_refuses_non_finite_weights_and_keeps_the_model_file_there(tmp_path):
    """`load` refuses a file with a NaN weight, so `save` does not write one: an earlier model at the path stays."""
    model = uatlab.compile_memorizer(SequenceDataset(TOKENS, LABELS)).model
    path = uatlab.save(model, tmp_path / "m.safetensors")
    before = path.read_bytes()
    with torch.no_grad():
        model.embed.weight[0, 0] = float("nan")
    with pytest.raises(InputError, match=r"m.safetensors: tensor embed.weight has 1 non-finite entry .* nothing was"):
        uatlab.save(model, path)
    assert path.read_bytes() == before
    with pytest.raises(InputError, match="tensor embed.weight"):
        uatlab.save(model, tmp_path / "new.safetensors")
    assert not (tmp_path / "new.safetensors").exists()


def test_load_refuses_a_float64_weight_in_a_float32_model_rather_than_cast_it(tmp_path):
    cfg = uatlab.TransformerConfig(d_model=4, vocab_size=3, num_labels=2, dtype="float32")
    model = uatlab.Transformer(cfg)
    path = uatlab.save(model, tmp_path / "m.safetensors")
    bad = _tampered(path, tmp_path / "big.safetensors", "embed.weight", 1e300, dtype=torch.float64)
    with pytest.raises(
        ModelFileError, match=r"big.safetensors: the file mixes parameter dtypes \(.*embed.weight is float64"
    ):
        uatlab.load(bad)


def test_gd_bounds_are_inf_not_an_overflow_error_when_out_of_range():
    from uatlab.constructions.paper_b.appB_incontext_gd import (
        float_step_error_bound,
        multi_step_bound,
        multi_step_float_bound,
    )

    # d = 10⁴ standard-normal tokens: S, S₁ ~ 3·10⁴, so e^{εS₁} and cosh(εS) exceed the float64 range
    args = dict(N=4, M=4e8, eps=0.01, S=3e4, V=3.0, lr=0.5)
    assert multi_step_bound(**args, steps=3) == math.inf
    for dtype in ("float64", "float32"):
        assert float_step_error_bound(**args, S_abs=3e4, d=10_000, dtype=dtype) == math.inf
        assert multi_step_float_bound(**args, S_abs=3e4, steps=3, d=10_000, dtype=dtype) == math.inf
    # in range the bound is a finite number that grows with S (the same function, not a special case)
    small = multi_step_float_bound(
        N=4, M=4e8, eps=0.01, S=30.0, S_abs=30.0, V=3.0, lr=0.5, steps=3, d=8, dtype="float64"
    )
    larger = multi_step_float_bound(
        N=4, M=4e8, eps=0.01, S=60.0, S_abs=60.0, V=3.0, lr=0.5, steps=3, d=8, dtype="float64"
    )
    assert 0 < small < larger < math.inf


def test_train_refuses_an_empty_set_and_an_output_that_is_a_file(tmp_path):
    from uatlab.training.trainer import TrainConfig

    cfg = TrainConfig(epochs=1, dim=8)
    with pytest.raises(InputError, match="no sequences to train on"):
        uatlab.train(from_lists([], []), cfg, tmp_path / "x", progress=False)
    keep = tmp_path / "keep.txt"
    keep.write_text("precious")
    for out in (keep, keep / "run"):
        with pytest.raises(InputError, match=f"out_dir {out}: {keep} is a file, not a folder"):
            uatlab.train(SequenceDataset(TOKENS, LABELS), cfg, out, progress=False)
    assert keep.read_text() == "precious"
    with pytest.raises(TypeError, match="train_data must be a uatlab.SequenceDataset, not a list"):
        uatlab.train(TOKENS, cfg, tmp_path / "y", progress=False)


def test_train_refuses_an_empty_out_dir_and_an_empty_validation_set(tmp_path, monkeypatch):
    """An empty out_dir is not the current folder, and an empty validation set has no accuracy (it read 0.0):
    both are refused before any file is written."""
    from uatlab.io_safety import OutputFolder
    from uatlab.training.trainer import TrainConfig

    monkeypatch.chdir(tmp_path)
    cfg, data = TrainConfig(epochs=1, dim=8), SequenceDataset(TOKENS, LABELS)
    with pytest.raises(InputError, match="out_dir is empty; give a folder's name"):
        uatlab.train(data, cfg, "", progress=False)
    with pytest.raises(TypeError, match="out_dir must be a path, not a NoneType"):
        uatlab.train(data, cfg, None, progress=False)
    with pytest.raises(InputError, match=r"no sequences to validate on \(valid_data; None for no validation\)"):
        uatlab.train(data, cfg, "run", valid_data=from_lists([], []), progress=False)
    with pytest.raises(InputError, match="--out: the path is empty"):
        OutputFolder("", "reproduce", ["claims.json"])
    assert list(tmp_path.iterdir()) == []


def test_compile_memorizer_names_bad_seed_and_width():
    ds = SequenceDataset(TOKENS, LABELS)
    with pytest.raises(InputError, match=r"seed must be an integer in \[0, 4294967295\], got -1"):
        uatlab.compile_memorizer(ds, seed=-1)
    with pytest.raises(TypeError, match="d_model must be an integer, got '8'"):
        uatlab.compile_memorizer(ds, d_model="8")
    with pytest.raises(TypeError, match="seed must be an integer, got 1.5"):
        uatlab.compile_memorizer(ds, seed=1.5)
    with pytest.raises(InputError, match=r"compile_memorizer\(d_model=1000000000000\) would need about .* TB"):
        uatlab.compile_memorizer(ds, d_model=10**12)


def test_save_names_a_non_model_and_a_folder(compiled, tmp_path):
    with pytest.raises(TypeError, match="save\\(\\) takes a uatlab model .* not a NoneType"):
        uatlab.save(None, tmp_path / "m.safetensors")
    for folder in (".", tmp_path):
        with pytest.raises(InputError, match="is a folder; give the model file's name"):
            uatlab.save(compiled.model, folder)
    with pytest.raises(ModelFileError, match="is a folder, not a model file"):
        uatlab.load(tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("tail", ["/", "/.", "/.."])
def test_save_refuses_a_path_spelt_as_a_folder(compiled, tmp_path, tail):
    """'outdir/', 'outdir/.' and 'outdir/..' name folders: the CLI refuses them, and so does the API (Path would
    drop '/' or '/.' and write a file named 'outdir')."""
    from uatlab.models.io import save_model

    spelt = f"{tmp_path}/outdir{tail}"
    end = re.escape(repr(tail.lstrip("/") or "/"))
    with pytest.raises(InputError, match=rf"save\(\): '{re.escape(spelt)}' ends in {end}, the spelling of a folder"):
        uatlab.save(compiled.model, spelt)
    with pytest.raises(InputError, match=rf"save_model\(\): '{re.escape(spelt)}' ends in {end}"):
        save_model(compiled.model, spelt)
    assert list(tmp_path.iterdir()) == []


def test_from_lists_refuses_none_tokens_and_labels():
    with pytest.raises(InputError, match="sequence 0, position 1: the label is None"):
        from_lists([[1, 2, 3]], [["x", None, "y"]])
    with pytest.raises(InputError, match="sequence 1, position 0: the token is None"):
        from_lists([["a"], [None]], [["x"], ["y"]])
    assert from_lists([[1, 2]], [["x", "y"]]).tokens == [["1", "2"]]  # other items are still stringified


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("beta", float("nan"), "beta .* must be a finite number ≥ 0, got nan"),
        ("beta", float("inf"), "beta .* got inf"),
        ("beta", -1.0, "beta .* got -1.0"),
        ("rank", 0, r"rank 0 is impossible .* in \[1, 4\]"),
        ("attention", "x", "attention must be 'softmax' or 'hardmax', got 'x'"),
        ("d_model", "8", "d_model must be an integer, got '8'"),
    ],
)
def test_transformer_config_validates_every_field(field, value, message):
    with pytest.raises(InputError, match=message):
        uatlab.TransformerConfig(**{"d_model": 4, "head_dim": 4, field: value})


def test_incontext_gd_guarantee_bounds_the_error_on_unit_data():
    import numpy as np

    from uatlab.constructions.paper_b.appB_incontext_gd import gd_prediction

    d, N, steps, lr = 3, 8, 2, 0.5
    for dtype in ("float64", "float32"):
        built = uatlab.build_incontext_gd(d, N, steps=steps, lr=lr, eps=1e-2, dtype=dtype)
        g = built.guarantee
        assert g["eps_min"] > 0 and 0 < g["exact_arithmetic_bound_unit_data"] <= g["sup_error_bound_unit_data"]
        rng = np.random.default_rng(0)
        # unit envelope: |x_ik| ≤ 1/√d gives Σ_k |x_ik x_jk| ≤ 1; |y| ≤ 1
        xc = rng.uniform(-1, 1, (16, N, d)) / math.sqrt(d)
        xq = rng.uniform(-1, 1, (16, d)) / math.sqrt(d)
        yc = rng.uniform(-1, 1, (16, N))
        err = np.abs(built.detail.predict(xc, yc, xq) - gd_prediction(xc, yc, xq, lr, steps)).max()
        assert 0 < err <= g["sup_error_bound_unit_data"]


def test_transformer_refuses_a_size_beyond_memory_before_allocating():
    from uatlab.memory_guard import set_memory_limit

    cfg = uatlab.TransformerConfig(d_model=10**6, ff_width=10**6, vocab_size=10, num_labels=3)
    set_memory_limit("1G")
    try:
        with pytest.raises(InputError, match=r"Transformer\(d_model=1000000\) would need about 7.3 TB"):
            uatlab.Transformer(cfg)
        small = uatlab.TransformerConfig(d_model=8, ff_width=16, vocab_size=10, num_labels=3)
        assert uatlab.Transformer(small).num_parameters() > 0
    finally:
        set_memory_limit(None)


def test_load_checks_each_tensor_for_nan_once(tmp_path, monkeypatch):
    """Loading checks each tensor for NaN/±inf once, also a file whose tensors are not the dtype its header says
    (they are the model: nothing is cast, so nothing needs a second check)."""
    import uatlab.models.io as model_io

    cfg = uatlab.TransformerConfig(d_model=4, vocab_size=3, num_labels=2, dtype="float32")
    path = uatlab.save(uatlab.Transformer(cfg), tmp_path / "m.safetensors")
    with safe_open(str(path), framework="pt") as f:
        meta, tensors = dict(f.metadata()), {k: f.get_tensor(k).double() for k in f.keys()}
    retyped = tmp_path / "f64.safetensors"
    save_file(tensors, str(retyped), metadata=meta)  # float64 tensors under a float32 header
    checked: list[str] = []
    real = model_io.check_finite

    def counting(path, tensors):
        checked.extend(tensors)
        return real(path, tensors)

    monkeypatch.setattr(model_io, "check_finite", counting)
    for file, dtype in ((path, torch.float32), (retyped, torch.float64)):
        checked.clear()
        model = uatlab.load(file)
        assert sorted(checked) == sorted(model.state_dict()), file
        assert {t.dtype for t in model.state_dict().values()} == {dtype}


def _edit_header(src, dst, edit):
    """Copy the model file ``src`` to ``dst`` with its header metadata passed through ``edit``."""
    with safe_open(str(src), framework="pt") as f:
        meta, tensors = dict(f.metadata()), {k: f.get_tensor(k) for k in f.keys()}
    save_file(tensors, str(dst), metadata=edit(meta))
    return dst


def test_save_and_load_refuse_an_encoding_that_does_not_name_every_output(compiled, tmp_path, capsys):
    import json

    from uatlab.cli import main
    from uatlab.data.dataset import Encoding

    model = compiled.model
    tokens, labels = model.encoding.id_to_token, model.encoding.id_to_label
    n_out = model.config.num_labels
    short = Encoding.from_lists(tokens, labels[:-1])
    with pytest.raises(InputError, match=f"lists {n_out - 1} labels, the model has {n_out} outputs"):
        uatlab.save(model, tmp_path / "short.safetensors", encoding=short)
    assert not (tmp_path / "short.safetensors").exists()
    good = uatlab.save(model, tmp_path / "good.safetensors")
    text = tmp_path / "in.txt"
    text.write_text(" ".join(TOKENS[0]) + "\n")

    def with_labels(names):
        def edit(meta):
            extra = json.loads(meta["uatlab_extra"])
            extra["encoding"]["labels"] = names
            return {**meta, "uatlab_extra": json.dumps(extra)}

        return edit

    for names, message in (
        (labels[:-1], f"the encoding lists {n_out - 1} labels, the model has {n_out} outputs"),
        ([*labels[:-1], labels[0]], f"the encoding lists the label {labels[0]!r} twice"),
        ([*labels[:-1], None], f"the encoding's 'labels' entry {n_out - 1} is None, a NoneType, not a name"),
    ):
        bad = _edit_header(good, tmp_path / "bad.safetensors", with_labels(names))
        with pytest.raises(ModelFileError, match=f"{bad}: {message}"):
            uatlab.load(bad)
        capsys.readouterr()
        assert main(["predict", str(bad), str(text)]) == 2
        assert message in " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("uatlab_extra", "[]", "header field uatlab_extra must be a JSON object, got list"),
        ("uatlab_extra", '"x"', "header field uatlab_extra must be a JSON object, got str"),
        ("uatlab_extra", "{not json", "header field uatlab_extra is not valid JSON"),
        ("uatlab_extra", '{"encoding": [1]}', "header field uatlab_extra.encoding must be a JSON object"),
        ("uatlab_config", "[]", "the config must be a JSON object, got list"),
        ("uatlab_config", None, "meta must be a dict, got list"),  # None: the config's meta set to []
    ],
)
def test_a_header_field_of_the_wrong_type_is_refused_naming_the_file_and_field(
    compiled, tmp_path, capsys, field, value, message
):
    import json

    from uatlab.cli import main

    good = uatlab.save(compiled.model, tmp_path / "good.safetensors")

    def edit(meta):
        if value is None:
            return {**meta, field: json.dumps({**json.loads(meta[field]), "meta": []})}
        return {**meta, field: value}

    bad = _edit_header(good, tmp_path / "bad.safetensors", edit)
    with pytest.raises(ModelFileError, match=message) as info:
        uatlab.load(bad)
    assert str(info.value).startswith(f"{bad}: ")
    data = tmp_path / "d.conll"
    data.write_text("".join(f"{t} {y}\n" for t, y in zip(TOKENS[0], LABELS[0], strict=True)) + "\n")
    for cmd in (["certify", str(bad), str(data)], ["predict", str(bad), str(data), "--format", "conll"]):
        capsys.readouterr()
        assert main(cmd) == 2
        assert message in " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize(
    "tokens,labels,named",
    [
        (["ab", "cd"], [["X", "Y"], ["Z", "W"]], "tokens must be a list of strings, not the string 'ab'"),
        ([["a", "b"]], ["XY"], "labels must be a list of strings, not the string 'XY'"),
        ([["a", 1]], [["X", "Y"]], "sequence 0, position 1: the token 1 is a int, not a string"),
        ([["a", "b"]], [["X", None]], "sequence 0, position 1: the label None is a NoneType"),
    ],
)
def test_a_dataset_of_strings_or_non_strings_is_refused_naming_the_item(tokens, labels, named):
    # a string sequence would be read one character per token and compile into a model of characters
    with pytest.raises(InputError, match=re.escape(named)):
        uatlab.SequenceDataset(tokens, labels)


def test_a_non_path_or_a_wrong_config_is_a_type_error_naming_it(tmp_path):
    for call, named in [
        (lambda: uatlab.load(5), "expected a path (str or os.PathLike), got int 5"),
        (lambda: uatlab.read_conll(5), "expected a path (str or os.PathLike), got int 5"),
        (lambda: uatlab.read_jsonl(5), "expected a path (str or os.PathLike), got int 5"),
        (
            lambda: uatlab.train(uatlab.data.from_lists([["a"]], [["X"]]), {"epochs": 1}, tmp_path / "r"),
            "TrainConfig(**d)",
        ),
        (
            lambda: uatlab.train([["a"]], uatlab.TrainConfig(), tmp_path / "r"),
            "train_data must be a uatlab.SequenceDataset, not a list",
        ),
    ]:
        with pytest.raises(TypeError, match=re.escape(named)):
            call()
    assert not (tmp_path / "r").exists()  # refused before any file
    with pytest.raises(InputError, match="vocab_size must be at least 1"):
        uatlab.TransformerConfig(d_model=4, vocab_size=0)


def test_a_builder_and_logit_bounds_name_a_malformed_argument(compiled):
    from uatlab.verify.certificate import logit_bounds

    with pytest.raises(InputError, match=r"vocabulary must be a \(\|V\|, d\) array of real numbers"):
        uatlab.build_theorem2_layer(["a", "b"], n=2, eps=0.5, r_min=1.0, r_max=2.0)
    model = compiled.model
    with pytest.raises(InputError, match=r"ids must be token ids \(B, n\) of one length n"):
        logit_bounds(model, [[0, 1], [1]])
    with pytest.raises(InputError, match=r"ids must be token ids of shape \(B, n\), got shape \(2,\)"):
        logit_bounds(model, [0, 1])


@pytest.mark.parametrize(
    ("facts", "error", "message"),
    [
        ("hello", TypeError, r"save\(\): facts must be a dict of JSON values .* not a str"),
        ({"x": object()}, TypeError, r"save\(\): facts\['x'\] is a object .*not a JSON value"),
        ({"a": [1, {"b": float("nan")}]}, InputError, r"save\(\): facts\['a'\]\[1\]\['b'\] is nan, which JSON cannot"),
        ({"a": float("-inf")}, InputError, r"facts\['a'\] is -inf, which JSON cannot hold"),
        ({"a": {3: "x"}}, TypeError, r"facts\['a'\] has the key 3 \(int\); JSON keys are strings"),
    ],
)
def test_save_refuses_facts_that_are_not_json_naming_the_key(compiled, tmp_path, facts, error, message):
    with pytest.raises(error, match=message):
        uatlab.save(compiled.model, tmp_path / "m.safetensors", facts=facts)
    assert list(tmp_path.iterdir()) == []


def test_save_keeps_json_facts_as_standard_json(compiled, tmp_path):
    import json

    import numpy as np

    facts = {"n": np.int64(3), "x": np.float32(0.5), "ok": np.bool_(True), "t": (1, "a"), "d": {"k": None}}
    path = uatlab.save(compiled.model, tmp_path / "m.safetensors", facts=facts)
    with safe_open(str(path), framework="pt") as f:
        extra = json.loads(f.metadata()["uatlab_extra"], parse_constant=lambda c: pytest.fail(f"non-JSON {c}"))
    assert extra["facts"] == {"n": 3, "x": 0.5, "ok": True, "t": [1, "a"], "d": {"k": None}}


def test_save_names_an_empty_path(compiled):
    with pytest.raises(InputError, match=r"save\(\): the path is empty; give the model file's name"):
        uatlab.save(compiled.model, "")


@pytest.mark.parametrize(
    ("tokens", "labels", "named"),
    [
        ([["a", "b c"]], [["X", "Y"]], "sequence 0, position 1: the token 'b c' contains white space"),
        ([["a"], ["", "b"]], [["X"], ["X", "Y"]], "sequence 1, position 0: the token '' is empty"),
        ([["a", "b"]], [["X", "Y\t"]], "sequence 0, position 1: the label 'Y\\t' contains white space"),
    ],
)
def test_a_token_or_label_that_is_not_one_word_is_refused_naming_it(tokens, labels, named):
    # no file can hold such a word: CoNLL and text files split at white space, and the JSONL reader refuses it
    for build in (from_lists, SequenceDataset):
        with pytest.raises(InputError, match=re.escape(named)):
            build(tokens, labels)


def test_integer_tokens_are_read_as_strings_by_from_lists_and_predict_alike():
    import numpy as np

    data = from_lists([[1, 2], [2, np.int64(1)]], [["X", "Y"], ["Y", "X"]])
    assert data.tokens == [["1", "2"], ["2", "1"]]
    model = uatlab.compile_memorizer(data).model
    assert model.predict([[1, 2], [np.int64(2), "1"]]) == model.predict([["1", "2"], ["2", "1"]]) == data.labels
    for bad, kind in ((1.0, "float"), (True, "bool"), (object(), "object")):
        with pytest.raises(InputError, match=f"sequence 0, position 1: the token .* is a {kind}, neither a string"):
            from_lists([[1, bad]], [["X", "Y"]])
        with pytest.raises(InputError, match=f"sentence 0, position 1: the token .* is a {kind}, neither a string"):
            model.predict([[1, bad]])


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("layers", 0, "an integer in [1, 256]"),
        ("embed_std", -1.0, "a finite number in [0, 1000] or None"),
        ("weight_decay", math.inf, "a finite number in [0, 1000]"),
        ("clip", -1.0, "a finite number in [0, 1000000000]"),
        ("warmup_steps", -5, "an integer in [0, 1000000000]"),
        ("min_lr_ratio", 2.0, "a finite number in [0, 1]"),
        ("momentum", math.nan, "a finite number in [0, 1)"),
        ("dim", 0, "an integer in [1, 65536]"),
        ("rank", 0, "an integer in [1, 65536] or None"),
        ("epochs", 2.5, "an integer in [1, 1000000]"),
        ("lr", "0.1", "a finite number in (0, 1000]"),
        ("seed", -1, "an integer in [0, 4294967295]"),
        ("focus_margin", 0.0, "a finite number in (0, 1000000]"),
        ("batch_size", True, "an integer in [1, 1000000]"),
    ],
)
def test_train_config_checks_every_field_naming_it_its_value_and_range(field, value, allowed):
    with pytest.raises(InputError, match=re.escape(f"TrainConfig: {field} must be {allowed}, got {value!r}")) as e:
        uatlab.TrainConfig(**{field: value})
    assert "--" not in str(e.value)


def test_train_config_checks_choices_and_fields_that_depend_on_each_other():
    with pytest.raises(
        InputError, match="TrainConfig: positional must be one of 'none', 'learned', 'given', got 'rope'"
    ):
        uatlab.TrainConfig(positional="rope")
    with pytest.raises(InputError, match=r"TrainConfig: rank must be at most min\(dim, head_dim\) = 2 .* got 3"):
        uatlab.TrainConfig(dim=8, head_dim=2, rank=3)
    with pytest.raises(InputError, match="TrainConfig: ff_width lists 1 widths for 2 layers"):
        uatlab.TrainConfig(layers=2, ff_width=[4])
    with pytest.raises(InputError, match="TrainConfig: give ff_width or ff_mult"):
        uatlab.TrainConfig(ff_width=None, ff_mult=None)
    import numpy as np

    cfg = uatlab.TrainConfig(epochs=np.int64(3), lr=1, embed_std=0)  # plain numbers; 0 = PyTorch's N(0, 1)
    assert (type(cfg.epochs), type(cfg.lr), cfg.embed_std) == (int, float, None)


def test_train_refuses_a_bad_time_budget_before_touching_the_output(tmp_path):
    cfg = uatlab.TrainConfig(epochs=1, dim=8)
    for bad in (-1, 0, math.nan, "5"):
        with pytest.raises(
            InputError, match=re.escape("train(): max_minutes must be a finite number in (0, 10000000]")
        ):
            uatlab.train(SequenceDataset(TOKENS, LABELS), cfg, tmp_path / "run", progress=False, max_minutes=bad)
    assert not (tmp_path / "run").exists()


def test_cli_train_checks_its_config_before_reading_the_data(tmp_path, capsys):
    from uatlab.cli import main

    assert main(["train", str(tmp_path / "missing.conll"), "--rank", "2", "--head-dim", "1"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--rank must be at most min(dim, head_dim) = 1" in err and "missing" not in err


def test_train_advice_names_arguments_not_cli_flags(tmp_path):
    from uatlab.cli.train import in_flags
    from uatlab.training.checkpoint import CheckpointError

    cfg = uatlab.TrainConfig(epochs=1, dim=8, warmup_steps=0)
    data = SequenceDataset(TOKENS, LABELS)
    uatlab.train(data, cfg, tmp_path / "run", progress=False, with_f1=False)
    with pytest.raises(CheckpointError, match=r"already exists: resume it \(resume=True\), or train into another") as e:
        uatlab.train(data, cfg, tmp_path / "run", progress=False, with_f1=False)
    assert "--" not in str(e.value)
    assert "pass --resume to continue it, or choose another --out" in in_flags(str(e.value))
    other = uatlab.TrainConfig(epochs=1, dim=8, warmup_steps=0, lr=0.5)
    with pytest.raises(CheckpointError, match="was written for a different run .* without resume") as e:
        uatlab.train(data, other, tmp_path / "run", progress=False, with_f1=False, resume=True)
    assert "--" not in str(e.value) and "use another --out or drop --resume" in in_flags(str(e.value))


def test_a_missing_width_in_a_width_list_is_named():
    from uatlab.training import TrainConfig

    with pytest.raises(InputError, match=r"ff_width\[1\] must be a width"):
        TrainConfig(ff_width=[8, None], layers=2, dim=4)


def test_load_and_the_out_check_accept_the_same_model_tags(compiled, tmp_path, monkeypatch):
    """One list, `MODEL_TAGS`, says which files are uatlab models: a tag taken out of it is refused by `load` as
    by compile's check of --out (the two lists had been spelt apart)."""
    from uatlab.models import io

    path = tmp_path / "m.safetensors"
    uatlab.save(compiled.model, path)
    assert uatlab.load(path) is not None
    monkeypatch.setattr(io, "MODEL_TAGS", tuple(t for t in io.MODEL_TAGS if t != io.FORMAT_TAG))
    with pytest.raises(InputError, match="is not a uatlab model file"):
        io.check_replaceable_model(path)
    with pytest.raises(ModelFileError, match="not a uatlab model"):
        uatlab.load(path)


@pytest.fixture
def memory_limit_of():
    """Set the process's memory limit for one test, back to the default afterwards."""
    from uatlab.memory_guard import set_memory_limit

    yield set_memory_limit
    set_memory_limit(None)


def _one_long_sequence(n: int) -> uatlab.SequenceDataset:
    short = [["a", "b"], ["b", "a"]]
    return uatlab.SequenceDataset([*short, [f"w{i % 40}" for i in range(n)]], [["X", "Y"], ["Y", "X"], ["X"] * n])


def test_the_python_api_refuses_a_certificate_or_training_beyond_the_memory_limit(memory_limit_of, tmp_path):
    """compile_memorizer, certify and train state the quadratic memory of the longest sequence and refuse it
    above the limit (as the commands do), naming that sequence; compile_memorizer refuses before compiling."""
    data = _one_long_sequence(300)
    built = uatlab.compile_memorizer(data)  # the default limit: fits
    assert built.certificate.certified
    memory_limit_of("1M")  # 80 bytes × 300² = 6.9 MB for the certificate; training: 48 bytes × 3 per batch × 300²
    with pytest.raises(InputError, match=r"certifying the sequence of 300 tokens at .*:3 would need about 6\.9 MB"):
        uatlab.compile_memorizer(data)
    assert uatlab.compile_memorizer(data, certify=False).certificate is None  # no certificate, nothing refused
    with pytest.raises(
        InputError, match=r"certifying the sequence of 300 tokens at <memory>:3 would need .*above the limit"
    ):
        uatlab.certify(built.model, data)
    cfg = uatlab.TrainConfig(epochs=1, dim=8, layers=1, heads=1, batch_size=4)
    with pytest.raises(InputError, match=r"training would need about 12\.4 MB .*300 tokens, 3 per batch"):
        uatlab.train(data, cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()  # refused before the folder was made
    memory_limit_of("64M")  # raised: both run
    assert uatlab.certify(built.model, data).certified
    assert uatlab.train(data, cfg, tmp_path / "run").summary()["status"]


def test_a_call_checks_every_request_against_the_memory_available_when_it_began(monkeypatch):
    """The default limit is 80 % of the memory available; a call that checks several requests (the certificate,
    chunk by chunk) holds the limit as it was when the call began, so its own allocations do not lower it."""
    import uatlab.memory_guard as guard

    free = iter([1 << 30] + [1 << 20] * 10)  # 1 GB available at the start, 1 MB once the work has begun
    monkeypatch.delenv("UATLAB_MAX_MEMORY", raising=False)
    monkeypatch.setattr(guard, "available_memory", lambda: next(free))
    guard.set_memory_limit(None)
    with guard.limit_as_of_now():
        guard.check_memory(100 << 20, "a request", "a test")  # 100 MB < 0.8 GB: passes twice
        guard.check_memory(100 << 20, "a request", "a test")
    with pytest.raises(InputError, match="above the limit of 819.2 KB"):  # outside: the limit as it is now
        guard.check_memory(100 << 20, "a request", "a test")


def test_certify_and_compile_hold_the_limit_they_began_with(monkeypatch, memory_limit_of):
    """uatlab.certify and compile_memorizer check each chunk against the limit of their start: memory that their
    own work takes (here: the available memory falling to 1 KB after the first reading) does not refuse a
    chunk. Two threads holding limits at once each keep their own, and none is left after."""
    import threading

    import uatlab.memory_guard as guard

    data = _one_long_sequence(300)  # 6.9 MB of bounds
    built = uatlab.compile_memorizer(data)
    monkeypatch.delenv("UATLAB_MAX_MEMORY", raising=False)
    memory_limit_of(None)
    readings = []

    def falling():
        readings.append(1)
        return (1 << 30) if len(readings) == 1 else (1 << 10)

    monkeypatch.setattr(guard, "available_memory", falling)
    # three chunks, three checks: the first reading (1 GB) is the one every check uses
    assert uatlab.certify(built.model, data, chunk_tokens=2).certified  # held 0.8 GB, not 819 bytes
    readings.clear()
    assert uatlab.compile_memorizer(data).certificate.certified
    readings[:] = [1, 1]  # the next reading is 1 KB: a call that holds nothing is refused
    with pytest.raises(InputError, match="above the limit of 819 B"):
        guard.check_memory(7 << 20, "a request", "a test")
    free = {"a": 1 << 30, "b": 2 << 30}  # what each thread finds available
    monkeypatch.setattr(guard, "available_memory", lambda: free[threading.current_thread().name])
    seen, gate = {}, threading.Barrier(2)

    def hold():
        name = threading.current_thread().name
        with guard.limit_as_of_now():
            gate.wait()  # both blocks open at once
            seen[name] = guard.memory_limit()

    threads = [threading.Thread(target=hold, name=n) for n in free]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {n: int(0.8 * f) for n, f in free.items()}  # each its own
    assert guard._held.get() is None and guard._override is None  # and nothing left after


def test_from_lists_reads_iterators_and_generators_once():
    """Validation reads every sequence; an iterator given for the outer list or for a sequence is read into a list
    first, so the data set holds what was given (it held nothing, or failed with "sequence 0 is empty")."""
    data = from_lists(map(str.split, ["Alva Morrow", "said"]), map(str.split, ["B-PER I-PER", "O"]))
    assert data.tokens == [["Alva", "Morrow"], ["said"]] and data.labels == [["B-PER", "I-PER"], ["O"]]
    data = from_lists([iter(["a", 1])], (iter(y) for y in [["O", "X"]]))
    assert data.tokens == [["a", "1"]] and data.labels == [["O", "X"]]


def _next_token_case():
    import numpy as np

    X = np.random.default_rng(0).integers(0, 6, (20, 4))
    y = np.random.default_rng(1).integers(0, 3, 20)
    return X, y


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (
            "labels (N, 1)",
            {},
            r"tokens must be \(N, n\) and labels \(N,\), one label per example; got \(20, 4\) and \(20, 1\)",
        ),
        ("regime", {"regime": "float"}, "regime 'float': choose one of"),
        ("ragged", {}, "token ids must form a rectangular array"),
    ],
)
def test_compile_next_token_names_bad_arguments(args, kwargs, message):
    X, y = _next_token_case()
    tokens, labels = {"labels (N, 1)": (X, y[:, None]), "regime": (X, y), "ragged": ([[1, 2], [1, 2, 3]], [0, 1])}[args]
    with pytest.raises(InputError, match=message):
        uatlab.compile_next_token(tokens, labels, 6, 3, **kwargs)


def test_compile_next_token_with_one_label_is_certified():
    """One label is built as two (as the command line builds a corpus with one distinct next token)."""
    X, y = _next_token_case()
    con = uatlab.compile_next_token(X, 0 * y, 6, 1)
    assert con.certificate.certified_rows == len(y)
    assert (con.model(torch.as_tensor(X)).argmax(-1) == 0).all()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("short labels", r"tokens must be \(N, n\) and labels \(N,\), one label per example; got \(20, 4\) and \(3,\)"),
        ("token ids", r"row 0, position 0: token id 15 is outside \[0, 6\]"),
        ("label ids", r"row 0: label 11 is outside \[0, 3\)"),
        ("fractional", r"token ids must be integers: row 0, position 0 holds 5.5"),
        ("pad inside", r"row 0, position 2: id 6 is the pad id"),
    ],
)
def test_certify_names_a_bad_next_token_data_set(change, message):
    from uatlab.data.next_token import NextTokenData

    X, y = _next_token_case()
    model = uatlab.compile_next_token(X, y, 6, 3).model
    bad = X.copy()
    bad[0, 2] = 6
    tokens, labels = {
        "short labels": (X, y[:3]),
        "token ids": (X + 10, y),
        "label ids": (X, y + 10),
        "fractional": (X + 0.5, y),
        "pad inside": (bad, y),
    }[change]
    data = NextTokenData(tokens, labels, [str(i) for i in range(6)], ["0", "1", "2"], source="hand")
    with pytest.raises(InputError, match="^hand: " + message):
        uatlab.certify(model, data)


def test_compile_seq2seq_deep_reads_2d_arrays_as_rows():
    """Equal-length sentences as one 2-D array are its rows (numpy refused the truth value of the array)."""
    import numpy as np

    X, Y = np.array([[1, 2], [3, 4]]), np.array([[0, 1], [1, 0]])
    con = uatlab.compile_seq2seq_deep(X, Y, 8, 3)
    assert con.certificate.certified
    assert con.model.predict([["1", "2"], ["3", "4"]]) == [["0", "1"], ["1", "0"]]
    with pytest.raises(InputError, match=r"must be lists of id rows \(or 2-D arrays\), got int and ndarray"):
        uatlab.compile_seq2seq_deep(5, Y, 8, 3)


def test_predict_refuses_an_encoding_with_another_number_of_labels(compiled):
    """An argmax past the encoding's label list had no name (IndexError); a shorter list is named as certify names it."""
    import copy

    model = copy.deepcopy(compiled.model)
    model.encoding = uatlab.Encoding.from_json({"tokens": ["a", "b", "c"], "labels": ["X"]})
    with pytest.raises(InputError, match="the model has 2 labels but its encoding lists 1"):
        model.predict([["a", "b"]])
    model.encoding = uatlab.Encoding.from_json({"tokens": ["a", "b", "c"], "labels": ["X", "Y", "Z"]})
    with pytest.raises(InputError, match="the model has 2 labels but its encoding lists 3"):
        model.predict([["a", "b"]])


def test_certificate_margin_names_a_sequence_or_position_out_of_range(compiled):
    cert = uatlab.certify(compiled.model, SequenceDataset(TOKENS, LABELS), keep_margins=True)
    assert cert.margin(2, 2) == cert.margins[2][2] > 0
    for args, message in (
        ((3, 0), "sequence 3: the certificate has sequences 0…2"),
        ((-1, 0), "sequence -1"),
        ((1, 2), "position 2: sequence 1 has positions 0…1"),
        ((0, -1), "position -1"),
    ):
        with pytest.raises(IndexError, match=message):
            cert.margin(*args)


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ({"tokens": ["a"]}, r"needs a list of names under 'labels' \(missing\)"),
        ({"tokens": "ab", "labels": ["X"]}, r"under 'tokens' \(a str\)"),
        (["a"], "is a dict with 'tokens' and 'labels', not a list"),
        ({"tokens": ["a", None], "labels": ["X"]}, "'tokens' entry 1 is None, not a name"),
        ({"tokens": ["a", "a"], "labels": ["X"]}, "'tokens' lists 'a' twice"),
        ({"tokens": ["a"], "labels": ["X"], "unknown_token": "<unk>"}, "'unknown_token' '<unk>' is not one of"),
    ],
)
def test_encoding_from_json_names_what_is_wrong(obj, message):
    with pytest.raises(InputError, match=message):
        uatlab.Encoding.from_json(obj)


def test_encoding_fit_takes_a_data_set():
    with pytest.raises(TypeError, match="Encoding.fit\\(\\) takes a SequenceDataset .* not a list"):
        uatlab.Encoding.fit([["a"]])
    enc = uatlab.Encoding.fit(SequenceDataset(TOKENS, LABELS), unknown_token="<unk>")
    assert enc.id_to_token[:2] == ["<unk>", "a"] and enc.unknown_id == 0


def test_argument_types_are_named_before_any_work(compiled):
    from torch import nn

    data = SequenceDataset(TOKENS, LABELS)
    with pytest.raises(TypeError, match="progress must be None or a callable"):
        uatlab.compile_memorizer(data, progress=3)
    with pytest.raises(TypeError, match=r"predict\(\): max_tokens must be an integer, got 'x'"):
        compiled.model.predict([["a"]], max_tokens="x")
    with pytest.raises(InputError, match=r"max_tokens must be an integer ≥ 1, got 0"):
        compiled.model.predict([["a"]], max_tokens=0)
    with pytest.raises(TypeError, match=r"build_hardmax_counterexample\(\): d must be an integer, got 2.5"):
        uatlab.build_hardmax_counterexample(2.5)
    with pytest.raises(InputError, match="n_heads must be an integer ≥ 1, got 0"):
        uatlab.build_hardmax_counterexample(3, n_heads=0)
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 4))
    with pytest.raises(TypeError, match="takes a ReluNetwork .*ReluNetwork.from_torch.* not a Sequential"):
        uatlab.build_softmax_pooling(net, 4.0)
