"""Bad files given to predict, certify, compile and data-report: one ``error: FILE:LINE: …`` line, exit 2.

Non-UTF-8 bytes, a byte-order mark, empty input, plain text read as CoNLL, JSONL words that CoNLL cannot hold,
and the approx options whose extreme values used to end in a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from uatlab.cli import main

BAD = b"\n\xbc\xff tail\n"  # line 1 blank (skipped by every reader); line 2, column 1 is not UTF-8


def _err(capsys) -> str:
    return " ".join(capsys.readouterr().err.split())  # the console may wrap a long line


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """A token model (knots), a deep seq2seq model and a next-token model, compiled from tiny data."""
    d = tmp_path_factory.mktemp("models")
    data = d / "s.jsonl"
    assert main(["synth", str(data), "-N", "6", "-n", "3", "-V", "8", "-C", "2", "--json"]) == 0
    nt = d / "nt.jsonl"
    nt.write_text(
        "".join(
            json.dumps({"tokens": [f"w{(i + j) % 5}" for j in range(3)], "label": f"w{i % 5}"}) + "\n" for i in range(6)
        )
    )
    out = {"data": data, "nt_data": nt}
    for name, args in {
        "knots": [str(data)],
        "deep": [str(data), "--ff", "deep"],
        "next": [str(nt), "--task", "next-token"],
    }.items():
        out[name] = d / f"{name}.safetensors"
        assert main(["compile", *args, "--out", str(out[name]), "--json"]) == 0
    return out


@pytest.mark.parametrize("kind", ["knots", "deep", "next"])
@pytest.mark.parametrize("suffix", [".txt", ".jsonl"])
def test_predict_on_non_utf8_input_names_file_line_and_byte(models, kind, suffix, tmp_path, capsys):
    bad = tmp_path / f"bin{suffix}"
    bad.write_bytes(BAD)
    capsys.readouterr()
    assert main(["predict", str(models[kind]), str(bad)]) == 2
    err = _err(capsys)
    assert f"error: {bad}:2: not UTF-8 text (byte 0xbc at column 1)" in err and "Traceback" not in err


def test_predict_with_a_model_file_as_input_is_a_clean_error(models, capsys):
    capsys.readouterr()
    assert main(["predict", str(models["knots"]), str(models["knots"])]) == 2
    assert "not UTF-8 text" in _err(capsys)


def test_certify_next_token_model_on_non_utf8_data(models, tmp_path, capsys):
    from uatlab.data.next_token import read_next_token_jsonl, read_text_windows
    from uatlab.errors import InputError

    bad = tmp_path / "bin.jsonl"
    bad.write_bytes(b'{"tokens": ["w0"], "label": "w1"}\n' + BAD)
    capsys.readouterr()
    assert main(["certify", str(models["next"]), str(bad), "--json"]) == 2
    assert f"{bad}:3: not UTF-8 text (byte 0xbc at column 1)" in _err(capsys)
    with pytest.raises(InputError, match=r"bin.jsonl:3: not UTF-8 text \(byte 0xbc at column 1\)"):
        read_next_token_jsonl(bad)
    text = tmp_path / "bin.txt"
    text.write_bytes(b"a b c\nd e \xc3( f\n")  # a truncated 2-byte sequence at line 2, column 5
    with pytest.raises(InputError, match=r"bin.txt:2: not UTF-8 text \(byte 0xc3 at column 5\)"):
        read_text_windows(text, 2)


def test_a_byte_order_mark_is_not_part_of_the_first_word(models, tmp_path, capsys):
    from uatlab.data.next_token import read_text_windows

    plain, bom = tmp_path / "p.txt", tmp_path / "b.txt"
    plain.write_text("w1 w2 w3 w1 w2 w4\n", encoding="utf-8")
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    a, b = read_text_windows(plain, 2), read_text_windows(bom, 2)
    assert b.token_vocab == a.token_vocab == ["w1", "w2", "w3", "w4"]
    assert (b.tokens == a.tokens).all() and (b.labels == a.labels).all()
    # predict on plain text with a mark: the same output as without it
    data = [json.loads(ln)["tokens"] for ln in models["data"].read_text().splitlines()]
    plain.write_text("\n".join(" ".join(t) for t in data) + "\n", encoding="utf-8")
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    capsys.readouterr()
    assert main(["predict", str(models["knots"]), str(plain), "--format", "text"]) == 0
    want = capsys.readouterr().out
    assert main(["predict", str(models["knots"]), str(bom), "--format", "text"]) == 0
    assert capsys.readouterr().out == want and want.startswith(data[0][0] + "\t")


@pytest.mark.parametrize("content", ["", "\n   \n\t\n"])
@pytest.mark.parametrize("kind", ["knots", "next"])
def test_predict_on_an_empty_or_blank_file_is_an_error(models, kind, content, tmp_path, capsys):
    empty = tmp_path / "e.txt"
    empty.write_text(content)
    capsys.readouterr()
    assert main(["predict", str(models[kind]), str(empty), "--json"]) == 2
    captured = capsys.readouterr()
    assert "empty or blank" in " ".join(captured.err.split()) and captured.out == ""


def test_plain_text_is_not_read_as_conll(tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_text("".join(" ".join(f"w{(i * 7 + j) % 11}" for j in range(6)) + "\n" for i in range(5)))
    one_line = tmp_path / "one.txt"
    one_line.write_text(" ".join(f"w{i % 9}" for i in range(40)) + "\n")
    for bad in (text, one_line):
        for cmd in (["compile", str(bad), "--out", str(tmp_path / "m.safetensors")], ["data-report", str(bad)]):
            capsys.readouterr()
            assert main(cmd) == 2
            err = _err(capsys)
            assert f"{bad}:1: read as CoNLL, the whole file is one sentence" in err and "plain text" in err
    assert not (tmp_path / "m.safetensors").exists()


def test_one_sentence_conll_files_are_still_read(tmp_path):
    """No false alarm: a one-sentence file with IOB labels, or with two columns of any labels, is CoNLL."""
    from uatlab.data.conll import read_conll

    tagged = tmp_path / "a.txt"
    tagged.write_text("Zorbia NNP B-NP B-ORG\npraises VBZ B-VP O\n\n\n")
    two = tmp_path / "b.txt"
    two.write_text("the DET\ncat NOUN\n")
    several = tmp_path / "c.txt"
    several.write_text("a x y P\nb x y Q\n\nc x y P\n")
    assert read_conll(tagged).tokens == [["Zorbia", "praises"]]
    assert read_conll(two).labels == [["DET", "NOUN"]]
    assert read_conll(several).labels == [["P", "Q"], ["P"]]


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"tokens": ["a b", "c"], "labels": ["X", "Y"]}, "token 'a b' (position 0) contains white space"),
        ({"tokens": ["a", ""], "labels": ["X", "Y"]}, "token '' (position 1) is empty"),
        ({"tokens": ["a", "b"], "labels": ["X", "Y\tZ"]}, "label 'Y\\tZ' (position 1) contains white space"),
    ],
)
def test_jsonl_words_that_conll_cannot_hold_are_refused(tmp_path, capsys, record, message):
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"tokens": ["a"], "labels": ["X"]}) + "\n" + json.dumps(record) + "\n")
    capsys.readouterr()
    assert main(["data-report", str(data)]) == 2
    assert f"{data}:2: {message}" in _err(capsys)


def test_next_token_jsonl_words_with_white_space_are_refused(tmp_path):
    from uatlab.data.next_token import read_next_token_jsonl
    from uatlab.errors import InputError

    data = tmp_path / "n.jsonl"
    data.write_text(json.dumps({"tokens": ["a", "b c"], "label": "a"}) + "\n")
    with pytest.raises(InputError, match=r"n.jsonl:1: token 'b c' \(position 1\) contains white space"):
        read_next_token_jsonl(data)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["truncated-linear", "--anchors", "11", "--points", "101", "--a", "1e-300", "--b", "2e-300"], "--b − --a"),
        (["universal", "--grids", "2", "--samples", "5", "--d", "64", "--n", "10000"], "more than 400000 context"),
        (["gd-in-context", "--contexts", "4", "--eps", "1e300", "--steps", "1"], "--eps 1e+300"),
    ],
)
def test_approx_extremes_are_clean_errors(tmp_path, capsys, args, message):
    out = tmp_path / "ap"
    capsys.readouterr()
    assert main(["approx", *args, "--out", str(out)]) == 2
    err = _err(capsys)
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert not out.exists()


def test_narrow_interval_and_huge_grid_in_the_library():
    import math

    from uatlab.constructions.paper_a.prop1_universal_approximator import MAX_IDS, context_ids
    from uatlab.constructions.paper_b.thm3_truncated_linear import plan_interpolation
    from uatlab.errors import InputError

    with pytest.raises(InputError, match="too narrow"):
        plan_interpolation(1e-300, 2e-300, anchors=11)
    for g, d, n in [(2, 2, 3), (3, 2, 3), (1, 5, 7), (44, 1, 3), (2, 18, 1), (10, 3, 4), (2, 64, 10_000)]:
        ids = math.comb(g**d + n - 1, n) * n if g**d < 10**7 else MAX_IDS + 1
        assert context_ids(g, d, n) == (ids if ids <= MAX_IDS else None)


def test_python_certify_reads_a_next_token_model_and_its_jsonl_by_path(models):
    import uatlab

    cert = uatlab.certify(str(models["next"]), models["nt_data"])
    assert cert.certified and cert.ceiling_rows == 6
