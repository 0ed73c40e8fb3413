"""Compile a labelled sequence data set into a one-layer, one-head, rank-1 softmax Transformer and certify it
(paper A, Corollary 1; the construction is in `uatlab.constructions.paper_a.cor1_memorizer.assemble`).

Two inputs, one code path: an in-memory `uatlab.data.SequenceDataset` (or its
`uatlab.data.encoded.EncodedData`) and an on-disk `uatlab.data.token_store.TokenStore`
(out of core: h is computed chunk by chunk and the token records are partitioned by word into buckets; each
bucket is grouped alone and reduced to the points the feed-forward layer needs). Both give the same model
bit for bit.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from uatlab._util import check_flag, check_integer
from uatlab.constructions.contract import PAPER_A, Construction
from uatlab.constructions.paper_a.cor1_memorizer.assemble import assemble_ramp_model
from uatlab.constructions.paper_a.cor1_memorizer.contexts import (
    Occurrences,
    context_columns,
    group_occurrences,
    merge_occurrences,
    reduce_occurrences,
)
from uatlab.constructions.paper_a.cor1_memorizer.knots import assemble_knot_model
from uatlab.constructions.paper_a.cor1_memorizer.layout import (
    alpha_grid,
    positional_codes,
    query_scales,
    word_key_codes,
)
from uatlab.constructions.paper_a.cor1_memorizer.select import check_request, choose_beta, position_scores
from uatlab.data.dataset import Encoding, SequenceDataset
from uatlab.data.encoded import EncodedData, encode_dataset
from uatlab.data.information import label_information, merge_label_information
from uatlab.data.keys import freshly_salted_input_keys, input_identity_assumption
from uatlab.data.token_store import TokenStore, TokenTable
from uatlab.errors import InputError
from uatlab.memory_guard import limit_as_of_now
from uatlab.models.io import load, save
from uatlab.models.transformer import Transformer
from uatlab.numerics.float_bounds import DEFAULT_EXP_ULPS
from uatlab.verify.certificate import Certificate, certify, certify_chunks, store_chunks, stream_chunks

#: progress callback: (stage, done, total or None); stages "attention" and "certify" count sequences
ProgressFn = Callable[[str, int, int | None], None]


def _stage(progress: ProgressFn | None, stage: str, total: int | None) -> Callable[[int], None] | None:
    """An increment callback (n more sequences done) reporting cumulative counts to ``progress``."""
    if progress is None:
        return None
    done = [0]

    def step(n: int) -> None:
        done[0] += n
        progress(stage, done[0], total)

    return step


@dataclass
class CompileResult:
    model: Transformer
    certificate: Certificate | None
    encoding: Encoding
    report: dict[str, Any]


def encoding_of(store: TokenStore) -> Encoding:
    """The encoding of the strings a token store has read (ids in first-seen order)."""
    return Encoding(dict(store.token_to_id), dict(store.label_to_id))


# mapper(fn, items): fn(*item) for every item, results in the order of items, wherever they run
# (e.g. uatlab.experiments.executor.map_ordered on Ray); the default runs them here
Mapper = Callable[[Callable[..., Any], Iterable[tuple]], Iterable[Any]]


def _in_process(fn: Callable[..., Any], items: Iterable[tuple]) -> Iterator[Any]:
    return (fn(*item) for item in items)


def group_bucket(
    table: TokenTable,
    columns: list[int] | np.ndarray,
    id2tok: list[str],
    id2lab: list[str],
    lines: np.ndarray,
    by_position: int | None,
    token_lines: bool = False,
) -> list[Occurrences]:
    """The reduce step of one word bucket: its occurrences grouped and reduced, for each h column in
    ``columns`` (a list of column indices), or with each token's column chosen by its position (an array);
    ``token_lines``: one token per source line (CoNLL), for the lines conflicts name."""
    if isinstance(columns, np.ndarray):
        hs = [table.h[np.arange(len(table)), columns[table.pos]]]
    else:
        hs = [table.h[:, c] for c in columns]
    return [
        reduce_occurrences(
            group_occurrences(table, h, id2tok, id2lab, lines, by_position=by_position, token_lines=token_lines)
        )
        for h in hs
    ]


def _counted(items: Iterable[Any], step: Callable[[int], None] | None) -> Iterator[Any]:
    """The items, reporting one progress step as each is consumed."""
    for item in items:
        if step:
            step(1)
        yield item


def _compile_tables(
    tables: Callable[[], Iterable[TokenTable]],
    vocab: Encoding,
    group: str,
    pool: list[tuple[float, int]],
    lines: np.ndarray,
    sequences: int,
    max_len: int,
    dtype: str,
    causal: bool,
    seed: int,
    d_model: int | None,
    code: str,
    times: dict[str, float],
    ff: str = "knots",
    labels: str = "auto",
    progress: ProgressFn | None = None,
    num_tables: int | None = None,
    mapper: Mapper | None = None,
    token_lines: bool = False,
) -> tuple[Transformer, dict]:
    """Group the tables (disjoint word sets; column c of ``table.h`` is h under candidate ``pool[c]``), choose
    the query scales, build the model: one code path for the in-memory and the out-of-core compiler.

    Word groups: one β for all positions (`_choose_beta`). (word, position) groups with β auto: the
    query scale b_k is chosen per position k among the (β, shift) candidates. The h of a token at position k
    depends on b_k only (the keys do not depend on β) and every FF unit serves one position, so the choice
    decomposes over positions: per position, fewest tokens next to a boundary gap below
    ``RISKY_RELATIVE_GAP·r_h``, then the largest smallest gap relative to r_h. A heuristic; the certificate
    decides.
    """
    t = time.perf_counter()
    mapper = mapper or _in_process
    id2tok, id2lab = list(vocab.token_to_id), list(vocab.label_to_id)
    V = len(id2tok)
    by_position = max_len if group == "word-pos" else None
    scales = [query_scales(max_len, beta, shift) for beta, shift in pool]
    query_choice = None
    info_parts = []  # label information per table (tables hold disjoint word sets: the parts add up)
    if by_position and len(pool) > 1:
        risky, ratio = np.zeros((len(pool), max_len)), np.full((len(pool), max_len), np.inf)
        step = _stage(progress, "choose query scales", num_tables)
        for table in tables():  # pass 1: scores per (candidate, position)
            info_parts.append(_label_information(table, len(id2lab)))
            r, q = position_scores(table, pool, max_len, dtype)
            if step:
                step(1)
            risky += r
            ratio = np.minimum(ratio, q)
        choice = np.array([min(range(len(pool)), key=lambda c: (risky[c, k], -ratio[c, k], c)) for k in range(max_len)])
        # pass 2: group with each token's chosen column, wherever the mapper runs it (results in bucket order)
        step = _stage(progress, "group contexts", num_tables)
        items = ((table, choice, id2tok, id2lab, lines, by_position, token_lines) for table in _counted(tables(), step))
        occ = merge_occurrences([part[0] for part in mapper(group_bucket, items)])
        b = np.array([scales[c][k] for k, c in enumerate(choice)])
        beta: float | str = "per-position"
        counts: dict[str, int] = {}
        for c in choice:
            name = f"beta {pool[c][0]:g} shift {pool[c][1]}"
            counts[name] = counts.get(name, 0) + 1
        beta_scores = {
            "per_position_choices": counts,
            "tokens_in_risky_groups": int(sum(risky[c, k] for k, c in enumerate(choice))),
        }
        query_choice = b
    else:
        per: list[list[Occurrences]] = [[] for _ in pool]
        step = _stage(progress, "group contexts", num_tables)

        def items():  # label information per table here, the grouping wherever the mapper runs it
            for table in _counted(tables(), step):
                info_parts.append(_label_information(table, len(id2lab)))
                yield table, list(range(len(pool))), id2tok, id2lab, lines, by_position, token_lines

        for parts in mapper(group_bucket, items()):  # in bucket order
            for c, part in enumerate(parts):
                per[c].append(part)
        occs = [merge_occurrences(p) for p in per]
        if len(pool) > 1:
            i, beta_scores = choose_beta(occs, [p[0] for p in pool], V, code, dtype)
        else:
            i, beta_scores = 0, {}
        beta, occ, b = pool[i][0], occs[i], scales[i]
    times["group contexts per word"] = time.perf_counter() - t
    t = time.perf_counter()
    alpha = word_key_codes(V, seed)
    pi, _ = positional_codes(max_len, 1.0, seed)  # π does not depend on β
    if progress is not None:
        progress("feed-forward assembly", 0, 1)
    if ff == "knots":
        model, info = assemble_knot_model(
            vocab, occ, alpha, pi, b, beta, max_len, dtype, causal, seed, sequences, d_model, code, labels
        )
    else:
        model, info = assemble_ramp_model(vocab, occ, alpha, pi, b, beta, max_len, dtype, causal, seed, d_model, code)
    if progress is not None:
        progress("feed-forward assembly", 1, 1)
    model.encoding = vocab
    times["feed-forward construction"] = time.perf_counter() - t
    information = merge_label_information(info_parts)
    report = {
        "sequences": sequences,
        "tokens": occ.tokens,
        "distinct_contexts": int(occ.distinct),
        # the ceiling per identical input (both input keys agree, as the certificate counts it): tokens whose
        # different inputs share an h (collisions) are winnable, only conflicts are inherent
        "ceiling_tokens": information.ceiling_tokens,
        "conflict_tokens": occ.tokens - information.ceiling_tokens,
        "conflicts": occ.conflicts,
        "collision_tokens": occ.collision_tokens,
        "vocabulary": V,
        "labels": id2lab,
        "max_len": max_len,
        "beta": beta,
        "beta_search": beta_scores,
        "query_scales": None if query_choice is None else query_choice.tolist(),
        "causal": causal,
        "dtype": dtype,
        **info,
        "label_information": information.to_json(),
        "stage_seconds": times,
    }
    return model, report


def _label_information(table: TokenTable, num_labels: int):
    """`label_information` of one table, inputs told apart by both its keys (rolling and salted)."""
    return label_information(table.word, table.label, table.pos, table.key, num_labels=num_labels, key2=table.key2)


def compile_encoded(
    enc: EncodedData,
    dtype: str = "float64",
    causal: bool = False,
    beta: float | str = "auto",
    seed: int = 0,
    max_len: int | None = None,
    d_model: int | None = None,
    code: str = "auto",
    group: str = "auto",
    ff: str = "knots",
    labels: str = "auto",
    progress: ProgressFn | None = None,
) -> tuple[Transformer, dict]:
    """Compile already-encoded in-memory data (with input keys, see `EncodedData`); returns (model, report).

    ``group``: gate the FF units on the word (``"word"``) or on (word, position) (``"word-pos"``, needs an
    m-hot ``code``); ``"auto"``: word-pos in float32, word in float64.
    """
    group, pool = check_request(dtype, beta, group, ff, labels)
    if len(enc) == 0:
        raise InputError(f"{enc.source}: no sequences to compile")
    if enc.keys is None:
        raise InputError(f"{enc.source}: encoded without input keys (encode_dataset(..., context=...))")
    times: dict[str, float] = {}
    t = time.perf_counter()
    max_len = max(max_len or 0, max(len(w) for w in enc.ids))
    alpha = word_key_codes(len(enc.encoding.token_to_id), seed)
    h = context_columns(alpha, max_len, pool, seed, causal)(enc.ids)  # (T, K)
    # the second input key, salted at random now (the certificate's approach): two tokens are one input for the
    # report's ceiling, conflicts and label information only if both keys agree
    lengths = np.fromiter((len(w) for w in enc.ids), np.int64, len(enc.ids))
    key2 = freshly_salted_input_keys(np.concatenate(enc.ids), lengths, "prefix" if causal else "sequence")
    table = TokenTable.from_sequences(enc.ids, enc.targets, enc.keys, 0, h, key2)
    times["attention (h per token)"] = time.perf_counter() - t
    model, report = _compile_tables(
        lambda: [table],
        enc.encoding,
        group,
        pool,
        np.asarray(enc.lines),
        len(enc),
        max_len,
        dtype,
        causal,
        seed,
        d_model,
        code,
        times,
        ff,
        labels,
        progress,
        1,
        token_lines=enc.token_lines,
    )
    report["label_counts"] = np.bincount(table.label, minlength=len(enc.encoding.label_to_id)).tolist()
    return model, report


def compile_store(
    store: TokenStore,
    dtype: str = "float64",
    causal: bool = False,
    beta: float | str = "auto",
    seed: int = 0,
    max_len: int | None = None,
    progress: ProgressFn | None = None,
    d_model: int | None = None,
    code: str = "auto",
    group: str = "auto",
    ff: str = "knots",
    labels: str = "auto",
    mapper: Mapper | None = None,
) -> tuple[Transformer, dict]:
    """Compile a data set held in an on-disk `uatlab.data.token_store.TokenStore` (out of core).

    h is computed chunk by chunk for every query-scale candidate and the token records are partitioned by
    word into buckets; each bucket is grouped on its own and reduced to the points the model needs
    (`reduce_occurrences`), so memory scales with the chunk, the largest bucket and the model.

    ``mapper`` runs the map over chunks (h per token) and the reduce per word bucket elsewhere (e.g. on Ray,
    `uatlab.experiments.executor.map_ordered`); results are combined in chunk and bucket order, so the
    model is the same bytes wherever they ran.
    """
    group, pool = check_request(dtype, beta, group, ff, labels)
    if store.sequences == 0:
        raise InputError(f"{store.source}: no sequences to compile")
    times: dict[str, float] = {}
    t = time.perf_counter()
    max_len = max(max_len or 0, store.max_len)
    alpha = word_key_codes(len(store.token_to_id), seed)
    columns = context_columns(alpha, max_len, pool, seed, causal)
    signature = {
        "pool": [list(p) for p in pool],
        "seed": seed,
        "max_len": max_len,
        "causal": causal,
        "alpha_grid": float(alpha_grid(len(store.token_to_id))),
    }
    store.bucketize(
        columns, len(pool), signature, progress=_stage(progress, "attention", store.sequences), mapper=mapper
    )
    times["attention (h per token)"] = time.perf_counter() - t
    model, report = _compile_tables(
        store.bucket_tables,
        encoding_of(store),
        group,
        pool,
        store.lines,
        store.sequences,
        max_len,
        dtype,
        causal,
        seed,
        d_model,
        code,
        times,
        ff,
        labels,
        progress,
        store.bucket_count,
        mapper,
        token_lines=getattr(store, "token_lines", False),
    )
    report["buckets"] = store.bucket_count
    report["label_counts"] = store.label_counts.tolist()
    return model, report


def paper_a_param_count(d: int, n: int, N: int, s: int = 1) -> int:
    """Paper A's memorization parameter count 4(s+d) + d(2nN + d) (Kajitsuka & Sato 2024, Corollary 1)."""
    return 4 * (s + d) + d * (2 * n * N + d)


