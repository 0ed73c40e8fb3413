"""The JSONL sequence format shared by ``uatlab compile``, ``uatlab train`` and the generators.

One JSON object per line: ``{"tokens": [...], "labels": [...]}``; tokens and labels may be strings
or integers (they are read as strings); each is one non-empty word without white space, as in CoNLL. Blank
lines are skipped; text is UTF-8 (a leading byte-order mark is ignored). Errors name the file and line.
"""

from __future__ import annotations

import json
import os
import string
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

from uatlab.data.dataset import SequenceDataset
from uatlab.errors import InputError
from uatlab.io_safety import atomic_write, check_input_file


def json_error_at(exc: json.JSONDecodeError) -> str:
    """What a JSON parser found wrong in one line, and where: "Expecting value at column 9" ("… at" messages,
    such as "Invalid control character at", get the column after them)."""
    at = "" if exc.msg.endswith(" at") else " at"
    if exc.lineno > 1:  # past the line's own text (on its line ending): one column after its last character
        first = exc.doc.split("\n", 1)[0].rstrip("\r")  # the parser's lines end at "\n" only (U+2028 may be text)
        return f"{exc.msg}{at} the end of the line (column {len(first) + 1})"
    return f"{exc.msg}{at} column {exc.colno}"


def iter_jsonl(path: str | os.PathLike, need_labels: bool = True) -> Iterator[tuple[list[str], list[str], int]]:
    """Yield (tokens, labels, line) per sequence, streaming. ``need_labels=False`` (a reader that ignores labels,
    e.g. prediction) also takes ``{"tokens": [...]}`` objects; their labels come back as ``[]``."""
    from uatlab.data.text_file import decode_line, raw_lines

    path = check_input_file(path)
    with path.open("rb") as fh:
        for lineno, raw_bytes in enumerate(raw_lines(fh), start=1):
            raw = decode_line(raw_bytes, path, lineno)
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{lineno}: not valid JSON ({json_error_at(exc)})") from None
            except (ValueError, RecursionError) as exc:  # e.g. an integer of more than 4300 digits, deep nesting
                raise InputError(f"{path}:{lineno}: unreadable JSON value ({str(exc).splitlines()[0][:120]})") from None
            if not isinstance(obj, dict) or "tokens" not in obj or ("labels" not in obj and need_labels):
                want = '"tokens" and "labels"' if need_labels else '"tokens"'
                raise InputError(f"{path}:{lineno}: expected an object with {want}")
            unlabelled = "labels" not in obj
            toks, labs = obj["tokens"], obj.get("labels", [])
            if not isinstance(toks, list) or not isinstance(labs, list):
                raise InputError(f'{path}:{lineno}: "tokens" and "labels" must be lists')
            if len(toks) == 0:
                raise InputError(f"{path}:{lineno}: empty sequence")
            if len(toks) != len(labs) and not unlabelled:
                raise InputError(f"{path}:{lineno}: {len(toks)} tokens but {len(labs)} labels (ragged)")
            # fast path: only strings, and no \u escape in the line (a lone surrogate can come only from one: the
            # line itself was decoded from UTF-8); otherwise every item is checked
            if "\\u" not in raw and all(type(v) is str for v in toks) and all(type(v) is str for v in labs):
                check_words(toks, labs, path, lineno)
                yield toks, labs, lineno
                continue
            for k, v in enumerate(toks + labs):
                kind = "token" if k < len(toks) else "label"
                if not isinstance(v, (str, int)) or isinstance(v, bool):
                    raise InputError(f"{path}:{lineno}: {kind} {_short(v)} is neither a string nor an integer")
                if isinstance(v, str) and not _encodable(v):
                    raise InputError(f"{path}:{lineno}: {kind} {_short(v)} is not valid Unicode (a lone surrogate)")
            toks, labs = [str(t) for t in toks], [str(y) for y in labs]
            check_words(toks, labs, path, lineno)
            yield toks, labs, lineno


