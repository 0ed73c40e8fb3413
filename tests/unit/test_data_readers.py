"""CoNLL and JSONL readers, IOB schemes, conflicts and ceilings on small fixtures made here."""

import json

import pytest

from uatlab.data import (
    Encoding,
    baselines,
    ceiling_report,
    detect_scheme,
    from_lists,
    iob1_to_iob2,
    majority_targets,
    read_conll,
    read_jsonl,
    read_sequences,
    write_jsonl,
)
from uatlab.errors import InputError

CONLL = """-DOCSTART- -X- -X- O

Zorbia NNP B-NP B-ORG
praises VBZ B-VP O
Quarkish JJ B-NP B-MISC

Alva NNP B-NP B-PER
Kestrel NNP I-NP I-PER

Zorbia NNP B-NP B-ORG
praises VBZ B-VP O
Quarkish JJ B-NP O
"""


def test_conll_reader_counts_and_conflicts(tmp_path):
    p = tmp_path / "mini.txt"
    p.write_text(CONLL)
    ds = read_conll(p)
    assert len(ds) == 3 and ds.num_tokens == 8
    assert ds.lines == [3, 7, 10]
    rep = ceiling_report(ds)
    # the two identical sentences disagree on "Quarkish": one conflicting token
    assert rep.conflict_tokens == 1 and rep.ceiling_tokens == 7
    assert rep.conflicts[0].token == "Quarkish" and rep.conflicts[0].label_counts == {"B-MISC": 1, "O": 1}
    targets = majority_targets(ds)
    assert targets[0] == targets[2]
    b = baselines(ds)
    assert b["all_majority_label"] == pytest.approx(3 / 8)
    assert b["ceiling"] == pytest.approx(7 / 8)


def test_conll_errors_name_file_and_line(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_text("Zorbia NNP B-NP B-ORG\nrejects\n")
    with pytest.raises(InputError, match=r"bad.txt:2: expected at least 2 columns"):
        read_conll(p)
    p.write_text("Zorbia NNP B-NP B-ORG\nrejects VBZ O\n")
    with pytest.raises(InputError, match=r"bad.txt:2: expected 4 columns"):
        read_conll(p)


def test_iob_schemes():
    iob1 = [["I-PER", "I-PER", "O", "I-LOC", "B-LOC"]]
    assert detect_scheme(iob1) == "IOB1"
    converted = [iob1_to_iob2(s) for s in iob1]
    assert converted == [["B-PER", "I-PER", "O", "B-LOC", "B-LOC"]]
    assert detect_scheme(converted) == "IOB2"
    assert detect_scheme([["O", "O"]]) == "none"


def test_jsonl_roundtrip_and_errors(tmp_path):
    ds = from_lists([[1, 2, 3], ["a", "b"]], [[0, 1, 0], ["x", "y"]])
    p = tmp_path / "d.jsonl"
    write_jsonl(ds, p)
    back = read_sequences(p)
    assert back.tokens == [["1", "2", "3"], ["a", "b"]] and back.labels == [["0", "1", "0"], ["x", "y"]]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"tokens": [1, 2], "labels": [0, 1]}) + "\n" + json.dumps({"tokens": [1], "labels": []}))
    with pytest.raises(InputError, match=r"bad.jsonl:2: 1 tokens but 0 labels \(ragged\)"):
        read_jsonl(bad)
    bad.write_text('{"tokens": [], "labels": []}\n')
    with pytest.raises(InputError, match="bad.jsonl:1: empty sequence"):
        read_jsonl(bad)
    bad.write_text("{not json\n")
    with pytest.raises(InputError, match="bad.jsonl:1: not valid JSON"):
        read_jsonl(bad)
    bad.write_text('{"tokens": ["a"], "labels": ["O"]}\n{"tokens": ["a\tb"], "labels": ["O"]}\n')  # a raw tab
    with pytest.raises(InputError, match=r"bad.jsonl:2: not valid JSON \(Invalid control character at column 15\)"):
        read_jsonl(bad)
    bad.write_text('{"tokens": ["a"], "labels": ["O"]} x\n')
    with pytest.raises(InputError, match=r"bad.jsonl:1: not valid JSON \(Extra data at column 36\)"):
        read_jsonl(bad)


def test_encoding_names_unknown_tokens_and_labels():
    train = from_lists([["a", "b"]], [["X", "Y"]])
    enc = Encoding.fit(train)
    other = from_lists([["a", "c"]], [["X", "Z"]])
    with pytest.raises(InputError, match="token 'c' \\(sequence 0, position 1\\)"):
        enc.encode_tokens(other)
    with pytest.raises(InputError, match="label 'Z' \\(sequence 0, position 1\\)"):
        enc.encode_labels(other)


def test_prefix_context_conflicts():
    ds = from_lists([["a", "b", "c"], ["a", "b", "d"]], [["X", "Y", "Z"], ["X", "W", "Z"]])
    assert ceiling_report(ds, "sequence").conflict_tokens == 0  # whole sequences differ
    assert ceiling_report(ds, "prefix").conflict_tokens == 1  # prefix "a b" seen with Y and W


