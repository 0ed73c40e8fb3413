"""CI guards the claims: `uatlab reproduce` fails when a claim raises; claims find CoNLL-2003 only where told."""

import pytest

from uatlab.claims.registry import _REGISTRY, CONLL_DIR_ENV, ClaimContext, ClaimResult, register_claim
from uatlab.cli import main


def test_reproduce_exits_nonzero_when_a_claim_raises(tmp_path, capsys):
    @register_claim(id="guard.raises", statement="raises", paper="none", theorem="T")
    def broken(ctx):
        raise RuntimeError("headline broke")

    @register_claim(id="guard.passes", statement="passes", paper="none", theorem="T")
    def fine(ctx):
        return ClaimResult("pass", figures={"x": 1})

    try:
        assert main(["reproduce", "--quick", "--only", "guard.passes", "--out", str(tmp_path / "a"), "--json"]) == 0
        assert main(["reproduce", "--quick", "--only", "guard.*", "--out", str(tmp_path / "b"), "--json"]) == 1
        assert '"verdict": "error"' in capsys.readouterr().out
    finally:
        _REGISTRY.pop("guard.raises", None)
        _REGISTRY.pop("guard.passes", None)


@pytest.mark.parametrize("code", ["ENOSPC", "EROFS", "EACCES"])
def test_reproduce_stops_with_exit_2_when_a_claim_cannot_write_its_outputs(code, tmp_path, capsys):
    """A full disk (or a read-only or forbidden folder) is the machine's failure, not the claim's: exit 2 with one
    line naming the file, and no report recording the claim as an error."""
    import errno
    import os

    from uatlab.io_safety import save_figure

    number = getattr(errno, code)

    class Figure:  # a writer that meets the disk's error, as matplotlib's PNG writer does (no file name)
        def savefig(self, path, **kwargs):
            with open(path, "wb") as fh:
                fh.write(b"\x89PNG")
            raise OSError(number, os.strerror(number))

    @register_claim(id="guard.writes", statement="writes a figure", paper="none", theorem="T")
    def writes(ctx):
        save_figure(Figure(), ctx.figure_path("guard.writes", "plot.png"))
        return ClaimResult("pass", figures={"x": 1})

    out = tmp_path / "rep"
    try:
        assert main(["reproduce", "--quick", "--only", "guard.writes", "--out", str(out), "--json"]) == 2
    finally:
        _REGISTRY.pop("guard.writes", None)
    captured = capsys.readouterr()
    err = captured.err
    assert err.count("error:") == 1 and "Traceback" not in err, err
    figure = out / "figures" / "guard.writes__plot.png"
    assert str(figure) in err
    if number == errno.ENOSPC:
        assert f"no space left on device writing {figure}" in err
    else:
        assert os.strerror(number) in err
    assert not (out / "claims.json").exists() and not (out / "report.md").exists()
    assert '"verdict"' not in captured.out
    assert not figure.exists() and not (out / "figures").exists()  # no temporary file, no empty folder left


def test_claims_read_conll_only_from_the_argument_or_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(CONLL_DIR_ENV, raising=False)
    assert ClaimContext(quick=True, out_dir=tmp_path).conll_train() is None
    (tmp_path / "train.txt").write_text("Zorbia B-ORG\n\n")
    assert ClaimContext(quick=True, out_dir=tmp_path, data_dir=tmp_path).conll_train() == tmp_path / "train.txt"
    monkeypatch.setenv(CONLL_DIR_ENV, str(tmp_path))
    assert ClaimContext(quick=True, out_dir=tmp_path).conll_train() == tmp_path / "train.txt"


def test_reproduce_refuses_a_data_dir_without_train_txt(tmp_path, capsys):
    assert main(["reproduce", "--quick", "--data-dir", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "no train.txt" in capsys.readouterr().err


@pytest.mark.parametrize("claim_id", ["A.sec5.rank1-trained-memorization"])
def test_claim_without_conll_runs_on_a_synthetic_stand_in_and_says_so(claim_id, tmp_path, monkeypatch):
    from uatlab.claims.registry import all_claims, run_claim

    monkeypatch.delenv(CONLL_DIR_ENV, raising=False)
    claim = {c.id: c for c in all_claims()}[claim_id]  # all_claims imports the claim modules (any test order)
    run = run_claim(claim, ClaimContext(quick=True, out_dir=tmp_path))
    assert run.result.verdict == "pass"
    assert (
        "synthetic" in str(run.result.figures) + run.result.note
        and CONLL_DIR_ENV in str(run.result.figures) + run.result.note
    )


def test_reproduce_only_takes_several_globs_and_names_the_one_matching_nothing(tmp_path, capsys):
    for name in ("guard.one", "guard.two", "guard.three"):
        register_claim(id=name, statement=name, paper="none", theorem="T")(
            lambda ctx, name=name: ClaimResult("pass", figures={"name": name})
        )
    try:
        argv = ["reproduce", "--quick", "--only", "guard.one", "--only", "guard.two,guard.th*"]
        assert main([*argv, "--out", str(tmp_path / "a"), "--json"]) == 0
        out = capsys.readouterr().out
        assert all(f'"id": "{n}"' in out for n in ("guard.one", "guard.two", "guard.three"))
        assert '"total": 3' in out
        assert main(["reproduce", "--quick", "--only", "guard.one,guard.typo", "--out", str(tmp_path / "b")]) == 2
        err = capsys.readouterr().err
        assert "--only 'guard.typo' matches no claim" in err
        assert not (tmp_path / "b").exists()
    finally:
        for name in ("guard.one", "guard.two", "guard.three"):
            _REGISTRY.pop(name, None)