def check_words(toks: list[str], labs: list[str], path: Path, lineno: int) -> None:
    """Every token and label is one non-empty word without white space (as CoNLL and text files split them),
    so that the data reads back the same from CoNLL; InputError names the line, the item and its position."""
    for items, kind in ((toks, "token"), (labs, "label")):
        joined = "".join(items)
        if all(items) and joined.split() == [joined]:  # fast check: no empty item, no white space anywhere
            continue
        for k, v in enumerate(items):
            if not v or v.split() != [v]:
                what = "is empty" if not v else "contains white space"
                raise InputError(
                    f"{path}:{lineno}: {kind} {_short(v)} (position {k}) {what}; a {kind} is one word without "
                    "white space (CoNLL and text files split at white space)"
                )


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _short(v: object) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def read_jsonl(path: str | os.PathLike) -> SequenceDataset:
    """Read a JSONL file of ``{"tokens": [...], "labels": [...]}`` objects, one per line (blank lines skipped);
    a malformed line is an InputError naming ``file:line``."""
    toks, labs, lines = [], [], []
    for t, y, line in iter_jsonl(path):
        toks.append(t)
        labs.append(y)
        lines.append(line)
    if not toks:
        raise InputError(f"{path}: no sequences found")
    return SequenceDataset(toks, labs, source=str(path), lines=lines)


def write_jsonl(data: SequenceDataset, path: str | os.PathLike) -> None:
    """Write ``data`` as JSONL (`read_jsonl` reads it back). An existing file at ``path`` is replaced (atomically,
    once the new one is complete): pass a path you mean to write."""
    with atomic_write(Path(path)) as fh:
        for toks, labs in data:
            fh.write(json.dumps({"tokens": toks, "labels": labs}) + "\n")


JSONL_SUFFIXES = (".jsonl", ".json")


def is_jsonl_path(path: str | os.PathLike) -> bool:
    """True when ``path`` is named ``*.jsonl`` or ``*.json``, in any case (``J.JSONL``): what every reader's
    ``format='auto'`` reads as JSONL."""
    return str(path).lower().endswith(JSONL_SUFFIXES)


def format_by_name(path: str | os.PathLike) -> str:
    """The labelled-sequence format a file's name implies: ``'jsonl'`` for .jsonl/.json (`is_jsonl_path`), else
    ``'conll'`` (what ``'auto'`` reads, before it looks inside the file)."""
    return "jsonl" if is_jsonl_path(path) else "conll"


def sequence_format(path: str | os.PathLike, fmt: str = "auto", text: bool = False) -> str:
    """``'jsonl'`` or ``'conll'``: ``fmt``, or for ``'auto'`` JSONL for .jsonl/.json files (`is_jsonl_path`) and
    CoNLL otherwise, except that an existing file whose columns are words rather than tags (plain text,
    `words_as_labels`) is an InputError naming its line; InputError for any other format. The one decision of
    every command that reads data.

    With ``text=True`` (a reader that also takes plain text, one sentence per line) ``'text'`` is a format too,
    and ``'auto'`` for a file not named .jsonl/.json is `conll_or_text`: CoNLL whenever the CoNLL reader would
    read the file as CoNLL (``'conll-tokens'`` for unlabelled CoNLL, one token per line), plain text when it
    would refuse it, and an InputError naming the file when both readings are possible."""
    if fmt == "auto":
        fmt = conll_or_text(path) if text and not is_jsonl_path(path) else format_by_name(path)
        if fmt == "conll" and not text and Path(path).is_file():  # a missing file: the reader names it
            refuse_words_as_labels(path)
    allowed = ("jsonl", "conll", "conll-tokens", "text") if text else ("jsonl", "conll")
    if fmt not in allowed:
        raise InputError(f"unknown data format {fmt!r}: use {', '.join(repr(f) for f in allowed)}")
    return fmt


LABEL_SAMPLE_LINES = 1000  # token lines read from the start of a file to judge its label column
MIN_WORD_LABELS = 4  # fewer distinct labels than this: no rule can tell plain text from a tiny CoNLL file


