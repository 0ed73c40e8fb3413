"""Re-certifying a compiled seq2seq deep memorizer on other data: the certificate's verdict is the forward pass's
(Kajitsuka & Sato, ICLR 2025, sequence-to-sequence memorization, as built by ``uatlab compile --ff deep``)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import uatlab
from uatlab.constructions.paper_c.seq2seq_api import compile_seq2seq_deep
from uatlab.constructions.paper_c.seq2seq_memorizer import prepare
from uatlab.data.dataset import from_lists
from uatlab.errors import InputError

V, C = 6, 3


@pytest.fixture(scope="module", params=["float64", "float32"])
def compiled(request):
    rng = np.random.default_rng(0)
    sents = [rng.integers(0, V, size=int(rng.integers(1, 6))) for _ in range(40)] + [np.arange(V)]
    labels = [rng.integers(0, C, size=len(s)) for s in sents]
    con = compile_seq2seq_deep(sents, labels, V, C, regime=request.param)
    assert con.certificate.certified and con.model.context == 8  # sentences of ≤ 6 tokens: n' = 8
    return con.model


def _predictions(model, sents) -> list[list[int]]:
    with torch.no_grad():
        return [model(torch.tensor([s])).argmax(-1)[0].tolist() for s in sents]


def _certify(model, sents, labels):
    data = from_lists([[str(t) for t in s] for s in sents], [[str(y) for y in row] for row in labels])
    return uatlab.certify(model, data)


@pytest.mark.parametrize("longest", [1, 2, 3, 8])
def test_the_verdict_is_the_forward_passs_on_data_shorter_than_the_context(compiled, longest):
    """Sentences of at most ``longest`` tokens, most of them never seen at compile time: labelled with the forward
    pass's own predictions every token is certified; labelled one class off, none is."""
    model = compiled
    rng = np.random.default_rng(longest)
    sents = [rng.integers(0, V, size=int(rng.integers(1, longest + 1))).tolist() for _ in range(30)]
    pred = _predictions(model, sents)
    same = _certify(model, sents, pred)
    assert same.certified and same.certified_tokens == same.tokens == sum(map(len, sents))
    off = _certify(model, sents, [[(y + 1) % C for y in row] for row in pred])
    assert off.certified_tokens == 0 and not off.certified


def test_a_module_edited_or_cast_after_compiling_is_refused(compiled):
    """The certificate proves the construction the module was built from; a module whose tensors no longer are
    that construction is refused, naming what differs."""
    sents, labels = [[0, 1]], [[0, 0]]
    _certify(compiled, sents, labels)  # the unedited module: no error
    edits = {
        "tensor nu": lambda m: m.nu.__setitem__((slice(None), 0), m.nu[:, 0] + 1),
        "tensor readout_b": lambda m: m.readout_b.zero_(),
        "circuit layer 3": lambda m: m._layers[3][1].add_(1),
        "tensor nu ": lambda m: m.float() if m.dtype == torch.float64 else m.double(),  # buffers cast, layers not
    }
    for what, edit in edits.items():
        model = copy.deepcopy(compiled)
        with torch.no_grad():
            edit(model)
        with pytest.raises(InputError, match=what.strip()):
            _certify(model, sents, labels)


def test_sentences_are_padded_to_the_given_width_or_refused():
    sents, labels = [np.array([1, 2])], [np.array([0, 1])]
    assert prepare(sents, labels, V).ids.shape == (1, 2)
    data = prepare(sents, labels, V, n_pad=8)
    assert data.ids.shape == (1, 8) and (data.ids[0, 2:] == V).all()
    with pytest.raises(InputError, match="2 tokens"):
        prepare([np.array([1, 2])], labels, V, n_pad=1)