def summarize(model: Transformer, report: dict[str, Any], cert: Certificate | None) -> dict:
    """The figures the issue asks for, as one flat dict (JSON contract fields first)."""
    p_total = model.num_parameters()
    p_ne = model.num_parameters(non_embedding=True)
    paper = paper_a_param_count(model.config.d_model, report["max_len"], report["sequences"])
    max_w = max(float(t.detach().abs().max()) for t in model.state_dict().values() if t.numel())
    info = report["label_information"]
    bits = info["word_bits"]  # Σ_tokens H(label | word), conflicts excluded (uatlab.data.information)
    out = {
        "sequences": report["sequences"],
        "tokens": report["tokens"],
        # the certificate's count when there is one: it tells different inputs apart by a second, salted key
        "conflict_tokens": cert.conflict_tokens if cert else report["conflict_tokens"],
        "ceiling_tokens": cert.ceiling_tokens if cert else report["ceiling_tokens"],
        "correct_tokens": cert.correct_tokens if cert else None,
        "certified": cert.certified if cert else None,
        "certified_fraction": cert.certified_fraction if cert else None,
        "certified_tokens": cert.certified_tokens if cert else None,
        # why the proof is void (empty if it stands), and what the bounds alone prove then
        "invalidated_by": cert.invalidated_by if cert else None,
        "bound_certified_tokens": cert.bound_certified_tokens if cert else None,
        "min_certified_margin": cert.min_certified_margin if cert else None,
        "min_margin_at": cert.min_margin_at if cert else None,
        "params_total": p_total,
        "params_non_embedding": p_ne,
        "paper_a_param_count": paper,
        "non_embedding_vs_paper_a": p_ne / paper,
        "within_paper_a": p_ne <= paper,
        "params_non_embedding_nonzero": model.num_parameters(non_embedding=True, nonzero=True),
        "ff_width": model.config.layer_ff_width(0),
        "d_model": model.config.d_model,
        "max_abs_weight": max_w,
        # log2(largest |W2| × own-token pre-activation term sum / margin 1/2): bits of h the model relies on
        "bits_of_precision_relied_on": math.log2(
            max(report["max_abs_W2"], 1.0) * 2 * max(report["preactivation_magnitude"], 1.0)
        ),
        "code": report["code"],
        "dtype": report["dtype"],
        "distinct_contexts": report["distinct_contexts"],
        "conflicts": report["conflicts"],
        "torch_spot_check": cert.torch_spot_check if cert else None,
        # first-FF units one certificate pass evaluated for all its tokens (0: each token met its own code's only)
        "certificate_dense_units": cert.dense_units if cert else None,
        "exp_ulps": cert.exp_ulps if cert else None,
        "environment": cert.environment if cert else None,
        # without a certificate: what the compile's own ceiling, conflicts and label information assume
        "assumptions": cert.assumptions if cert else [input_identity_assumption("this run")],
        "collision_tokens": report["collision_tokens"],
        "accuracy": (cert.correct_tokens / report["tokens"]) if cert else None,
        "ceiling_accuracy": (cert.ceiling_tokens if cert else report["ceiling_tokens"]) / report["tokens"],
        # bits per parameter: Σ_tokens H(label | word) with conflicts excluded (the embedding may hold one label per
        # word) divided by the non-embedding parameters; see uatlab.data.information for every figure below
        "label_information_bits": bits,
        "bits_per_param_non_embedding": bits / max(p_ne, 1),
        "bits_per_param_definition": "sum over tokens of H(label | word), conflicts excluded, / non-embedding params",
        "label_bits_marginal": info["marginal_bits"],
        "label_bits_given_word_position": info["word_position_bits"],
        "exception_tokens": info["exceptions"],
        "exception_code_bits": info["exception_code_bits"],
        "uniform_label_bits": info["uniform_label_bits"],
        "label_boundaries": report["label_boundaries"],
        "padding_for_paper_a": report.get("padding_for_paper_a", 0),
        "ff": report.get("ff", "ramps"),
        "label_code": report.get("label_code", "one-hot"),
        "beta": report["beta"],
        "causal": report["causal"],
        "min_gap": report["min_gap"],
        "unresolved_boundaries": report["unresolved_boundaries"],
        "vocabulary": report["vocabulary"],
        "max_len": report["max_len"],
        "stage_seconds": report["stage_seconds"],
    }
    return out