def _is_word(label: str) -> bool:
    """A label that reads as a word of prose: letters only once punctuation at its ends is dropped ("mat.",
    "Paris"), at least two of them and one lower-case. Tags are upper-case (NN, B-PER, O), numbers, or symbols
    (CCG's S[dcl]\\NP, "``"); a one-letter label is a fixture's tag as often as a word. Some tag sets are
    lower-case words by this rule (the Brown corpus's ``at``, ``nn``, ``vbd``; dependency relations ``det``,
    ``nsubj``), so `words_as_labels` also asks the middle columns."""
    core = label.strip(string.punctuation)
    return len(core) >= 2 and core.isalpha() and any(c.islower() for c in core)


def _mostly_words(values: set[str] | dict[str, int]) -> tuple[int, bool]:
    """(how many of the distinct ``values`` are words (`_is_word`), whether they are more than half of them)."""
    words = sum(1 for v in values if _is_word(v))
    return words, 2 * words > len(values)


def words_as_labels(path: str | os.PathLike) -> dict[str, Any] | None:
    """Evidence that ``path``, read as CoNLL columns, would take the last word of each line of plain text for its
    label, or None. Judged on the first `LABEL_SAMPLE_LINES` (1000) lines of two or more columns (blank,
    one-column and ``-DOCSTART-`` lines aside; the readers name those), whose last column is the label.

    The file is prose, not columns, when all of these hold:

    - at least `MIN_WORD_LABELS` (4) distinct labels: with fewer, a prose file of three lines and a fixture
      labelled ``a``, ``b``, ``c`` look the same, and the commands only say how they read the file;
    - more than half the distinct labels are seen once: a tag set is used over and over (CoNLL-2003's 9 NER
      tags, the 45 Penn Treebank POS tags: a few rare tags at most in 1000 tokens), the last words of lines are
      mostly new words (Zipf's law);
    - more than half the distinct labels are words (`_is_word`: lower-case letters), which most tag sets are
      not (CCG supertags, rare and many, are symbols and upper-case);
    - the distinct labels number more than a quarter of the lines read: a tag set is small beside the tokens;
    - more than half the lines read have three or more columns, and every middle column (between the first and
      the last) found on more than half of them is words too, by the same rule (more than half its distinct
      values words). In prose every column is words; in CoNLL the middle columns are tags (POS, chunk) or, in
      CoNLL-U, a lemma column beside tag columns. The label column alone cannot tell a small file of a
      lower-case tag set (Brown's ``at nn vbd nr``, 80-odd tags, many seen once in a few sentences) from prose,
      so a file of two columns is never refused: the commands say on stderr how they read it.

    A token-per-line file whose columns really are all words (a lemma, a translation) meets them too:
    format ``'conll'`` reads it as columns regardless. The result has ``line`` (the number of the first line
    whose label is a word seen once: the evidence), ``text`` (that line), ``lines``, ``labels`` (distinct),
    ``once``, ``words``, ``middle`` (the middle columns judged) and ``complete`` (the whole file was read)."""
    from uatlab.data.text_file import iter_lines

    counts: dict[str, int] = {}
    first_line: dict[str, tuple[int, str]] = {}
    middle: dict[int, set[str]] = {}  # column index (from the first) -> its distinct values
    middle_rows: dict[int, int] = {}  # column index -> lines that have it as a middle column
    rows = wide = 0
    complete = True  # every line of the file was read (not only the first LABEL_SAMPLE_LINES token lines)
    lines = iter_lines(check_input_file(path))
    try:
        for lineno, line in lines:
            cols = line.split()
            if len(cols) < 2 or cols[0].startswith("-DOCSTART-"):
                continue
            rows += 1
            label = cols[-1]
            counts[label] = counts.get(label, 0) + 1
            first_line.setdefault(label, (lineno, line.strip()))
            if len(cols) >= 3:
                wide += 1
                for j in range(1, len(cols) - 1):
                    middle.setdefault(j, set()).add(cols[j])
                    middle_rows[j] = middle_rows.get(j, 0) + 1
            if rows >= LABEL_SAMPLE_LINES:
                complete = False
                break
    finally:
        lines.close()
    distinct = len(counts)
    once = [label for label, n in counts.items() if n == 1]
    words, label_words = _mostly_words(counts)
    if not (distinct >= MIN_WORD_LABELS and 2 * len(once) > distinct and label_words and 4 * distinct > rows):
        return None
    judged = [j for j in middle if 2 * middle_rows[j] > rows]
    if not (2 * wide > rows and judged and all(_mostly_words(middle[j])[1] for j in judged)):
        return None  # two columns, or a middle column of tags: a lower-case tag set, not prose
    lineno, text = min(first_line[label] for label in once if _is_word(label))
    return {
        "line": lineno,
        "text": text,
        "lines": rows,
        "labels": distinct,
        "once": len(once),
        "words": words,
        "middle": len(judged),
        "complete": complete,
    }