def test_read_token_lines_one_sequence_per_non_blank_line(tmp_path):
    from uatlab.data.text_file import read_token_lines

    path = tmp_path / "lines.txt"
    path.write_bytes(b"\xef\xbb\xbfthe cat\n\n  \t\nsat  on\tthe mat\r\n")
    assert read_token_lines(path) == [(1, ["the", "cat"]), (4, ["sat", "on", "the", "mat"])]
    blank = tmp_path / "blank.txt"
    blank.write_text("\n \n")
    with pytest.raises(InputError, match=r"blank.txt: no sentences found \(the file is empty or blank\)"):
        read_token_lines(blank, "sentences")
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xff\n")
    with pytest.raises(InputError, match=r"bad.txt:2: not UTF-8 text"):
        read_token_lines(bad)


def test_read_conll_scheme_is_validated_and_iob1_kept_unless_asked(tmp_path) -> None:
    """An unknown scheme is an error (it was read as 'keep'); IOB1 labels are kept as read by default and
    converted to IOB2 only with scheme='iob2'."""
    p = tmp_path / "iob1.txt"
    p.write_text("Alva I-PER\nMorrow I-PER\nsaid O\n\nZorbia I-ORG\nplan O\n\n", encoding="utf-8")
    assert read_conll(p).labels == [["I-PER", "I-PER", "O"], ["I-ORG", "O"]]
    assert read_conll(p, scheme="iob2").labels == [["B-PER", "I-PER", "O"], ["B-ORG", "O"]]
    for bad in ("x", "IOB2", ""):
        with pytest.raises(InputError, match="scheme must be 'keep' or 'iob2'"):
            read_conll(p, scheme=bad)


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("bad_utf8.txt", b"the cat\n\n\xffsat\n"),
        ("empty.txt", b""),
        ("blank.txt", b"\n  \t\r\n"),
        ("fine.txt", b"\xef\xbb\xbfthe cat\n\n  \t\nsat  on\tthe mat\r\nlast"),
    ],
)
def test_both_one_sequence_per_line_readers_agree(tmp_path, name, raw):
    """`read_token_lines` (predict's text files) and `read_sequence_lines` (a next-token model's lines): the same
    rows for the same file, and the same error (naming file and line) for the same bad one."""
    from uatlab.data.next_token import read_sequence_lines
    from uatlab.data.text_file import read_token_lines

    path = tmp_path / name
    path.write_bytes(raw)

    def outcome(read):
        try:
            return read(path)
        except InputError as exc:
            return f"InputError: {exc}"

    a, b = outcome(read_token_lines), outcome(read_sequence_lines)
    assert a == b
    if name == "bad_utf8.txt":
        assert a.startswith(f"InputError: {path}:3: not UTF-8 text")
    elif name == "fine.txt":
        assert a == [(1, ["the", "cat"]), (4, ["sat", "on", "the", "mat"]), (5, ["last"])]
    else:
        assert a == f"InputError: {path}: no sequences found (the file is empty or blank)"


def test_a_document_marker_ends_a_sentence_in_both_conll_readers(tmp_path):
    """-DOCSTART- with no blank line before it is still a document boundary: no sentence spans two documents,
    and the labelled reader and the unlabelled one (`read_token_blocks`, used by predict) cut the same way."""
    from uatlab.data.text_file import read_token_blocks

    labelled = tmp_path / "l.conll"
    labelled.write_text("Alva B-PER\nsleeps O\n-DOCSTART- -X- -X- O\nKestrel B-PER\n\nZorbia B-ORG\nwakes O\n")
    data = read_conll(labelled)
    assert data.tokens == [["Alva", "sleeps"], ["Kestrel"], ["Zorbia", "wakes"]]
    assert data.lines == [1, 4, 6]
    unlabelled = tmp_path / "u.conll"
    unlabelled.write_text(
        "".join(line.split()[0] + "\n" if line else "\n" for line in labelled.read_text().split("\n"))
    )
    assert [t for _, t in read_token_blocks(unlabelled)] == data.tokens


def test_format_detection_ends_a_sentence_at_a_document_marker_as_the_readers_do(tmp_path):
    """Unlabelled CoNLL whose sentences are separated by -DOCSTART- alone: the detection sees two sentences, as
    `read_token_blocks` does, not one block of text."""
    from uatlab.data.jsonl import conll_or_text
    from uatlab.data.text_file import read_token_blocks

    marked, blank = tmp_path / "m.txt", tmp_path / "b.txt"
    marked.write_text("a\nb\n-DOCSTART-\nc\nd\n")
    blank.write_text("a\nb\n\nc\nd\n")
    assert len(read_token_blocks(marked)) == len(read_token_blocks(blank)) == 2
    assert conll_or_text(marked) == conll_or_text(blank) == "conll-tokens"  # unlabelled CoNLL


