"""How much precision the literal Theorem-2 layer (paper A) needs: the arbitrary-precision search, the float64
collapse count and the separation-versus-scale sweep."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import torch

from uatlab.constructions.paper_a.thm2_causal_mask import build_theorem2_causal_layer
from uatlab.constructions.paper_a.thm2_contextual_mapping import (
    Theorem2Construction,
    all_sequences,
    build_theorem2_layer,
    random_vocabulary,
    validate_parameters,
)
from uatlab.errors import InputError, PrecisionError
from uatlab.numerics.arb import (
    arb_log10,
    arb_to_str,
    working_precision,
)
from uatlab.theory.contextual import contextual_margin_of_outputs
from uatlab.theory.separatedness import tokenwise_separatedness
from uatlab.verify.theorem2 import Theorem2Certificate, certify_theorem2

# decimal digits past which raising the cap is no advice: one product of two arb numbers this long takes seconds,
# and the certificate takes many per sequence
FEASIBLE_DIGITS = 10**7


def count_merged(items: list[Any], close_pairs: Iterable[tuple[Any, Any]]) -> int:
    """How many classes ``items`` form when every pair in ``close_pairs`` is merged (transitively, union-find)."""
    parent = {k: k for k in items}

    def find(k: Any) -> Any:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for a, b in close_pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
    return len({find(k) for k in items})


def largest_logit_range(V: np.ndarray, con: Theorem2Construction) -> float:
    """max over queries of c·|a_k|·(max a − min a), a = V w: the widest logit range the certificate resolves."""
    a = V @ con.w
    return float(max(abs(con.c_used * ak) * (a.max() - a.min()) for ak in a))


def float64_collapse(con: Theorem2Construction, sequences: list[tuple[int, ...]]) -> dict[str, Any]:
    """Evaluate the same weights in float64 and count the context ids that collapse.

    Two ids (different (V^(i), token) keys) collapse when some outputs of theirs are no farther apart
    than the float64 noise floor: max(same-key spread, 8 ulp · max‖F‖). Ids are merged transitively.
    """
    X = np.stack([con.vocabulary[list(s)] for s in sequences])  # (N, n, d)
    with torch.no_grad():
        out = con.layer(torch.from_numpy(X))  # (N, n, d)
    sep = tokenwise_separatedness(X)
    m = contextual_margin_of_outputs(out, sep)
    Y = out.reshape(-1, X.shape[-1]).numpy()  # (Nn, d)
    keys = sep.context_keys().reshape(-1)
    floor = max(m.same_key_spread, 8 * np.finfo(np.float64).eps * m.r)
    uniq = np.unique(keys)
    if len(Y) > 4000:
        raise InputError(f"{len(Y)} outputs are too many for the float64 collapse count (limit 4000)")
    dist = np.linalg.norm(Y[:, None, :] - Y[None, :, :], axis=-1)  # (Nn, Nn)
    close = np.argwhere((dist <= floor) & (keys[:, None] != keys[None, :]))
    f64_ids = count_merged([int(k) for k in uniq], [(int(keys[a]), int(keys[b])) for a, b in close])
    return {
        "exact_distinct_ids": len(uniq),
        "float64_distinct_ids": f64_ids,
        "float64_collapsed_ids": len(uniq) - f64_ids,
        "float64_delta": m.delta,
        "float64_noise_floor": floor,
        "float64_max_norm": m.r,
        "float64_worst_pair": m.describe_worst_pair(),
    }


def vocabulary_for(
    n: int, vocab_size: int, dim: int, eps: float, r_min: float, r_max: float, seed: int, vocabulary: Any = None
) -> np.ndarray:
    """The given vocabulary (as float64) or a seeded random one, (|V|, d); refused if n > |V|."""
    if vocabulary is None:
        V = random_vocabulary(vocab_size, dim, eps, r_min, r_max, seed=seed)
    else:
        V = np.asarray(vocabulary, dtype=np.float64)
    if n > len(V):
        raise InputError(f"n = {n} exceeds the vocabulary size {len(V)}: sequences need n distinct tokens")
    return V


def theorem2_literal(
    vocab_size: int = 4,
    dim: int = 2,
    n: int = 3,
    seed: int = 0,
    eps: float = 0.5,
    r_min: float = 1.0,
    r_max: float = 2.0,
    max_digits: int = 100_000,
    sequences: str = "all",
    vocabulary: Any = None,
    c_scale: float = 1.0,
    max_sequences: int = 20_000,
    progress: Callable[[int, bool], None] | None = None,
) -> dict[str, Any]:
    """Build the literal Theorem-2 layer on a random (or given) vocabulary and certify it exactly.

    Steps: vocabulary (seeded, `random_vocabulary`) → weights (`build_theorem2_layer`) →
    smallest passing precision (digits 16, 32, … doubling until the certificate passes, then bisection
    to one digit) → a final certificate at 1.1× that precision + 20 digits for the reported figures →
    the float64 evaluation of the same weights (`float64_collapse`).

    Returns:
        a JSON-able dict: ``passes``, ``delta_achieved`` / ``delta_achieved_lower`` / ``delta_theorem``
        (strings such as '1.234e-3373'), their log10, ``digits`` (smallest passing precision),
        ``float64_collapsed_ids`` and friends, the constants, the search trace and ``seconds``.

    Raises:
        InputError: impossible parameters or vocabulary; too many sequences.
        PrecisionError: the certificate does not pass within ``max_digits`` (the message says how many
            digits the data likely need).
    """
    t0 = time.perf_counter()
    validate_parameters(n, eps, r_min, r_max)
    if max_digits < 16:
        raise PrecisionError(f"--max-digits {max_digits} is below the minimum of 16 decimal digits")
    V = vocabulary_for(n, vocab_size, dim, eps, r_min, r_max, seed, vocabulary)
    count = math.perm(len(V), n) if sequences == "all" else math.comb(len(V), n)
    if count > max_sequences:
        raise InputError(
            f"{count} sequences ({sequences}) exceed the limit of {max_sequences}; use sequences='sets' "
            "(one ordering per set: the layer is permutation-equivariant) or a smaller |V| or n"
        )
    con = build_theorem2_layer(V, n, eps, r_min, r_max, seed=seed, c_scale=c_scale).detail
    seqs = all_sequences(len(V), n, sequences)
    spread = largest_logit_range(V, con)
    estimate = int(spread / math.log(10)) + 10

    trace: list[tuple[int, bool]] = []

    def attempt(digits: int) -> Theorem2Certificate:
        cert = certify_theorem2(con, int(math.ceil(digits * math.log2(10))), seqs)
        trace.append((digits, cert.passes))
        if progress is not None:
            progress(digits, cert.passes)
        return cert

    lo, digits = 0, 16
    while True:
        cert = attempt(digits)
        if cert.passes or cert.definite:
            break
        lo = digits
        if digits >= max_digits:
            if estimate > FEASIBLE_DIGITS:
                advice = (
                    f"up to about {float(estimate):.3g} digits, beyond any feasible exact check (arb numbers of "
                    f"{FEASIBLE_DIGITS:.0e} digits already take seconds per operation). Use a larger eps, or smaller "
                    "|V|, d or n."
                )
            else:
                advice = (
                    f"up to about {estimate} digits. Raise --max-digits (the cost grows faster than linearly with "
                    "it) or use smaller |V|, d or n."
                )
            raise PrecisionError(
                f"the exact certificate did not pass at the cap of {max_digits} decimal digits; the largest "
                f"logit range here is {spread:.4g}, which suggests {advice}"
            )
        digits = min(2 * digits, max_digits)
    hi = digits
    if cert.passes:
        # Informed probes: outputs are O(1) and must be resolved to δ, so about −log10 δ digits are needed.
        # Probing just below and above that guess shrinks the bisection interval (the search stays exact).
        guess = math.nan
        if cert.same_token_value is not None:
            with working_precision(bits=cert.bits):
                guess = -arb_log10(cert.same_token_value) if cert.same_token_value > 0 else math.nan
        if math.isfinite(guess):
            for probe in (int(guess) - 8, int(guess) + 8):
                if lo < probe < hi:
                    if attempt(probe).passes:
                        hi = probe
                    else:
                        lo = probe
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if attempt(mid).passes:
                hi = mid
            else:
                lo = mid
    final = certify_theorem2(con, int(math.ceil((1.1 * hi + 20) * math.log2(10))), seqs) if cert.passes else cert
    with working_precision(bits=final.bits):
        consts = con.constants()
        delta_th = consts["delta"]
        r = consts["r"]
        # δ achieved: the same-token/different-set minimum (the binding one); with a single vocabulary
        # set there is none and the certified different-token bound is the δ achieved.
        same = final.same_token_value is not None
        d_val = final.same_token_value if same else final.different_token_lower
        d_low = final.same_token_lower if same else final.different_token_lower
        res: dict[str, Any] = {
            "passes": bool(final.passes),
            "delta_achieved": arb_to_str(d_val),
            "delta_achieved_lower": arb_to_str(d_low),
            "delta_kind": "same token, different sets" if same else "different tokens (one vocabulary set)",
            "delta_theorem": arb_to_str(delta_th),
            "log10_delta_achieved": arb_log10(d_val),
            "log10_delta_theorem": arb_log10(delta_th),
            "achieved_over_theorem_log10": arb_log10(d_val) - arb_log10(delta_th),
            "digits": hi if final.passes else None,
            "bits": int(math.ceil(hi * math.log2(10))),
            "digits_estimate": estimate,
            "different_token_lower": float(final.different_token_lower.mid()),
            "max_norm": float(final.max_norm_upper.mid()),
            "r": float(r.mid()),
            "failures": final.failures[:5],
        }
    res.update(
        {
            "vocab_size": len(V),
            "dim": int(V.shape[1]),
            "length": n,
            "eps": eps,
            "r_min": r_min,
            "r_max": r_max,
            "seed": seed,
            "sequences": sequences,
            "n_sequences": len(seqs),
            "c": con.c,
            "c_used": con.c_used,
            "c_scale": c_scale,
            "max_logit": con.max_logit,
            "w": con.w.tolist(),
            "projection_ratio": con.projection_ratio,
            "projection_constant": con.projection_constant,
            "worst_pair": (
                None
                if final.same_token_pair is None
                else {
                    "sequence_a": list(final.same_token_pair[0]),
                    "position_a": final.same_token_pair[1],
                    "sequence_b": list(final.same_token_pair[2]),
                    "position_b": final.same_token_pair[3],
                }
            ),
            "vocabulary": V.tolist(),
            "precision_search": [{"digits": dg, "passes": ok} for dg, ok in trace],
        }
    )
    res.update(float64_collapse(con, seqs))
    res["seconds"] = round(time.perf_counter() - t0, 3)
    return res


def separation_vs_scale(
    scales: list[float],
    vocab_size: int = 4,
    dim: int = 2,
    n: int = 3,
    seed: int = 0,
    eps: float = 0.5,
    r_min: float = 1.0,
    r_max: float = 2.0,
) -> list[dict[str, Any]]:
    """Same-token separation in exact arithmetic and in float64 as the paper's c is scaled.

    For each factor in ``scales`` the layer is rebuilt with c_scale = factor (one vocabulary, one w;
    factors < 1 leave the theorem's regime and are for the study only) and evaluated on every sorted
    sequence (one per vocabulary set, enough by permutation equivariance): exact δ (arb, at a precision
    chosen from the logit range, certified lower bound reported) against the float64 margin and
    collapsed ids.
    """
    V = random_vocabulary(vocab_size, dim, eps, r_min, r_max, seed=seed)
    seqs = all_sequences(len(V), n, "sets")
    rows = []
    for f in scales:
        con = build_theorem2_layer(V, n, eps, r_min, r_max, seed=seed, c_scale=f).detail
        spread = largest_logit_range(V, con)
        digits = int(spread / math.log(10)) + 40
        cert = certify_theorem2(con, int(math.ceil(digits * math.log2(10))), seqs)
        with working_precision(bits=cert.bits):
            same = cert.same_token_value is not None
            exact_lower = cert.same_token_lower if same else cert.different_token_lower
            row = {
                "c_scale": f,
                "c_used": con.c_used,
                "exact_log10_delta": arb_log10(cert.same_token_value if same else exact_lower),
                "exact_delta_certified_positive": bool(exact_lower > 0),
                "digits": digits,
            }
        row.update(float64_collapse(con, seqs))
        rows.append(row)
    return rows


def float64_causal_collapse(con: Theorem2Construction) -> dict[str, Any]:
    """The Theorem-2 weights in float64 with a causal mask: contexts (prefix set, last token) merged by noise.

    Each prefix is evaluated on its own (the causal output of its last token); two contexts collapse when
    their outputs are within 8 ulp · max‖F‖, merged transitively.
    """
    V = con.vocabulary
    outs: dict[tuple[frozenset[int], int], np.ndarray] = {}
    with torch.no_grad():
        for seq in itertools.permutations(range(len(V)), con.n):
            for k in range(con.n):
                pre = seq[: k + 1]
                key = (frozenset(pre), pre[-1])
                if key not in outs:
                    outs[key] = con.layer(torch.from_numpy(V[list(pre)][None]))[0, -1].numpy()  # (d,)
    Y = np.stack(list(outs.values()))  # (K, d)
    floor = 8 * np.finfo(np.float64).eps * float(np.linalg.norm(Y, axis=1).max())
    dist = np.linalg.norm(Y[:, None] - Y[None], axis=-1)  # (K, K)
    distinct = count_merged(list(range(len(Y))), [(int(a), int(b)) for a, b in np.argwhere(np.triu(dist <= floor, 1))])
    off = dist[np.triu_indices(len(Y), 1)]
    return {
        "float64_distinct_ids": distinct,
        "float64_collapsed_ids": len(Y) - distinct,
        "float64_min_separation": float(off.min()) if off.size else math.nan,
        "float64_noise_floor": floor,
    }


def theorem2_causal(
    vocab_size: int = 4,
    dim: int = 2,
    n: int = 3,
    seed: int = 0,
    eps: float = 0.5,
    r_min: float = 1.0,
    r_max: float = 2.0,
    max_digits: int = 100_000,
    vocabulary: Any = None,
) -> dict[str, Any]:
    """`uatlab.constructions.paper_a.thm2_causal_mask.build_theorem2_causal_layer` on a random (or
    given) vocabulary, its certificate and the float64 collapse of the same weights, as one JSON-able dict."""
    t0 = time.perf_counter()
    V = vocabulary_for(n, vocab_size, dim, eps, r_min, r_max, seed, vocabulary)
    if math.perm(len(V), n) > 20_000:
        raise InputError(f"{math.perm(len(V), n)} ordered sequences exceed the limit of 20000: use a smaller |V| or n")
    built = build_theorem2_causal_layer(V, n, eps, r_min, r_max, seed=seed, max_digits=max_digits)
    return {
        "vocab_size": len(V),
        "dim": V.shape[1],
        "length": n,
        "c_used": built.detail.c_used,
        "digits": built.facts["digits"],
        **built.certificate,
        **float64_causal_collapse(built.detail),
        "seconds": round(time.perf_counter() - t0, 3),
    }
