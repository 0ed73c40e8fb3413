"""Comma-separated list options of every command: an empty item or an item given twice is refused before any
work, with one ``error:`` line naming the option and the item (``uatlab.cli.options.list_items``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from uatlab.cli import main

# (command line before the option, the option, two valid items)
LIST_OPTIONS = [
    (["experiment", "depth-ablation", "data.txt"], "--layers", ("1", "3")),
    (["experiment", "capacity"], "--ns", ("16", "32")),
    (["experiment", "capacity"], "--grid", ("4", "8")),
    (["experiment", "rank-ablation", "data.txt"], "--ranks", ("1", "full")),
    (["hardmax-counterexample"], "--heads", ("1", "2")),
    (["reproduce"], "--only", ("A.*", "B.*")),
    (["approx", "truncated-linear"], "--anchors", ("11", "21")),
    (["approx", "heads"], "--heads", ("1", "2")),
    (["approx", "relu-network"], "--anchors", ("33", "65")),
    (["approx", "universal"], "--grids", ("5", "10")),
    (["approx", "gd-in-context"], "--contexts", ("8", "16")),
    (["approx", "gd-in-context"], "--eps", ("0.1", "0.01")),
    (["approx", "gd-in-context"], "--steps", ("1", "2")),
    (["approx", "incontext"], "--steps", ("20", "100")),
]


def _cases():
    for argv, option, (a, b) in LIST_OPTIONS:
        name = f"{' '.join(argv[:2])} {option}"
        yield pytest.param(argv, option, f"{a},,{b}", "item 2 of 3 is empty", id=f"{name} inner-empty")
        yield pytest.param(argv, option, f"{a},{b},", "item 3 of 3 is empty", id=f"{name} trailing-comma")
        yield pytest.param(argv, option, f",{a}", "item 1 of 2 is empty", id=f"{name} leading-comma")
        yield pytest.param(argv, option, f"{a},{b},{a}", f"'{a}' is given twice", id=f"{name} duplicate")


# the same value spelt twice: equal once parsed
SPELLINGS = [
    (["hardmax-counterexample"], "--heads", "1,2,01", "'01' (the same as '1') is given twice"),
    (["approx", "gd-in-context"], "--eps", "0.1,1e-1", "'1e-1' (the same as '0.1') is given twice"),
    (["experiment", "rank-ablation", "data.txt"], "--ranks", "full,2,FULL", "'FULL' (the same as 'full')"),
    (["experiment", "capacity"], "--ns", "16,0016", "'0016' (the same as '16')"),
]


@pytest.fixture
def here(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.txt").write_text("a X\nb Y\n\n")
    return tmp_path


def _run(here: Path, capsys, argv: list[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err and out == "", err
    assert sorted(p.name for p in here.iterdir()) == ["data.txt"]  # nothing written
    return lines[0]


@pytest.mark.parametrize(("argv", "option", "value", "why"), list(_cases()))
def test_empty_or_repeated_item_is_refused(here: Path, capsys, argv, option, value, why) -> None:
    line = _run(here, capsys, [*argv, option, value])
    assert f"{option} {value!r}" in line and why in line, line


# options whose default is the empty list (there an empty list means the default)
EMPTY_MEANS_DEFAULT = {("experiment", "capacity", "--grid")}


@pytest.mark.parametrize(
    ("argv", "option"),
    [(argv, option) for argv, option, _ in LIST_OPTIONS if (*argv[:2], option) not in EMPTY_MEANS_DEFAULT],
    ids=lambda v: " ".join(v[:2]) if isinstance(v, list) else v,
)
@pytest.mark.parametrize("value", ["", " "])
def test_empty_list_is_refused(here: Path, capsys, argv, option, value) -> None:
    """An empty list would run nothing (a sweep over no sizes) and exit 0 as if it had succeeded."""
    line = _run(here, capsys, [*argv, option, value])
    assert f"{option} {value!r}: the list is empty" in line, line


@pytest.mark.parametrize(("argv", "option", "value", "why"), SPELLINGS, ids=lambda v: str(v))
def test_one_value_spelt_twice_is_refused(here: Path, capsys, argv, option, value, why) -> None:
    line = _run(here, capsys, [*argv, option, value])
    assert f"{option} {value!r}" in line and why in line, line


def test_repeated_only_option_counts_as_one_list(here: Path, capsys) -> None:
    """``--only`` may be repeated: a glob given in two of them is refused too."""
    line = _run(here, capsys, ["reproduce", "--only", "A.*", "--only", "B.*,A.*"])
    assert "--only" in line and "'A.*' is given twice" in line, line


@pytest.mark.parametrize("seed", ["-1", str(2**32), str(2**64), "1.5"])
def test_export_seed_outside_the_seed_range_is_refused(here: Path, capsys, seed: str) -> None:
    """``uatlab export --seed`` is an integer in [0, 2^32 - 1] like every other seed: anything else is one error
    naming --seed, and the export directory is not written."""
    assert main(["synth", "s.jsonl", "-N", "4", "-n", "3", "-V", "6", "-C", "2", "--json"]) == 0
    assert main(["compile", "s.jsonl", "--out", "m.safetensors", "--json"]) == 0
    capsys.readouterr()
    argv = ["export", "m.safetensors", "tl", "--to", "transformer-lens", "--check", "2", "--seed", seed]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "--seed" in err and "Traceback" not in err, err
    assert not (here / "tl").exists()


def test_white_space_means_the_default_where_an_empty_list_does() -> None:
    """Where an empty list means the default, so does one of white space only (the commands read it as empty)."""
    from types import SimpleNamespace

    from uatlab.cli.options import _number_list
    from uatlab.cli.train import _ints

    check = _number_list(int, "integers", "grid", lambda v: None)
    param = SimpleNamespace(default="", opts=["--grid"])
    assert _ints(check(param, "  "), "--grid") == () == _ints(check(param, ""), "--grid")
