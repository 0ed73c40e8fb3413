"""One executor interface for every sweep: a local process pool by default, Ray optionally.

A sweep is a list of `Trial` (a unique id and JSON-able parameters) and one top-level
function ``fn(params) -> dict`` (picklable: defined at module level). `run_trials`

* stores each finished trial's result atomically as ``store/trials/<id>.json`` and **never
  recomputes** a trial whose file exists (so a killed sweep resumes where it stopped); a sweep that
  calls `check_store_options` first reuses them only when its options and data fingerprint equal the
  ones recorded in ``store/sweep_options.json``;
* a trial that trains (capacity, depth and rank ablations) resumes, replaces or deletes only a checkpoint
  ``store/runs/<id>/checkpoint.pt`` that one of the sweep's trials wrote there (`trial_checkpoint`,
  `resume_trial`: its identity is recorded in the trial folder's `uatlab.io_safety.OutputFolder` record);
* retries a trial that raised or whose worker died (``retries`` times), then reports it as failed
  without losing the others;
* runs trials in-process (``workers=1``), in a local process pool, or on Ray (``executor="ray"``,
  the optional ``uatlab[ray]`` extra; ``ray.init`` uses a running cluster if ``RAY_ADDRESS`` is set,
  else starts a local one).

Results come back in the order of ``trials``.
"""

from __future__ import annotations

import atexit
import concurrent.futures as cf
import concurrent.futures.process  # noqa: F401  (registers its exit hook now: `_shutdown_pools`, below, runs first)
import json
import multiprocessing as mp
import os
import re
import signal
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from uatlab.errors import InputError, UatlabError
from uatlab.io_safety import OutputFolder, write_text_atomic

OPTIONS_FILE = "sweep_options.json"  # the options every stored trial of a store was run with


@dataclass(frozen=True)
class Trial:
    """One point of a sweep: ``id`` names its result file; ``params`` go to the trial function."""

    id: str
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.=,+-]+", self.id):
            raise UatlabError(f"trial id {self.id!r} may only hold letters, digits and _ . = , + -")


@dataclass
class SweepResult:
    results: dict[str, dict[str, Any]]
    failed: dict[str, str]
    reused: list[str]
    computed: list[str]

    def ordered(self, trials: Sequence[Trial]) -> list[dict[str, Any]]:
        return [self.results[t.id] for t in trials if t.id in self.results]


# ------------------------------------------------------------------------------------------------
# reuse only what was computed with the same options


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else _canonical(value)
    return text if len(text) <= 24 else text[:16] + "…"


