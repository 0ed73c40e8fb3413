"""What the next-token certificate (Kajitsuka & Sato, ICLR 2025) relies on is checked, not assumed.

A file whose token-position table, regime or label vocabulary was edited, a memorizer edited in memory, data
the model cannot run and a module whose tensors no longer match its construction are refused with a clear
error, where the certificate used to say "certified" while the forward pass predicts another label.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

import uatlab
from uatlab.cli import main
from uatlab.constructions.paper_c.api import compile_next_token
from uatlab.data.dataset import from_lists
from uatlab.data.next_token import NextTokenData
from uatlab.errors import InputError, ModelFileError
from uatlab.verify.next_token import certify_next_token

V, C, N_TOK = 8, 4, 3  # n = 3 tokens, so n' = 4 and position 0 is always a left pad


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    return rng.integers(0, V, size=(30, N_TOK)), rng.integers(0, C, size=30)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, data):
    """A float64 memorizer of ``data`` saved with uatlab.save, and the data as JSONL (ids as strings)."""
    tokens, labels = data
    folder = tmp_path_factory.mktemp("ntsound")
    con = compile_next_token(tokens, labels, V, C, regime="float64")
    assert con.certificate.certified
    uatlab.save(con.model, folder / "m.safetensors")
    with (folder / "d.jsonl").open("w", encoding="utf-8") as fh:
        for t, y in zip(tokens.tolist(), labels.tolist(), strict=True):
            fh.write(json.dumps({"tokens": [str(v) for v in t], "label": str(y)}) + "\n")
    return folder


def _tamper(folder, name, edit) -> str:
    """A copy of m.safetensors with ``edit(nu (n', V+1) int64, header dict)`` applied."""
    with safe_open(str(folder / "m.safetensors"), framework="pt") as f:
        meta = dict(f.metadata())
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    header = json.loads(meta["uatlab_next_token"])
    nu = tensors["nu"].clone().view(header["layout"]["n_pad"], header["V"] + 1)
    edit(nu, header)
    tensors["nu"] = nu.reshape(-1).contiguous()
    meta["uatlab_next_token"] = json.dumps(header)
    save_file(tensors, str(folder / name), metadata=meta)
    return name


def _shift(nu, header):  # ν ± 2^60 at two real positions: h unchanged, float64 partial sums rounded
    nu[4 - N_TOK, :V] += 2**60
    nu[5 - N_TOK, :V] -= 2**60


def _pad(nu, header):  # the forward pass sums the left pad at position 0, the certificate skipped it
    nu[0, V] = 12345


def _big(nu, header):
    nu[1, 2] = header["layout"]["value_range"]


def _regime(nu, header):  # an unknown regime made the certificate skip every floating-point check
    header["layout"]["regime"] = "float16"


def _labels(nu, header):  # a readout of 2 classes with 4 label names: label 3 was "proven"
    header["layout"]["C"] = 2
    header["label_vocab"] = [str(c) for c in range(C)]


def _n(nu, header):
    header["n"] = 7


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_shift, r"table nu\[\d, \d\] = -\d+ is outside \[0, value_range"),
        (_pad, rf"table nu\[0, {V}\] = 12345: the pad token's column must be 0"),
        (_big, r"table nu\[1, 2\] = \d+ is outside \[0, value_range = \d+\)"),
        (_regime, r"layout.regime 'float16' is not one of"),
        (_labels, r"label_vocab lists 4 entries, .* C = 2 classes"),
        (_n, r"n = 7 and layout.n_pad = 4 disagree"),
    ],
)
def test_cli_certify_refuses_a_tampered_next_token_file(saved, monkeypatch, capsys, edit, message):
    monkeypatch.chdir(saved)
    name = _tamper(saved, f"{edit.__name__}.safetensors", edit)
    capsys.readouterr()
    assert main(["certify", name, "d.jsonl", "--json"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {name}: ") and captured.out == ""
    assert re.search(message, err[0]), err[0]
    with pytest.raises(ModelFileError, match=name):
        uatlab.load(name)


def test_tampered_file_refused_by_the_real_cli_process_without_traceback(saved):
    name = _tamper(saved, "pad_proc.safetensors", _pad)
    proc = subprocess.run(
        [sys.executable, "-m", "uatlab", "certify", name, "d.jsonl"], cwd=saved, capture_output=True, text=True
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"error: {name}: table nu[0, {V}] = 12345: the pad token's column must be 0"
    ]


def test_cli_certify_with_no_label_the_model_outputs_is_one_error_line(saved, monkeypatch, capsys):
    monkeypatch.chdir(saved)
    (saved / "u.jsonl").write_text('{"tokens": ["1", "2"], "label": "zebra"}\n', encoding="utf-8")
    capsys.readouterr()
    assert main(["certify", "m.safetensors", "u.jsonl"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: u.jsonl:1: label 'zebra' is not one the model outputs, nor is any other example's"
    ]


def _memo(data):
    tokens, labels = data
    return compile_next_token(tokens, labels, V, C, regime="float64", certify=False).detail


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("shift", r"nu\[\d, \d\] = -\d+ is negative"),
        ("pad", rf"nu\[0, {V}\] = 12345: the pad token's column must be 0"),
        ("regime", r"regime 'float16' is not one of"),
        ("classes", r"row \d+: label [23] is outside \[0, 2\) \(the readout has C = 2"),
    ],
)
def test_certify_next_token_refuses_an_edited_memorizer(data, edit, message):
    tokens, labels = data
    memo = _memo(data)
    assert certify_next_token(memo, tokens, labels).certified  # the unedited memorizer is certified
    if edit == "shift":
        for t in range(V):
            memo.nu[4 - N_TOK][t] += 2**60
            memo.nu[5 - N_TOK][t] -= 2**60
    elif edit == "pad":
        memo.nu[0][V] = 12345
    elif edit == "regime":
        memo.layout = dataclasses.replace(memo.layout, regime="float16")
    else:
        memo.layout = dataclasses.replace(memo.layout, C=2)
    with pytest.raises(InputError, match=message):
        certify_next_token(memo, tokens, labels)


@pytest.mark.parametrize(
    ("tokens", "labels", "message"),
    [
        ([[0, 1, V + 3]], [0], rf"row 0, position 2: token id {V + 3} is outside \[0, {V}\]"),
        ([[0, 1, -1]], [0], r"row 0, position 2: token id -1 is outside"),
        # a fractional id is refused, not truncated to 1: the certificate would speak of another window
        ([[0, 1.5, 2]], [0], r"token ids must be integers: row 0, position 1 holds 1\.5"),
        ([[0, 1, 2]], [0.5], r"label ids must be integers: row 0 holds 0\.5"),
        ([[0, 1, 2.0**64]], [0], r"token ids must fit in int64: row 0, position 2 holds"),
        ([[0, 1, 2, 3, 4, 5]], None, r"windows of 6 tokens, the model's context is n' = 4"),
        ([[0, 1, 2]], [C], rf"row 0: label {C} is outside \[0, {C}\)"),
        ([[0, 1, 2]], [-1], r"row 0: label -1 is outside"),
        (np.zeros((0, N_TOK), dtype=np.int64), np.zeros(0, dtype=np.int64), "no rows: tokens of shape"),
    ],
)
def test_certify_next_token_refuses_data_the_model_cannot_run(data, tokens, labels, message):
    memo = _memo(data)
    if labels is None:  # the label the exact arithmetic would "prove" for a window wider than n'
        labels = [int(memo.predict_exact(np.asarray(tokens))[0]) % C]
    with pytest.raises(InputError, match=message):
        certify_next_token(memo, np.asarray(tokens), np.asarray(labels))


def _dataset(data) -> NextTokenData:
    tokens, labels = data
    return NextTokenData(tokens, labels, [str(i) for i in range(V)], [str(c) for c in range(C)], "mem")


@pytest.mark.parametrize("regime", ["float64", "float32", "exact"])
def test_uatlab_certify_dispatches_a_next_token_module(data, regime):
    tokens, labels = data
    model = compile_next_token(tokens, labels, V, C, regime=regime, certify=False).model
    cert = uatlab.certify(model, _dataset(data))
    assert cert.certified and cert.correct_rows == cert.ceiling_rows == len(labels) and cert.regime == regime
    wrong = _dataset(data)
    wrong.labels = (labels + 1) % C
    cert = uatlab.certify(model, wrong)
    assert not cert.certified and cert.correct_rows == 0
    per_token = from_lists([[str(v) for v in t] for t in tokens.tolist()], [[str(y)] * N_TOK for y in labels])
    with pytest.raises(InputError, match="certify_next_token"):
        uatlab.certify(model, per_token)


def _nu_edit(m):
    m.nu[:, 0] += 1


def _readout_edit(m):
    m.readout_b[:] = 0


def _layer_edit(m):
    m._layers[3][2][0] += 1


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_nu_edit, "tensor nu "),
        (_readout_edit, "tensor readout_b "),
        (_layer_edit, "tensor circuit layer 3 weights "),
        (lambda m: m.float(), r"tensor nu \(torch.float32"),
    ],
)
def test_uatlab_certify_reads_the_module_tensors_not_only_its_construction(data, edit, message):
    tokens, labels = data
    model = compile_next_token(tokens, labels, V, C, regime="float64", certify=False).model
    assert uatlab.certify(model, _dataset(data)).certified
    with torch.no_grad():
        edit(model)
    with pytest.raises(InputError, match=message):
        uatlab.certify(model, _dataset(data))