def refuse_words_as_labels(path: str | os.PathLike) -> None:
    """InputError naming ``path`` and the line of the evidence when format ``'auto'`` would read plain text as
    CoNLL columns (`words_as_labels`): each line would become one token, its first word, labelled with its last
    word. An explicit format ``'conll'`` reads it as columns anyway (the readers never call this). The message
    names the format both as a library argument and as the command-line option."""
    found = words_as_labels(path)
    if found is None:
        return
    cols = found["text"].split()
    n = found["lines"]
    what = f"the first {n} token lines" if n >= LABEL_SAMPLE_LINES else f"its {n} token line{'s' if n != 1 else ''}"
    text = found["text"] if len(found["text"]) <= 60 else found["text"][:57] + "..."
    middle = "its middle column is" if found["middle"] == 1 else "its middle columns are"
    advice = "; read it with format 'conll' (--format conll) to take it as word ... label columns anyway"
    if found["complete"]:  # a small file, read whole: say so if the CoNLL reader refuses it too
        from uatlab.data.conll import iter_conll

        try:
            for _ in iter_conll(path, plain_text_check=False):  # what format 'conll' does
                pass
        except InputError as exc:
            advice = f", and format 'conll' (--format conll) refuses it too: {exc}"
    raise InputError(
        f"{path}:{found['line']}: {text!r} does not look like CoNLL: read as columns it would be the token "
        f"{cols[0]!r} labelled {cols[-1]!r}, and the last column of {what} holds "
        f"{found['labels']} distinct labels, {found['once']} seen once, {found['words']} of them words, not a tag "
        f"set, and {middle} words too (this looks like plain text){advice}"
    )


def conll_or_text(path: str | os.PathLike) -> str:
    """``'conll'``, ``'conll-tokens'`` or ``'text'`` for a file that is not JSONL, by its shape (lines split at white space, blank
    lines and ``-DOCSTART-`` lines aside):

    - CoNLL when its first blank-line-separated block has lines of one width of ≥ 2 columns and the second
      block's first line has that width too (what the CoNLL reader reads, whatever the labels; it names any
      later bad line) or the first block's two or more lines all end in an IOB tag (O, B-X, I-X, E-X, S-X:
      the reader names a second block of another width), or when it is one such block of two or more tagged
      lines;
    - unlabelled CoNLL (``'conll-tokens'``: one token per line, `uatlab.data.text_file.read_token_blocks`) when every
      line has one word and blank lines separate at least two sentences, one of several lines;
    - plain text when the widths differ or every line has one word otherwise, or when it is
      one block of ≥ 3 columns not all ending in an IOB tag (with none, the CoNLL reader refuses it as plain
      text, `uatlab.data.conll.check_not_plain_text`), or one line (a sentence such as "please send E-mail");
    - otherwise (one block of ≥ 2 lines of 2 columns, not all ending in an IOB tag: a ``word label`` sentence
      or two-word sentences) an InputError naming the file and asking for ``--format conll`` or
      ``--format text``.

    A file whose lines have one width of ≥ 2 columns except some lines of one word, fewer than the others,
    and whose wider lines alone are CoNLL by the first rule is CoNLL with a label missing: an InputError
    naming the first one-word line (plain text gets there only with sentences of one length split into
    blank-line-separated paragraphs, and ``--format text`` reads it).

    A file CoNLL by its shape whose columns are words rather than tags (`words_as_labels`: lines of one
    length of prose) is plain text, as compile, certify, train and data-report refuse it under ``--format auto``.
    """
    reading = _conll_or_text_by_shape(path)
    return "text" if reading == "conll" and words_as_labels(path) is not None else reading


