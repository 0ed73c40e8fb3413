"""``--require-certified``: compile and certify exit 1, after printing every figure (compile: after saving the
model), unless the certificate proves every token or example that can be right; without it they exit 0 whatever
the certificate proves. For token, --ff deep and next-token models alike."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from uatlab.cli import main

SENTENCES = [
    [("the", "O"), ("cat", "B-X"), ("sat", "O")],
    [("a", "O"), ("dog", "B-X"), ("ran", "O"), ("home", "I-X")],
    [("the", "O"), ("dog", "B-X"), ("sat", "O")],
    [("cat", "B-X"), ("ran", "O")],
]


def _conll(sentences) -> str:
    return "".join("".join(f"{w}\t{y}\n" for w, y in s) + "\n" for s in sentences)


@pytest.fixture
def here(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.txt").write_text(_conll(SENTENCES))
    # the same sentences with every label moved on by one: no model trained on d.txt gets them right
    cycle = {"O": "B-X", "B-X": "I-X", "I-X": "O"}
    (tmp_path / "relabelled.txt").write_text(_conll([[(w, cycle[y]) for w, y in s] for s in SENTENCES]))
    return tmp_path


def _run(argv: list[str], capsys) -> tuple[int, dict, str]:
    code = main(argv)
    got = capsys.readouterr()
    return code, json.loads(got.out), got.err


@pytest.mark.parametrize("ff", ["knots", "deep"])
def test_certify_exits_1_only_when_asked_and_not_certified(here: Path, capsys, ff: str) -> None:
    code, fig, err = _run(["compile", "d.txt", "--ff", ff, "--json", "--require-certified"], capsys)
    assert code == 0 and fig["certified"] is True, err
    code, fig, err = _run(["certify", "model.safetensors", "d.txt", "--json", "--require-certified"], capsys)
    assert code == 0 and fig["certified"] is True and "not certified" not in err
    code, fig, err = _run(["certify", "model.safetensors", "relabelled.txt", "--json"], capsys)
    assert code == 0 and fig["certified"] is False  # the default: the figures say it, the status does not
    code, fig, err = _run(["certify", "model.safetensors", "relabelled.txt", "--json", "--require-certified"], capsys)
    assert code == 1 and fig["certified"] is False and fig["certified_tokens"] < fig["ceiling_tokens"]
    line = err.strip().splitlines()[-1]
    assert line == (
        f"not certified: the certificate proves {fig['certified_tokens']} of the {fig['ceiling_tokens']} tokens "
        "that can be right (--require-certified: exit status 1)"
    ), err
    # the tables too are printed in full before the exit
    assert main(["certify", "model.safetensors", "relabelled.txt", "--require-certified"]) == 1
    assert "proved" in capsys.readouterr().out


def test_compile_saves_the_model_then_exits_1_when_its_proof_is_void(here: Path, capsys) -> None:
    """--exp-ulp 0.5 (the least it takes: a correctly rounded exp) below the float32 exp error measured in this
    process, as the certificate measures it: the proof is void."""
    from uatlab.numerics.exp_accuracy import measured_exp_ulps
    from uatlab.verify.environment import EXP_CHECK_SAMPLES

    measured = measured_exp_ulps("float32", EXP_CHECK_SAMPLES)
    if all(v is not None and v <= 0.5 for v in measured.values()):
        pytest.skip(f"this machine's float32 exp is correctly rounded ({measured}): no --exp-ulp voids a proof")
    argv = ["compile", "d.txt", "--dtype", "float32", "--exp-ulp", "0.5", "--json"]
    code, fig, err = _run([*argv, "--require-certified"], capsys)
    assert code == 1 and fig["certified"] is False and fig["invalidated_by"], err
    assert (here / "model.safetensors").is_file() and not (here / "model.safetensors.work").exists()
    assert "its proof is void (--require-certified: exit status 1)" in err.strip().splitlines()[-1], err
    code, fig, _ = _run([*argv, "--out", "other.safetensors"], capsys)
    assert code == 0 and fig["certified"] is False


def test_require_certified_with_no_certify_is_refused_before_anything_is_written(here: Path, capsys) -> None:
    for extra in ([], ["--ff", "deep"], ["--task", "next-token", "--format", "text", "--window", "2"]):
        before = sorted(p.name for p in here.iterdir())
        assert main(["compile", "d.txt", "--no-certify", "--require-certified", *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("error:") == 1 and "--require-certified needs the certificate" in err, err
        assert sorted(p.name for p in here.iterdir()) == before


def test_next_token_examples_are_counted_as_examples(here: Path, capsys) -> None:
    (here / "t.txt").write_text("the cat sat on the mat and the dog sat on the log " * 2)
    argv = ["compile", "t.txt", "--task", "next-token", "--window", "3", "--json", "--require-certified"]
    code, fig, err = _run(argv, capsys)
    assert code == 0 and fig["certified"] is True, err
    # an example whose label the model never outputs: not every example can be proven
    (here / "e.jsonl").write_text(
        '{"tokens": ["the", "cat", "sat"], "label": "on"}\n{"tokens": ["cat", "sat", "on"], "label": "zebra"}\n'
    )
    code, fig, err = _run(["certify", "model.safetensors", "e.jsonl", "--json", "--require-certified"], capsys)
    assert code == 1 and fig["certified"] is False, err
    assert "examples that can be right; 1 examples have a label the model never outputs (--require-certified" in err
    assert main(["certify", "model.safetensors", "e.jsonl", "--json"]) == 0


@pytest.mark.parametrize(
    ("module", "name", "argv"),
    [
        ("uatlab.cli.seq2seq_deep", "compile_deep_file", ["d.txt", "--ff", "deep"]),
        ("uatlab.cli.next_token", "compile_next_token_file", ["t.txt", "--task", "next-token", "--window", "3"]),
    ],
)
def test_deep_and_next_token_compiles_exit_1_when_their_figures_say_not_certified(
    here: Path, capsys, monkeypatch, module: str, name: str, argv: list[str]
) -> None:
    """Their certificates prove every example of data they compile; a run whose figures say otherwise (as one
    would if a floating-point condition failed) saves the model and exits 1."""
    import importlib

    (here / "t.txt").write_text("the cat sat on the mat and the dog sat on the log " * 2)
    mod = importlib.import_module(module)
    real = getattr(mod, name)

    def uncertified(*args, **kwargs):
        fig = real(*args, **kwargs)
        return fig | {"certified": False}

    monkeypatch.setattr(mod, name, uncertified)
    code, fig, err = _run(["compile", *argv, "--json", "--require-certified"], capsys)
    assert code == 1 and fig["certified"] is False and (here / "model.safetensors").is_file()
    assert err.strip().splitlines()[-1].endswith("(--require-certified: exit status 1)"), err
    assert main(["compile", *argv, "--json", "--out", "other.safetensors"]) == 0
