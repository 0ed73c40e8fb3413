"""Thread settings of the numeric libraries, in one place: numpy's BLAS (through threadpoolctl) and torch's own.

Compile and certify do many small matrix products (a few dozen rows by d ≈ 30 columns); a BLAS thread
pool cannot split such products profitably, and on a machine whose cores are busy the extra threads
spin-wait for a core. Parallelism therefore comes from worker processes (the executor's workers), and
each process uses few threads:

* ``UATLAB_THREADS`` (environment) or an explicit request wins;
* otherwise (``"auto"``) one thread per process on machines with fewer than `MIN_CORES_FOR_THREADS`
  cores available to the process, else the number of cores not already busy (1-minute load average),
  capped at `MAX_THREADS`.

An explicit request (or ``UATLAB_THREADS``) above `max_threads` (4 threads per available core) is refused:
thread pools of tens of thousands of threads make the OpenMP runtime abort or the process crash.

The results never depend on the number of threads: every quantity compile and certify compute is a
sum whose rounding is bounded for any summation order, and the products used (matrix × small matrix)
are split by output rows, so each output element is summed in the same order whatever the split.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

MIN_CORES_FOR_THREADS = 4
MAX_THREADS = 8
THREADS_PER_CORE_LIMIT = 4  # an explicit request may oversubscribe each available core at most this much
ENV = "UATLAB_THREADS"
# variables read by the BLAS/OpenMP runtimes when they load (set for worker processes started later)
_RUNTIME_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS")


@dataclass(frozen=True)
class ThreadSettings:
    """What `apply_threads` set, recorded in JSON outputs."""

    threads: int
    chosen_by: str  # "auto", "environment" or "request"
    cores_available: int
    load_average_1min: float
    torch_threads: int
    blas: list[dict[str, Any]]  # one entry per BLAS/OpenMP library loaded: name, version, threads

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def cores_available() -> int:
    """Cores this process may run on (its CPU affinity), not the machine's total."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def max_threads() -> int:
    """The largest thread count per process accepted on this machine: 4 × the cores available."""
    return THREADS_PER_CORE_LIMIT * cores_available()


def check_thread_count(n: int, what: str = "threads") -> int:
    """``n`` if it is in [1, `max_threads`]; else ValueError ``"<what> n: at most M on this machine"``."""
    if n < 1:
        raise ValueError(f"{what} must be ≥ 1, got {n}")
    cap = max_threads()
    if n > cap:
        raise ValueError(f"{what} {n}: at most {cap} on this machine ({THREADS_PER_CORE_LIMIT} per available core)")
    return n


def thread_request(value: int | str, what: str = "threads", auto: bool = True) -> int | str:
    """A requested thread count: ``'auto'`` (if ``auto``) or a positive integer (int or digits) of at most
    `max_threads`, returned as int; ValueError naming ``what`` (e.g. ``"--threads"``) otherwise."""
    if auto and value == "auto":
        return value
    text = str(value)
    if not text.isdigit():
        choices = "a positive integer or 'auto'" if auto else "a positive integer"
        raise ValueError(f"{what} must be {choices}, got {text!r}")
    return check_thread_count(int(text), what)


def choose_threads(requested: int | str | None = "auto") -> tuple[int, str]:
    """The thread count per process and what chose it (see the module docstring)."""
    if requested not in (None, "auto"):
        return int(thread_request(requested)), "request"
    env = os.environ.get(ENV)
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"{ENV} must be a positive integer, got {env!r}") from None
        return check_thread_count(n, ENV), "environment"
    cores = cores_available()
    if cores < MIN_CORES_FOR_THREADS:
        return 1, "auto"
    idle = cores - os.getloadavg()[0]
    return max(1, min(int(idle), cores, MAX_THREADS)), "auto"


def apply_threads(requested: int | str | None = "auto") -> ThreadSettings:
    """Limit numpy's BLAS (threadpoolctl) and torch to the chosen thread count in this process, and set
    the runtimes' environment variables so that worker processes started later begin with the same."""
    import numpy  # noqa: F401  (loads the BLAS that threadpoolctl then finds)
    import torch
    from threadpoolctl import threadpool_info, threadpool_limits

    n, how = choose_threads(requested)
    for var in _RUNTIME_ENV:
        os.environ[var] = str(n)
    threadpool_limits(limits=n)  # not used as a context manager: the limit stays for the process
    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    blas = [
        {"library": i.get("internal_api"), "version": i.get("version"), "threads": i.get("num_threads")}
        for i in threadpool_info()
    ]
    return ThreadSettings(
        threads=n,
        chosen_by=how,
        cores_available=cores_available(),
        load_average_1min=round(os.getloadavg()[0], 2),
        torch_threads=torch.get_num_threads(),
        blas=blas,
    )


@contextlib.contextmanager
def single_torch_thread() -> Iterator[None]:
    """torch on one thread for the duration of the block, the previous count restored after (small batched
    checks and training runs on a shared machine: extra threads only spin-wait)."""
    import torch

    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(prev)