def _conll_or_text_by_shape(path: str | os.PathLike) -> str:
    """`conll_or_text` by the widths of the lines and their blocks alone."""
    from uatlab.data.conll import IOB_TAG
    from uatlab.data.text_file import iter_lines

    widths: set[int] = set()  # widths of the lines of two or more columns
    blocks = wide_blocks = rows = narrow = block_rows = longest = 0
    in_block = block_wide = False
    tagged = True  # the last column of every line of two or more columns an IOB tag so far
    first_narrow: tuple[int, str] | None = None  # (line number, text) of the first one-word line
    lines = iter_lines(path)
    try:
        for lineno, line in lines:
            cols = line.split()
            if not cols or cols[0].startswith("-DOCSTART-"):  # a document marker ends a sentence, as in the readers
                in_block = False
                continue
            if not in_block:
                # a second sentence after one of a single width ≥ 2 whose two or more lines all end in an IOB tag
                # (one line ending in "E-mail" is a sentence), or whose first line has that width: CoNLL (the
                # reader names any bad line); else read on (plain text by the rules below)
                if (
                    wide_blocks == 1
                    and not narrow
                    and len(widths) == 1
                    and ((tagged and rows >= 2) or len(cols) in widths)
                ):
                    return "conll"
                blocks += 1
                in_block, block_wide = True, False
                block_rows = 0
            rows += 1
            block_rows += 1
            longest = max(longest, block_rows)
            if len(cols) == 1:
                narrow += 1
                first_narrow = first_narrow or (lineno, line.strip())
                continue
            widths.add(len(cols))
            if len(widths) > 1:
                return "text"
            if not block_wide:
                wide_blocks += 1
                block_wide = True
            tagged = tagged and bool(IOB_TAG.fullmatch(cols[-1]))
    finally:
        lines.close()
    if not rows:
        return "text"  # empty or blank: the text reader says so
    if not widths:  # one word per line: sentences of several lines between blank lines are unlabelled CoNLL
        return "conll-tokens" if blocks >= 2 and longest >= 2 else "text"
    if first_narrow is not None:
        wide = rows - narrow
        if wide > narrow and (wide_blocks >= 2 or tagged):
            lineno, word = first_narrow
            raise InputError(
                f"{path}:{lineno}: 1 column ({word!r}) where the other lines have {min(widths)} (word ... label): "
                "this is CoNLL with a missing column; fix the line, or give --format text to read the file as "
                "plain text"
            )
        return "text"  # sentences of one word and of several
    if rows == 1:
        return "text"  # one line: a sentence ("please send E-mail") rather than a one-token CoNLL file
    if tagged:
        return "conll"
    if min(widths) >= 3:
        return "text"
    raise InputError(
        f"{path}: cannot tell whether this is CoNLL (one 'word label' line per token) or plain text (one sentence "
        "of two words per line): every line has 2 columns, there is no blank line between sentences and no IOB "
        "tag; give --format conll or --format text"
    )


def conll_columns_at(path: str | os.PathLike) -> tuple[int, str] | None:
    """(line number, text) of the first token line when `conll_or_text` reads ``path`` as labelled CoNLL
    (lines of ``word ... label`` columns), else None: plain text, unlabelled CoNLL (one word per line) and files
    that reading refuses (both readings possible, a column missing) are None. What a reader of plain text checks
    before it takes a CoNLL file's tags for words."""
    from uatlab.data.text_file import iter_lines

    try:
        if conll_or_text(path) != "conll":
            return None
    except InputError:
        return None
    lines = iter_lines(path)
    try:
        for lineno, line in lines:
            cols = line.split()
            if len(cols) >= 2 and not cols[0].startswith("-DOCSTART-"):
                return lineno, line.strip()
    finally:
        lines.close()
    return None


