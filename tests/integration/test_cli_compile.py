"""``uatlab compile / certify / synth`` end to end on fixtures made here: figures, files, clear errors."""

from __future__ import annotations

import json
import random
from collections import Counter

import numpy as np
import pytest
import torch
from conll_fixture import CONLL as CONLL_THREE_SENTENCES
from key_collision import rolling_hash_collision
from safetensors import safe_open

from uatlab.cli import main
from uatlab.constructions.paper_a.cor1_memorizer import compile_memorizer
from uatlab.data.information import label_information
from uatlab.data.jsonl import read_sequences
from uatlab.data.keys import input_keys
from uatlab.models.io import load

CONLL = (
    CONLL_THREE_SENTENCES
    + """
Alva NNP B-NP B-PER
Kestrel NNP I-NP I-PER

Alva NNP B-NP B-PER
Kestrel NNP I-NP B-PER
"""
)

CONTRACT = [
    "sequences",
    "tokens",
    "conflict_tokens",
    "ceiling_tokens",
    "correct_tokens",
    "certified",
    "certified_fraction",
    "min_certified_margin",
    "params_total",
    "params_non_embedding",
    "paper_a_param_count",
    "ff_width",
    "max_abs_weight",
    "dtype",
    "seconds",
]


def _run(capsys, args, code=0):
    got = main(args)
    cap = capsys.readouterr()
    assert got == code, cap.out + cap.err
    return cap


def _json(capsys, args):
    return json.loads(_run(capsys, args + ["--json"]).out)


@pytest.fixture
def conll(tmp_path):
    path = tmp_path / "tiny.conll"
    path.write_text(CONLL)
    return path


def test_compile_conll_prints_contract_and_lists_conflict(capsys, tmp_path, conll):
    out = tmp_path / "m.safetensors"
    fig = _json(capsys, ["compile", str(conll), "--out", str(out)])
    assert all(k in fig for k in CONTRACT)
    assert fig["sequences"] == 5 and fig["tokens"] == 13
    # 'Kestrel' after 'Alva' is I-PER twice and B-PER once in identical sentences: one conflict token
    assert fig["conflict_tokens"] == 1 and fig["ceiling_tokens"] == 12
    (conf,) = fig["conflicts"]
    assert conf["token"] == "Kestrel" and conf["majority"] == "I-PER"
    assert fig["certified"] is True and fig["correct_tokens"] == 12 and fig["certified_fraction"] == 1.0
    assert fig["dtype"] == "float64" and out.is_file() and fig["model_file_bytes"] == out.stat().st_size
    # certify the saved model on the same data: same verdict
    cert = _json(capsys, ["certify", str(out), str(conll)])
    assert cert["certified"] is True and cert["certified_tokens"] == 12 and cert["conflict_tokens"] == 1


def test_compile_tables_and_progress(capsys, tmp_path, conll):
    cap = _run(capsys, ["compile", str(conll), "--out", str(tmp_path / "m.safetensors")])
    for word in ("certified", "params_non_embedding", "conflict", "time per stage", "smallest certified margin"):
        assert word in cap.out


def test_synth_then_compile_causal_float32(capsys, tmp_path):
    data = tmp_path / "s.jsonl"
    syn = _json(capsys, ["synth", str(data), "-N", "60", "-n", "6", "-V", "15", "-C", "3", "--seed", "2"])
    assert syn["tokens"] == 360 and data.is_file()
    fig = _json(capsys, ["compile", str(data), "--causal", "--out", str(tmp_path / "c.safetensors")])
    assert fig["causal"] is True and fig["certified"] is True
    f32 = _json(capsys, ["compile", str(data), "--dtype", "float32", "--out", str(tmp_path / "f.safetensors")])
    assert f32["dtype"] == "float32" and f32["exp_ulps"] == 5.0 and f32["environment"]["ok"] is True
    assert f32["certified"] is True and f32["certified_fraction"] == 1.0
    assert f32["certified_tokens"] == f32["ceiling_tokens"] and "note" not in f32


