"""How every command prints a certificate's assumptions, run-time checks, a void proof and a model saved uncertified
(token, next-token and --ff deep certificates alike), and the exit status --require-certified asks for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from uatlab.cli.app import console, err_console

REQUIRE_CERTIFIED_HELP = (
    "Exit with status 1, after every figure is printed (and, for compile, the model saved), unless the certificate "
    'proves every token (example) that can be right and its proof stands ("certified": true); without it the '
    "exit status is 0 whatever the certificate proves."
)


def table_rows(fig: dict[str, Any]) -> dict[str, Any]:
    """The figures for a key-value table: without the assumptions and run-time checks, which
    `print_certificate_assumptions` prints one a line."""
    return {k: v for k, v in fig.items() if k not in ("assumptions", "environment", "threads")}


def print_certificate_assumptions(fig: dict[str, Any]) -> None:
    """Below a table of a certificate's figures: each assumption of its proof (``assumes: ...``), then one line of
    the run-time checks made in this process and whether they hold; why a proof is void is a row of the table
    (``invalidated_by``) and a warning (`warn_void_proof`)."""
    for a in fig.get("assumptions") or []:
        console.print(f"assumes: {a}", highlight=False)
    env = fig.get("environment")
    if env:
        status = "hold" if env.get("ok") else "DO NOT all hold: the certificate does not cover runs in this process"
        checked = ", ".join(f"{k}={v}" for k, v in env.items() if k not in ("ok", "torch_compile"))
        compiled = f"; torch.compile: {env['torch_compile']}" if "torch_compile" in env else ""
        console.print(
            f"run-time checks of the certificate's assumptions {status} ({checked}){compiled}", highlight=False
        )


def warn_void_proof(invalidated_by: list[str], unit: str = "tokens", bound: int | None = None) -> None:
    """One stderr line per reason (in every output mode) when a certificate's proof is void: it then proves no
    token (or example); ``bound``: what the bounds alone would prove, when the certificate says."""
    alone = "" if bound is None else f" (the bounds alone would prove {bound} {unit})"
    for reason in invalidated_by:
        err_console.print(
            f"warning: the proof is void, no {unit[:-1]} is proven: {reason}{alone}", highlight=False, soft_wrap=True
        )


def warn_exp_ulp_below_measured(exp_ulp: float, dtype: str) -> None:
    """Before any data is read: one stderr line when the assumed ``--exp-ulp`` is below the exp error measured in
    this process for ``dtype`` (`uatlab.numerics.exp_accuracy.measured_exp_ulps`, as the certificate's own check
    measures it), so that the proof will be void; the run goes on (the bounds' figures are still reported)."""
    from uatlab.numerics.exp_accuracy import measured_exp_ulps
    from uatlab.verify.environment import EXP_CHECK_SAMPLES

    measured = measured_exp_ulps(dtype, EXP_CHECK_SAMPLES)
    if all(v is not None and v <= exp_ulp for v in measured.values()):
        return
    shown = ", ".join(f"{k} {'not measurable' if v is None else f'{v:.3g} ulp'}" for k, v in measured.items())
    err_console.print(
        f"warning: --exp-ulp {exp_ulp:g} is below the exp error measured in this process ({dtype}: {shown}): the "
        "certificate's proof will be void (its bounds are still computed: bound_certified_tokens)",
        highlight=False,
        soft_wrap=True,
    )


def warn_not_certified(certified: int | None, ceiling: int, dtype: str, out: Path, unit: str = "tokens") -> None:
    """One stderr line (in every output mode) when the saved model's certificate does not prove every ceiling
    example (``certified``: how many it proves, None if it does not count them); exit status stays 0, as for
    `uatlab certify`."""
    count = f"{certified} of {ceiling}" if certified is not None else f"not all {ceiling}"
    err_console.print(
        f"warning: the model is not certified: its certificate does not prove every {unit[:-1]} that can be right "
        f"correct in {dtype} ({count} ceiling {unit}); the model was saved to {out} anyway",
        highlight=False,
        soft_wrap=True,
    )


def exit_unless_certified(required: bool, fig: dict[str, Any]) -> None:
    """With --require-certified (``required``): unless ``fig`` (a command's figures, printed already) says
    ``"certified": true``, one stderr line saying what the certificate proved and exit status 1
    (``typer.Exit``); a script can then run ``uatlab certify M DATA --require-certified && ...``."""
    if not required or fig.get("certified") is True:
        return
    import typer

    # token certificates count tokens; next-token ones count examples (compile) or rows (certify: one per example)
    counts = (("tokens", "tokens"), ("examples", "examples"), ("rows", "examples"))
    key, unit = next(((k, u) for k, u in counts if f"ceiling_{k}" in fig), counts[0])
    proved, ceiling = fig.get(f"certified_{key}"), fig.get(f"ceiling_{key}")
    void = "; its proof is void" if fig.get("invalidated_by") else ""
    unknown = fig.get("labels_the_model_cannot_output")  # next-token certify: examples no proof can cover
    if unknown:
        void += f"; {unknown} examples have a label the model never outputs"
    err_console.print(
        f"not certified: the certificate proves {proved} of the {ceiling} {unit} that can be right{void} "
        "(--require-certified: exit status 1)",
        highlight=False,
        soft_wrap=True,
    )
    raise typer.Exit(1)