def compile_dataset(
    data: SequenceDataset,
    dtype: str = "float64",
    causal: bool = False,
    beta: float | str = "auto",
    seed: int = 0,
    run_certificate: bool = True,
    progress: ProgressFn | None = None,
    d_model: int | None = None,
    code: str = "auto",
    group: str = "auto",
    exp_ulps: float = DEFAULT_EXP_ULPS,
    ff: str = "knots",
    labels: str = "auto",
) -> CompileResult:
    """Compile ``data`` and (by default) certify the result; returns model, certificate and all figures."""
    t0 = time.perf_counter()
    enc = encode_dataset(data, context="prefix" if causal else "sequence")
    t_read = time.perf_counter() - t0
    model, report = compile_encoded(
        enc,
        dtype=dtype,
        causal=causal,
        beta=beta,
        seed=seed,
        d_model=d_model,
        progress=progress,
        code=code,
        group=group,
        ff=ff,
        labels=labels,
    )
    report["stage_seconds"] = {"read + encode": t_read, **report["stage_seconds"]}
    cert = None
    if run_certificate:
        t = time.perf_counter()
        cert = certify_with_progress(model, data, progress, exp_ulps)
        report["stage_seconds"]["certify"] = time.perf_counter() - t
    report["seconds"] = time.perf_counter() - t0
    return CompileResult(model, cert, model.encoding, {**summarize(model, report, cert), "seconds": report["seconds"]})


