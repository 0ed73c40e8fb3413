"""``compile_seq2seq_deep``: labelled sentences → `uatlab.constructions.contract.Construction`.

Kajitsuka & Sato, "On the Optimal Memorization Capacity of Transformers" (ICLR 2025), sequence-to-sequence
memorization with one self-attention layer and a deep feed-forward network; the construction, its
derivation and its bound are in `uatlab.constructions.paper_c.seq2seq_memorizer`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from uatlab.constructions.contract import Construction
from uatlab.constructions.paper_c.seq2seq_memorizer import PAPER, THEOREM, compile_seq2seq


def compile_seq2seq_deep(
    sentences: list[np.ndarray],
    labels: list[np.ndarray],
    V: int,
    C: int,
    regime: str = "float64",
    seed: int = 0,
    certify: bool = True,
    progress: Callable[[str, int, int | None], None] | None = None,
    where: Callable[[int], str] | None = None,
) -> Construction:
    """Compile sentences (token ids in [0, V)) with a label per token (in [0, C)) and certify it.

    regime: 'float64' or 'float32' (every weight and intermediate value an integer ≤ 2^53 / 2^24; raises
    PrecisionError before building when the keys do not fit). ``detail`` is the exact memorizer and
    ``certificate`` a `uatlab.verify.seq2seq_deep.Seq2SeqCertificate`. ``progress(stage, done, total)`` is told
    the construction's steps (stage "construct") and the certificate's chunks ("certify gate", "certify
    retrieval"); ``where(i)`` names sentence i in errors (default "sentence i"). Neither changes the result.
    ``facts`` add the CPU seconds of this process (all its threads) spent compiling and certifying.
    """
    from uatlab.constructions.paper_c.model import REGIME_DTYPES
    from uatlab.constructions.paper_c.seq2seq_model import Seq2SeqDeepModel
    from uatlab.verify.seq2seq_deep import certify_seq2seq

    cpu = time.process_time()
    memo, data, report = compile_seq2seq(
        sentences, labels, V=V, C=C, regime=regime, seed=seed, progress=progress, where=where
    )
    model = Seq2SeqDeepModel(memo, REGIME_DTYPES[regime])
    cpu_compile, cpu = time.process_time() - cpu, time.process_time()
    cert = certify_seq2seq(memo, data, progress=progress) if certify else None
    cpu_certify = time.process_time() - cpu
    guarantee = {
        "min_logit_margin": 1.0,
        "certified_tokens": float(cert.certified_tokens) if cert else float("nan"),
    }
    facts = dict(memo.facts) | {
        "paper": PAPER,
        "theorem": THEOREM,
        "parameters": memo.parameters["non_embedding"],
        "seconds_compile": report["seconds_total"],
        "cpu_seconds_compile": cpu_compile,  # this process, every thread: construction and the torch module
        "cpu_seconds_certify": cpu_certify,
    }
    return Construction(model=model, guarantee=guarantee, facts=facts, certificate=cert, detail=memo)
