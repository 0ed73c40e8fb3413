"""`uatlab predict`: a compiled model saved by `uatlab compile` tags sentences from a text file."""

import json

from uatlab.cli import main
from uatlab.data.jsonl import read_jsonl


def test_compile_then_predict_from_the_command_line(tmp_path, capsys):
    data_path = tmp_path / "d.jsonl"
    assert main(["synth", str(data_path), "-N", "30", "-n", "5", "-V", "15", "-C", "3", "--json"]) == 0
    model = tmp_path / "m.safetensors"
    assert main(["compile", str(data_path), "--out", str(model), "--json"]) == 0
    data = read_jsonl(data_path)
    text = tmp_path / "s.txt"
    text.write_text("\n".join(" ".join(t) for t in data.tokens[:5]) + "\n")
    capsys.readouterr()
    assert main(["predict", str(model), str(text), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["sentences"] == 5 and out["labels"] == data.labels[:5]
    assert main(["predict", str(model), str(text)]) == 0
    rows = capsys.readouterr().out.split("\n")
    conll = tmp_path / "c.txt"
    conll.write_text(
        "-DOCSTART- O\n\n" + "\n".join(f"{t} {y}" for t, y in zip(data.tokens[0], data.labels[0], strict=True)) + "\n"
    )
    assert main(["predict", str(model), str(conll), "--format", "conll", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["labels"] == [data.labels[0]]
    assert rows[0] == f"{data.tokens[0][0]}\t{data.labels[0][0]}"
    text.write_text("never-seen-word\n")
    assert main(["predict", str(model), str(text)]) == 2
    err = " ".join(capsys.readouterr().err.split())  # the console may wrap the line
    assert f"{text}: sentence 0, position 0: token 'never-seen-word' is not in the model's vocabulary" in err


def test_auto_format_reads_tagged_columns_as_conll_and_anything_else_as_text(tmp_path):
    from uatlab.cli.predict import read_sentences

    conll = tmp_path / "a.txt"
    conll.write_text("-DOCSTART- -X- O O\n\nZorbia NNP B-NP B-ORG\npraises VBZ B-VP O\n")
    text = tmp_path / "b.txt"
    text.write_text("Zorbia praises Quarkish plan\nAlva Morrow\n")
    assert read_sentences(conll, "auto") == [["Zorbia", "praises"]]
    assert read_sentences(text, "auto") == [["Zorbia", "praises", "Quarkish", "plan"], ["Alva", "Morrow"]]