def certify_with_progress(
    model: Transformer, data: SequenceDataset, progress: ProgressFn | None, exp_ulps: float = DEFAULT_EXP_ULPS
) -> Certificate:
    """`uatlab.verify.certificate.certify`, reporting stage ``"certify"`` to ``progress``."""
    cb = None if progress is None else (lambda n, total: progress("certify", n, total))
    return certify(model, data, progress=cb, exp_ulps=exp_ulps)


def _check_width_memory(data: SequenceDataset | TokenStore, d_model: int, dtype: str) -> None:
    """Refuse (InputError, `uatlab.memory_guard`) a width whose smallest allocations would not fit: the embedding
    (V × d) and readout (C × d) in ``dtype`` and the three float64 d-vectors of the attention layout, a lower
    bound on what the compiler allocates (it adds the feed-forward layer, also d wide)."""
    from uatlab.memory_guard import check_memory

    V = len(data.vocabulary()) if isinstance(data, SequenceDataset) else 1
    C = len(data.label_set()) if isinstance(data, SequenceDataset) else 1
    item = 4 if dtype == "float32" else 8
    check_memory(
        float(d_model) * (item * (V + C) + 3 * 8),
        f"compile_memorizer(d_model={d_model})",
        f"at least the {V} × d embedding, the {C} × d readout and three d-vectors",
    )


