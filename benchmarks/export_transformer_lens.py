"""TransformerLens export, measured: logit agreement and re-certification after the round trip.

    python benchmarks/export_transformer_lens.py           # the full CoNLL-2003 train set, compiled (float64),
                                                           # and a model trained on its first 2,000 sentences
    python benchmarks/export_transformer_lens.py --quick   # the first 1,000 CoNLL sentences (or synthetic data)

For each model: max |logit_uatlab − logit_TransformerLens| over 1,000 sequences of the data (float64,
batched by length, no padding). For the compiled model also: the ``HookedTransformer`` is written to
disk, read back, converted to a uatlab model from TransformerLens's weights and certified again on
the whole data set (certified tokens against the ceiling, minimum certified margin).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

# the CoNLL-2003 files (never in this repository): ../shared/data/conll2003 beside the checkout, or $UATLAB_CONLL_DIR
CONLL = Path(os.environ.get("UATLAB_CONLL_DIR", Path(__file__).resolve().parents[2] / "shared/data/conll2003"))


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="CI size: 1,000 sentences.")
    ap.add_argument("--out", type=Path, default=None, help="Write the figures as JSON here.")
    args = ap.parse_args()
    torch.set_num_threads(1)

    from uatlab import compile_memorizer, load, read_conll
    from uatlab.data.synthetic import synthetic_dataset
    from uatlab.interop import (
        from_hooked_transformer,
        load_hooked,
        max_logit_difference,
        save_hooked,
        to_hooked_transformer,
    )
    from uatlab.training.trainer import TrainConfig, train
    from uatlab.verify.certificate import certify

    if (CONLL / "train.txt").is_file():
        data = read_conll(CONLL / "train.txt")
        source = "CoNLL-2003 train"
    else:
        data = synthetic_dataset(N=14_041, n=14, V=20_000, C=9, seed=0)
        source = "synthetic N=14,041 n=14 V=20,000 C=9 (CoNLL-2003 not found)"
    if args.quick:
        data = data.subset(range(1000))
        source += ", first 1,000 sentences"
    fig: dict = {"data": source, "sequences": len(data), "tokens": data.num_tokens}
    check = data.subset(np.random.default_rng(0).choice(len(data), size=min(1000, len(data)), replace=False))

    c0, t0 = cpu_seconds(), time.perf_counter()
    built = compile_memorizer(data)
    model, cert = built.model, built.certificate
    fig["compile_and_certify_cpu_s"] = cpu_seconds() - c0
    hooked = to_hooked_transformer(model)
    fig["compiled"] = {
        "ff_width": model.config.ff_width,
        "d_model": model.config.d_model,
        "certified": cert.certified,
        "certified_tokens": cert.certified_tokens,
        "ceiling_tokens": cert.ceiling_tokens,
        "min_certified_margin": cert.min_certified_margin,
        "max_logit_difference_1000_sequences": max_logit_difference(model, hooked, model.encoding.encode_tokens(check)),
    }
    with tempfile.TemporaryDirectory() as tmp:
        back = from_hooked_transformer(load_hooked(save_hooked(hooked, Path(tmp) / "tl")))
    c0 = cpu_seconds()
    again = certify(back, data)
    fig["read_back_certificate"] = {
        "certified": again.certified,
        "certified_tokens": again.certified_tokens,
        "ceiling_tokens": again.ceiling_tokens,
        "min_certified_margin": again.min_certified_margin,
        "max_logit_error_bound": again.max_logit_error_bound,
        "cpu_s": cpu_seconds() - c0,
    }

    train_data = data.subset(range(min(2000, len(data))))
    cfg = TrainConfig(epochs=2 if args.quick else 5, dim=64, dtype="float64", warmup_steps=20)
    with tempfile.TemporaryDirectory() as tmp:
        r = train(train_data, cfg, Path(tmp) / "run", progress=False, with_f1=False)
        trained = load(Path(tmp) / "run" / "model.safetensors")
    ids = trained.encoding.encode_tokens(train_data.subset(range(min(1000, len(train_data)))))
    fig["trained"] = {
        "epochs": r.epochs,
        "train_accuracy": r.history[-1].get("train_accuracy"),
        "parameters": trained.num_parameters(),
        "max_logit_difference_1000_sequences": max_logit_difference(trained, to_hooked_transformer(trained), ids),
    }
    fig["wall_s"] = time.perf_counter() - t0
    fig["machine"] = "2 shared cores (other jobs running): wall time is only indicative"
    text = json.dumps(fig, indent=2)
    print(text)
    if args.out:
        from uatlab.io_safety import write_text_atomic

        write_text_atomic(args.out, text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
