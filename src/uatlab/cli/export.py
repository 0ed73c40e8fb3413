"""``uatlab export MODEL --to transformer-lens OUT``: a uatlab model as a TransformerLens model.

The model (saved by ``uatlab compile`` or ``uatlab train``) is converted by
`uatlab.interop.to_hooked_transformer`, its logits are compared with uatlab's on random token
sequences (`uatlab.interop.compare_logits`), and the ``HookedTransformer`` is written to the new directory OUT
(``config.json`` with the vocabulary, ``weights.safetensors``) only when the largest relative difference is
within ``--tolerance``; otherwise exit 1 and nothing is written. `uatlab.interop.load_hooked` reads it back.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import typer

from uatlab.cli.app import app, console, err_console, key_value_table, print_json, say_on_interrupt
from uatlab.cli.options import SEED_MAX
from uatlab.errors import InputError
from uatlab.io_safety import check_output_dir

TARGETS = ("transformer-lens",)
# --json field → `uatlab.interop.LogitComparison` attribute (None with --check 0)
COMPARISON_FIELDS = {
    "checked_positions": "positions",
    "max_logit_difference": "max_abs_difference",
    "max_relative_logit_difference": "max_relative_difference",
    "argmax_disagreements": "argmax_disagreements",
    "nonfinite_positions": "nonfinite_positions",
    "mismatched_positions": "mismatched_positions",
}


# bytes of one check sequence besides its ids: a torch tensor and the numpy array over it (measured: 660–770 bytes
# a sequence, for max_len 8 to 512)
CHECK_ARRAY_BYTES = 800


def check_sequences(model, sequences: int, seed: int) -> list:
    """``sequences`` random token-id sequences of random lengths 1…max_len (torch's generator, seeded)."""
    import torch

    cfg = model.config
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(sequences):
        n = int(torch.randint(1, cfg.max_len + 1, (1,), generator=gen))
        out.append(torch.randint(0, cfg.vocab_size, (n,), generator=gen).numpy())  # (n,)
    return out


@app.command("export")
def export_cmd(
    model_path: Path = typer.Argument(..., metavar="MODEL", help="A uatlab model file (.safetensors)."),
    out: Path = typer.Argument(..., help="New directory to write (must not exist)."),
    to: str = typer.Option(..., "--to", help="Target format: transformer-lens."),
    check: int = typer.Option(
        100, "--check", min=0, help="Random sequences on which logits are compared (0: no comparison)."
    ),
    tolerance: float | None = typer.Option(
        None,
        "--tolerance",
        help="Largest relative logit difference accepted (max |L - L_TL| / max |L| per position); "
        "default √ε of the model's dtype: 1.5e-8 (float64), 3.5e-4 (float32). Beyond it nothing is written, exit 1.",
    ),
    seed: int = typer.Option(0, "--seed", min=0, max=SEED_MAX, help="Seed of the check sequences."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
) -> None:
    """Export a model to TransformerLens (a HookedTransformer with hooks and activation caches).

    \b
    Exit codes:
      0    exported (with --check, its logits agree with uatlab's within --tolerance)
      1    the logits differ beyond --tolerance: nothing was written
      2    a user error, one 'error:' line
      130  interrupted (Ctrl-C, SIGTERM): OUT is not created
    """
    if to not in TARGETS:
        raise InputError(f"--to {to!r} is not a known target; choose one of {', '.join(TARGETS)}")
    if tolerance is not None and not (math.isfinite(tolerance) and tolerance >= 0):
        raise InputError(f"--tolerance must be a finite number ≥ 0, got {tolerance}")
    if tolerance is not None and check == 0:
        raise InputError("--tolerance has no effect with --check 0 (no logits are compared); drop one of them")
    from uatlab.interop.transformer_lens import (
        check_new_directory,
        compare_logits,
        default_tolerance,
        save_hooked,
        to_hooked_transformer,
    )

    check_new_directory(out)  # before the model is read
    check_output_dir(out, option="OUT")  # and a folder it can be made in (not under a file, not read-only)
    say_on_interrupt(f"interrupted: {out} was not created (nothing was written)")
    from uatlab.models.io import load

    t0 = time.perf_counter()
    model = load(model_path)
    from uatlab.models.transformer import Transformer

    if not isinstance(model, Transformer):  # a memorizer of Kajitsuka & Sato 2025 (integer ReLU circuit)
        raise InputError(
            f"{model_path} is a {type(model).__name__} (a deep integer ReLU circuit), not a uatlab Transformer; "
            "only Transformers export to TransformerLens"
        )
    from uatlab.interop.transformer_lens import ExportError

    try:
        hooked = to_hooked_transformer(model)  # refuses what TransformerLens cannot hold, before anything is written
    except ExportError as exc:
        raise InputError(f"{model_path}: {exc}") from None
    tol = default_tolerance(model.config.dtype) if tolerance is None else tolerance
    if check:  # the check sequences are all made first: ~(max_len + 1) / 2 int64 ids and an array header each
        from uatlab.memory_guard import check_memory

        check_memory(
            check * (4.0 * (model.config.max_len + 1) + CHECK_ARRAY_BYTES),
            f"export --check {check}",
            f"{check} random sequences of up to {model.config.max_len} token ids are made before they are compared",
        )
    cmp = compare_logits(model, hooked, check_sequences(model, check, seed)) if check else None
    ok = cmp is None or cmp.within(tol)
    fig = {
        "model": str(model_path),
        "out": str(out),
        "to": to,
        "layers": model.config.n_layers,
        "heads": model.config.n_heads,
        "d_model": model.config.d_model,
        "dtype": model.config.dtype,
        "attention_dir": hooked.cfg.attention_dir,
        "vocabulary": len(hooked.token_list),
        "labels": len(hooked.label_list),
        "checked_sequences": check,
        **{field: None if cmp is None else getattr(cmp, name) for field, name in COMPARISON_FIELDS.items()},
        "tolerance": None if cmp is None else tol,  # nothing compared: no tolerance applied
        "written": ok,
    }
    if ok:
        save_hooked(hooked, out)  # whole or not at all: a folder made beside OUT, renamed
        say_on_interrupt(f"interrupted after {out} was written whole")
    fig["seconds"] = time.perf_counter() - t0
    if json_out:  # the figures on stdout whether or not the directory was written
        print_json(fig)
    elif ok:
        console.print(key_value_table("export to TransformerLens", fig))
    if cmp is not None and not ok:
        if cmp.mismatched_positions:
            how = (
                f"a NaN, or an infinite logit that the other model does not have, at {cmp.mismatched_positions} of "
                f"the {cmp.positions} positions"
            )
        else:
            how = (
                f"up to {cmp.max_relative_difference:.3g} of the largest logit (absolute "
                f"{cmp.max_abs_difference:.3g}; top label differs at {cmp.argmax_disagreements} of "
                f"{cmp.positions} positions)"
            )
        err_console.print(
            f"error: {model_path}: the exported model's logits differ from uatlab's by {how} on {check} random "
            f"sequences (--seed {seed}), above --tolerance {tol:.3g}; nothing was written",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(code=1)
    if cmp is not None and cmp.argmax_disagreements:
        err_console.print(
            f"warning: the top label differs at {cmp.argmax_disagreements} of {cmp.positions} positions, all within "
            f"--tolerance {tol:.3g} (near-ties: the top two logits closer than twice the difference)",
            highlight=False,
            soft_wrap=True,
        )