FORMAT_READINGS = {
    "jsonl": ("JSONL (one JSON object per line, by its .jsonl/.json name)", ""),
    "conll": (
        "CoNLL (word ... label columns; only the first column is a word)",
        "give --format text to read every word",
    ),
    "conll-columns": (
        "CoNLL columns (word = first column, label = last column, a blank line between sentences)",
        "give --format conll to choose this reading yourself",
    ),
    "conll-tokens": (
        "unlabelled CoNLL (one token per line, a blank line between sentences)",
        "give --format text to read each line as a sentence",
    ),
    "text": (
        "plain text (one sentence per line, every word a token)",
        "give --format conll to read it as CoNLL columns",
    ),
    "lines": ("plain text (one sequence per line, split by the model's tokenizer)", ""),
}


def prose_by_labels(path: str | os.PathLike, labels: Collection[str]) -> bool:
    """True for a few lines of prose that have the shape of CoNLL columns, which no rule without the model can
    tell from a tiny CoNLL file (`words_as_labels` needs `MIN_WORD_LABELS` distinct last
    columns and judges larger files): every line with a word has three or more columns, none is a
    ``-DOCSTART-`` line, fewer than `MIN_WORD_LABELS` distinct last columns, none of them one of the model's
    ``labels``, and every column after the first, the last included, mostly words (`_is_word`).
    A file with the model's labels stays CoNLL, and so does one of two columns (a word and its lemma or tag,
    as compile never refuses them), one with a tag column (POS, chunk and IOB tags are not words) and one of
    another data set's documents."""
    from uatlab.data.text_file import iter_lines

    known = set(labels)
    columns: dict[int, set[str]] = {}  # column index (from the second) -> its distinct values
    lines = iter_lines(path)
    try:
        for _, line in lines:
            cols = line.split()
            if not cols:
                continue
            if len(cols) < 3 or cols[0].startswith("-DOCSTART-") or cols[-1] in known:
                return False
            columns.setdefault(-1, set()).add(cols[-1])
            for j in range(1, len(cols) - 1):
                columns.setdefault(j, set()).add(cols[j])
            if len(columns[-1]) >= MIN_WORD_LABELS:
                return False
    finally:
        lines.close()
    return bool(columns) and all(_mostly_words(values)[1] for values in columns.values())


def format_note(path: str | os.PathLike, reading: str) -> str:
    """The one line telling how a file whose format was detected (``--format auto``) was read: ``reading`` is
    ``'jsonl'``, ``'conll'``, ``'conll-tokens'`` (one token per line), ``'text'``, ``'lines'`` (a next-token
    model's sequences) or ``'conll-columns'`` (labelled CoNLL, to compile, certify or train), with the option that reads
    it the other way."""
    what, hint = FORMAT_READINGS[reading]
    return f"note: {path} read as {what}" + (f"; {hint}" if hint else "")


def read_sequences(path: str | os.PathLike, fmt: str = "auto", *, chosen: str | None = None) -> SequenceDataset:
    """Read CoNLL or JSONL; ``fmt='auto'`` picks JSONL for .jsonl/.json files, CoNLL otherwise. ``chosen``: the
    format the user asked for when ``fmt`` is the reading already decided from it (default: ``fmt``). CoNLL asked
    for by name is read as the columns it asks for; under ``auto`` a file that is one sentence of ≥ 3 untagged
    columns is refused as plain text (`uatlab.data.conll.iter_conll`)."""
    from uatlab.data.conll import read_conll

    if sequence_format(path, fmt) == "jsonl":
        return read_jsonl(path)
    return read_conll(path, plain_text_check=(chosen or fmt) != "conll")
