"""CLI: ``uatlab hardmax-counterexample`` and ``uatlab contextual-mapping literal``."""

import json

from uatlab.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_hardmax_counterexample_json(capsys):
    code, out, _ = run(capsys, "hardmax-counterexample", "--heads", "1,2", "--trials", "50", "--seed", "3", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["trials"] == 50 and data["heads"] == [1, 2]
    assert data["collisions"] == {"1": 50, "2": 50}
    assert all(v > 0 for v in data["softmax_delta"].values())


def test_hardmax_counterexample_table_and_bad_heads(capsys):
    code, out, _ = run(capsys, "hardmax-counterexample", "--heads", "1", "--trials", "20")
    assert code == 0 and "20/20" in out and "every hardmax layer collides" in out
    code, out, err = run(capsys, "hardmax-counterexample", "--heads", "1,x")
    assert code == 2 and out == "" and "error: --heads" in err and "Traceback" not in err
    code, _, err = run(capsys, "hardmax-counterexample", "--length", "3")
    assert code == 2 and "n ≥ 4" in err and "Traceback" not in err


def test_hardmax_counterexample_says_why_softmax_did_not_separate_in_float64(capsys):
    """At a long length softmax's outputs on the pair can be identical in float64: the table's "not all" comes with
    a note that counts those layers and names the cause, which a run where every layer separates does not print."""
    argv = ["hardmax-counterexample", "--heads", "1,2", "--trials", "5", "--dim", "2"]
    code, out, err = run(capsys, *argv, "--length", "200")
    data = json.loads(run(capsys, *argv, "--length", "200", "--json")[1])
    unseparated = sum(5 - v for v in data["softmax_separated"].values())
    assert code == 0 and unseparated > 0 and "softmax separates not all" in out
    assert f"note: for {unseparated} layers softmax's outputs on X1 and X2 are identical in float64 (δ = 0)" in err
    code, out, err = run(capsys, *argv, "--length", "4")
    assert code == 0 and "softmax separates all" in out and "note:" not in err


def test_contextual_mapping_literal_json(capsys):
    code, out, err = run(capsys, "contextual-mapping", "literal", "--vocab-size", "3", "--length", "2", "--json")
    assert code == 0
    data = json.loads(out)  # exactly one JSON object on stdout; progress went to stderr
    for key in ("passes", "delta_achieved", "delta_theorem", "digits", "float64_collapsed_ids", "seconds"):
        assert key in data
    assert data["passes"] is True and isinstance(data["delta_theorem"], str) and "e-" in data["delta_theorem"]
    assert data["log10_delta_achieved"] >= data["log10_delta_theorem"]
    assert "digits" in err


def test_contextual_mapping_literal_table_and_refusals(capsys):
    code, out, _ = run(
        capsys, "contextual-mapping", "literal", "--vocab-size", "3", "--length", "2", "--sequences", "sets"
    )
    assert code == 0 and "decimal digits needed" in out and "True" in out
    code, _, err = run(capsys, "contextual-mapping", "literal", "--vocab-size", "50", "--dim", "1")
    assert code == 2 and "cannot exist" in err and "Traceback" not in err
    code, _, err = run(
        capsys, "contextual-mapping", "literal", "--vocab-size", "3", "--length", "2", "--max-digits", "40"
    )
    assert code == 2 and "did not pass at the cap of 40" in err
    code, _, err = run(capsys, "contextual-mapping", "literal", "--sequences", "some")
    assert code == 2 and "--sequences" in err
    # the causal certificate checks every prefix: --sequences is refused, not ignored; --max-digits has one minimum
    code, _, err = run(capsys, "contextual-mapping", "literal", "--causal", "--sequences", "sets")
    assert code == 2 and err.startswith("error: --sequences has no effect with --causal"), err
    for extra in ([], ["--causal"]):
        code, _, err = run(capsys, "contextual-mapping", "literal", *extra, "--max-digits", "5")
        assert code == 2 and err.startswith("error: --max-digits 5 is below the minimum of 16"), (extra, err)


def test_memory_refusal_suggests_only_what_the_command_accepts(capsys, monkeypatch):
    """The refusal's remedies exist: the environment variable it names raises the limit for this command,
    and every command it says takes --max-memory lists that option (hardmax-counterexample has none)."""
    import re

    monkeypatch.delenv("UATLAB_MAX_MEMORY", raising=False)
    big = ["hardmax-counterexample", "--dim", "4096", "--head-dim", "4096", "--heads", "1024", "--trials", "1"]
    code, _, err = run(capsys, *big)
    assert code == 2 and "would need about" in err, err
    env = re.search(r"(UATLAB_MAX_MEMORY)=SIZE", err)
    assert env, err
    for line in err.split(";")[1:]:
        if "--max-memory" in line:
            named = re.findall(r"\b(compile|certify|train)\b", line)
            assert named, f"--max-memory offered without naming the commands that take it: {err}"
            for cmd in named:
                code, out, _ = run(capsys, cmd, "--help")
                assert code == 0 and "--max-memory" in out, cmd
    monkeypatch.setenv("UATLAB_MAX_MEMORY", "1K")  # the variable governs this command: a small run is refused
    code, _, err = run(capsys, "hardmax-counterexample", "--trials", "1")
    assert code == 2 and "above the limit of 1.0 KB" in err, err
