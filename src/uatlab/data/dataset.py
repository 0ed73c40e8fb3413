"""Labelled token sequences: the one in-memory data type shared by compile, train and experiments.

A `SequenceDataset` holds N sequences of tokens (strings) with one label (string) per token,
plus where each sequence came from (file and first line), so that every error can name its source.
Token and label vocabularies are built in first-seen order, which makes ids deterministic.
"""

from __future__ import annotations

import itertools
import numbers
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from uatlab.errors import InputError, UnknownTokenError


def _is_list_like(obj: object) -> bool:
    """A sized iterable other than a string (whose items would be its characters): a sequence's tokens or labels,
    or a list of them."""
    return not isinstance(obj, (str, bytes)) and hasattr(obj, "__len__") and hasattr(obj, "__iter__")


@dataclass
class SequenceDataset:
    """N labelled sequences.

    Attributes:
        tokens: ``tokens[i][k]`` is the k-th token (a string) of sequence i.
        labels: ``labels[i][k]`` is its label (a string).
        source: where the data came from (a path or a description).
        lines: ``lines[i]`` is the line number (1-based) where sequence i starts in ``source``.
        token_lines: token k of sequence i is on line ``lines[i] + k`` (CoNLL: one token per line, a sentence
            has no blank or marker line inside); otherwise (JSONL, text, data in memory) every token of a
            sequence is on its line ``lines[i]``. `where` names a token's own line when given its position.
    """

    tokens: list[list[str]]
    labels: list[list[str]]
    source: str = "<memory>"
    lines: list[int] = field(default_factory=list)
    token_lines: bool = False

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """InputError naming the sequence, position and item unless tokens and labels are lists (one per
        sequence) of equally long, non-empty lists of one-word strings. Run on construction, and again by
        `uatlab.compile_memorizer` and `uatlab.certify`: the lists can be changed after the data set was made."""
        for what, seqs in (("tokens", self.tokens), ("labels", self.labels)):
            if not _is_list_like(seqs):
                raise InputError(
                    f"{self.source}: {what} must be a list of sequences (each a list of strings), not a "
                    f"{type(seqs).__name__}"
                )
        if len(self.tokens) != len(self.labels):
            raise InputError(
                f"{self.source}: {len(self.tokens)} token sequences but {len(self.labels)} label sequences"
            )
        if not self.lines or getattr(self, "_numbered_here", False):  # sequences added since: numbered too
            self._numbered_here = True
            self.lines = list(range(1, len(self.tokens) + 1))
        elif len(self.lines) != len(self.tokens):
            raise InputError(f"{self.source}: {len(self.lines)} line numbers for {len(self.tokens)} sequences")
        for i, (t, y) in enumerate(zip(self.tokens, self.labels, strict=True)):
            for what, seq in (("token", t), ("label", y)):
                if isinstance(seq, str):  # iterating a string would make each character a token
                    raise InputError(
                        f"{self.where(i)}: sequence {i}: {what}s must be a list of strings, not the string {seq!r}"
                    )
                if not _is_list_like(seq):
                    raise InputError(
                        f"{self.where(i)}: sequence {i}: {what}s must be a list of strings, not a {type(seq).__name__}"
                    )
                if not all(map(isinstance, seq, itertools.repeat(str))):  # one C loop
                    k, item = next((k, item) for k, item in enumerate(seq) if not isinstance(item, str))
                    raise InputError(
                        f"{self.where(i)}: sequence {i}, position {k}: the {what} {item!r} is a "
                        f"{type(item).__name__}, not a string (uatlab.data.from_lists converts integers to strings)"
                    )
                joined = "".join(seq)
                if not (all(seq) and joined.split() == [joined]):  # fast check: no empty item, no white space
                    for k, item in enumerate(seq):
                        if not item or item.split() != [item]:
                            problem = "is empty" if not item else "contains white space"
                            raise InputError(
                                f"{self.where(i)}: sequence {i}, position {k}: the {what} {item!r} {problem}; a "
                                f"{what} is one word without white space (CoNLL and text files split at white space)"
                            )
            if len(t) == 0:
                raise InputError(f"{self.where(i)}: sequence {i} is empty")
            if len(t) != len(y):
                raise InputError(f"{self.where(i)}: sequence {i} has {len(t)} tokens but {len(y)} labels")

    def where(self, i: int, position: int | None = None) -> str:
        """``source:line`` of sequence i, or of its token at ``position`` (its own line when `token_lines`)."""
        if i >= len(self.lines):
            return f"{self.source}:?"
        return f"{self.source}:{token_line(self.lines[i], position, self.token_lines)}"

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def num_tokens(self) -> int:
        return sum(len(t) for t in self.tokens)

    @property
    def max_len(self) -> int:
        return max((len(t) for t in self.tokens), default=0)

    def vocabulary(self) -> list[str]:
        """Distinct tokens in first-seen order."""
        return list(dict.fromkeys(tok for seq in self.tokens for tok in seq))

    def label_set(self) -> list[str]:
        """Distinct labels in first-seen order."""
        return list(dict.fromkeys(lab for seq in self.labels for lab in seq))

    def __repr__(self) -> str:
        return (
            f"SequenceDataset({len(self)} sequences, {self.num_tokens} tokens, "
            f"{len(self.label_set())} labels, source={self.source!r})"
        )

    def __getitem__(self, key: int | slice) -> tuple[list[str], list[str]] | SequenceDataset:
        """``data[i]``: (tokens, labels) of sequence i; ``data[a:b]``: the sequences a..b-1 as a data set."""
        if isinstance(key, slice):
            return self.subset(range(len(self))[key])
        if isinstance(key, int | np.integer):
            return self.tokens[key], self.labels[key]
        raise TypeError(f"SequenceDataset indices must be integers or slices, not {type(key).__name__}")

    def subset(self, indices: Iterable[int], *, validate: bool = True) -> SequenceDataset:
        """The sequences at ``indices`` (in that order), keeping their source lines. ``validate=False`` skips the
        new data set's `validate`, for a caller that has just validated this one (its sequences are the same
        list objects, so a subset of valid data is valid)."""
        idx = list(indices)
        parts = ([self.tokens[i] for i in idx], [self.labels[i] for i in idx], [self.lines[i] for i in idx])
        if validate:
            return SequenceDataset(*parts[:2], source=self.source, lines=parts[2], token_lines=self.token_lines)
        sub = object.__new__(SequenceDataset)
        sub.tokens, sub.labels, sub.lines = parts
        sub.source, sub.token_lines = self.source, self.token_lines
        return sub

    def __iter__(self) -> Iterator[tuple[list[str], list[str]]]:
        return iter(zip(self.tokens, self.labels, strict=True))


