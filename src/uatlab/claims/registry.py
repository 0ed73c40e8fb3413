"""The registry of the papers' claims: each claim is an id, a statement, a source and a check.

A check is a function ``check(ctx: ClaimContext) -> ClaimResult`` that *computes* numbers and
returns a verdict from them; it never compares against a hard-coded result. ``uatlab reproduce``
runs every registered check (`run_claims`).

Adding a claim:

    from uatlab.claims.registry import ClaimContext, ClaimResult, register_claim

    @register_claim(
        id="A.thm1.hardmax-not-contextual",
        statement="One hardmax self-attention layer is not a contextual mapping.",
        paper="Kajitsuka & Sato, ICLR 2024",
        theorem="Theorem 1",
    )
    def _check(ctx: ClaimContext) -> ClaimResult:
        ...
        return ClaimResult(verdict="pass", figures={"collisions": 1000})

Claim modules are listed in `uatlab.claims.CLAIM_MODULES` and imported on first use.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

Verdict = Literal["pass", "fail", "error", "skipped"]
#: whether a check reads CoNLL-2003 train when it is given: never, always (quick and full mode), or in full mode only
ReadsConll = Literal["never", "always", "full"]
READS_CONLL: tuple[str, ...] = get_args(ReadsConll)

#: environment variable naming the folder with the CoNLL-2003 files (train.txt, valid.txt)
CONLL_DIR_ENV = "UATLAB_CONLL_DIR"
NO_CONLL = f"no CoNLL-2003 train.txt (pass --data-dir or set ${CONLL_DIR_ENV})"


@dataclass
class ClaimContext:
    """What a check receives: quick mode, the output folder for its figures, a seed, and where data sets are.

    ``data_dir`` holds the CoNLL-2003 files (``train.txt``); default: ``$UATLAB_CONLL_DIR``. Claims that
    want CoNLL-2003 run on a synthetic stand-in without it and say so in their note.
    """

    quick: bool
    out_dir: Path
    seed: int = 0
    data_dir: Path | None = None

    def conll_train(self) -> Path | None:
        """CoNLL-2003 ``train.txt`` in ``data_dir`` (or ``$UATLAB_CONLL_DIR``), or None if there is none."""
        d = self.data_dir if self.data_dir is not None else os.environ.get(CONLL_DIR_ENV)
        if not d:
            return None
        path = Path(d) / "train.txt"
        return path if path.is_file() else None

    def figure_path(self, claim_id: str, name: str) -> Path:
        """A path inside ``out_dir/figures`` for one of this claim's figures."""
        safe = claim_id.replace("/", "_")
        path = self.out_dir / "figures" / f"{safe}__{name}"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path


@dataclass
class ClaimResult:
    """The outcome of one check: a verdict, the measured figures, figure files, a note and its key figure."""

    verdict: Verdict
    figures: dict[str, Any] = field(default_factory=dict)
    figure_files: list[str] = field(default_factory=list)
    note: str = ""
    key_figure: str | None = None  # the figure shown in the report's summary table (default: first numeric)


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str
    paper: str
    theorem: str
    check: Callable[[ClaimContext], ClaimResult]
    reads_conll: ReadsConll = "never"  # whether the check reads `ClaimContext.conll_train` (see `reads_conll_in`)

    def reads_conll_in(self, quick: bool) -> bool:
        """True when the check reads CoNLL-2003 train (if given) in this mode: ``reads_conll`` is 'always', or
        'full' and this is not a quick run (a quick run of such a check uses a synthetic stand-in)."""
        return self.reads_conll == "always" or (self.reads_conll == "full" and not quick)


@dataclass
class ClaimRun:
    """A claim with its result and wall time, as written to claims.json."""

    claim: Claim
    result: ClaimResult
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.claim.id,
            "statement": self.claim.statement,
            "paper": self.claim.paper,
            "theorem": self.claim.theorem,
            "verdict": self.result.verdict,
            "seconds": round(self.seconds, 3),
            "measured": self.result.figures,
            "figures": self.result.figure_files,
            "note": self.result.note,
        }


_REGISTRY: dict[str, Claim] = {}


def register_claim(*, id: str, statement: str, paper: str, theorem: str, reads_conll: ReadsConll = "never") -> Callable:
    """Decorator registering ``check`` under ``id`` (ids are unique). ``reads_conll``: whether ``check`` reads
    CoNLL-2003 train when it is given (`ClaimContext.conll_train`): 'never', 'always', or 'full' (in full mode
    only); ``uatlab reproduce --data-dir`` is refused when no selected claim reads it."""
    if reads_conll not in READS_CONLL:
        raise ValueError(f"claim {id!r}: reads_conll must be one of {READS_CONLL}, got {reads_conll!r}")

    def wrap(check: Callable[[ClaimContext], ClaimResult]) -> Callable[[ClaimContext], ClaimResult]:
        if id in _REGISTRY and _REGISTRY[id].check is not check:
            raise ValueError(f"claim id {id!r} is registered twice")
        _REGISTRY[id] = Claim(
            id=id, statement=statement, paper=paper, theorem=theorem, check=check, reads_conll=reads_conll
        )
        return check

    return wrap


def all_claims() -> list[Claim]:
    """Every registered claim, after importing the claim modules, in registration order."""
    from uatlab.claims import load_claim_modules

    load_claim_modules()
    return list(_REGISTRY.values())


def run_claim(claim: Claim, ctx: ClaimContext) -> ClaimRun:
    """Run one check; an exception becomes verdict 'error' with its message (the run goes on).

    An OSError of the machine's (`uatlab.io_safety.is_environment_error`: no space left on the device, a
    read-only file system, no permission) is raised instead: the check could not write its outputs, which says
    nothing about the claim, and the checks after it would meet the same disk.
    """
    from uatlab.io_safety import is_environment_error

    t0 = time.perf_counter()
    try:
        result = claim.check(ctx)
        if result.verdict not in ("pass", "fail", "error", "skipped"):
            raise ValueError(f"check returned an unknown verdict {result.verdict!r}")
    except Exception as exc:  # a failing check must not stop the other checks
        if is_environment_error(exc):
            raise
        result = ClaimResult(
            verdict="error",
            note=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}",
        )
    return ClaimRun(claim=claim, result=result, seconds=time.perf_counter() - t0)


def run_claims(
    ctx: ClaimContext,
    select: Callable[[Claim], bool] | None = None,
    on_done: Callable[[ClaimRun], None] | None = None,
) -> list[ClaimRun]:
    """Run every registered claim (optionally filtered); ``on_done`` is called after each.

    ``ctx`` must be a `ClaimContext`, ``select`` (which claims to run) and ``on_done`` functions of one argument
    or None: anything else is a TypeError naming the argument before any check runs (a wrong ``ctx`` would
    otherwise turn every claim into verdict 'error', a wrong ``on_done`` fail only after the first check).
    """
    if not isinstance(ctx, ClaimContext):
        raise TypeError(f"run_claims: ctx must be a ClaimContext, got {type(ctx).__name__}")
    if select is not None and not callable(select):
        raise TypeError(
            f"run_claims: select must be a function Claim -> bool or None, got {type(select).__name__} "
            "(to select by id: select=lambda claim: fnmatch.fnmatch(claim.id, 'A.*'))"
        )
    if on_done is not None and not callable(on_done):
        raise TypeError(
            f"run_claims: on_done must be a function ClaimRun -> None or None, got {type(on_done).__name__}"
        )
    runs = []
    for claim in all_claims():
        if select is not None and not select(claim):
            continue
        run = run_claim(claim, ctx)
        runs.append(run)
        if on_done is not None:
            on_done(run)
    return runs
