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


def test_components_beyond_the_exact_precision_cap_report_float64_without_certificate(capsys):
    code, out, err = run(capsys, "boltzmann", "0,1e20", "1,1e20", "--json")
    assert code == 0 and "Traceback" not in err
    d = json.loads(out)
    assert d["gap_exceeds_bound_certified"] is None and d["log10_gap_exact"] is None
    assert d["exact_check"].startswith("skipped: |components| up to r = 1e+20 need 8.69e+19 digits")
    assert d["gap"] == 0.0 and d["log10_bound"] < -8e19
    assert err.count("\n") == 1 and err.startswith("note: exact check skipped")


def test_max_digits_sets_the_cap(capsys):
    # r = 18 needs int(36 / ln 10) + 30 = 45 digits
    code, out, _ = run(capsys, "boltzmann", "0,6,12", "0,6,18", "--json", "--max-digits", "44")
    d = json.loads(out)
    assert code == 0 and d["gap_exceeds_bound_certified"] is None and "45 digits" in d["exact_check"]
    code, out, _ = run(capsys, "boltzmann", "0,6,12", "0,6,18", "--json", "--max-digits", "45")
    d = json.loads(out)
    assert code == 0 and d["gap_exceeds_bound_certified"] is True and d["exact_check"] == "done at 45 digits"
    code, out, err = run(capsys, "boltzmann", "0,6,12", "0,6,18", "--max-digits", "5")
    assert code == 2 and out == "" and err.startswith("error: --max-digits must be at least 30")


def test_exact_check_reports_progress_per_component():
    from uatlab.numerics.arb import arb_boltz, working_precision

    calls = []
    with working_precision(digits=50):
        b = arb_boltz([0.0, 6.0, 12.0], progress=calls.append)
    assert calls == [1, 1, 1]
    expected = sum(v * math.exp(v) for v in (0, 6, 12)) / sum(math.exp(v) for v in (0, 6, 12))
    assert abs(float(b.mid()) - expected) < 1e-12


def test_components_near_the_float64_maximum_are_reported_not_a_traceback(capsys):
    """2r overflows float64 for r ≥ ~9e307: the digits the exact check needs, the log10 bound and the smallest gap
    are formed without it (the digits as a float, r / ln 10 first); the gap beyond float64's range is +inf."""
    for argv in (("1e308,0", "1e308,1"), ("1,2", "1,3", "--r", "1e308")):
        code, out, err = run(capsys, "boltzmann", *argv, "--json")
        d = json.loads(out)
        assert code == 0 and "Traceback" not in err and d["exact_check"].startswith("skipped"), err
        assert math.isclose(d["log10_bound"], -2 * (1e308 / math.log(10)) + 2 * math.log10(math.log(2)))
    code, out, err = run(capsys, "boltzmann", "--json", "--", "1e308,-1e308")
    assert code == 0 and json.loads(out)["min_gap"] == "inf" and "Warning" not in err, err
