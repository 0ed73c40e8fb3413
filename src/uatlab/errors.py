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


class PrecisionError(UatlabError, ArithmeticError):
    """A request that the chosen number format cannot honour (overflow, too few digits)."""


class ModelFileError(UatlabError, OSError):
    """A model or checkpoint file that is missing, truncated or not a uatlab file."""
