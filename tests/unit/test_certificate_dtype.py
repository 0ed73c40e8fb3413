"""The certificate proves the arithmetic of the model's tensors, not of its config.

``model.float()`` re-types the parameters of a float64 model to float32 and leaves ``config.dtype`` at
'float64'. A certificate that read the config proved such a model with float64 rounding (u = 2^-53), while
PyTorch evaluates it in float32 (u = 2^-24). These tests reproduce that in miniature: "before" is the old
computation, which is exactly a certificate of the same weight values held in float64 tensors.
"""

import copy

import numpy as np
import pytest
import torch
from hand_models import float32_tie_model

from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset
from uatlab.data import from_lists
from uatlab.data.synthetic import synthetic_dataset
from uatlab.errors import InputError
from uatlab.models import Transformer, TransformerConfig
from uatlab.verify.certificate import certify, parameter_dtype


def torch_predictions(model: Transformer, data) -> tuple[np.ndarray, np.ndarray]:
    ids = np.stack(model.encoding.encode_tokens(data))  # (N, n): the synthetic sequences share one length
    ys = np.stack(model.encoding.encode_labels(data))
    with torch.no_grad():
        pred = model(torch.from_numpy(ids)).argmax(-1).numpy()
    return pred, ys


def test_float_on_a_compiled_float64_model_is_certified_in_float32():
    # 400 sequences of 12 tokens over 4 words, 3 labels: the float64 compile relies on ~27 bits of h, more
    # than float32 holds, so PyTorch's float32 forward of model.float() gets hundreds of tokens wrong
    data = synthetic_dataset(400, 12, 4, 3, seed=0)
    m64 = compile_dataset(data, dtype="float64", run_certificate=False).model
    m32 = copy.deepcopy(m64).float()
    assert m32.config.dtype == "float64" and parameter_dtype(m32) == "float32"  # the trap: a stale config
    pred, ys = torch_predictions(m32, data)
    wrong = pred != ys
    assert wrong.sum() > 0  # the premise: the float32 run really misclassifies tokens
    rows = np.flatnonzero(wrong.any(axis=1))  # certify the sequences that hold a misclassified token
    data, wrong = data.subset(rows), wrong[rows]

    # before: the same weight values proven with float64 rounding (what certify did for m32)
    before = certify(copy.deepcopy(m32).double(), data)
    before_ok = np.stack(before.margins) > 0
    assert before.dtype == "float64"
    assert (before_ok & wrong).sum() > 0  # tokens "proven" that PyTorch's own forward misclassifies

    # after: proven in the tensors' dtype; no certified token is misclassified by PyTorch
    after = certify(m32, data)
    after_ok = np.stack(after.margins) > 0
    assert after.dtype == "float32" and after.config_dtype == "float64"
    assert (after_ok & wrong).sum() == 0
    assert after.certified_tokens < before.certified_tokens and not after.certified


def test_minimal_float32_rounding_case():
    # L_B = 1 + 2^-25 and L_A = 1 exactly; float32 rounds L_B to 1 (a tie: argmax picks A, the wrong label).
    model = float32_tie_model()
    data = from_lists([["a"]], [["B"]])
    enc = {"tokens": ["a"], "labels": ["A", "B"]}
    assert certify(model, data, encoding=enc).certified_tokens == 1  # float64: proven, and right
    model.float()
    with torch.no_grad():
        assert int(model(torch.zeros(1, 1, dtype=torch.int64)).argmax(-1)) == 0  # float32 run: wrong label
    cert = certify(model, data, encoding=enc)
    assert cert.dtype == "float32" and cert.certified_tokens == 0 and not cert.certified
    assert cert.margin(0, 0) < 0


def test_mixed_dtypes_are_refused_with_the_parameter_named():
    cfg = TransformerConfig(d_model=2, n_layers=0, vocab_size=1, num_labels=2, max_len=4, positional="none")
    model = Transformer(cfg)
    model.readout.double()
    with pytest.raises(InputError, match=r"mixes parameter dtypes .*readout\.(weight|bias) is float64"):
        certify(model, from_lists([["a"]], [["B"]]), encoding={"tokens": ["a"], "labels": ["A", "B"]})
    model.half()
    with pytest.raises(InputError, match=r"is not float32 or float64 \(.* is float16\)"):
        parameter_dtype(model)
