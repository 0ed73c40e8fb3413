"""The rows of the next-token capacity experiment report the rows the certificate proves, not only those the
reference gets right: a void proof (a failed run-time check) proves none, though every row is still correct."""

from __future__ import annotations

import uatlab.verify.uniform_attention as uniform_attention
from uatlab.experiments.next_token import compiled_point


def test_a_row_reports_the_certified_rows_of_its_certificate() -> None:
    row = compiled_point(120, "float64", n=8, C=3, V=4, seed=1)
    assert row["certified"] and row["certified_rows"] == row["ceiling"] == row["N"] == 120


def test_a_void_proof_certifies_no_row_though_all_are_correct(monkeypatch) -> None:
    real = uniform_attention.certificate_environment

    def failing(regime: str, n: int):
        env, failed = real(regime, n)
        return env, [*failed, "gradual_underflow"]

    monkeypatch.setattr(uniform_attention, "certificate_environment", failing)
    row = compiled_point(120, "float64", n=8, C=3, V=4, seed=1)
    assert row["correct"] == row["N"] == 120
    assert not row["certified"] and row["certified_rows"] == 0
