"""Claim: a one-layer, single-head, rank-1 softmax Transformer memorizes a labelled data set (paper A).

Paper A (Kajitsuka & Sato, ICLR 2024), Corollary 1: F^(FF) ∘ F^(SA) with one rank-1 head memorizes any
finite labelled data set (consistent labels). The checks compile a data set made on the fly with
`uatlab.constructions.paper_a.cor1_memorizer` and certify it in float64, and in float32, with
`uatlab.verify.certificate`: the verdict is 'pass' iff every winnable token is *proven* correct in
that dtype, the attention is one head of rank 1, the model has one block, and its non-embedding parameters
do not exceed paper A's count 4(s + d) + d(2nN + d) for its own (s, d, n, N).
"""

from __future__ import annotations

import time

from uatlab.claims.registry import ClaimContext, ClaimResult, register_claim


@register_claim(
    id="A.cor1.memorization-compiled",
    statement="A one-layer single-head rank-1 softmax Transformer memorizes this data set "
    "(every non-conflicting token classified correctly, certified in float64) with at most paper A's "
    "4(s+d) + d(2nN+d) non-embedding parameters.",
    paper="Kajitsuka & Sato, ICLR 2024",
    theorem="Corollary 1 (memorization) with Theorem 2 and the positional-encoding corollary",
)
def check_memorization(ctx: ClaimContext) -> ClaimResult:
    # quick: ~2.5k random labels (≈8 kbit), full: 20k sequences of 32 (640k labels, incompressible)
    return _memorization(ctx, "float64", (400, 12, 300, 5) if ctx.quick else (20_000, 32, 5_000, 10))


@register_claim(
    id="A.cor1.memorization-compiled-float32",
    statement="The same in float32: a one-layer single-head rank-1 softmax Transformer memorizes this data set, "
    "every non-conflicting token certified in float32, with at most paper A's 4(s+d) + d(2nN+d) non-embedding "
    "parameters.",
    paper="Kajitsuka & Sato, ICLR 2024",
    theorem="Corollary 1 (memorization) with Theorem 2 and the positional-encoding corollary",
)
def check_memorization_float32(ctx: ClaimContext) -> ClaimResult:
    return _memorization(ctx, "float32", (400, 12, 300, 5) if ctx.quick else (5_000, 32, 5_000, 10))


def _memorization(ctx: ClaimContext, dtype: str, size: tuple[int, int, int, int]) -> ClaimResult:
    from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset
    from uatlab.data.synthetic import synthetic_dataset

    N, n, V, C = size
    t0 = time.perf_counter()
    data = synthetic_dataset(N, n, V, C, repeats=True, seed=ctx.seed)
    res = compile_dataset(data, dtype=dtype, seed=ctx.seed)
    model, cert, fig = res.model, res.certificate, res.report
    assert cert is not None
    ranks = model.blocks[0].attn.check_ranks()
    one_layer_rank1 = model.config.n_layers == 1 and model.config.n_heads == 1 and all(r == [1] for r in ranks.values())
    figures = {
        "dtype": dtype,
        "sequences": N,
        "length": n,
        "vocabulary": V,
        "classes": C,
        "tokens": cert.tokens,
        "ceiling_tokens": cert.ceiling_tokens,
        "correct_tokens": cert.correct_tokens,
        "certified_tokens": cert.certified_tokens,
        "certified": cert.certified,
        "certified_fraction": cert.certified_fraction,
        "min_certified_margin": cert.min_certified_margin,
        "ranks_QKVO": [ranks[k][0] for k in ("W_Q", "W_K", "W_V", "W_O")],
        "n_layers": model.config.n_layers,
        "n_heads": model.config.n_heads,
        "params_non_embedding": fig["params_non_embedding"],
        "paper_a_param_count": fig["paper_a_param_count"],
        "ff_width": fig["ff_width"],
        "label_information_bits": fig["label_information_bits"],
        "ratio_to_paper_a": fig["non_embedding_vs_paper_a"],
        "bits_per_param_non_embedding": fig["bits_per_param_non_embedding"],
        "bits_per_param_definition": fig["bits_per_param_definition"],
        "seconds": time.perf_counter() - t0,
    }
    # paper A's count 4(s+d) + d(2nN + d) holds for every data set: the compiled model must not exceed it
    within_paper_a = fig["params_non_embedding"] <= fig["paper_a_param_count"]
    ok = cert.certified and one_layer_rank1 and cert.correct_tokens == cert.ceiling_tokens and within_paper_a
    return ClaimResult(
        verdict="pass" if ok else "fail",
        figures=figures,
        figure_files=_figures(ctx, dtype, data, res, size),
        key_figure="certified_fraction",
        note="synthetic data with uniformly random labels; certificate: forward floating-point error analysis "
        f"valid for any summation order (assumes exp within {cert.exp_ulps:g} ulp). Paper A's count "
        "4(s+d) + d(2nN + d) is linear in nN (d taken as this model's d); the compiled model's feed-forward width "
        "grows with the number of distinct contexts, which random data makes close to nN, so here the two counts "
        "grow alike; the ratio params_non_embedding / paper_a_param_count must stay at most 1 (the verdict requires "
        f"it; here {fig['non_embedding_vs_paper_a']:.3f}; second figure: the same generator at N/8, N/4, N/2, N, "
        "compiled without certificate). Data with repeated contexts (CoNLL) share units.",
    )


