"""``--format auto`` refuses plain text that would pass for CoNLL columns, and says how it read a CoNLL file.

Lines of one length of prose, with blank lines between paragraphs, have the shape of CoNLL: read as columns,
each line would be one token (its first word) labelled with its last word. compile, certify, train and
data-report refuse such a file (exit 2, one ``error:`` line naming it, nothing written); ``--format conll``
reads it as columns anyway; a file read as CoNLL by ``auto`` gets one ``note:`` line on stderr and ``--json``
says ``format``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conll_fixture import CONLL

from uatlab.cli import main

PARA = "the cat sat\non the mat\n\nand it was\nvery happy now\n"


@pytest.fixture
def folder(tmp_path: Path, monkeypatch) -> Path:
    (tmp_path / "para.txt").write_text(PARA)
    (tmp_path / "ner.txt").write_text(CONLL)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _refused(argv: list[str], folder: Path, capsys) -> str:
    """Run ``argv`` and check the refusal: exit 2, one ``error:`` line naming para.txt:1 and --format conll,
    nothing on stdout, no file or folder added or changed."""
    before = _files(folder)
    names = set(os.listdir(folder))
    capsys.readouterr()
    assert main(argv) == 2
    cap = capsys.readouterr()
    err = " ".join(cap.err.split())  # the console may wrap the line
    assert cap.out == ""
    assert cap.err.startswith("error: para.txt:1: 'the cat sat'") and cap.err.count("error:") == 1, cap.err
    assert "labelled 'sat'" in err and "--format conll" in err, err
    assert "note:" not in err
    assert set(os.listdir(folder)) == names and _files(folder) == before
    return err


def test_compile_refuses_the_paragraph(folder: Path, capsys) -> None:
    _refused(["compile", "para.txt", "--out", "m.safetensors", "--json"], folder, capsys)
    _refused(["compile", "para.txt", "--out", "m.safetensors", "--keep-work"], folder, capsys)
    _refused(["compile", "para.txt", "--out", "m.safetensors", "--ff", "deep", "--json"], folder, capsys)


def test_train_and_data_report_refuse_the_paragraph(folder: Path, capsys) -> None:
    _refused(["train", "para.txt", "--out", "run", "--epochs", "1", "--json"], folder, capsys)
    _refused(["train", "ner.txt", "--valid", "para.txt", "--out", "run", "--epochs", "1"], folder, capsys)
    _refused(["data-report", "para.txt", "--json"], folder, capsys)


def test_certify_refuses_the_paragraph(folder: Path, capsys) -> None:
    assert main(["compile", "ner.txt", "--out", "m.safetensors", "--json"]) == 0
    assert main(["compile", "ner.txt", "--out", "deep.safetensors", "--ff", "deep", "--json"]) == 0
    _refused(["certify", "m.safetensors", "para.txt", "--json"], folder, capsys)
    _refused(["certify", "deep.safetensors", "para.txt", "--json"], folder, capsys)


def test_format_conll_reads_the_paragraph_as_columns(folder: Path, capsys) -> None:
    capsys.readouterr()
    assert main(["compile", "para.txt", "--format", "conll", "--out", "m.safetensors", "--json"]) == 0
    cap = capsys.readouterr()
    fig = json.loads(cap.out)
    assert fig["format"] == "conll" and fig["sequences"] == 2 and fig["tokens"] == 4, fig
    assert "note:" not in cap.err  # the user chose the reading
    assert main(["data-report", "para.txt", "--format", "conll", "--json"]) == 0


def _note(err: str, name: str) -> None:
    lines = [line for line in err.splitlines() if line.startswith("note:")]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"note: {name} read as CoNLL columns (word = first column, label = last column")


def test_auto_says_how_it_read_conll(folder: Path, capsys) -> None:
    capsys.readouterr()
    assert main(["compile", "ner.txt", "--out", "m.safetensors", "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["format"] == "conll"  # the note is on stderr only: stdout is the JSON
    _note(cap.err, "ner.txt")
    assert main(["compile", "ner.txt", "--out", "d.safetensors", "--ff", "deep", "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["format"] == "conll"
    _note(cap.err, "ner.txt")
    for model in ("m.safetensors", "d.safetensors"):
        assert main(["certify", model, "ner.txt", "--json"]) == 0
        cap = capsys.readouterr()
        assert json.loads(cap.out)["format"] == "conll"
        _note(cap.err, "ner.txt")
    assert main(["data-report", "ner.txt"]) == 0
    _note(capsys.readouterr().err, "ner.txt")
    assert main(["data-report", "ner.txt", "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["format"] == "conll"
    _note(cap.err, "ner.txt")
    assert main(["compile", "ner.txt", "--format", "conll", "--out", "m.safetensors", "--json"]) == 0
    assert "note:" not in capsys.readouterr().err


def test_train_json_has_the_format(folder: Path, capsys) -> None:
    capsys.readouterr()
    assert main(["train", "ner.txt", "--out", "run", "--epochs", "1", "--no-f1", "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["format"] == "conll"
    _note(cap.err, "ner.txt")


def test_jsonl_is_read_by_its_name_without_a_note(folder: Path, capsys) -> None:
    assert main(["synth", "d.jsonl", "-N", "5", "-n", "4", "-V", "6", "-C", "2", "--json"]) == 0
    capsys.readouterr()
    assert main(["compile", "d.jsonl", "--out", "m.safetensors", "--json"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["format"] == "jsonl" and "note:" not in cap.err


def test_predict_reads_the_paragraph_as_text(folder: Path, capsys) -> None:
    """predict's --format auto uses the same rule: the paragraph is plain text, every word a token."""
    (folder / "words.txt").write_text("the O\ncat O\nsat O\non O\nmat O\nand O\nit O\nwas O\nvery O\nhappy O\nnow O\n")
    assert main(["compile", "words.txt", "--out", "m.safetensors", "--json"]) == 0
    capsys.readouterr()
    assert main(["predict", "m.safetensors", "para.txt", "--json"]) == 0
    cap = capsys.readouterr()
    out = json.loads(cap.out)
    assert out["format"] == "text" and out["words"][0] == ["the", "cat", "sat"], out
    assert "note: para.txt read as plain text" in " ".join(cap.err.split())


