"""``uatlab export MODEL --to transformer-lens OUT``: a uatlab model as a TransformerLens model.

The model (saved by ``uatlab compile`` or ``uatlab train``) is converted by
`uatlab.interop.to_hooked_transformer`, its logits are compared with uatlab's on random token
sequences, and the ``HookedTransformer`` is written to the new directory OUT (``config.json`` with
the vocabulary, ``weights.safetensors``); `uatlab.interop.load_hooked` reads it back.
"""

from __future__ import annotations

import time
from pathlib import Path

import typer

from uatlab.cli.app import app, console, key_value_table, print_json
from uatlab.cli.options import SEED_MAX
from uatlab.errors import InputError

TARGETS = ("transformer-lens",)


def max_logit_difference(model, hooked, sequences: int, seed: int) -> float:
    """max |uatlab logits − TransformerLens logits| on random token sequences of random lengths."""
    import torch

    cfg = model.config
    gen = torch.Generator().manual_seed(seed)
    worst = 0.0
    with torch.no_grad():
        for _ in range(sequences):
            n = int(torch.randint(1, cfg.max_len + 1, (1,), generator=gen))
            ids = torch.randint(0, cfg.vocab_size, (1, n), generator=gen)  # (1, n)
            worst = max(worst, float((model(ids) - hooked(ids)).abs().max()))
    return worst


@app.command("export")
def export_cmd(
    model_path: Path = typer.Argument(..., metavar="MODEL", help="A uatlab model file (.safetensors)."),
    out: Path = typer.Argument(..., help="New directory to write (must not exist)."),
    to: str = typer.Option(..., "--to", help="Target format: transformer-lens."),
    check: int = typer.Option(100, "--check", min=0, help="Random sequences on which logits are compared."),
    seed: int = typer.Option(0, "--seed", min=0, max=SEED_MAX, help="Seed of the check sequences."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
) -> None:
    """Export a model to TransformerLens (a HookedTransformer with hooks and activation caches)."""
    if to not in TARGETS:
        raise InputError(f"--to {to!r} is not a known target; choose one of {', '.join(TARGETS)}")
    from uatlab.interop.transformer_lens import check_new_directory, save_hooked, to_hooked_transformer

    check_new_directory(out)  # before the model is read
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
    diff = max_logit_difference(model, hooked, check, seed) if check else None
    save_hooked(hooked, out)
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
        "max_logit_difference": diff,
        "seconds": time.perf_counter() - t0,
    }
    if json_out:
        print_json(fig)
    else:
        console.print(key_value_table("export to TransformerLens", fig))
