"""`words_as_labels`: the rule by which ``--format auto`` tells a file of prose from token-per-line CoNLL.

Both sides of each threshold: prose is refused, CoNLL with a tag set (9 NER tags, 45 POS tags, a handful of
tags in a tiny fixture) is read as CoNLL whatever its size.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from conll_fixture import CONLL

from uatlab.data.conll import read_conll
from uatlab.data.jsonl import LABEL_SAMPLE_LINES, conll_or_text, read_sequences, sequence_format, words_as_labels
from uatlab.errors import InputError

PARA = "the cat sat\non the mat\n\nand it was\nvery happy now\n"

PENN_TAGS = (
    "CC CD DT EX FW IN JJ JJR JJS LS MD NN NNS NNP NNPS PDT POS PRP PRP$ RB RBR RBS RP SYM TO UH VB VBD VBG VBN "
    "VBP VBZ WDT WP WP$ WRB # $ . , : `` '' -LRB- -RRB-"
).split()
NER_TAGS = "O B-PER I-PER B-ORG I-ORG B-LOC I-LOC B-MISC I-MISC".split()


def _columns(path: Path, tags: list[str], sentences: int, seed: int, width: int = 2) -> Path:
    """A token-per-line file of ``sentences`` sentences of 3 to 12 tokens: a lower-case word, ``width - 2``
    middle columns and a tag drawn from ``tags`` (the first tag as often as all the others, as O in NER)."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(500)] + "the of and to a in is was for on".split()
    lines = []
    for _ in range(sentences):
        for _ in range(rng.randint(3, 12)):
            tag = tags[0] if rng.random() < 0.5 else rng.choice(tags)
            lines.append(" ".join([rng.choice(words), *(["X"] * (width - 2)), tag]))
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_paragraph_is_words_as_labels(tmp_path: Path) -> None:
    path = tmp_path / "para.txt"
    path.write_text(PARA)
    found = words_as_labels(path)
    assert found is not None
    assert (found["line"], found["lines"], found["labels"], found["once"], found["words"]) == (1, 4, 4, 4, 4)
    with pytest.raises(InputError) as err:
        sequence_format(path, "auto")
    msg = str(err.value)
    assert msg.startswith(f"{path}:1: 'the cat sat'") and "'sat'" in msg and "--format conll" in msg
    assert sequence_format(path, "conll") == "conll"  # the user's choice stands
    assert conll_or_text(path) == "text"  # predict and the next-token task read it as text


def test_the_evidence_line_is_the_first_word_seen_once(tmp_path: Path) -> None:
    path = tmp_path / "prose.txt"
    # lines 1-2 end in the same word; line 4 is the first whose last word is seen once
    path.write_text("we sat down\nthey sat down\n\nshe went home\nhe ran away\ni flew off\nyou fell asleep\n")
    found = words_as_labels(path)
    assert found is not None and found["line"] == 4, found


@pytest.mark.parametrize(
    ("tags", "sentences", "width"),
    [
        (NER_TAGS, 300, 4),  # CoNLL-2003's shape: word POS chunk NER
        (NER_TAGS, 3, 2),
        (PENN_TAGS, 300, 2),
        (PENN_TAGS, 20, 3),  # about 150 tokens: many of the 45 tags seen once, none a word
        (PENN_TAGS, 2, 2),
    ],
)
def test_tag_sets_are_conll(tmp_path: Path, tags: list[str], sentences: int, width: int) -> None:
    path = _columns(tmp_path / "tags.txt", tags, sentences, seed=sentences + width, width=width)
    assert words_as_labels(path) is None
    assert sequence_format(path, "auto") == "conll"


def test_small_fixtures_are_conll(tmp_path: Path) -> None:
    for name, text in {
        "conll.txt": CONLL,
        "pos.txt": "The DT\ncat NN\nsat VBD\non IN\nthe DT\nmat NN\n. .\n",  # 3 of 5 tags seen once, none a word
        "letters.txt": "a x\nb y\n\nc z\nd w\ne v\n",  # one-letter labels: a fixture's tags as often as words
        "brown.txt": "the at\ncat nn\nsat vbd\n\nthe at\ndog nn\nran vbd\non in\nthe at\nmat nn\n",  # lower-case tags
    }.items():
        path = tmp_path / name
        path.write_text(text)
        assert words_as_labels(path) is None, name
        assert sequence_format(path, "auto") == "conll", name


