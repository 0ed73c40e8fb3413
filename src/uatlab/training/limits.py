"""The allowed values of every training hyperparameter: one table that `uatlab.training.TrainConfig` checks
at construction and that ``uatlab train`` reads its option ranges from.

Kept apart from `uatlab.training` (which imports torch) so that the command line can read the ranges before
anything heavy is imported. Messages name the field (``TrainConfig: lr must be ...``), never a CLI flag.
"""

from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass
from typing import Any

SEED_MAX = 2**32 - 1  # numpy and torch both accept seeds in [0, 2^32)


@dataclass(frozen=True)
class Range:
    """The closed interval [lo, hi] (open at ``lo`` with ``lo_open``, at ``hi`` with ``hi_open``; ``hi`` None:
    unbounded above) of an ``integer`` or finite real field."""

    lo: float
    hi: float | None
    integer: bool = False
    lo_open: bool = False
    hi_open: bool = False

    def describe(self) -> str:
        what = "an integer" if self.integer else "a finite number"
        left = "(" if self.lo_open else "["
        right = "∞)" if self.hi is None else (f"{_shown(self.hi)})" if self.hi_open else f"{_shown(self.hi)}]")
        return f"{what} in {left}{_shown(self.lo)}, {right}"

    def holds(self, value: float) -> bool:
        if value < self.lo or (self.lo_open and value == self.lo):
            return False
        return self.hi is None or (value < self.hi if self.hi_open else value <= self.hi)


def _shown(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"


# field → its range (the CLI options of ``uatlab train`` use the same bounds)
RANGES: dict[str, Range] = {
    "layers": Range(1, 256, integer=True),
    "rank": Range(1, 65536, integer=True),  # or None (full rank); at most min(dim, head_dim)
    "dim": Range(1, 65536, integer=True),
    "heads": Range(1, 1024, integer=True),
    "head_dim": Range(1, 65536, integer=True),
    "ff_width": Range(0, 10**6, integer=True),  # or None (ff_mult × dim), or one width per layer
    "ff_mult": Range(0, 1024, integer=True),  # or None (then ff_width is needed)
    "beta": Range(0, None),
    "embed_std": Range(0, 1e3),  # or None; 0 means None (PyTorch's N(0, 1))
    "epochs": Range(1, 10**6, integer=True),
    "batch_size": Range(1, 10**6, integer=True),
    "lr": Range(0, 1e3, lo_open=True),
    "weight_decay": Range(0, 1e3),
    "momentum": Range(0, 1, hi_open=True),
    "warmup_steps": Range(0, 10**9, integer=True),
    "min_lr_ratio": Range(0, 1),
    "clip": Range(0, 1e9),
    "seed": Range(0, SEED_MAX, integer=True),
    "focus": Range(0, 1e6),
    "focus_margin": Range(0, 1e6, lo_open=True),
    "replay": Range(0, 10**6, integer=True),
    "max_minutes": Range(0, 1e7, lo_open=True),  # an argument of train(), not a TrainConfig field
}
CHOICES: dict[str, tuple[str, ...]] = {
    "positional": ("none", "learned", "given"),
    "optimizer": ("adamw", "sgd"),
    "schedule": ("cosine", "constant"),
    "dtype": ("float32", "float64"),
}
# the fields that describe the model: with ``init`` they are the init model's (checked by its TransformerConfig)
MODEL_FIELDS = ("layers", "rank", "dim", "heads", "head_dim", "ff_width", "ff_mult", "positional", "beta", "embed_std")
OPTIONAL = ("rank", "ff_width", "ff_mult", "embed_std", "max_minutes")  # None allowed


def check_value(name: str, value: Any, where: str = "TrainConfig") -> int | float | None:
    """``value`` of field ``name`` as a plain int or float once it lies in ``RANGES[name]`` (None where the field
    allows it); otherwise an InputError naming the field, the value and the range: a value of another type (a
    bool, a string, a float for an integer field, as `uatlab.TransformerConfig` refuses them) or a number outside
    the range (NaN and ±inf included)."""
    from uatlab.errors import InputError

    if value is None and name in OPTIONAL:
        return None
    r = RANGES[name]
    kind = numbers.Integral if r.integer else numbers.Real
    allowed = r.describe() + (" or None" if name in OPTIONAL else "")
    if isinstance(value, bool) or not isinstance(value, kind):
        raise InputError(f"{where}: {name} must be {allowed}, got {value!r} ({type(value).__name__})")
    number = int(value) if r.integer else float(value)
    if not (math.isfinite(number) and r.holds(number)):
        raise InputError(f"{where}: {name} must be {allowed}, got {value!r}")
    return number


def check_train_fields(fields: dict[str, Any], where: str = "TrainConfig") -> dict[str, Any]:
    """The fields of a `uatlab.training.TrainConfig` checked and normalised (plain ints and floats, ``init`` as
    a str, ``ff_width`` lists as lists of ints, ``embed_std`` 0 as None): every field against its range or
    choices, then the fields that depend on each other (rank ≤ min(dim, head_dim), one ``ff_width`` per layer,
    ``ff_width`` or ``ff_mult`` given); InputError naming the field otherwise (TypeError for an ``init`` that is
    not a path). With ``init`` the model fields are not range-checked: the run takes
    them from the init model."""
    from uatlab.errors import InputError

    out = dict(fields)
    init = out.get("init")
    if init is not None:
        if not isinstance(init, (str, os.PathLike)):
            raise TypeError(
                f"{where}: init must be the path of a saved model (str or os.PathLike) or None, got {init!r}"
            )
        out["init"] = os.fspath(init)
        if out["init"] == "":
            raise InputError(f"{where}: init is an empty path; give a saved model's file or None")
    for name, choices in CHOICES.items():
        if out[name] not in choices:
            raise InputError(f"{where}: {name} must be one of {', '.join(map(repr, choices))}, got {out[name]!r}")
    for name in RANGES:
        if name not in out or (init is not None and name in MODEL_FIELDS):
            continue
        if name == "ff_width" and isinstance(out[name], (list, tuple)):
            widths = list(out[name])
            for i, w in enumerate(widths):  # each a width: None ("no width given") is for the field as a whole
                if w is None:
                    raise InputError(f"{where}: ff_width[{i}] must be a width (an integer), got None")
            out[name] = [check_value(name, w, where) for w in widths]
            if len(widths) != out["layers"]:
                raise InputError(f"{where}: ff_width lists {len(widths)} widths for {out['layers']} layers")
            continue
        out[name] = check_value(name, out[name], where)
    if init is None:
        if out["embed_std"] == 0:
            out["embed_std"] = None
        if out["ff_width"] is None and out["ff_mult"] is None:
            raise InputError(f"{where}: give ff_width or ff_mult (both are None)")
        if out["rank"] is not None and out["rank"] > min(out["dim"], out["head_dim"]):
            raise InputError(
                f"{where}: rank must be at most min(dim, head_dim) = {min(out['dim'], out['head_dim'])} (or None: full "
                f"rank), got {out['rank']} with dim {out['dim']} and head_dim {out['head_dim']}"
            )
    return out