def _figures(ctx: ClaimContext, dtype: str, data, res, size: tuple[int, int, int, int]) -> list[str]:
    """Histogram of certified margins; parameters against paper A's count over data-set sizes."""
    import numpy as np

    from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset
    from uatlab.data.synthetic import synthetic_dataset
    from uatlab.report.figures import plot_margin_histogram, plot_params_vs_paper_a

    claim = "A.cor1.memorization-compiled" + ("" if dtype == "float64" else "-float32")
    files = []
    if res.certificate.margins is not None:
        margins = np.concatenate([np.asarray(m, dtype=np.float64) for m in res.certificate.margins])
        files.append(
            str(
                plot_margin_histogram(
                    margins,
                    ctx.figure_path(claim, "certified_margins.png"),
                    f"certified margins, {dtype}, N={len(data):,} (exact margin of the construction: 1)",
                )
            )
        )
    N, n, V, C = size
    sizes = [max(N // 8, 1), max(N // 4, 1), max(N // 2, 1)]
    ne, tot, paper = [], [], []
    for k in sizes:
        r = compile_dataset(
            synthetic_dataset(k, n, V, C, repeats=True, seed=ctx.seed),
            dtype=dtype,
            seed=ctx.seed,
            run_certificate=False,
        )
        ne.append(r.report["params_non_embedding"])
        tot.append(r.report["params_total"])
        paper.append(r.report["paper_a_param_count"])
    ne.append(res.report["params_non_embedding"])
    tot.append(res.report["params_total"])
    paper.append(res.report["paper_a_param_count"])
    files.append(
        str(
            plot_params_vs_paper_a(
                [*sizes, N],
                ne,
                tot,
                paper,
                ctx.figure_path(claim, "params_vs_paper_a.png"),
                f"parameters vs paper A's count, {dtype}, n={n}, |V|={V}, C={C}",
            )
        )
    )
    return files


@register_claim(
    id="C.seq2seq.memorization-deep",
    statement="One rank-1 single-head attention layer followed by a deep ReLU feed-forward network memorizes this "
    "data set (every non-conflicting token certified in float64) with at least 0.25 bit of label information "
    "Σ H(label | word) per dense non-embedding parameter.",
    paper="Kajitsuka & Sato, ICLR 2025",
    theorem="sequence-to-sequence memorization with Õ(√(nN)) parameters (one self-attention layer + deep FFN)",
    reads_conll="full",
)
def check_memorization_deep(ctx: ClaimContext) -> ClaimResult:
    import numpy as np

    from uatlab.constructions.paper_c.seq2seq_api import compile_seq2seq_deep
    from uatlab.data.information import bits_per_parameter, label_information_of

    t0 = time.perf_counter()
    path = None if ctx.quick else ctx.conll_train()  # the 0.25 target is CoNLL-2003 train's, whole
    if path is not None:
        from uatlab.data.conll import iter_conll

        records = [(t, y) for t, y, _ in iter_conll(path)]
        source = f"CoNLL-2003 train ({len(records)} sentences)"
    else:
        from uatlab.data.synthetic import synthetic_dataset

        N, n, V, C = (400, 12, 300, 5) if ctx.quick else (2000, 16, 500, 5)
        d = synthetic_dataset(N, n, V, C, repeats=True, seed=ctx.seed)
        records = list(zip(d.tokens, d.labels, strict=True))
        source = f"synthetic random labels N={N} n={n} V={V} C={C}" + ("" if ctx.quick else " (no CoNLL-2003 given)")
    tok: dict[str, int] = {}
    lab: dict[str, int] = {}
    sents = [np.asarray([tok.setdefault(w, len(tok)) for w in t], dtype=np.int64) for t, _ in records]
    labs = [np.asarray([lab.setdefault(y, len(lab)) for y in ys], dtype=np.int64) for _, ys in records]
    con = compile_seq2seq_deep(sents, labs, V=len(tok), C=max(2, len(lab)), regime="float64", seed=ctx.seed)
    cert, memo = con.certificate, con.detail
    info = label_information_of(records)
    params = memo.parameters
    bpp = bits_per_parameter(info, params["non_embedding"])
    ranks = [int(np.linalg.matrix_rank(w)) for w in memo.attention_weights().values()]
    target = 0.25
    ok = cert.certified and cert.certified_tokens == cert.ceiling_tokens and ranks == [1, 1, 1, 1] and bpp >= target
    figures = {
        "data": source,
        "tokens": cert.tokens,
        "ceiling_tokens": cert.ceiling_tokens,
        "certified_tokens": cert.certified_tokens,
        "certified": cert.certified,
        "ranks_QKVO": ranks,
        "attention_layers": 1,
        "ffn_depth": memo.circuit.depth,
        "params_non_embedding": params["non_embedding"],
        "params_non_embedding_nonzero": params["non_embedding_nonzero"],
        "label_bits_given_word": info.word_bits,
        "bits_per_param_non_embedding": bpp,
        "bits_per_param_target": target,
        "bits_per_param_definition": "Σ_tokens H(label | word), conflicts excluded, / dense non-embedding parameters",
        "seconds": time.perf_counter() - t0,
    }
    from uatlab.report.figures import plot_bars

    fig = plot_bars(
        {
            "dense non-embedding parameters": params["non_embedding"],
            "non-zero non-embedding parameters": params["non_embedding_nonzero"],
            "label bits Σ H(label | word)": info.word_bits,
        },
        ctx.figure_path("C.seq2seq.memorization-deep", "parameters_vs_label_bits.png"),
        ylabel="count (log scale)",
        title="deep-FF memorizer (Kajitsuka & Sato 2025): parameters vs label bits",
        logy=True,
        threshold=(f"most parameters at {target} bit/parameter", info.word_bits / target),
    )
    return ClaimResult(
        verdict="pass" if ok else "fail",
        figures=figures,
        figure_files=[str(fig)],
        key_figure="bits_per_param_non_embedding",
        note="the attention averages (equal logits: softmax weights exactly 1/n'), giving every token an integer "
        "id; an integer ReLU circuit reads the labels of the ambiguous words' tokens out of packed words "
        "(three-table retrieval). Certificate: exact integer evaluation and every partial sum ≤ 2^53.",
    )
