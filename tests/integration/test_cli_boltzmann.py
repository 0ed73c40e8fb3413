"""CLI: ``uatlab boltzmann`` (paper A, Lemma 1)."""

import json
import math

from uatlab.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_two_vectors_satisfying_lemma1(capsys):
    code, out, _ = run(capsys, "boltzmann", "0,6,12", "0,6,18", "--json")
    assert code == 0
    d = json.loads(out)
    b0 = sum(v * math.exp(v) for v in (0, 6, 12)) / sum(math.exp(v) for v in (0, 6, 12))
    assert abs(d["boltz"][0] - b0) < 1e-12
    assert d["hypotheses_hold"] and d["lemma1_applies"] and d["gap_exceeds_bound_certified"]
    assert abs(d["bound"] - math.log(3) ** 2 * math.exp(-2 * 18)) < 1e-20
    assert d["gap"] > d["bound"]


def test_violated_hypothesis_is_reported_not_an_error(capsys):
    code, out, _ = run(capsys, "boltzmann", "0,1,12", "0,2,12")
    assert code == 0 and "fail: components" in out


def test_bad_input_one_error_line(capsys):
    code, out, err = run(capsys, "boltzmann", "0,x,2")
    assert code == 2 and out == "" and "vector 0, component 1" in err and "Traceback" not in err
    code, _, err = run(capsys, "boltzmann", "0,1", "1,2,3")
    assert code == 2 and "equal lengths" in err
    code, _, err = run(capsys, "boltzmann", "1", "2", "3")
    assert code == 2 and "one or two vectors" in err