def _check_certificate_memory(data: SequenceDataset | TokenStore) -> None:
    """Refuse (InputError) a data set whose longest sequence's certificate would not fit in memory
    (`uatlab.verify.certificate.check_certify_memory`), naming that sequence."""
    from uatlab.verify.certificate import check_certify_memory

    if isinstance(data, TokenStore):
        n, where = data.max_len, f"{data.source}:{data.m.get('max_len_line', '?')}"
    else:
        lengths = [len(t) for t in data.tokens]
        i = max(range(len(lengths)), key=lengths.__getitem__, default=0)
        n, where = (lengths[i] if lengths else 0), data.where(i)
    check_certify_memory(n, where, "certify=False skips the certificate")


@limit_as_of_now()  # the certificate's requests against the memory available when the call began
def compile_memorizer(
    data: SequenceDataset | TokenStore,
    dtype: str = "float64",
    causal: bool = False,
    beta: float | str = "auto",
    seed: int = 0,
    *,
    d_model: int | None = None,
    code: str = "auto",
    group: str = "auto",
    certify: bool = True,
    progress: ProgressFn | None = None,
    exp_ulps: float = DEFAULT_EXP_ULPS,
    ff: str = "knots",
    labels: str = "auto",
    records: Callable[[], Iterable[tuple[list[str], list[str], int]]] | None = None,
    mapper: Mapper | None = None,
) -> Construction:
    """Compile ``data`` into a one-layer single-head rank-1 Transformer and (by default) certify it.

    Args:
        data: labelled token sequences in memory, a `uatlab.data.token_store.TokenStore` that has
            read them (out of core: memory bounded by the chunk, the largest bucket and the model), or the path
            of a CoNLL or JSONL file (read into memory with `uatlab.data.jsonl.read_sequences`).
        dtype: "float64" or "float32" (the dtype the certificate proves).
        causal: attention over the prefix only (labels may depend on the prefix only); a TokenStore must
            have been read with context "prefix" then.
        beta: the query inverse temperature (a power of two) or "auto".
        seed: seed of the key codes.
        d_model: model width (default: the smallest that works; larger pads with unused coordinates).
        code: word codes of the feed-forward gate: "binary", "M-hot" (e.g. "3-hot") or "auto".
        group: feed-forward units per word or per (word, position): "word", "word-pos" or "auto".
        ff: "knots" (paper A's interpolant, one ReLU per slope change, `.knots`; never above paper A's
            count) or "ramps" (two ReLUs per label change, `.assemble`).
        labels: label code of the knots FF: "ordinal", "one-hot" or "auto" (float64 ordinal, float32 one-hot).
        certify: compute the floating-point certificate.
        progress: callback ``(stage, done, total)``, called for every stage (attention, grouping,
            feed-forward assembly, certification by chunks).
        exp_ulps: the error of the evaluator's exp the certificate assumes, in ulps.
        records: with a TokenStore and ``certify``: a function returning the ``(tokens, labels, line)``
            records again (for example ``lambda: iter_conll(path)``) for the certificate to stream; default
            (None): the certificate reads the store's encoded chunks (the same certificate, without parsing,
            encoding or hashing the data again).
        mapper: with a TokenStore: where the map over chunks (h per token), the reduce per word bucket and
            the certificate's map over chunks run, ``mapper(fn, items)`` yielding ``fn(*item)`` in the order
            of ``items`` (e.g. `uatlab.experiments.executor.map_ordered` on a process pool or Ray);
            default: in this process. The model and certificate are the same wherever they ran.

    Returns:
        `uatlab.constructions.contract.Construction`: ``model`` (``model.encoding`` maps strings
        to ids), ``certificate``, ``facts`` the compile report (parameter counts against paper A's, conflicts,
        bits of precision relied on, stage times), ``guarantee`` the certified token count and smallest
        certified logit margin.

    Raises:
        TypeError: ``data`` is neither a dataset, a token store nor a path (e.g. a bare list of token lists);
            ``seed`` or ``d_model`` is not an integer.
        InputError: bad data (naming the file line) or options; ``ff='deep'`` (that is
            `uatlab.compile_seq2seq_deep`); with ``certify``, a longest sequence whose certificate would need
            more memory than the limit (`uatlab.memory_guard`: the memory available when the call began),
            before anything is compiled.
    """
    causal = check_flag(causal, "causal", TypeError, "compile_memorizer()")
    certify = check_flag(certify, "certify", TypeError, "compile_memorizer()")
    if progress is not None and not callable(progress):
        raise TypeError(
            f"compile_memorizer(): progress must be None or a callable (stage, done, total), not a "
            f"{type(progress).__name__}"
        )
    if ff == "deep":
        raise InputError(
            "ff='deep' is the seq2seq deep memorizer (Kajitsuka & Sato, ICLR 2025): call "
            "uatlab.compile_seq2seq_deep(data); compile_memorizer builds paper A's one-layer model (ff 'knots' or 'ramps')"
        )
    if isinstance(data, (str, os.PathLike)):
        from uatlab.data.jsonl import read_sequences

        data = read_sequences(data)
    if not isinstance(data, (SequenceDataset, TokenStore)):
        raise TypeError(
            "compile_memorizer() takes a uatlab.SequenceDataset (uatlab.read_jsonl, uatlab.read_conll or "
            "SequenceDataset(tokens, labels)), a TokenStore or the path of a CoNLL or JSONL file, "
            f"not a {type(data).__name__}"
        )
    if isinstance(data, SequenceDataset):
        data.validate()  # its lists may have been changed since it was made
    check_integer(seed, "seed", 0, 2**32 - 1, "compile_memorizer()")
    if d_model is not None:
        check_integer(d_model, "d_model", 1, None, "compile_memorizer()")
        _check_width_memory(data, int(d_model), dtype)
    if certify:  # refused now, before compiling, rather than after
        _check_certificate_memory(data)
    if isinstance(data, TokenStore):
        want = "prefix" if causal else "sequence"
        if data.context != want:
            raise InputError(
                f"{data.source}: the token store was read with context {data.context!r}; causal={causal} needs {want!r}"
            )
        t0 = time.perf_counter()
        model, report = compile_store(
            data,
            dtype=dtype,
            causal=causal,
            beta=beta,
            seed=seed,
            progress=progress,
            d_model=d_model,
            code=code,
            group=group,
            ff=ff,
            labels=labels,
            mapper=mapper,
        )
        cert = None
        if certify:
            t = time.perf_counter()
            if records is None:  # the store's encoded words and keys: nothing read or hashed again
                cert = certify_store_with_progress(model, data, progress, exp_ulps, mapper=mapper)
            else:
                cert = certify_chunks_with_progress(
                    model,
                    records(),
                    data.source,
                    data.sequences,
                    progress,
                    exp_ulps,
                    mapper=mapper,
                    token_lines=data.token_lines,
                )
            report["stage_seconds"]["certify"] = time.perf_counter() - t
        report["seconds"] = time.perf_counter() - t0
        fig = {**summarize(model, report, cert), "buckets": report["buckets"], "seconds": report["seconds"]}
        encoding = model.encoding
    else:
        res = compile_dataset(
            data,
            dtype=dtype,
            causal=causal,
            beta=beta,
            seed=seed,
            run_certificate=certify,
            progress=progress,
            d_model=d_model,
            code=code,
            group=group,
            exp_ulps=exp_ulps,
            ff=ff,
            labels=labels,
        )
        model, cert, fig, encoding = res.model, res.certificate, res.report, res.encoding
    guarantee: dict[str, float] = {}
    if cert is not None:
        guarantee = {
            "certified_tokens": cert.certified_tokens,
            "ceiling_tokens": cert.ceiling_tokens,
            "min_certified_margin": cert.min_certified_margin,
        }
    facts = {"paper": PAPER_A, "theorem": "Corollary 1", "parameters": model.num_parameters(), **fig}
    return Construction(model=model, guarantee=guarantee, facts=facts, certificate=cert, detail=encoding)


