"""Errors and reports name a token's own line in CoNLL (one token per line) and the record's line in JSONL."""

import json

import pytest

from uatlab.cli import main
from uatlab.data.conll import read_conll
from uatlab.data.dataset import Encoding
from uatlab.data.jsonl import read_jsonl
from uatlab.errors import InputError

ROWS = [
    "-DOCSTART- -X- O",
    "",
    "EU NNP B-ORG",
    "rejects VBZ O",
    "German JJ B-MISC",
    "call NN O",
    "",
    "Peter NNP B-PER",
    "Blackburn NNP I-PER",
    "",
    "The DT O",
    "European NNP B-ORG",
    "Commission NNP I-ORG",
    "said VBD O",
]


def _write(path, rows):
    path.write_text("\n".join(rows) + "\n")
    return path


def _line_of(rows, word, start=0):
    """1-based line number of the first row from ``start`` whose first column is ``word``."""
    return next(i for i, r in enumerate(rows) if i >= start and r.split()[:1] == [word]) + 1


def _changed(rows, word, label):
    out = list(rows)
    i = _line_of(rows, word) - 1
    out[i] = " ".join(out[i].split()[:-1] + [label])
    return out, i + 1


def test_an_unknown_label_names_the_token_line_in_conll_and_the_record_line_in_jsonl(tmp_path):
    good = read_conll(_write(tmp_path / "good.conll", ROWS))
    enc = Encoding.fit(good)
    rows, line = _changed(ROWS, "Commission", "B-FOO")
    bad = read_conll(_write(tmp_path / "bad.conll", rows))
    first = _line_of(rows, "The")
    assert line != first  # the token is not the first of its sentence
    with pytest.raises(InputError) as info:
        enc.encode_labels(bad)
    assert f"{tmp_path / 'bad.conll'}:{line}: label 'B-FOO'" in str(info.value)
    jl = tmp_path / "bad.jsonl"
    jl.write_text("".join(json.dumps({"tokens": t, "labels": y}) + "\n\n" for t, y in bad))  # records on odd lines
    data = read_jsonl(jl)
    i = next(i for i, y in enumerate(data.labels) if "B-FOO" in y)
    with pytest.raises(InputError) as info:
        enc.encode_labels(data)
    assert f"{jl}:{2 * i + 1}: label 'B-FOO'" in str(info.value)


def test_certify_data_report_and_predict_name_the_token_line(tmp_path, capsys):
    data = _write(tmp_path / "d.conll", ROWS)
    model = tmp_path / "m.safetensors"
    capsys.readouterr()
    assert main(["compile", str(data), "--out", str(model), "--json"]) == 0
    at = json.loads(capsys.readouterr().out)["min_margin_at"]  # compile (its token store) and certify agree
    assert main(["certify", str(model), str(data), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["min_margin_at"]["line"] == at["line"]
    starts = [i + 1 for i, r in enumerate(ROWS) if r and not r.startswith("-DOC") and (i == 0 or not ROWS[i - 1])]
    assert ROWS[at["line"] - 1].split()[0] == at["token"] and at["line"] - at["position"] in starts
    # a label outside the model's label set
    rows, line = _changed(ROWS, "Commission", "B-FOO")
    bad = _write(tmp_path / "bad.conll", rows)
    capsys.readouterr()
    assert main(["certify", str(model), str(bad)]) == 2
    assert f"{bad}:{line}: label 'B-FOO'" in " ".join(capsys.readouterr().err.split())
    # a label of the set that the model does not output there: not certified, at that token's line
    rows, line = _changed(ROWS, "Commission", "B-PER")
    wrong = _write(tmp_path / "wrong.conll", rows)
    assert main(["certify", str(model), str(wrong), "--json"]) == 0
    fig = json.loads(capsys.readouterr().out)
    (ex,) = [e for e in fig["uncertified_examples"] if e["token"] == "Commission"]
    assert ex["line"] == line and ex["line"] == _line_of(rows, "The") + ex["position"]
    # an inherent conflict between the two files: each place is named by its token's line
    both = _write(tmp_path / "both.conll", ROWS + [""] + rows)
    assert main(["data-report", str(both), "--json"]) == 0
    (conflict,) = json.loads(capsys.readouterr().out)["conflicts"]
    second = _line_of(ROWS + [""] + rows, "Commission", len(ROWS))
    assert conflict["where"] == [f"{both}:{line}", f"{both}:{second}"]
    # compile names the same lines (its token store, and the library on a data set read from CoNLL)
    assert main(["compile", str(both), "--out", str(tmp_path / "both.safetensors"), "--json"]) == 0
    (conflict,) = json.loads(capsys.readouterr().out)["conflicts"]
    assert conflict["lines"] == [line, second]
    from uatlab.constructions.paper_a.cor1_memorizer import compile_memorizer

    (conflict,) = compile_memorizer(read_conll(both)).facts["conflicts"]
    assert conflict["lines"] == [line, second]
    # a word outside the vocabulary: predict names its line (CoNLL) or its sentence's line (text)
    rows = list(ROWS)
    i = _line_of(rows, "call") - 1
    rows[i] = "Zorbia " + " ".join(rows[i].split()[1:])
    unk = _write(tmp_path / "unk.conll", rows)
    assert main(["predict", str(model), str(unk)]) == 2
    assert f"{unk}:{i + 1}: sentence 0, position 3: token 'Zorbia'" in " ".join(capsys.readouterr().err.split())
    text = _write(tmp_path / "t.txt", ["Peter said", "EU rejects Zorbia call"])
    assert main(["predict", str(model), str(text)]) == 2
    assert f"{text}:2: sentence 1, position 2: token 'Zorbia'" in " ".join(capsys.readouterr().err.split())


def test_certify_of_a_deep_model_names_the_token_line(tmp_path, capsys):
    data = _write(tmp_path / "d.conll", ROWS)
    model = tmp_path / "deep.safetensors"
    assert main(["compile", str(data), "--ff", "deep", "--out", str(model), "--json"]) == 0
    rows, line = _changed(ROWS, "Commission", "B-FOO")
    bad = _write(tmp_path / "bad.conll", rows)
    capsys.readouterr()
    assert main(["certify", str(model), str(bad)]) == 2
    assert f"{bad}:{line}: label 'B-FOO'" in " ".join(capsys.readouterr().err.split())
