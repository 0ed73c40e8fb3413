"""Error types that uatlab raises for user mistakes.

Every error that a user can cause (bad data, bad flags, impossible requests) derives from
`UatlabError`. The CLI prints these as one clear message without a traceback; any other
exception is a bug and keeps its traceback.
"""

from __future__ import annotations


class UatlabError(Exception):
    """A user-facing error: the message names the offending item and how to fix it."""


class InputError(UatlabError, ValueError):
    """Malformed or inconsistent input data (ragged, empty, NaN, wrong dimension...)."""


class UnknownTokenError(InputError):
    """A word outside a model's vocabulary where unknown words are an error. ``sentence`` and ``position`` say
    where it is, so that a reader of a file can name the word's line (`uatlab.data.dataset.token_line`)."""

    def __init__(self, message: str, sentence: int = 0, position: int = 0) -> None:
        super().__init__(message)
        self.sentence, self.position = sentence, position


class SentenceTooLongError(InputError):
    """A sentence longer than a model's positional encoding covers. ``sentence`` says which (0-based), so that a
    reader of a file can name its line."""

    def __init__(self, message: str, sentence: int = 0) -> None:
        super().__init__(message)
        self.sentence = sentence


class DimensionTooSmallError(InputError):
    """A model dimension below the smallest one the data needs. The message names the Python parameter
    (``d_model``); `named` gives the same error naming another spelling of it (the command line's ``--dim``)."""

    def __init__(self, given: int, needed: int, detail: str, name: str = "d_model") -> None:
        super().__init__(f"{name} {given} is too small: this data needs d ≥ {needed} ({detail})")
        self.given, self.needed, self.detail, self.name = given, needed, detail, name

    def __reduce__(self):  # the arguments, not the message: the error crosses process pools as it was raised
        return type(self), (self.given, self.needed, self.detail, self.name)

    def named(self, name: str) -> DimensionTooSmallError:
        """The same error, its message naming the dimension ``name``."""
        return DimensionTooSmallError(self.given, self.needed, self.detail, name)


class PrecisionError(UatlabError, ArithmeticError):
    """A request that the chosen number format cannot honour (overflow, too few digits)."""


class ModelFileError(UatlabError, OSError):
    """A model or checkpoint file that is missing, truncated or not a uatlab file."""
