"""The Python API on wrong arguments: a TypeError or InputError naming what was expected, never an
AttributeError from deep inside, and no silent truncation of token ids."""

from __future__ import annotations

import numpy as np
import pytest

import uatlab
from uatlab.data.dataset import SequenceDataset
from uatlab.errors import InputError

TOKENS = [["a", "b", "c"], ["b", "a"], ["c", "c", "a"]]
LABELS = [["X", "Y", "X"], ["Y", "Y"], ["X", "X", "Y"]]


@pytest.fixture(scope="module")
def compiled():
    return uatlab.compile_memorizer(SequenceDataset(TOKENS, LABELS))


def test_certify_reads_paths_for_model_and_data(compiled, tmp_path):
    from uatlab.data.jsonl import write_jsonl

    ds = SequenceDataset(TOKENS, LABELS)
    model_path, data_path = tmp_path / "m.safetensors", tmp_path / "d.jsonl"
    uatlab.save(compiled.model, model_path)
    write_jsonl(ds, data_path)
    for model, data in [(compiled.model, str(data_path)), (str(model_path), ds), (model_path, data_path)]:
        cert = uatlab.certify(model, data)
        assert cert.certified and cert.ceiling_tokens == sum(len(t) for t in TOKENS)


def test_certify_names_the_expected_types(compiled):
    with pytest.raises(TypeError, match="certify\\(\\) takes a uatlab.SequenceDataset .* not a list"):
        uatlab.certify(compiled.model, TOKENS)
    with pytest.raises(TypeError, match="certify\\(\\) takes a uatlab Transformer.* not a NoneType"):
        uatlab.certify(None, SequenceDataset(TOKENS, LABELS))


@pytest.mark.parametrize("chunk", [0, -1, 2.5])
def test_certify_refuses_a_chunk_size_below_one(compiled, chunk):
    with pytest.raises(InputError, match="chunk_tokens must be an integer ≥ 1"):
        uatlab.certify(compiled.model, SequenceDataset(TOKENS, LABELS), chunk_tokens=chunk)


def test_compile_memorizer_argument_errors(tmp_path):
    with pytest.raises(TypeError, match="compile_memorizer\\(\\) takes a uatlab.SequenceDataset.* not a list"):
        uatlab.compile_memorizer([["a", "b"]])
    with pytest.raises(InputError, match="compile_seq2seq_deep"):
        uatlab.compile_memorizer(SequenceDataset(TOKENS, LABELS), ff="deep")
    from uatlab.data.jsonl import write_jsonl

    write_jsonl(SequenceDataset(TOKENS, LABELS), tmp_path / "d.jsonl")
    assert uatlab.compile_memorizer(str(tmp_path / "d.jsonl")).certificate.certified


def test_compile_next_token_refuses_fractional_ids_and_pads_after_a_token():
    tok = np.array([[0, 1, 2], [1, 2, 0], [2, 0, 1]])
    lab = np.array([0, 1, 2])
    with pytest.raises(InputError, match=r"token ids must be integers: row 0, position 0 holds 0\.5"):
        uatlab.compile_next_token(tok + 0.5, lab, V=3, C=3)
    with pytest.raises(InputError, match=r"label ids must be integers: row 2 holds 1\.5"):
        uatlab.compile_next_token(tok, np.array([0, 1, 1.5]), V=3, C=3)
    with pytest.raises(InputError, match=r"row 0, position 2: id 2 is the pad id \(V = 2\)"):
        uatlab.compile_next_token(tok, lab, V=2, C=3)
    # integral floats and left padding are fine, and the padded rows are certified
    padded = np.array([[2, 0, 1], [2, 2, 1], [0, 1, 1]])
    built = uatlab.compile_next_token(padded.astype(float), lab, V=2, C=3)
    assert built.certificate.certified


@pytest.mark.parametrize("bad", ["5", True, None, [5]])
def test_certify_refuses_an_exp_ulps_that_is_not_a_real_number(compiled, bad):
    with pytest.raises(TypeError, match=r"exp_ulps .*must be a real number, got .*\(" + type(bad).__name__):
        uatlab.certify(compiled.model, SequenceDataset(TOKENS, LABELS), exp_ulps=bad)


