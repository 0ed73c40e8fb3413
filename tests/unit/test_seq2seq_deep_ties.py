"""The --ff deep certificate (Kajitsuka & Sato, ICLR 2025) counts tied majority labels as the main certificate
does: per distinct input, the tokens whose label is the prediction, against the count of its majority label, so
the same multiset of examples certifies in any order."""

from __future__ import annotations

import json

import numpy as np
import pytest

from uatlab.cli import main
from uatlab.constructions.paper_c.seq2seq_memorizer import compile_seq2seq, prepare
from uatlab.verify.seq2seq_deep import certify_seq2seq

# "x" at position 0 of "x y" is labelled A once and B once: a tie, the ceiling counts one of the two
TIED = [[("x", "A"), ("y", "O")], [("x", "B"), ("y", "O")], [("z", "A"), ("x", "O")]]


def _write(path, sentences):
    path.write_text("\n\n".join("\n".join(f"{w} {y}" for w, y in s) for s in sentences) + "\n")


@pytest.mark.parametrize("order", [(0, 1, 2), (1, 0, 2)])
def test_tied_labels_certify_in_either_order_from_the_cli(tmp_path, capsys, order):
    compiled, other = tmp_path / "compiled.txt", tmp_path / "other.txt"
    _write(compiled, [TIED[i] for i in order])
    _write(other, [TIED[i] for i in (order[1], order[0], order[2])])  # the first two swapped
    model = tmp_path / "m.safetensors"
    assert main(["compile", "--ff", "deep", str(compiled), "--format", "conll", "--out", str(model), "--json"]) == 0
    fig = json.loads(capsys.readouterr().out)
    assert fig["certified"] is True and fig["certified_tokens"] == fig["ceiling_tokens"] == 5
    for data in (compiled, other):
        assert main(["certify", str(model), str(data), "--format", "conll", "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["certified"] is True, (data.name, out["reason"])
        assert out["certified_tokens"] == out["ceiling_tokens"] == 5 and out["tokens"] == 6


def test_every_order_of_random_ties_certifies_the_same():
    """Sentences repeated with tied labels: certifying any permutation gives the same counts and certifies."""
    rng = np.random.default_rng(3)
    sents = [rng.integers(0, 6, size=int(rng.integers(1, 5))) for _ in range(12)]
    labs = [rng.integers(0, 3, size=len(s)) for s in sents]
    sents += [s.copy() for s in sents]  # each sentence twice, a fresh label draw: many two-way ties
    labs += [rng.integers(0, 3, size=len(s)) for s in sents[:12]]
    memo, data, _ = compile_seq2seq(sents, labs, 6, 3)
    base = certify_seq2seq(memo, data)
    assert base.certified and base.certified_tokens == base.ceiling_tokens < sum(len(s) for s in sents)
    for seed in range(6):
        perm = np.random.default_rng(seed).permutation(len(sents))
        cert = certify_seq2seq(memo, prepare([sents[i] for i in perm], [labs[i] for i in perm], 6, n_pad=memo.context))
        assert cert.certified, (seed, cert.reason)
        assert (cert.ceiling_tokens, cert.certified_tokens) == (base.ceiling_tokens, base.certified_tokens)