def first_difference(old: Any, new: Any, prefix: str = "") -> str | None:
    """The first field (dotted path) whose value differs between ``old`` and ``new``, as ``field: old → new``;
    None when they are equal (compared as JSON, so a tuple equals the list it was stored as)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in list(new) + [k for k in old if k not in new]:
            if key not in old and not (isinstance(new[key], dict) and new[key]):
                return f"{prefix}{key}: not recorded → {_shown(new[key])}"
            if key not in new:
                return f"{prefix}{key}: {_shown(old[key])} → not set"
            diff = first_difference(old.get(key, {}), new[key], f"{prefix}{key}.")
            if diff is not None:
                return diff
        return None
    if _canonical(old) == _canonical(new):
        return None
    return f"{prefix.rstrip('.') or 'options'}: {_shown(old)} → {_shown(new)}"


def refuse_other_options(where: str | os.PathLike, old: Any, new: Any, what: str = "trials") -> None:
    """Raise `InputError` (``WHERE holds WHAT for other options (field: old → new); use another --out``)
    unless ``old`` equals ``new``: stored results are reused only for exactly the options they were run with."""
    diff = first_difference(old, new)
    if diff is not None:
        raise InputError(f"{where} holds {what} for other options ({diff}); use another --out")


TRIAL_CHECKPOINT = "checkpoint.pt"  # a trial's training checkpoint, in its folder ``store/runs/<trial>``
TRIAL_KIND = "experiment trial"  # the kind its record entry names (`uatlab.io_safety.OutputFolder`)


def trial_checkpoint(run_dir: str | os.PathLike) -> OutputFolder:
    """The guard of a trial's training checkpoint ``run_dir/checkpoint.pt``: open (``with``) around the training,
    every checkpoint written is recorded (size and SHA-256) in ``run_dir``'s output record, so a later trial
    resumes, replaces or deletes only a checkpoint the sweep wrote there (`resume_trial`)."""
    return OutputFolder(run_dir, TRIAL_KIND, (TRIAL_CHECKPOINT,))


def resume_trial(run_dir: str | os.PathLike) -> bool:
    """True if ``run_dir`` holds a checkpoint this sweep's trial wrote there (unchanged since), False if it
    holds none; an InputError naming any other file there (a user's checkpoint, one of ``uatlab train`` or of
    an edited copy): the trial would resume from it and replace it."""
    guard = trial_checkpoint(run_dir)
    why = guard.refusal(TRIAL_CHECKPOINT)
    if why is not None:
        raise InputError(
            f"{guard.folder / TRIAL_CHECKPOINT} {why}: a trial resumes only a checkpoint the sweep wrote for it; "
            "move it away or use another --out"
        )
    return guard.holds(TRIAL_CHECKPOINT)


def check_trial_folder(store: str | os.PathLike, trial: Trial) -> bool:
    """Before any work, for a trial of the sweep in ``store`` that trains into ``trial.params["out_dir"]``
    (`uatlab.training.train`): `resume_trial`, and, unless the trial is stored as finished (`run_trials` reuses it and
    trains nothing), every file there that its training would replace (model, summary, metrics) is one a training
    run wrote (`uatlab.training.trainer.train_output_folder`); an InputError names any other, so the sweep stops
    before it starts instead of failing that trial after the others ran."""
    from uatlab.training.trainer import train_output_folder

    run_dir = trial.params["out_dir"]
    resume = resume_trial(run_dir)
    if not _result_path(Path(store), trial).is_file():
        train_output_folder(run_dir).check()
    return resume


def _holds_trials(store: Path) -> bool:
    """Finished trials (``trials/*.json``) or partial ones (a checkpoint a trial wrote in ``runs/<trial>``);
    other files under ``runs/`` are not the sweep's."""
    if any((store / "trials").glob("*.json")):
        return True
    runs = store / "runs"
    return runs.is_dir() and any(trial_checkpoint(d).holds(TRIAL_CHECKPOINT) for d in runs.iterdir() if d.is_dir())


def check_store_options(store: str | os.PathLike, options: dict[str, Any], record: bool = True) -> bool:
    """Refuse a store whose trials (finished or partial) were run with other ``options`` (the training
    configuration and a fingerprint of the data shared by every trial of the sweep); else, with
    ``record``, write ``options`` to ``store/sweep_options.json`` (once). A store holding trials but no
    options file (written before options were recorded) is refused too: its options are unknown.

    Returns True when the store holds trials (finished or partial) run with these options.
    """
    store = Path(store)
    path = store / OPTIONS_FILE
    held = _holds_trials(store)
    if held:
        old: Any = {}
        if path.is_file():
            try:
                old = json.loads(path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise InputError(f"{path}: not valid JSON; use another --out") from None
        refuse_other_options(store, old, options)
    if record and not (held and path.is_file()):
        store.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(options, indent=1, default=str))
    return held


def _result_path(store: Path, trial: Trial) -> Path:
    return store / "trials" / f"{trial.id}.json"


def _stored_result(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None when it holds none (invalid JSON, not UTF-8, not an object)."""
    try:
        out = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    return out if isinstance(out, dict) else None


def _write_atomic(path: Path, data: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(data, indent=1, default=str))


def _call(fn: Callable[[dict[str, Any]], dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    _started()
    t0 = time.perf_counter()
    out = dict(fn(params))
    out.setdefault("wall_seconds", time.perf_counter() - t0)
    return out


def run_trials(
    trials: Sequence[Trial],
    fn: Callable[[dict[str, Any]], dict[str, Any]],
    store: str | os.PathLike,
    executor: str = "local",
    workers: int | None = None,
    retries: int = 1,
    progress: bool = True,
    desc: str = "trials",
) -> SweepResult:
    """Run ``fn`` on every trial not already stored; see the module docstring."""
    store = Path(store)
    ids = [t.id for t in trials]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise UatlabError(f"duplicate trial ids: {dup}")
    results: dict[str, dict[str, Any]] = {}
    reused: list[str] = []
    todo: list[Trial] = []
    for t in trials:
        path = _result_path(store, t)
        if path.is_file():  # results are written atomically: a file this sweep wrote is whole and names its trial
            stored = _stored_result(path)
            if stored is None or stored.get("trial_id") != t.id:
                raise InputError(
                    f"{path}: not a result of trial {t.id!r} of this sweep (not its JSON record); it was left "
                    "untouched: move it away or use another --out"
                )
            results[t.id] = stored
            reused.append(t.id)
            continue
        todo.append(t)
    failed: dict[str, str] = {}
    computed: list[str] = []
    if workers is None:
        workers = max(1, min(len(todo), os.cpu_count() or 1))
    bar = tqdm(total=len(trials), initial=len(reused), desc=desc, disable=not progress, leave=False)

    def finish(t: Trial, out: dict[str, Any]) -> None:
        out = {"trial_id": t.id, **t.params, **out}
        _write_atomic(_result_path(store, t), out)
        results[t.id] = out
        computed.append(t.id)
        bar.update(1)

    attempts = {t.id: 0 for t in todo}
    pending = list(todo)
    while pending:
        batch, pending = pending, []
        errors: dict[str, str] = {}
        if executor == "ray":
            errors = _run_ray(batch, fn, finish)
        elif executor == "local" and workers <= 1:
            for t in batch:
                try:
                    finish(t, _call(fn, t.params))
                except Exception:
                    errors[t.id] = traceback.format_exc(limit=6)
        elif executor == "local":
            errors = _run_pool(batch, fn, finish, workers)
        else:
            raise UatlabError(f"unknown executor {executor!r}: use 'local' or 'ray'")
        for t in batch:
            if t.id in errors:
                attempts[t.id] += 1
                if attempts[t.id] <= retries:
                    pending.append(t)
                else:
                    failed[t.id] = errors[t.id]
                    bar.update(1)
    bar.close()
    return SweepResult(results=results, failed=failed, reused=reused, computed=computed)


# seconds a stopped pool's running tasks get to end before their workers are terminated
STOP_GRACE_SECONDS = 20.0


_STOPPED: Any = None  # in a pool worker: the pool's stop event (`_init_worker`)


def _init_worker(stopped: Any) -> None:
    """A pool worker's initializer. Ctrl-C (SIGINT, sent to the terminal's whole process group) is for the main
    process, which stops the pool (`_stop_pool`); a worker that took it would die printing its own traceback. A
    training trial still stops at a checkpoint on SIGINT: the trainer installs its own handler while it runs.
    ``stopped`` is set by `_stop_pool`: a task that reaches a worker after it is not started (`_started`)."""
    global _STOPPED
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _STOPPED = stopped


def _started() -> None:
    """In a pool worker, before a task runs: CancelledError if its pool was stopped. The executor hands up to
    ``workers + 1`` tasks to its call queue ahead of time, where ``cancel_futures`` no longer reaches them."""
    if _STOPPED is not None and _STOPPED.is_set():
        raise cf.CancelledError("the pool was stopped")


def _new_pool(workers: int) -> cf.ProcessPoolExecutor:
    ctx = mp.get_context("spawn")
    stopped = ctx.Event()
    pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker, initargs=(stopped,))
    pool._uatlab_stopped = stopped  # type: ignore[attr-defined]
    _LIVE_POOLS.add(pool)
    return pool


def _stop_pool(pool: cf.ProcessPoolExecutor) -> None:
    """Stop a pool after Ctrl-C, or at exit (nobody will read its results): its queued tasks are cancelled (those
    already handed to a worker's queue return at once, `_started`), and the running ones get `STOP_GRACE_SECONDS`
    to end (a chunk takes seconds; a training trial stops at its next batch on SIGINT, with a checkpoint).
    Workers still running then are terminated, and killed if they outlive that: what they write is atomic, so
    what they leave is whole or absent. Letting a worker finish first
    matters: one killed while it sends a result leaves a partial message that the pool's thread waits on
    forever, and the interpreter waits for that thread at exit."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    stopped = getattr(pool, "_uatlab_stopped", None)
    if stopped is not None:
        stopped.set()  # the tasks already handed to the workers' queue end at once (`_started`)
    pool.shutdown(wait=False, cancel_futures=True)
    if manager is not None:
        try:
            manager.join(timeout=STOP_GRACE_SECONDS)  # ends once the running tasks have ended and the workers quit
        except KeyboardInterrupt:  # a second Ctrl-C: wait no longer
            pass
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=2.0)
        if p.is_alive():
            p.kill()
            p.join()
    if manager is not None:
        manager.join(timeout=5.0)


def _run_pool(batch, fn, finish, workers) -> dict[str, str]:
    errors: dict[str, str] = {}
    pool = _new_pool(workers)
    try:
        futures = {pool.submit(_call, fn, t.params): t for t in batch}
        for fut in cf.as_completed(futures):
            t = futures[fut]
            try:
                finish(t, fut.result())
            except cf.process.BrokenProcessPool:
                errors[t.id] = "worker process died (killed or crashed)"
            except Exception:
                errors[t.id] = traceback.format_exc(limit=6)
    except BaseException:  # Ctrl-C (or SystemExit): stop the workers rather than wait for their trials
        _stop_pool(pool)
        raise
    pool.shutdown(wait=True)
    return errors


def _run_ray(batch, fn, finish) -> dict[str, str]:
    try:
        import ray
    except ImportError:
        raise UatlabError("--executor ray needs Ray: pip install 'uatlab[ray]'") from None
    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS"), include_dashboard=False, log_to_driver=False)
    remote = ray.remote(_call)
    refs = {remote.remote(fn, t.params): t for t in batch}
    errors: dict[str, str] = {}
    for ref, t in refs.items():
        try:
            finish(t, ray.get(ref))
        except Exception as exc:
            errors[t.id] = f"{type(exc).__name__}: {exc}"
    return errors


# ------------------------------------------------------------------------------------------------
# ordered maps (the passes of an out-of-core job: map over chunks, reduce per bucket)


def _ray_module(workers: int | None = None):
    try:
        import ray
    except ImportError:
        raise UatlabError("--executor ray needs Ray: pip install 'uatlab[ray]'") from None
    if not ray.is_initialized():
        # RAY_ADDRESS set: join that cluster; else start a local instance with ``workers`` CPUs
        address = os.environ.get("RAY_ADDRESS")
        ray.init(address=address, num_cpus=None if address else workers, include_dashboard=False, log_to_driver=False)
    return ray


def _apply_and_call(threads: int, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` with BLAS and torch limited to ``threads``. The arguments come one by one (not as one
    tuple) so that Ray resolves every object-store reference among them before the call: Ray resolves only
    references passed as top-level arguments, never ones nested inside a tuple."""
    from uatlab.threads import apply_threads

    _started()
    apply_threads(threads)
    return fn(*args)


def map_ordered(
    fn: Callable[..., Any],
    items: Iterable[tuple],
    executor: str = "local",
    workers: int = 1,
    retries: int = 3,
    window: int | None = None,
    threads: int = 1,
) -> Iterator[Any]:
    """``fn(*item)`` for every item, results yielded **in the order of** ``items`` (so a reduction over them
    is the same whatever runs where).

    * ``executor="local"``, ``workers=1``: in this process; ``workers>1``: a spawned process pool.
    * ``executor="ray"``: Ray tasks (``fn`` and the items travel through Ray's object store, so workers need
      no shared file system). A task whose worker process dies is re-run by Ray up to ``retries`` times;
      an exception raised by ``fn`` is not retried (it is an error in the data or the code) and propagates.

    At most ``window`` items (default ``2·workers``) are in flight, so memory stays bounded when ``items``
    is a lazy stream of large chunks. Each worker limits its BLAS and torch to ``threads`` threads.
    """
    if executor not in ("local", "ray"):
        raise UatlabError(f"unknown executor {executor!r}: use 'local' or 'ray'")
    if workers < 1:
        raise UatlabError(f"workers must be ≥ 1, got {workers}")
    window = window or 2 * workers
    if executor == "local" and workers == 1:
        for item in items:
            yield fn(*item)
        return
    if executor == "local":
        pool = _shared_pool(workers)
        pending: list[cf.Future] = []
        try:
            for item in items:
                pending.append(pool.submit(_apply_and_call, threads, fn, *item))
                if len(pending) >= window:
                    yield _pool_result(pending.pop(0), workers)
            while pending:
                yield _pool_result(pending.pop(0), workers)
        except (KeyboardInterrupt, SystemExit):  # Ctrl-C while waiting here: the workers end now (they ignore it)
            _stop_shared_pool(workers)
            raise
        finally:
            # an error, or the caller stopped reading (GeneratorExit: Ctrl-C in the caller's code lands here too,
            # and the exit hook `_shutdown_pools` then stops the pool): this generator's queued chunks are not run;
            # the pool stays for its other users
            for fut in pending:
                fut.cancel()
        return
    ray = _ray_module(workers)
    remote = ray.remote(max_retries=retries, retry_exceptions=False, num_cpus=1)(_apply_and_call)
    fn_ref = ray.put(fn)
    refs: list = []
    for item in items:
        refs.append(remote.remote(threads, fn_ref, *(ray.put(a) if _large(a) else a for a in item)))
        if len(refs) >= window:
            yield _ray_result(ray, refs.pop(0))
    while refs:
        yield _ray_result(ray, refs.pop(0))


def _large(a: Any) -> bool:
    import numpy as np

    return isinstance(a, np.ndarray) and a.nbytes > 1 << 20


_POOLS: dict[int, cf.ProcessPoolExecutor] = {}
_LIVE_POOLS: weakref.WeakSet[cf.ProcessPoolExecutor] = weakref.WeakSet()  # every pool `_new_pool` made


def _shared_pool(workers: int) -> cf.ProcessPoolExecutor:
    """One spawned pool per size for the whole process (its workers import numpy and torch once, not per pass)."""
    pool = _POOLS.get(workers)
    if pool is None:
        pool = _POOLS[workers] = _new_pool(workers)
    return pool


def _at_exit(fn: Callable[[], None]) -> None:
    """Run ``fn`` at interpreter exit before concurrent.futures joins its pools' threads (which waits for every
    running task, forever if a task's result is never read): threading's exit hooks run in reverse order of
    registration and before the atexit module's, and concurrent.futures registers its own at import."""
    register = getattr(threading, "_register_atexit", None)
    if register is None:  # not CPython's threading: the atexit module
        atexit.register(fn)
    else:
        register(fn)


def _stop_shared_pool(workers: int) -> None:
    pool = _POOLS.pop(workers, None)
    if pool is not None:
        _stop_pool(pool)


def _shutdown_pools() -> None:
    """At exit, once the main thread is done: when no other thread that could still read a result is running,
    no task is waited for (after Ctrl-C one may be running, its result unread). Otherwise nothing is done here,
    and concurrent.futures waits for the pools' tasks as it always does."""
    pools = list(_LIVE_POOLS)  # the shared ones and any other still alive (e.g. one whose stop was cut short)
    managers = {getattr(pool, "_executor_manager_thread", None) for pool in pools}
    me = threading.current_thread()
    if any(t is not me and not t.daemon and t not in managers for t in threading.enumerate()):
        return
    _POOLS.clear()
    for pool in pools:
        _stop_pool(pool)


def _pool_result(fut: cf.Future, workers: int) -> Any:
    try:
        return fut.result()
    except cf.process.BrokenProcessPool:
        _POOLS.pop(workers, None)
        raise UatlabError("a worker process died (killed or out of memory); use --executor ray to retry") from None


def _ray_result(ray, ref) -> Any:
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:  # fn raised: re-raise the original exception
        raise exc.as_instanceof_cause() from None
    except ray.exceptions.WorkerCrashedError:
        raise UatlabError("a Ray worker died more often than the task retries allow") from None


_at_exit(_shutdown_pools)  # after concurrent.futures.process's own hook: threading runs them in reverse order
