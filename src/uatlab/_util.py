"""Small helpers every layer may use."""

from __future__ import annotations

import math
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
