"""``uatlab approx``: the guard on ``--out`` covers exactly the files each mode writes.

A user's file under a name the mode writes is refused (named, kept) before any work; a user's file under a name
only another mode writes, or a similar name, is neither refused nor touched.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from uatlab.cli import main
from uatlab.io_safety import OUTPUT_RECORD

RELU = ["--nets", "1", "--n", "3", "--d", "2", "--hidden", "2"]
# mode: (small command line, the files it writes)
MODES = {
    "truncated-linear-token": (
        ["truncated-linear", "--mode", "token", "--anchors", "11,21", "--points", "201"],
        {"truncated-linear-token.csv", "truncated-linear-token.png"},
    ),
    "truncated-linear-sequence": (
        ["truncated-linear", "--mode", "sequence", "--anchors", "11,21", "--points", "201"],
        {"truncated-linear-sequence.csv", "truncated-linear-sequence.png"},
    ),
    "heads": (["heads", "--heads", "1,2", "--points", "201"], {"heads.csv", "heads.png"}),
    "relu-network": (
        ["relu-network", *RELU, "--anchors", "17,33", "--samples", "8"],
        {"relu-network.csv", "relu-network.png"},
    ),
    "relu-network-standard": (
        ["relu-network", *RELU, "--layers", "2", "--standard", "--anchors", "17,33", "--samples", "8"],
        {"relu-network-standard.csv", "relu-network-standard.png"},
    ),
    "relu-network-bounds": (
        ["relu-network", *RELU, "--layers", "1", "--standard", "--pairs", "50"],
        {"relu-network-one-standard-layer.csv", "relu-network-one-standard-layer.png"},
    ),
    "universal": (
        ["universal", "--grids", "3,4", "--samples", "200"],
        {"universal-product-mean-d1-n3.csv", "universal-product-mean-d1-n3.png"},
    ),
    "universal-d2": (
        ["universal", "--d", "2", "--n", "2", "--grids", "2,3", "--samples", "200"],
        {"universal-product-mean-d2-n2.csv", "universal-product-mean-d2-n2.png"},
    ),
    "gd-in-context": (
        ["gd-in-context", "--contexts", "8", "--eps", "0.01,0.001", "--d", "3", "--steps", "1"],
        {"gd-in-context.csv", "gd-in-context.png"},
    ),
    "incontext": (
        ["incontext", "--task", "relu-features", "--steps", "5", "--train-steps", "20", "--test-tasks", "8"],
        {"incontext.csv"},
    ),
}
EVERY_NAME = set().union(*(names for _, names in MODES.values())) | {"incontext.png"}


def _listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


@pytest.mark.parametrize("mode", list(MODES))
def test_files_of_other_modes_and_similar_names_are_left_alone(mode: str, tmp_path: Path, capsys) -> None:
    argv, writes = MODES[mode]
    out = tmp_path / "out"
    out.mkdir()
    users = (EVERY_NAME - writes) | {f"{Path(n).stem}-old{Path(n).suffix}" for n in writes}
    users |= {f"{n}.bak" for n in writes}
    for name in users:
        (out / name).write_text(f"the user's {name}")
    before = _listing(out)
    code = main(["approx", *argv, "--out", str(out), "--json"])
    err = capsys.readouterr().err
    assert code == 0, err
    after = _listing(out)
    assert {k: v for k, v in after.items() if k in before} == before  # every user file kept as it was
    assert set(after) - set(before) - {OUTPUT_RECORD} == writes  # and the run wrote exactly its files


@pytest.mark.parametrize(("mode", "name"), [(m, n) for m, (_, names) in MODES.items() for n in sorted(names)])
def test_a_user_file_where_the_mode_writes_is_refused_before_any_work(
    mode: str, name: str, tmp_path: Path, capsys
) -> None:
    argv, _ = MODES[mode]
    out = tmp_path / "out"
    out.mkdir()
    (out / name).write_text("mine")
    assert main(["approx", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and str(out / name) in err, err
    assert _listing(out) == {name: b"mine"}


@pytest.mark.parametrize("mode", list(MODES))
def test_the_help_of_out_names_what_the_mode_writes(mode: str, capsys) -> None:
    """--out's help says "figure" only for modes that write one (incontext writes its CSV only)."""
    assert main(["approx", MODES[mode][0][0], "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    figure = any(n.endswith(".png") for n in MODES[mode][1])
    assert ("Folder for the CSV and the figure" in text) == figure, text
    assert figure or "Folder for the CSV (a table, no figure)" in text
    assert ("Print one JSON object (rows, slope)" in text) == figure  # incontext prints rows and its CSV's path
    assert figure or "Print one JSON object (rows, the CSV's path)" in text
