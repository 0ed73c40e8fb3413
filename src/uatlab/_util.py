"""Small helpers every layer may use."""

from __future__ import annotations

import math
import numbers
from typing import Any


def to_jsonable(obj: Any) -> Any:
    """``obj`` with numpy/torch scalars unwrapped, tuples as lists, keys as strings and non-finite floats as
    strings (``"nan"``, ``"inf"``), so that `json.dumps` accepts it; anything else becomes ``str(obj)``."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if hasattr(obj, "item") and callable(obj.item):  # numpy / torch scalars
        return to_jsonable(obj.item())
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


def check_flag(value: Any, name: str, error: type[Exception] | None = None, where: str = "") -> bool:
    """``value`` as a bool once it is one (numpy's included): anything else (``"False"`` is truthy and would switch
    the option on) raises ``error`` (default InputError) naming ``name``, after ``where: `` when given."""
    import numpy as np

    from uatlab.errors import InputError

    if not isinstance(value, (bool, np.bool_)):
        prefix = f"{where}: " if where else ""
        raise (error or InputError)(f"{prefix}{name} must be True or False, got {value!r} ({type(value).__name__})")
    return bool(value)


def check_integer(value: Any, name: str, low: int, high: int | None, where: str = "") -> int:
    """``value`` once it is an integer (numpy's included, bool not) in [low, high] (``high`` None: no upper end):
    TypeError for another type, InputError outside the range, both naming ``name`` after ``where: ``."""
    import numpy as np

    from uatlab.errors import InputError

    prefix = f"{where}: " if where else ""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)):
        raise TypeError(f"{prefix}{name} must be an integer, got {value!r} ({type(value).__name__})")
    if value < low or (high is not None and value > high):
        span = f"≥ {low}" if high is None else f"in [{low}, {high}]"
        raise InputError(f"{prefix}{name} must be an integer {span}, got {value}")
    return int(value)


def check_positive(value: Any, name: str, where: str = "") -> float:
    """``value`` as a float once it is a real number (numpy's included; bool and str not) that is finite and
    > 0: TypeError for another type, InputError otherwise, both naming ``name`` after ``where: ``."""
    import numpy as np

    from uatlab.errors import InputError

    prefix = f"{where}: " if where else ""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"{prefix}{name} must be a number, got {value!r} ({type(value).__name__})")
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"{prefix}{name} must be a positive finite number, got {value}")
    return float(value)