def _timeless(value):
    """``value`` (JSON) without its wall-clock figures (seconds, load average): what a rerun can change."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if "seconds" not in k and not k.startswith("load_average")}
    return [_timeless(v) for v in value] if isinstance(value, list) else value


def test_synth_record_changes_nothing_compile_and_certify_read(capsys, tmp_path, monkeypatch):
    # line 1 of synth's output holds the "synth" record of its options: the same file without it (as an older synth
    # wrote it), under the same name, compiles to the same model and certifies to the same figures
    monkeypatch.chdir(tmp_path)
    models, certs = [], []
    for folder in ("with", "without"):
        (tmp_path / folder).mkdir()
        monkeypatch.chdir(tmp_path / folder)
        _json(capsys, ["synth", "d.jsonl", "-N", "30", "-n", "5", "-V", "12", "-C", "3", "--seed", "6"])
        lines = (tmp_path / folder / "d.jsonl").read_text().splitlines(keepends=True)
        first = json.loads(lines[0])
        assert first.pop("synth")["seed"] == 6
        if folder == "without":
            (tmp_path / folder / "d.jsonl").write_text(json.dumps(first) + "\n" + "".join(lines[1:]))
        _json(capsys, ["compile", "d.jsonl", "--causal", "--out", "m.safetensors"])
        with safe_open("m.safetensors", "pt") as f:
            meta = {k: json.loads(v) if v.startswith("{") else v for k, v in f.metadata().items()}
            models.append((_timeless(meta), {k: f.get_tensor(k) for k in f.keys()}))
        certs.append(_timeless(_json(capsys, ["certify", "m.safetensors", "d.jsonl"])))
    assert models[0][0] == models[1][0] and certs[0] == certs[1]
    assert models[0][1].keys() == models[1][1].keys()
    assert all(torch.equal(models[0][1][k], models[1][1][k]) for k in models[0][1])


def test_malformed_line_checkpoint_and_resume(capsys, tmp_path):
    good = "".join(f"w{i} O\nv{i} B-X\n\n" for i in range(30))
    path = tmp_path / "bad.conll"
    path.write_text(good + "broken\n")
    out = tmp_path / "m.safetensors"
    cap = _run(capsys, ["compile", str(path), "--out", str(out), "--chunk-tokens", "16"], code=2)
    assert f"{path}:91" in cap.err and "--resume" in cap.err
    work = tmp_path / "m.safetensors.work"
    manifest = json.loads((work / "manifest.json").read_text())
    assert manifest["sequences"] == 30 and manifest["tokens"] == 60 and len(manifest["chunks"]) == 4
    path.write_text(good + "fixed O\n")
    fig = _json(capsys, ["compile", str(path), "--out", str(out), "--resume", "--chunk-tokens", "16"])
    assert fig["sequences"] == 31 and fig["certified"] is True and not work.exists()
    assert fig["buckets"] == 4  # 61 tokens in buckets of ≤ 16 words' worth
    # out of core or not, resumed or not: the same model, bit for bit
    whole = tmp_path / "whole.safetensors"
    _json(capsys, ["compile", str(path), "--out", str(whole)])
    a, b = safe_open(str(out), "pt"), safe_open(str(whole), "pt")
    assert sorted(a.keys()) == sorted(b.keys())
    for k in a.keys():
        assert torch.equal(a.get_tensor(k), b.get_tensor(k)), k


def test_bad_inputs_are_clear_errors(capsys, tmp_path, conll):
    ragged = tmp_path / "r.jsonl"
    ragged.write_text('{"tokens": ["a", "b"], "labels": ["X"]}\n')
    assert "ragged" in _run(capsys, ["compile", str(ragged), "--out", str(tmp_path / "x.safetensors")], 2).err
    empty = tmp_path / "e.jsonl"
    empty.write_text('{"tokens": [], "labels": []}\n')
    assert "empty" in _run(capsys, ["compile", str(empty), "--out", str(tmp_path / "x.safetensors")], 2).err
    model = tmp_path / "m.safetensors"
    _run(capsys, ["compile", str(conll), "--out", str(model), "--json"])
    unknown = tmp_path / "u.conll"
    unknown.write_text("Zorbia NNP B-NP B-ORG\nzebra NN I-NP O\n")
    err = _run(capsys, ["certify", str(model), str(unknown)], 2).err
    assert "zebra" in err and "position 1" in err
    badlab = tmp_path / "l.conll"
    badlab.write_text("Zorbia NNP B-NP B-FOO\n")
    assert "B-FOO" in _run(capsys, ["certify", str(model), str(badlab)], 2).err
    notmodel = tmp_path / "n.safetensors"
    notmodel.write_bytes(b"not a model at all")
    assert "not a readable safetensors" in _run(capsys, ["certify", str(notmodel), str(conll)], 2).err
    truncated = tmp_path / "t.safetensors"
    truncated.write_bytes(model.read_bytes()[:-100])
    assert "error" in _run(capsys, ["certify", str(truncated), str(conll)], 2).err
    assert "float64 or float32" in _run(capsys, ["compile", str(conll), "--dtype", "half"], 2).err


def test_compile_that_does_not_certify_says_how_far_it_got(capsys, tmp_path):
    # float32 with one FF group per word over 4 words in 60 sequences: the word-level boundaries of h need
    # more bits than float32 holds, so part of the ceiling cannot be proven (the default groups by position)
    from uatlab.data.jsonl import write_jsonl
    from uatlab.data.synthetic import synthetic_dataset

    data = tmp_path / "d.jsonl"
    write_jsonl(synthetic_dataset(60, 10, 4, 3, seed=0), data)
    args = ["compile", str(data), "--dtype", "float32", "--group", "word", "--out", str(tmp_path / "w.safetensors")]
    fig = _json(capsys, args)
    assert fig["certified"] is False and 0 < fig["certified_tokens"] < fig["ceiling_tokens"]
    assert f"{fig['certified_tokens']} of {fig['ceiling_tokens']} winnable tokens certified" in fig["note"]
    ex = fig["uncertified_examples"]
    assert ex and all(e["certified_margin_lower_bound"] <= 0 for e in ex)


def test_the_default_out_is_never_written_over(tmp_path, capsys, monkeypatch):
    """Every task and --ff writes to model.safetensors by default: an existing one is replaced only when --out
    names it, so one run's model never silently replaces another's."""
    monkeypatch.chdir(tmp_path)
    assert main(["synth", "d.jsonl", "-N", "20", "-n", "6", "--json"]) == 0
    _run(capsys, ["compile", "d.jsonl", "--json"])
    before = (tmp_path / "model.safetensors").read_bytes()
    for extra in ([], ["--ff", "deep"], ["--ff", "ramps"]):
        err = _run(capsys, ["compile", "d.jsonl", *extra], 2).err
        assert err.startswith("error: model.safetensors exists (the default --out)") and err.count("\n") == 1, err
        assert (tmp_path / "model.safetensors").read_bytes() == before
    _run(capsys, ["compile", "d.jsonl", "--out", "model.safetensors", "--ff", "deep", "--json"])
    assert (tmp_path / "model.safetensors").read_bytes() != before  # named: replaced


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_causal_ceiling_counts_identical_prefixes_once(capsys, tmp_path, dtype):
    # prefixes of 12 base sentences cut at random lengths, random labels: one prefix occurs inside sequences of
    # several lengths with different labels, where float h of the copies can differ in the last bits
    rng = random.Random(1)
    words = [f"w{i}" for i in range(6)]
    base = [[rng.choice(words) for _ in range(8)] for _ in range(12)]
    records = []
    for _ in range(150):
        toks = rng.choice(base)[: rng.randint(2, 8)]
        records.append((toks, [rng.choice(["O", "B-X", "I-X"]) for _ in toks]))
    data = tmp_path / "prefixes.conll"
    data.write_text("".join("".join(f"{t} {y}\n" for t, y in zip(*r, strict=True)) + "\n" for r in records))
    labels_of: dict[tuple[str, ...], Counter] = {}
    lengths_of: dict[tuple[str, ...], set] = {}
    for toks, labs in records:
        for k in range(len(toks)):
            labels_of.setdefault(tuple(toks[: k + 1]), Counter())[labs[k]] += 1
            lengths_of.setdefault(tuple(toks[: k + 1]), set()).add(len(toks))
    ceiling = sum(max(c.values()) for c in labels_of.values())
    # the data holds what the test is about: a prefix with conflicting labels in sequences of different lengths
    assert any(len(c) > 1 and len(lengths_of[p]) > 1 for p, c in labels_of.items())
    out = tmp_path / "m.safetensors"
    fig = _json(capsys, ["compile", str(data), "--causal", "--dtype", dtype, "--out", str(out)])
    cert = _json(capsys, ["certify", str(out), str(data)])
    assert fig["ceiling_tokens"] == cert["ceiling_tokens"] == ceiling
    assert fig["conflict_tokens"] == cert["conflict_tokens"] == fig["tokens"] - ceiling
    assert fig["certified"] is True and fig["certified_tokens"] == ceiling


@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_inputs_built_to_share_a_key_are_two_inputs_to_compile_and_certify(capsys, tmp_path, causal):
    # two different sentences whose rolling-hash input keys agree (built with LLL): labelled apart where their
    # words agree, every token is winnable; the certificate must not count them as one input with conflicts
    s1, s2 = rolling_hash_collision()
    assert input_keys(s1, "sequence") == input_keys(s2, "sequence")
    l1 = ["X"] * len(s1)
    l2 = ["Y" if t1 == t2 else "X" for t1, t2 in zip(s1, s2, strict=True)]
    data = tmp_path / "collide.jsonl"
    data.write_text("".join(json.dumps({"tokens": t, "labels": y}) + "\n" for t, y in [(s1, l1), (s2, l2)]))
    out = tmp_path / "m.safetensors"
    args = ["compile", str(data), "--out", str(out)] + (["--causal"] if causal else [])
    fig = _json(capsys, args)
    cert = _json(capsys, ["certify", str(out), str(data)])
    # an independent count of the ceiling over exact inputs (prefixes when causal) and an independent forward pass
    inputs: dict[tuple, Counter] = {}
    for toks, labs in [(s1, l1), (s2, l2)]:
        for k, y in enumerate(labs):
            inputs.setdefault(tuple(toks[: k + 1]) if causal else (tuple(toks), k), Counter())[y] += 1
    ceiling = sum(max(c.values()) for c in inputs.values())
    assert ceiling == 2 * len(s1)  # no two tokens share an input
    model = load(out)
    right = 0
    with torch.no_grad():
        for toks, labs in [(s1, l1), (s2, l2)]:
            ids = torch.tensor([[model.encoding.token_to_id[t] for t in toks]])
            pred = model(ids.to(torch.int64)).argmax(-1)[0].tolist()
            right += sum(model.encoding.id_to_label[p] == y for p, y in zip(pred, labs, strict=True))
    for report in (fig, cert):
        assert report["ceiling_tokens"] == ceiling and report["conflict_tokens"] == 0
        assert report["certified"] is (right == ceiling)
        assert report["certified_tokens"] <= right
    assert fig["certified"] is True and right == ceiling  # the compiler tells the two inputs apart too


def _exact_input_figures(records: list[tuple[list[str], list[str]]], causal: bool) -> tuple[int, dict]:
    """The ceiling and label information of ``records`` with inputs grouped by their words (no hash)."""
    words: dict[str, int] = {}
    labels: dict[str, int] = {}
    inputs: dict[tuple, Counter] = {}
    W, Y, P, K = [], [], [], []
    for toks, labs in records:
        for k, (t, y) in enumerate(zip(toks, labs, strict=True)):
            inp = tuple(toks[: k + 1]) if causal else (tuple(toks), k)
            inputs.setdefault(inp, Counter())[y] += 1
            W.append(words.setdefault(t, len(words)))
            Y.append(labels.setdefault(y, len(labels)))
            P.append(k)
            K.append(list(inputs).index(inp))
    info = label_information(*(np.array(a, dtype=np.int64) for a in (W, Y, P, K)), num_labels=len(labels))
    return sum(max(c.values()) for c in inputs.values()), info.to_json()


@pytest.mark.parametrize("via", ["cli", "library"])
@pytest.mark.parametrize("causal", [False, True], ids=["bidirectional", "causal"])
def test_no_certify_figures_count_inputs_built_to_share_a_key_apart(capsys, tmp_path, causal, via):
    # without a certificate the compiler's own count is reported: two different sentences whose rolling-hash
    # keys agree (LLL), labelled apart everywhere, are two inputs (only a shared prefix is one input, when causal)
    s1, s2 = rolling_hash_collision()
    records = [(s1, ["X"] * len(s1)), (s2, ["Y"] * len(s2)), (["zz", s1[0]], ["X", "Y"])]
    data = tmp_path / "collide.jsonl"
    data.write_text("".join(json.dumps({"tokens": t, "labels": y}) + "\n" for t, y in records))
    if via == "cli":
        args = ["compile", str(data), "--out", str(tmp_path / "m.safetensors"), "--no-certify"]
        fig = _json(capsys, args + (["--causal"] if causal else []))
    else:
        fig = compile_memorizer(read_sequences(data), causal=causal, certify=False).facts
    ceiling, info = _exact_input_figures(records, causal)
    assert fig["certified"] is None and fig["tokens"] == info["tokens"] == 2 * len(s1) + 2
    assert fig["ceiling_tokens"] == ceiling == info["ceiling_tokens"]
    assert fig["conflict_tokens"] == fig["tokens"] - ceiling and fig["ceiling_accuracy"] == ceiling / fig["tokens"]
    if not causal:
        assert ceiling == fig["tokens"] and fig["conflicts"] == []  # no two tokens share an input
    for name, field in [
        ("label_information_bits", "word_bits"),
        ("label_bits_marginal", "marginal_bits"),
        ("label_bits_given_word_position", "word_position_bits"),
        ("exception_tokens", "exceptions"),
        ("exception_code_bits", "exception_code_bits"),
        ("uniform_label_bits", "uniform_label_bits"),
    ]:
        assert fig[name] == pytest.approx(info[field]), name
    assert any("salted at random for this run" in a for a in fig["assumptions"])


def test_a_key_collision_does_not_hide_wrong_tokens_from_the_certificate(capsys, tmp_path):
    # a model that labels both colliding sentences X everywhere, certified on them with the second one labelled Y
    # where the words agree: those tokens are winnable (different inputs) and wrong, so it is not certified
    s1, s2 = rolling_hash_collision()
    other = (["zz"], ["Y"])  # so that the model knows the label Y
    l2 = ["Y" if t1 == t2 else "X" for t1, t2 in zip(s1, s2, strict=True)]
    train, test = tmp_path / "all_x.jsonl", tmp_path / "some_y.jsonl"
    for path, records in [
        (train, [(s1, ["X"] * len(s1)), (s2, ["X"] * len(s2)), other]),
        (test, [(s1, ["X"] * len(s1)), (s2, l2), other]),
    ]:
        path.write_text("".join(json.dumps({"tokens": t, "labels": y}) + "\n" for t, y in records))
    out = tmp_path / "m.safetensors"
    assert _json(capsys, ["compile", str(train), "--out", str(out)])["certified"] is True
    cert = _json(capsys, ["certify", str(out), str(test)])
    wrong = sum(y == "Y" for y in l2)
    assert wrong > 0 and cert["ceiling_tokens"] == cert["tokens"] == 2 * len(s1) + 1
    assert cert["correct_tokens"] == cert["tokens"] - wrong and cert["certified"] is False