def token_line(first_line: int, position: int | None, token_lines: bool) -> int:
    """The line of the token at ``position`` of a sequence starting on ``first_line``: ``first_line + position``
    when the data has one token per line (`SequenceDataset.token_lines`), else (or with no position) the
    sequence's line."""
    return int(first_line) + int(position) if token_lines and position is not None else int(first_line)


UNK = "<unk>"
UNKNOWN_POLICIES = ("error", "unk")


def first_repeated(names: Iterable[object]) -> str | None:
    """The first name (as text) that a vocabulary lists twice, or None: two ids with one name would make one of
    them unreachable."""
    seen: set[str] = set()
    for name in map(str, names):
        if name in seen:
            return name
        seen.add(name)
    return None


class ReadOnlyMapping(dict):
    """A dict whose methods refuse every change (``dict.__setitem__(m, …)`` called on it directly still writes):
    an `Encoding`'s mappings. Its ids are the model's embedding rows and
    readout outputs, and `Encoding.id_to_label` reads their order: an entry changed in place would make
    ``predict`` (by order) and ``certify`` (by id) read two different encodings. JSON, pickling and copies
    (``dict(m)``, ``m.copy()``: plain dicts; ``copy.copy(m)``: another read-only one) work as for a dict."""

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError(
            "an Encoding's token_to_id and label_to_id cannot be changed (the model's rows are numbered by them); "
            "build a new Encoding, e.g. Encoding.from_lists(tokens, labels)"
        )

    __setitem__ = __delitem__ = __ior__ = _refuse  # type: ignore[assignment]
    pop = popitem = clear = update = setdefault = _refuse  # type: ignore[assignment]

    def copy(self) -> dict:  # type: ignore[override]
        return dict(self)

    def __reduce__(self) -> tuple:
        return (ReadOnlyMapping, (dict(self),))


