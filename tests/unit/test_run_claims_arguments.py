"""`run_claims` refuses wrongly typed arguments with a TypeError naming the argument, before any check runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from uatlab.claims import registry
from uatlab.claims.registry import Claim, ClaimContext, ClaimResult, run_claims


@pytest.fixture
def calls(monkeypatch) -> list[bool]:
    """One stand-in claim whose check records each call (and reads the context, as real checks do)."""
    seen: list[bool] = []

    def check(ctx: ClaimContext) -> ClaimResult:
        seen.append(ctx.quick)
        return ClaimResult(verdict="pass", figures={"quick": ctx.quick})

    claim = Claim(id="test.stand-in", statement="s", paper="p", theorem="t", check=check)
    monkeypatch.setattr(registry, "all_claims", lambda: [claim])
    return seen


def test_well_typed_arguments_run_the_claim(calls: list[bool], tmp_path: Path) -> None:
    done = []
    runs = run_claims(ClaimContext(quick=True, out_dir=tmp_path), select=lambda c: True, on_done=done.append)
    assert calls == [True] and [r.result.verdict for r in runs] == ["pass"] and done == runs


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"ctx": {"quick": True}}, "ctx"),
        ({"ctx": None}, "ctx"),
        ({"select": "A.*"}, "select"),
        ({"select": ["test.stand-in"]}, "select"),
        ({"on_done": []}, "on_done"),
        ({"on_done": "print"}, "on_done"),
    ],
    ids=lambda v: v if isinstance(v, str) else repr(v),
)
def test_wrongly_typed_argument_is_named_before_any_check(calls: list[bool], tmp_path: Path, kwargs, name) -> None:
    args = {"ctx": ClaimContext(quick=True, out_dir=tmp_path), **kwargs}
    with pytest.raises(TypeError, match=rf"run_claims: {name} must be") as info:
        run_claims(**args)
    assert type(kwargs[name]).__name__ in str(info.value)
    assert calls == []  # no check ran
