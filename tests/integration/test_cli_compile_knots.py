"""``uatlab compile --ff/--labels``: the knot FF's figures (paper A ratio, bits per parameter) and bad options."""

from __future__ import annotations

import json
import math

from uatlab.cli import main

# word "a" is X at position 0 and Y at position 1 of the same sequences: H(label | word) = 2 bits over 4 tokens
DATA = "a X\nb Z\na Y\n\na X\nb Z\na Y\n\nb Z\n"


def _compile(capsys, tmp_path, *extra):
    src = tmp_path / "d.conll"
    src.write_text(DATA)
    out = tmp_path / "m.safetensors"
    code = main(["compile", str(src), "--out", str(out), "--json", *extra])
    cap = capsys.readouterr()
    return code, cap, out


def test_knots_report_ratio_and_bits_per_parameter(capsys, tmp_path):
    code, cap, _ = _compile(capsys, tmp_path)
    assert code == 0, cap.err
    fig = json.loads(cap.out)
    assert fig["ff"] == "knots" and fig["certified"] is True and fig["correct_tokens"] == fig["ceiling_tokens"] == 7
    assert fig["within_paper_a"] is True and fig["params_non_embedding"] <= fig["paper_a_param_count"]
    assert math.isclose(fig["non_embedding_vs_paper_a"], fig["params_non_embedding"] / fig["paper_a_param_count"])
    # Σ H(label | word): word a has X, Y, X, Y → 4 tokens × 1 bit; b always Z → 0
    assert math.isclose(fig["label_information_bits"], 4.0)
    assert math.isclose(fig["bits_per_param_non_embedding"], 4.0 / fig["params_non_embedding"])
    assert 0 < fig["params_non_embedding_nonzero"] < fig["params_non_embedding"]


def test_ramps_still_available_and_bad_options_are_one_line_errors(capsys, tmp_path):
    code, cap, _ = _compile(capsys, tmp_path, "--ff", "ramps")
    assert code == 0 and json.loads(cap.out)["ff_width"] == 2 * json.loads(cap.out)["label_boundaries"]
    for extra, word in (
        (["--ff", "spline"], "--ff"),
        (["--labels", "gray"], "--labels"),
        (["--ff", "ramps", "--labels", "ordinal"], "--labels"),
    ):
        src = tmp_path / "d.conll"
        dst = tmp_path / "bad.safetensors"
        code = main(["compile", str(src), "--out", str(dst), *extra])
        cap = capsys.readouterr()
        assert code == 2 and word in cap.err and "Traceback" not in cap.err
        assert not dst.exists()