@dataclass(frozen=True)
class Encoding:
    """Maps between strings and integer ids for tokens and labels (id order = dict order: a mapping given in
    another order is re-ordered by id; ids must be 0..n−1, each once).

    Attributes:
        token_to_id: token string → embedding row.
        label_to_id: label string → readout row.
        unknown_token: the token that words outside the vocabulary map to (it has its own id and is not a
            real word), or None: then an unknown word is an error naming it.
    """

    token_to_id: dict[str, int]
    label_to_id: dict[str, int]
    unknown_token: str | None = None

    def __post_init__(self) -> None:
        for field_name, what in (("token_to_id", "token"), ("label_to_id", "label")):
            mapping = getattr(self, field_name)
            if not isinstance(mapping, Mapping):
                raise InputError(f"{field_name} must be a dict of {what} → id, got {type(mapping).__name__}")
            ids = list(mapping.values())
            if ids != list(range(len(ids))):  # id i must be the i-th entry: id_to_token / id_to_label read dict order
                seen = Counter(ids)
                bad = next(
                    ((k, i) for k, i in mapping.items() if type(i) is not int or not 0 <= i < len(ids) or seen[i] > 1),
                    None,
                )
                if bad is not None:
                    raise InputError(f"{what} ids must be 0..{len(ids) - 1}, each once: {bad[0]!r} has id {bad[1]!r}")
                mapping = dict(sorted(mapping.items(), key=lambda kv: kv[1]))
            object.__setattr__(self, field_name, ReadOnlyMapping(mapping))  # a copy: the caller's dict stays theirs
        if self.unknown_token is not None and self.unknown_token not in self.token_to_id:
            raise InputError(f"the unknown-word token {self.unknown_token!r} is not in the vocabulary")

    @classmethod
    def fit(cls, data: SequenceDataset, unknown_token: str | None = None) -> Encoding:
        """Ids in first-seen order; with ``unknown_token`` (e.g. ``"<unk>"``) that token is id 0."""
        if not isinstance(data, SequenceDataset):
            raise TypeError(
                f"Encoding.fit() takes a SequenceDataset (uatlab.data.from_lists, read_conll, read_jsonl), not a "
                f"{type(data).__name__}"
            )
        toks = data.vocabulary()
        if unknown_token is not None:
            toks = [unknown_token] + [t for t in toks if t != unknown_token]
        return cls({t: i for i, t in enumerate(toks)}, {y: i for i, y in enumerate(data.label_set())}, unknown_token)

    @classmethod
    def from_lists(cls, tokens: Sequence[str], labels: Sequence[str], unknown_token: str | None = None) -> Encoding:
        """The encoding whose token i is ``tokens[i]`` and label i is ``labels[i]``."""
        return cls({str(t): i for i, t in enumerate(tokens)}, {str(y): i for i, y in enumerate(labels)}, unknown_token)

    @classmethod
    def of_ids(cls, V: int, C: int) -> Encoding:
        """Token i is the string ``str(i)`` and label c is ``str(c)``: the encoding of a model compiled from ids."""
        return cls.from_lists([str(i) for i in range(V)], [str(c) for c in range(C)])

    @property
    def id_to_token(self) -> list[str]:
        return list(self.token_to_id)

    @property
    def id_to_label(self) -> list[str]:
        return list(self.label_to_id)

    @property
    def unknown_id(self) -> int | None:
        """The id of `unknown_token` (None when unknown words are an error)."""
        return None if self.unknown_token is None else self.token_to_id[self.unknown_token]

    def encode_tokens(self, data: SequenceDataset, unknown: str = "error", start: int = 0) -> list[np.ndarray]:
        """Token ids per sequence (int64).

        ``unknown='error'``: an unknown word is an `InputError` naming it, its file:line, sequence and
        position; ``unknown='unk'``: it maps to `unknown_id` (an error if the encoding has none).
        ``start`` is the global index of ``data``'s first sequence (a chunk of a larger set) for the message."""
        if unknown not in UNKNOWN_POLICIES:
            raise InputError(f"unknown must be one of {UNKNOWN_POLICIES}, got {unknown!r}")
        if unknown == "unk" and self.unknown_token is None:
            raise InputError("unknown='unk' needs an encoding with an unknown-word token; this one has none")
        fallback = self.unknown_id if unknown == "unk" else None
        return _encode(data, data.tokens, self.token_to_id, "token", "the model's vocabulary", start, fallback)

    def encode_sentences(self, sentences: Sequence[Sequence[str]], unknown: str | None = None) -> list[np.ndarray]:
        """Token ids (int64) of unlabelled sentences (lists of token strings; an integer token is read as its
        decimal string, as `from_lists` reads it, and any other non-string is an `InputError` naming it).

        ``unknown``: ``"error"`` (an unknown word is an `UnknownTokenError` naming the word, the sentence and
        the position) or ``"unk"`` (the unknown-word id); default ``"unk"`` when the encoding has an
        unknown-word token, else ``"error"``.
        """
        if unknown is None:
            unknown = "error" if self.unknown_token is None else "unk"
        if unknown not in UNKNOWN_POLICIES:
            raise InputError(f"unknown must be one of {UNKNOWN_POLICIES}, got {unknown!r}")
        if unknown == "unk" and self.unknown_token is None:
            raise InputError("unknown='unk' needs an encoding with an unknown-word token; this one has none")
        example = "e.g. [['Zorbia', 'praises', 'Quarkish', 'plan']]"
        if isinstance(sentences, (str, bytes)) or not hasattr(sentences, "__iter__"):  # any iterable of sentences
            raise InputError(f"sentences must be a list of token lists, {example}; got a {type(sentences).__name__}")
        sentences = list(sentences)
        for i, sent in enumerate(sentences):
            if not _is_list_like(sent):
                raise InputError(
                    f"sentences must be a list of token lists, {example}; sentence {i} is a {type(sent).__name__}"
                )
        fallback = self.unknown_id
        out = []
        for i, sent in enumerate(sentences):
            ids = np.empty(len(sent), dtype=np.int64)
            for k, tok in enumerate(sent):
                if not isinstance(tok, str):  # an integer is read as its digits, as from_lists does
                    if not is_integer(tok):
                        raise InputError(
                            f"sentence {i}, position {k}: the token {tok!r} is a {type(tok).__name__}, neither a "
                            "string nor an integer"
                        )
                    tok = as_word(tok)
                j = self.token_to_id.get(tok)
                if j is None:
                    if unknown == "error":
                        why = " (this model has no unknown-word token)" if self.unknown_token is None else ""
                        raise UnknownTokenError(
                            f"sentence {i}, position {k}: token {tok!r} is not in the model's vocabulary{why}", i, k
                        )
                    j = fallback
                ids[k] = j
            out.append(ids)
        return out

    def encode_labels(self, data: SequenceDataset, start: int = 0) -> list[np.ndarray]:
        """Label ids per sequence (int64); a label outside the label set is an error naming it."""
        return _encode(data, data.labels, self.label_to_id, "label", f"the label set {sorted(self.label_to_id)}", start)

    def to_json(self) -> dict[str, object]:
        """``{"tokens": [...id order...], "labels": [...], "unknown_token": ...}`` (what model files store)."""
        return {"tokens": self.id_to_token, "labels": self.id_to_label, "unknown_token": self.unknown_token}

    @classmethod
    def from_json(cls, obj: dict) -> Encoding:
        """The encoding `to_json` wrote: a dict with lists of names under ``"tokens"`` and ``"labels"`` (each name
        once) and, optionally, ``"unknown_token"``; InputError naming what is missing or wrong otherwise."""
        if not isinstance(obj, dict):
            raise InputError(f"an encoding's JSON is a dict with 'tokens' and 'labels', not a {type(obj).__name__}")
        for key in ("tokens", "labels"):
            names = obj.get(key)
            if not isinstance(names, (list, tuple)):
                got = "missing" if key not in obj else f"a {type(names).__name__}"
                raise InputError(f"an encoding's JSON needs a list of names under {key!r} ({got})")
            bad = next((i for i, n in enumerate(names) if not isinstance(n, str) and not is_integer(n)), None)
            if bad is not None:
                raise InputError(f"encoding {key!r} entry {bad} is {names[bad]!r}, not a name (a string)")
            repeated = first_repeated([str(n) for n in names])
            if repeated is not None:
                raise InputError(f"encoding {key!r} lists {repeated!r} twice (each name has one id)")
        unk = obj.get("unknown_token")
        if unk is not None and (not isinstance(unk, str) or unk not in [str(t) for t in obj["tokens"]]):
            raise InputError(f"encoding 'unknown_token' {unk!r} is not one of its tokens")
        return cls.from_lists(obj["tokens"], obj["labels"], unk)


