"""Memory requests stated before they are made: refuse a computation that would not fit.

Quadratic work (attention over one long sequence) is inherent to some requests; instead of letting the
kernel kill the process, a command estimates the bytes it will allocate, says so, and refuses above a
limit. The limit defaults to 80 % of the memory available when the command starts and is raised with
``UATLAB_MAX_MEMORY`` (e.g. ``64G``) or a command's ``--max-memory`` option.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator

from uatlab.errors import InputError

ENV = "UATLAB_MAX_MEMORY"
MAX_MEMORY_HELP = (
    "Refuse to start above this much memory (e.g. 16G; default: 80% of available memory, or $UATLAB_MAX_MEMORY)."
)
_override: int | None = None
_held: contextvars.ContextVar[int | None] = contextvars.ContextVar("uatlab_memory_limit_held", default=None)


def parse_size(text: str) -> int:
    """Bytes from ``'512M'``, ``'8G'``, ``'1.5T'`` or a plain number of bytes."""
    t = str(text).strip().upper().removesuffix("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:] or "", 1)
    number = t[:-1] if scale > 1 else t
    try:
        value = float(number)
    except ValueError:
        raise InputError(f"memory size {text!r}: expected a number with an optional K, M, G or T suffix") from None
    if not (value > 0 and value * scale < 1 << 62):
        raise InputError(f"memory size {text!r} must be positive and finite")
    return int(value * scale)


def physical_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def available_memory() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (what can be allocated now without swapping), None if unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def memory_limit() -> int:
    """The current limit in bytes: ``set_memory_limit``, else the limit a `limit_as_of_now` block of this thread
    holds, else ``UATLAB_MAX_MEMORY``, else 80 % of the memory available now (75 % of physical memory where that
    is unknown)."""
    if _override is not None:
        return _override
    held = _held.get()
    if held is not None:
        return held
    env = os.environ.get(ENV)
    if env:
        return parse_size(env)
    avail = available_memory()
    return int(0.8 * avail) if avail else int(0.75 * physical_memory())


def set_memory_limit(limit: int | str | None) -> None:
    """Set the limit for this process (None: back to the environment / default)."""
    global _override
    _override = None if limit is None else (parse_size(limit) if isinstance(limit, str) else int(limit))


@contextlib.contextmanager
def limit_as_of_now() -> Iterator[None]:
    """Hold the limit at its present value for the block (or the call it decorates): a call that checks several
    requests compares each with the memory available when it began, not with what its own work has left. The
    value is held per thread (a context variable: overlapping calls in two threads each keep their own, and
    nothing outlives the block); `set_memory_limit` still takes precedence."""
    token = _held.set(memory_limit())
    try:
        yield
    finally:
        _held.reset(token)


def human(nbytes: float) -> str:
    for unit, scale in (("TB", 1 << 40), ("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{int(nbytes)} B"


def check_memory(need: float, what: str, detail: str) -> None:
    """Refuse (InputError) a computation needing ``need`` bytes above `memory_limit`."""
    limit = memory_limit()
    if need > limit:
        raise InputError(
            f"{what} would need about {human(need)} of memory ({detail}), above the limit of {human(limit)}; "
            f"raise it with {ENV}=SIZE (compile, certify, train and approx gd-in-context also take --max-memory) if this machine has "
            "the memory"
        )