# figures of a compile report that describe the run, not the model (its times, how its data was cut into chunks
# and buckets, lists that can be long): not kept in the model file, so the same model is the same bytes
RUN_ONLY_FIGURES = (
    "conflicts",
    "min_margin_at",
    "seconds",
    "stage_seconds",
    "stage_cpu_seconds",
    "chunk_tokens",
    "buckets",
)


def save_compiled(model: Transformer, path: str | os.PathLike, report: dict[str, Any] | None = None) -> Path:
    """`uatlab.models.io.save` with the compile report as the facts, less what describes the run rather than the
    model (the conflict lists, where the smallest margin was, the times): the same model is the same bytes."""
    from uatlab._util import to_jsonable  # a non-finite figure is stored as a string ("inf"): JSON has none

    facts = {k: v for k, v in (report or {}).items() if k not in RUN_ONLY_FIGURES}
    return save(model, path, facts=to_jsonable(facts))


def load_compiled(path: str | os.PathLike) -> Transformer:
    """`uatlab.models.io.load` (any uatlab model; ``model.encoding`` is set if the file stores one)."""
    return load(path)


def certify_chunks_with_progress(
    model: Transformer,
    records: Iterable[tuple[list[str], list[str], int]],
    source: str,
    total: int | None,
    progress: ProgressFn | None,
    exp_ulps: float = DEFAULT_EXP_ULPS,
    mapper: Mapper | None = None,
    token_lines: bool = False,
    unknown: str = "error",
) -> Certificate:
    """Certify streamed records (e.g. ``iter_conll(path)``) chunk by chunk, reporting stage ``"certify"``;
    ``mapper``: where the chunks run (see `uatlab.verify.certificate.certify_chunks`); ``token_lines``: the
    records have one token per line (CoNLL), so a token's line is its sequence's first line plus its position;
    ``unknown``: as in `uatlab.verify.certificate.certify`."""
    cb = None if progress is None else (lambda n, _total: progress("certify", n, total))
    chunks = stream_chunks(records, source, token_lines=token_lines)
    return certify_chunks(model, chunks, total, progress=cb, exp_ulps=exp_ulps, mapper=mapper, unknown=unknown)


def certify_store_with_progress(
    model: Transformer,
    store: TokenStore,
    progress: ProgressFn | None,
    exp_ulps: float = DEFAULT_EXP_ULPS,
    mapper: Mapper | None = None,
) -> Certificate:
    """Certify the sequences a `uatlab.data.token_store.TokenStore` holds (its word ids, labels and input
    keys, cut into the chunks `certify_chunks_with_progress` would stream), reporting stage ``"certify"``."""
    cb = None if progress is None else (lambda n, _total: progress("certify", n, store.sequences))
    chunks = store_chunks(store, model.encoding)
    return certify_chunks(model, chunks, store.sequences, progress=cb, exp_ulps=exp_ulps, mapper=mapper)