def encoding_difference(given: Encoding, own: Encoding) -> str | None:
    """Where ``given`` first maps a token or a label to another id than ``own`` does, or names another unknown-word
    token (e.g. ``"label 'B-PER' is id 5 in the encoding given, 3 in the model's"``); None when they are the same
    encoding."""
    for what, a, b in (("token", given.token_to_id, own.token_to_id), ("label", given.label_to_id, own.label_to_id)):
        if a != b:
            for name in [*a, *(n for n in b if n not in a)]:
                i, j = a.get(name), b.get(name)
                if i != j:
                    shown = ["none" if v is None else str(v) for v in (i, j)]
                    return f"{what} {name!r} is id {shown[0]} in the encoding given, {shown[1]} in the model's"
    if given.unknown_token != own.unknown_token:
        return f"the unknown-word token is {given.unknown_token!r} in the encoding given, {own.unknown_token!r} in the model's"
    return None


def check_own_encoding(given: Encoding, own: object) -> None:
    """InputError when a model that carries its own encoding (``own``: ``model.encoding``) is given another one to
    certify under: the certificate would prove labels under ids that the model's ``predict`` and every reader of its
    file do not use (a model without one, e.g. a bare Transformer, takes any encoding)."""
    if not isinstance(own, Encoding) or given is own:
        return
    diff = encoding_difference(given, own)
    if diff is not None:
        raise InputError(
            f"encoding: not the model's own encoding ({diff}): a certificate under it would not be about the labels "
            "the model predicts; pass no encoding to certify under the model's"
        )