@pytest.mark.parametrize("ff", ["knots", "ramps"])
def test_a_too_small_d_model_is_named_as_the_python_parameter(ff):
    """The library's error names ``d_model`` (what the caller wrote), not the command line's ``--dim``; it
    survives a process pool's pickling with its figures."""
    import pickle

    from uatlab.errors import DimensionTooSmallError

    data = SequenceDataset(TOKENS, LABELS)
    needed = uatlab.compile_memorizer(data, ff=ff, certify=False).model.config.d_model
    with pytest.raises(DimensionTooSmallError) as info:
        uatlab.compile_memorizer(data, ff=ff, d_model=needed - 1, certify=False)
    err = info.value
    assert str(err).startswith(f"d_model {needed - 1} is too small: this data needs d ≥ ")
    assert "--dim" not in str(err) and err.given == needed - 1 and err.needed <= needed
    back = pickle.loads(pickle.dumps(err))
    assert str(back) == str(err) and back.needed == err.needed
    assert str(err.named("--dim")).startswith(f"--dim {needed - 1} is too small")


def _theorem2(**kw):
    from uatlab.constructions.paper_a.thm2_contextual_mapping import build_theorem2_layer

    args = {"vocabulary": np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]), "n": 2, "eps": 0.5, "r_min": 0.5}
    return build_theorem2_layer(**(args | {"r_max": 2.0} | kw))


def _truncated(**kw):
    from uatlab.constructions.paper_b.thm3_truncated_linear import build_truncated_linear_attention

    return build_truncated_linear_attention(np.array([1.0]), 0.0, **({"a": -1.0, "b": 1.0, "anchors": 9} | kw))


def _incontext(*args):
    from uatlab.constructions.paper_b.appB_incontext_gd import build_incontext_gd

    return build_incontext_gd(*args)


def _universal(**kw):
    from uatlab.constructions.paper_a.prop1_universal_approximator import build_universal_approximator

    return build_universal_approximator(lambda x: x, (0.0, 1.0), **({"grid": 2, "n": 2, "d": 1} | kw))


def _relu(**kw):
    from uatlab.constructions.paper_b.lem3_11_relu_network import ReluNetwork, compile_relu_network

    net = ReluNetwork(W1=np.array([[1.0]]), b1=np.array([0.0]), W2=np.array([[1.0]]), b2=np.array([0.0]), n=1, d=1)
    return compile_relu_network(net, domain=(0.0, 1.0), **kw)


def _from_lists(tokens, labels):
    from uatlab.data.dataset import from_lists

    return from_lists(tokens, labels)


def _next_token(V, C):
    return uatlab.compile_next_token(np.array([[0, 1]]), np.array([0]), V=V, C=C)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: _theorem2(seed=-1), InputError, r"build_theorem2_layer\(\): seed must be an integer ≥ 0, got -1"),
        (lambda: _theorem2(max_tries=0), InputError, r"max_tries must be an integer ≥ 1, got 0"),
        (lambda: _theorem2(eps="0.5"), TypeError, r"eps must be a number, got '0.5' \(str\)"),
        (lambda: _theorem2(n=2.5), TypeError, r"sequence length n must be an integer, got 2.5 \(float\)"),
        (lambda: _truncated(anchors=2.5), TypeError, r"anchors per head must be an integer, got 2.5"),
        (lambda: _truncated(heads=1.5), TypeError, r"heads must be an integer, got 1.5"),
        (lambda: _truncated(n_tokens=9.5), TypeError, r"n_tokens must be an integer, got 9.5"),
        (lambda: _incontext(2.5, 5), TypeError, r"build_incontext_gd\(\): d must be an integer, got 2.5"),
        (lambda: _incontext(2, 2.5), TypeError, r"build_incontext_gd\(\): context must be an integer, got 2.5"),
        (lambda: _universal(grid=2.5), TypeError, r"grid must be an integer, got 2.5"),
        (lambda: _relu(anchors=2.5), TypeError, r"anchors must be an integer, got 2.5"),
        (lambda: _relu(anchors="9"), TypeError, r"anchors must be an integer, got '9'"),
        (lambda: _next_token(0, 2), InputError, r"V \(the vocabulary size, also the pad id\) must be an integer ≥ 1"),
        (lambda: _next_token(2, 0), InputError, r"C \(the number of labels\) must be an integer ≥ 1, got 0"),
        (lambda: _from_lists(None, None), TypeError, r"tokens must be a list of sequences, not a NoneType"),
        (lambda: _from_lists([None], [["X"]]), InputError, r"sequence 0: tokens must be a list of items"),
    ],
)
def test_builders_name_a_bad_argument_and_never_truncate_a_fraction(call, error, message):
    """Each builder refuses a fractional count, a string for a number or an out-of-range value naming the
    parameter (before, some were truncated silently or failed deep inside numpy or torch)."""
    with pytest.raises(error, match=message):
        call()


