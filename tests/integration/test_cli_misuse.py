"""Commands on inputs too large or malformed for them: one ``error:`` line, exit 2, nothing written."""

from __future__ import annotations

from uatlab.cli import main


def test_gd_in_context_refuses_a_context_that_would_not_fit_in_memory(capsys, tmp_path):
    out = tmp_path / "g"
    code = main(
        [
            "approx",
            "gd-in-context",
            "--contexts",
            "5000",
            "--eps",
            "0.01",
            "--d",
            "2",
            "--steps",
            "1",
            "--max-memory",
            "4G",
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: gd-in-context would need about ") and "N = 5000" in err
    assert "Traceback" not in err and not out.exists()
