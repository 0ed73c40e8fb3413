"""One executor interface for every sweep: a local process pool by default, Ray optionally.

A sweep is a list of `Trial` (a unique id and JSON-able parameters) and one top-level
function ``fn(params) -> dict`` (picklable: defined at module level). `run_trials`

* stores each finished trial's result atomically as ``store/trials/<id>.json`` and **never
  recomputes** a trial whose file exists (so a killed sweep resumes where it stopped);
* retries a trial that raised or whose worker died (``retries`` times), then reports it as failed
  without losing the others;
* runs trials in-process (``workers=1``), in a local process pool, or on Ray (``executor="ray"``,
  the optional ``uatlab[ray]`` extra; ``ray.init`` uses a running cluster if ``RAY_ADDRESS`` is set,
  else starts a local one).

Results come back in the order of ``trials``.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import multiprocessing as mp
import os
import re
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from uatlab.errors import UatlabError


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


def _result_path(store: Path, trial: Trial) -> Path:
    return store / "trials" / f"{trial.id}.json"


def _write_atomic(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def _call(fn: Callable[[dict[str, Any]], dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
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
        if path.is_file():
            try:
                results[t.id] = json.loads(path.read_text())
                reused.append(t.id)
                continue
            except json.JSONDecodeError:
                path.unlink()  # a torn file from a killed run: recompute
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


def _run_pool(batch, fn, finish, workers) -> dict[str, str]:
    errors: dict[str, str] = {}
    ctx = mp.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        futures = {pool.submit(_call, fn, t.params): t for t in batch}
        for fut in cf.as_completed(futures):
            t = futures[fut]
            try:
                finish(t, fut.result())
            except cf.process.BrokenProcessPool:
                errors[t.id] = "worker process died (killed or crashed)"
            except Exception:
                errors[t.id] = traceback.format_exc(limit=6)
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