def test_certify_and_save_name_a_wrong_progress_or_encoding(compiled, tmp_path):
    with pytest.raises(TypeError, match=r"progress must be a callable \(done, total\) or None, not a int"):
        uatlab.certify(compiled.model, SequenceDataset(TOKENS, LABELS), progress=5)
    with pytest.raises(TypeError, match=r"save\(\): encoding must be a uatlab.data.Encoding \(or None\), not a str"):
        uatlab.save(compiled.model, tmp_path / "m.safetensors", encoding="x")
    assert not (tmp_path / "m.safetensors").exists()


def test_a_seq2seq_deep_model_is_saved_with_its_encoding_as_json(tmp_path):
    """The deep memorizer's file takes an Encoding or its JSON (the Transformer's check of the type applies to
    Transformers only)."""

    built = uatlab.compile_seq2seq_deep(
        [np.array([1, 0]), np.array([0, 2])], [np.array([0, 1]), np.array([1, 1])], V=3, C=2
    )
    enc = uatlab.Encoding.of_ids(3, 2)
    for i, given in enumerate((enc, enc.to_json())):
        path = uatlab.save(built.model, tmp_path / f"d{i}.safetensors", encoding=given)
        assert uatlab.load(path).encoding.token_to_id == enc.token_to_id
    with pytest.raises(InputError, match=r"save: an encoding's JSON needs a list of names under 'tokens' \(missing\)"):
        uatlab.save(built.model, tmp_path / "bad.safetensors", encoding={"x": 1})
    nt = uatlab.compile_next_token(np.array([[0, 1], [1, 0]]), np.array([0, 1]), V=2, C=2)
    with pytest.raises(TypeError, match="a next-token memorizer stores token_vocab and label_vocab, not an encoding"):
        uatlab.save(nt.model, tmp_path / "nt.safetensors", encoding=enc)
    assert not (tmp_path / "bad.safetensors").exists() and not (tmp_path / "nt.safetensors").exists()


@pytest.mark.parametrize(
    ("dtype", "advice"), [("float64", "use a larger eps"), ("float32", "use float64 or a larger eps")]
)
def test_a_too_small_eps_of_the_in_context_construction_gets_advice_that_applies(dtype, advice):
    """float64 runs are told the smallest eps they accept (advice to use float64 fit only float32), and that eps
    is accepted."""
    import re

    from uatlab.constructions.paper_b.appB_incontext_gd import build_incontext_gd
    from uatlab.errors import PrecisionError

    with pytest.raises(PrecisionError, match=rf"; {advice} \(at least ([0-9.e+-]+) in {dtype}\)$") as info:
        build_incontext_gd(2, 4, eps=1e-30, dtype=dtype)
    least = float(re.search(r"at least ([0-9.e+-]+) in", str(info.value)).group(1))
    assert build_incontext_gd(2, 4, eps=least, dtype=dtype).model is not None  # the value printed is accepted