def _encode(
    data: SequenceDataset, rows, mapping: dict[str, int], what: str, where: str, start: int, fallback: int | None = None
) -> list[np.ndarray]:
    """Ids of ``rows`` under ``mapping`` (int64, one array per sequence: views of one array); an unknown item is an
    InputError naming file:line, sequence and position of the first one (or ``fallback`` when given).

    One dictionary lookup per item in C (``map`` of ``dict.get``, -1 for an unknown item) into a flat array."""
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    ids = np.fromiter(
        map(mapping.get, itertools.chain.from_iterable(rows), itertools.repeat(-1)),
        dtype=np.int64,
        count=int(lengths.sum()),
    )
    missing = np.flatnonzero(ids < 0)
    if len(missing):
        if fallback is None:
            t = int(missing[0])
            i = int(np.searchsorted(np.cumsum(lengths), t, side="right"))
            k = t - int(lengths[:i].sum())
            item = rows[i][k]
            raise InputError(
                f"{data.where(i, k)}: {what} {item!r} (sequence {start + i}, position {k}) is not in {where}"
            )
        ids[missing] = fallback
    return split_flat(ids, lengths)


def split_flat(flat: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    """``flat`` (Σ lengths,) cut into one view per sequence of ``lengths[i]`` items (``np.split`` without its
    per-piece overhead)."""
    ends = np.cumsum(lengths).tolist()
    if not ends:  # no sequences
        return []
    return [flat[a:b] for a, b in zip([0, *ends[:-1]], ends, strict=True)]


def from_lists(tokens: Sequence[Sequence[object]], labels: Sequence[Sequence[object]], source: str = "<memory>"):
    """Build a dataset from nested lists of strings or integers; integers become strings (``1`` becomes ``"1"``,
    as the JSONL reader reads them and as `uatlab.Transformer.predict` looks them up).

    Each token and label is one non-empty word without white space (as CoNLL, JSONL and text files hold them).
    Any other item (None, a float, a bool, an object) is an InputError naming the sequence and position, as is
    an empty item or one with white space. Iterators and generators (of the outer lists or of a sequence) are
    read once, into lists."""
    words: list[list[list[str]]] = []
    for what, rows in (("token", tokens), ("label", labels)):
        if isinstance(rows, (str, bytes)) or not isinstance(rows, Iterable):
            raise TypeError(f"from_lists(): {what}s must be a list of sequences, not a {type(rows).__name__}")
        kept: list[list[str]] = []
        for i, seq in enumerate(rows):
            if isinstance(seq, str) or not isinstance(seq, Iterable):
                got = f"the string {seq!r}" if isinstance(seq, str) else f"a {type(seq).__name__}"
                raise InputError(f"{source}: sequence {i}: {what}s must be a list of items, not {got}")
            seq = list(seq)  # an iterator is read once, here
            kept.append(seq)
            for k, item in enumerate(seq):
                if item is None:
                    raise InputError(f"{source}: sequence {i}, position {k}: the {what} is None")
                if not isinstance(item, str) and not is_integer(item):
                    raise InputError(
                        f"{source}: sequence {i}, position {k}: the {what} {item!r} is a {type(item).__name__}, "
                        "neither a string nor an integer"
                    )
        words.append([[as_word(item) for item in seq] for seq in kept])
    return SequenceDataset(words[0], words[1], source=source)


def is_integer(item: object) -> bool:
    """An integer token or label (Python's or numpy's; not a bool), which `from_lists` and `Encoding.encode_sentences`
    read as its decimal string."""
    return isinstance(item, numbers.Integral) and not isinstance(item, (bool, np.bool_))


def as_word(item: object) -> str:
    """A token or label as its string: a string itself, an integer its decimal digits."""
    return item if isinstance(item, str) else str(int(item))