@pytest.mark.parametrize(
    ("text", "reading"),
    [
        ("t1 t2 t3\n\nt4\n", "text"),  # a paragraph, a blank line, a one-word line
        ("t1 t2 t3 t4 t5 t6 t7 t8\n\nt1 t2\n", "text"),  # the second paragraph of another width
        ("EU rejects German call\n\nBRUSSELS\n", "text"),
        ("EU B-ORG\nrejects O\n\nGerman B-MISC\n", "conll"),  # the second sentence of the same width
        ("a b c\n\nd e f\n", "conll"),
        ("Please send E-mail\n\nThe meeting moved to Friday afternoon\nBring the slides and the report\n", "text"),
    ],
)
def test_format_detection_reads_the_first_line_of_the_second_sentence_before_deciding(tmp_path, text, reading):
    """Two blank-line-separated blocks are CoNLL only when the second has the first's width: plain text with a
    blank line before a shorter line was taken for CoNLL and refused by its reader (`uatlab predict`)."""
    from uatlab.cli.predict import read_input
    from uatlab.data.jsonl import conll_or_text

    path = tmp_path / "in.txt"
    path.write_text(text)
    assert conll_or_text(path) == reading
    sentences, _, how = read_input(path, "auto")
    assert how == reading and sum(len(s) for s in sentences) == (
        len(text.split()) if reading == "text" else len(text.split()) // len(text.split("\n")[0].split())
    )


def test_tagged_conll_with_a_bad_line_in_its_second_sentence_is_named_not_read_as_text(tmp_path):
    """A first sentence whose lines end in IOB tags is CoNLL even when the second sentence starts with another
    width: the reader names the bad line (reading it as text would predict on the tags as words)."""
    from uatlab.cli.predict import read_input
    from uatlab.data.jsonl import conll_or_text

    bad = tmp_path / "bad.conll"
    bad.write_text("EU B-ORG\nrejects O\n\nGerman call B-MISC\nfoo O\n\nbar O\n")
    assert conll_or_text(bad) == "conll"
    with pytest.raises(InputError, match=r"bad.conll:4: expected 2 columns like the lines before, got 3"):
        read_input(bad, "auto")


@pytest.mark.parametrize("end", ["\r", "\r\n", "mixed"])
def test_every_line_end_splits_lines_in_conll_and_jsonl(tmp_path, end):
    """A file saved with classic Mac OS line ends (a lone \\r) is as many lines as with \\n, not one line of every
    column; so is a file mixing \\n, \\r\\n and \\r. Line numbers in errors count every kind of line end."""
    lines = CONLL.splitlines()
    ends = ["\n", "\r\n", "\r"] * len(lines) if end == "mixed" else [end] * len(lines)
    conll = tmp_path / "mac.txt"
    conll.write_bytes("".join(line + e for line, e in zip(lines, ends, strict=False)).encode())
    reference = tmp_path / "unix.txt"
    reference.write_text(CONLL)
    got, want = read_conll(conll), read_conll(reference)
    assert got.tokens == want.tokens and got.labels == want.labels and got.lines == want.lines
    assert len(got.tokens) == 3
    bad = lines[:6] + ["Kestrel"] + lines[7:]  # line 7: one column
    conll.write_bytes("".join(line + e for line, e in zip(bad, ends, strict=False)).encode())
    with pytest.raises(InputError, match=r"mac\.txt:7: expected at least 2 columns"):
        read_conll(conll)
    jsonl = tmp_path / "mac.jsonl"
    docs = [json.dumps({"tokens": t, "labels": y}) for t, y in zip(want.tokens, want.labels, strict=True)]
    jsonl.write_bytes((end if end != "mixed" else "\r").join(docs + ["{"]).encode())
    with pytest.raises(InputError, match=r"mac\.jsonl:4: not valid JSON"):
        read_jsonl(jsonl)
    jsonl.write_bytes((end if end != "mixed" else "\r").join(docs).encode())
    assert read_jsonl(jsonl).tokens == want.tokens


def test_line_counts_agree_with_the_readers_for_every_line_end(tmp_path):
    """The whole-file reader's error line and the resume check's "first N lines" count \\r and \\r\\n line ends
    as the streaming readers do."""
    from uatlab.data.text_file import iter_lines, read_text
    from uatlab.io_safety import prefix_identity

    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"a X\rb Y\r\rc X\r\nd \xff Y\r\r")
    with pytest.raises(InputError, match=r"bad\.txt:5: not UTF-8 text \(byte 0xff at column 3\)"):
        read_text(bad)
    with pytest.raises(InputError, match=r"bad\.txt:5: not UTF-8"):
        list(iter_lines(bad))
    cr = tmp_path / "cr.conll"
    cr.write_bytes(b"a X\rb Y\r\rc X\rd Y\r\r")
    assert [prefix_identity(cr, k)["bytes"] for k in (1, 2, 3, 6)] == [4, 8, 9, 18]