def test_next_token_reads_the_paragraph_as_text(folder: Path, capsys) -> None:
    """The next-token task refuses CoNLL columns read as text; the paragraph is not CoNLL: its words are read."""
    capsys.readouterr()
    assert (
        main(["compile", "para.txt", "--task", "next-token", "--window", "2", "--out", "nt.safetensors", "--json"]) == 0
    )
    fig = json.loads(capsys.readouterr().out)
    assert fig["vocabulary"] == len(set(PARA.split())), fig
    assert fig["format"] == "text", fig  # --json says how the file was read, as for the token task
    assert main(["certify", "nt.safetensors", "para.txt", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "text"
    # labels that occur as tokens (next-token generation must be able to produce them)
    jsonl = "".join(json.dumps({"tokens": s.split()[:2], "label": s.split()[0]}) + "\n" for s in PARA.splitlines() if s)
    (folder / "nt.jsonl").write_text(jsonl)
    assert main(["compile", "nt.jsonl", "--task", "next-token", "--out", "nt2.safetensors", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "jsonl"
    assert main(["certify", "nt2.safetensors", "nt.jsonl", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "jsonl"


# two sentences of the Brown corpus's original tags: lower-case words by the label rule, many seen once
BROWN = (
    "The at\nFulton np-tl\nCounty nn-tl\nGrand jj-tl\nJury nn-tl\nsaid vbd\nFriday nr\nan at\ninvestigation nn\n"
    "of in\nAtlanta's np$\nrecent jj\n\nprimary nn\nelection nn\nproduced vbd\nno at\nevidence nn\nthat cs\n"
    "any dti\nirregularities nns\ntook vbd\nplace nn\n. .\n"
)


def test_a_lower_case_tag_set_is_read_as_conll(folder: Path, capsys) -> None:
    """Two columns of a lower-case tag set are not prose: data-report and compile read them as CoNLL (with the
    note), and predict's auto reads them as CoNLL too, not as sentences of two words."""
    (folder / "brown.conll").write_text(BROWN)
    capsys.readouterr()
    assert main(["data-report", "brown.conll", "--json"]) == 0
    cap = capsys.readouterr()
    report = json.loads(cap.out)
    assert (report["sequences"], report["labels"]["vbd"]) == (2, BROWN.count(" vbd\n")), report
    _note(cap.err, "brown.conll")
    assert main(["compile", "brown.conll", "--out", "m.safetensors", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == BROWN.count("\n") - 1
    assert main(["predict", "m.safetensors", "brown.conll", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["format"] == "conll" and out["words"][0][:2] == ["The", "Fulton"], out
    assert out["labels"][0][:2] == ["at", "np-tl"], out


def test_capacity_refuses_the_paragraph_and_reads_it_with_format_conll(folder: Path, capsys) -> None:
    """experiment capacity --kind conll reads --data as the other commands do: auto refuses the paragraph,
    writing nothing; --format conll reads it as columns; the summary says how the file was read."""
    sweep = ["experiment", "capacity", "--kind", "conll", "--ns", "2", "--grid", "2", "--max-steps", "5", "--json"]
    _refused([*sweep, "--data", "para.txt", "--out", "cap"], folder, capsys)
    assert main([*sweep, "--data", "para.txt", "--out", "cap", "--format", "conll"]) == 0
    cap = capsys.readouterr()
    summary = json.loads(cap.out)
    assert summary["format"] == "conll" and [r["N"] for r in summary["rows"]] == [2], summary
    assert "note:" not in cap.err  # the reading was chosen, not guessed
    assert main([*sweep, "--data", "ner.txt", "--out", "cap-ner"]) == 0
    cap = capsys.readouterr()
    assert json.loads(cap.out)["format"] == "conll"
    assert "note: ner.txt read as CoNLL columns" in " ".join(cap.err.split()), cap.err


def test_format_conll_reads_one_untagged_sentence_of_several_columns(folder: Path, capsys) -> None:
    """One sentence of 4 columns whose last is a POS tag (no IOB tag, no blank line) is refused under auto as
    plain text, and read as the columns it asks for under --format conll, by every command (it was refused
    with no way through)."""
    (folder / "pos.conll").write_text("The the x DT\ncat cat x NN\nsat sit x VBD\n")
    assert main(["data-report", "pos.conll", "--json"]) == 2
    assert "give --format conll" in " ".join(capsys.readouterr().err.split())
    assert main(["data-report", "pos.conll", "--format", "conll", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sequences"] == 1 and report["tokens"] == 3
    assert main(["compile", "pos.conll", "--format", "conll", "--out", "pos.safetensors", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["certified_tokens"] == 3
    assert main(["certify", "pos.safetensors", "pos.conll", "--format", "conll", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["certified_tokens"] == 3