def test_three_distinct_words_cannot_be_told_apart(tmp_path: Path) -> None:
    """Below 4 distinct labels the file is read as CoNLL (the commands then say so in a note)."""
    path = tmp_path / "three.txt"
    path.write_text("the cat sat\non the mat\n\nand so forth\n")
    assert words_as_labels(path) is None
    path.write_text("the cat sat\non the mat\n\nand so forth\nvery happy now\n")
    assert words_as_labels(path) is not None


def test_a_tag_set_small_beside_the_tokens_is_conll(tmp_path: Path) -> None:
    """Word-like labels, most seen once, but no more than a quarter of the lines read: a (large) tag set."""
    path = tmp_path / "many.txt"
    labels = [f"tag{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(200)]  # 200 lower-case "words"
    rows = [labels[i] for i in range(150)] + [labels[150 + i % 50] for i in range(850)]  # 150 once, 50 × 17
    # a middle column of words too, as in prose: the label column alone decides
    path.write_text("".join(f"w{k} {y[::-1]} {y}\n" + ("\n" if k % 10 == 9 else "") for k, y in enumerate(rows)))
    assert words_as_labels(path) is None  # 200 labels in 1000 lines: 4 × 200 ≤ 1000
    rows = rows[:750]  # the same 200 labels in 750 lines: 4 × 200 > 750
    path.write_text("".join(f"w{k} {y[::-1]} {y}\n" + ("\n" if k % 10 == 9 else "") for k, y in enumerate(rows)))
    assert words_as_labels(path) is not None


# the first sentence of the Brown corpus with its original tags, and a second one: 2 columns, lower-case tags
BROWN = [
    ("The", "at"), ("Fulton", "np-tl"), ("County", "nn-tl"), ("Grand", "jj-tl"), ("Jury", "nn-tl"), ("said", "vbd"),
    ("Friday", "nr"), ("an", "at"), ("investigation", "nn"), ("of", "in"), ("Atlanta's", "np$"), ("recent", "jj"),
    ("primary", "nn"), ("election", "nn"), ("produced", "vbd"), ("no", "at"), ("evidence", "nn"), ("that", "cs"),
    ("any", "dti"), ("irregularities", "nns"), ("took", "vbd"), ("place", "nn"), (".", "."),
]  # fmt: skip
BROWN_CHUNKS = "B-NP B-NP I-NP I-NP I-NP B-VP B-NP B-NP I-NP B-PP B-NP I-NP I-NP I-NP B-VP B-NP I-NP B-SBAR".split()


def test_a_lower_case_tag_set_in_two_columns_is_conll(tmp_path: Path) -> None:
    """Brown's tags are lower-case words by `_is_word`, many seen once in one sentence: the label column alone
    looks like prose, but a file of two columns has no middle column to tell, and is read as CoNLL."""
    path = tmp_path / "brown.conll"
    path.write_text("".join(f"{w} {t}\n" for w, t in BROWN))
    assert words_as_labels(path) is None and sequence_format(path, "auto") == "conll"
    path.write_text("".join(f"{w} {t}\n" + ("\n" if k == 11 else "") for k, (w, t) in enumerate(BROWN)))
    assert words_as_labels(path) is None and conll_or_text(path) == "conll"  # predict's auto reads it as CoNLL


def test_a_lower_case_tag_set_beside_a_chunk_column_is_conll(tmp_path: Path) -> None:
    """word, Brown tag, chunk tag; and word, chunk tag, Brown tag: a middle column of tags is not prose."""
    chunks = BROWN_CHUNKS + ["I-SBAR", "B-NP", "B-VP", "B-NP", "O"]
    path = tmp_path / "brown3.conll"
    path.write_text("".join(f"{w} {t} {c}\n" for (w, t), c in zip(BROWN, chunks, strict=True)))
    assert words_as_labels(path) is None and sequence_format(path, "auto") == "conll"
    path.write_text("".join(f"{w} {c} {t}\n" for (w, t), c in zip(BROWN, chunks, strict=True)))
    assert words_as_labels(path) is None and sequence_format(path, "auto") == "conll"


def test_conll_u_lemmas_beside_tags_are_conll(tmp_path: Path) -> None:
    """A lemma column (words) next to a tag column, labels of words: one middle column of tags is enough."""
    path = tmp_path / "lemma.conll"
    rows = [(w, w.lower(), "X" if k % 2 else "Y", t) for k, (w, t) in enumerate(BROWN)]
    path.write_text("".join(" ".join(r) + "\n" for r in rows))
    assert words_as_labels(path) is None
    path.write_text("".join(f"{w} {lemma} {t}\n" for w, lemma, _, t in rows))  # every column words: refused
    assert words_as_labels(path) is not None


def test_only_the_first_lines_are_read(tmp_path: Path) -> None:
    path = _columns(tmp_path / "long.txt", NER_TAGS, 400, seed=1)
    text = path.read_text()
    assert text.count("\n") - text.count("\n\n") > LABEL_SAMPLE_LINES
    path.write_text(text + "\n" + PARA * 50)
    assert words_as_labels(path) is None


@pytest.mark.parametrize("name", ["train.txt", "valid.txt"])
def test_conll2003_is_conll(name: str) -> None:
    path = Path("/work/shared/data/conll2003") / name
    if not path.is_file():
        pytest.skip(f"{path} is not on this machine")
    assert words_as_labels(path) is None and sequence_format(path, "auto") == "conll"


def test_many_lines_of_prose_of_one_length_are_refused(tmp_path: Path) -> None:
    """The CoNLL reader already refuses lines of different column counts, so prose of one line length is what
    this check exists for: however many such lines, one column count is no evidence of columns."""
    rng = random.Random(11)
    letters = "abcdefghijklmnopqrstuvwxyz"
    lines = [
        " ".join("".join(rng.choice(letters) for _ in range(rng.randint(3, 7))) for _ in range(4)) for _ in range(300)
    ]
    path = tmp_path / "poem.txt"
    path.write_text("".join(line + ("\n\n" if k % 4 == 3 else "\n") for k, line in enumerate(lines)))
    found = words_as_labels(path)
    assert found is not None and found["lines"] == 300, found
    with pytest.raises(InputError):
        sequence_format(path, "auto")


def test_the_refusal_offers_format_conll_only_when_that_reads_the_file(tmp_path: Path) -> None:
    """Prose with no blank line is one sentence of three columns without an IOB tag: ``auto`` refuses it, and
    format 'conll' (asked for by name) reads it as the columns it asks for, so the refusal offers it; prose
    whose lines differ in width is refused by the CoNLL reader as well, and the refusal says so instead of
    offering a format that fails too."""
    one = tmp_path / "one.txt"
    one.write_text("the cat sat\na dog ran\nmy friend likes\nhis sister reads\nour teacher speaks\n")
    with pytest.raises(InputError) as err:
        sequence_format(one, "auto")
    assert "to take it as word ... label columns anyway" in str(err.value) and "refuses it too" not in str(err.value)
    with pytest.raises(InputError, match="the whole file is one sentence"):
        read_conll(one)  # the reader's own check, for a caller that did not choose the format
    assert read_conll(one, plain_text_check=False).tokens == [["the", "a", "my", "his", "our"]]
    assert read_sequences(one, "conll").labels == [["sat", "ran", "likes", "reads", "speaks"]]  # by name
    with pytest.raises(InputError, match="does not look like CoNLL"):
        read_sequences(one)  # auto
    ragged = tmp_path / "ragged.txt"
    ragged.write_text("the cat sat\na dog ran\nmy friend likes\nhis sister reads\nour teacher speaks slowly\n")
    with pytest.raises(InputError) as err:
        sequence_format(ragged, "auto")
    msg = str(err.value)
    assert "refuses it too" in msg and "expected 3 columns like the lines before, got 4" in msg and "anyway" not in msg
    para = tmp_path / "para.txt"
    para.write_text(PARA)
    with pytest.raises(InputError) as err:
        sequence_format(para, "auto")
    assert "to take it as word ... label columns anyway" in str(err.value) and "refuses it too" not in str(err.value)
    assert len(read_conll(para)) == 2  # --format conll reads it
