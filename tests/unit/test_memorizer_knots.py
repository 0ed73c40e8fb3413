"""The knot interpolant FF (one ReLU per slope change): never above paper A's count, certified at the ceiling."""

from __future__ import annotations

import numpy as np
import pytest

from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset, paper_a_param_count
from uatlab.data import ceiling_report, from_lists
from uatlab.data.synthetic import synthetic_dataset


def perm_parity(N: int, n: int, V: int, seed: int):
    rng = np.random.default_rng(seed)
    ms = rng.integers(0, V, size=n)
    toks = [[f"w{w}" for w in rng.permutation(ms)] for _ in range(N)]
    return from_lists(toks, [[f"p{k % 2}" for k in range(n)] for _ in range(N)])


def count_mod3(N: int, n: int, V: int, seed: int):
    rng = np.random.default_rng(seed)
    toks, labs = [], []
    for _ in range(N):
        ws = rng.integers(0, V, size=n).tolist()
        seen: dict[int, int] = {}
        lab = []
        for w in ws:
            lab.append(f"c{seen.get(w, 0) % 3}")
            seen[w] = seen.get(w, 0) + 1
        toks.append([f"w{w}" for w in ws])
        labs.append(lab)
    return from_lists(toks, labs)


FAMILIES = {
    "perm-parity": lambda: perm_parity(60, 12, 6, 0),
    "count-mod3": lambda: count_mod3(30, 24, 5, 1),
    "random-C20": lambda: synthetic_dataset(12, 40, 60, 20, seed=2),
    "synthetic": lambda: synthetic_dataset(80, 8, 40, 4, seed=3),
}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_never_above_paper_a_and_certified_at_the_ceiling(family, dtype):
    data = FAMILIES[family]()
    res = compile_dataset(data, dtype=dtype)
    fig, cert = res.report, res.certificate
    d, n, N = res.model.config.d_model, data.max_len, len(data)
    assert fig["paper_a_param_count"] == paper_a_param_count(d, n, N)
    assert fig["params_non_embedding"] <= fig["paper_a_param_count"] and fig["within_paper_a"]
    assert cert.certified and cert.certified_tokens == ceiling_report(data).ceiling_tokens
    assert cert.correct_tokens == cert.ceiling_tokens


def test_knots_use_fewer_units_than_ramps_on_alternating_labels():
    # position parity: along h a word's labels alternate often, runs are single points → one unit per change
    data = FAMILIES["perm-parity"]()
    knots = compile_dataset(data, run_certificate=False).report
    ramps = compile_dataset(data, ff="ramps", run_certificate=False).report
    assert ramps["ff_width"] == 2 * ramps["label_boundaries"]
    assert knots["label_boundaries"] <= knots["ff_width"] < 2 * knots["label_boundaries"]
    assert knots["ff_width"] <= knots["tokens"]
    assert knots["params_non_embedding"] < ramps["params_non_embedding"]


def test_ordinal_readout_margin_is_at_least_one_half():
    data = FAMILIES["synthetic"]()
    res = compile_dataset(data, dtype="float64", labels="ordinal")
    assert res.certificate.certified
    assert 0.49 < res.report["min_certified_margin"] <= 0.5 + 1e-9  # (t − c)²/2 with |t − c| = 1


def test_budget_dim_restores_paper_a_count():
    from uatlab.constructions.paper_a.cor1_memorizer.knots import paper_a_budget_dim

    for d, q, C, n, N in [(7, 3, 30, 2, 2), (7, 4, 5, 2, 2), (12, 100, 50, 10, 10), (5, 0, 2, 1, 1)]:
        dd = paper_a_budget_dim(d, q, C, n, N)
        assert dd >= d
        ours = 4 * (1 + dd) + 2 * q * dd + C * dd
        assert ours <= paper_a_param_count(dd, n, N)
        if dd > d:  # minimal: one coordinate less would be above paper A's count
            assert 4 * dd + 2 * q * (dd - 1) + C * (dd - 1) > paper_a_param_count(dd - 1, n, N)


def test_many_labels_with_an_ordinal_code_stay_within_paper_a():
    toks = [["a", "b"], ["b", "a"], *[[f"u{j}"] for j in range(26)]]
    labs = [["y0", "y29"], ["y7", "y12"], *[[f"y{j + 1}"] for j in range(26)]]
    res = compile_dataset(from_lists(toks, labs), dtype="float64", labels="ordinal")
    fig = res.report
    assert fig["params_non_embedding"] <= fig["paper_a_param_count"]
    assert res.certificate.certified and res.certificate.correct_tokens == res.certificate.ceiling_tokens


def _knot_units_point_by_point(occ, base, codes, h_v, GK, dtype):
    """Reference: the error-feedback recursion of `knot_units`, one group and one point at a time."""
    np_dt = np.float32 if dtype == "float32" else np.float64
    grp, word, lab, h = occ.group, occ.word, occ.label, occ.h
    P, L = len(h), codes.shape[1]
    starts = np.r_[0, np.flatnonzero(grp[1:] != grp[:-1]) + 1]
    zt = -(-GK - h).astype(np_dt).astype(np.float64) - GK
    zv = -float(np.asarray(-GK - h_v).astype(np_dt)) - GK
    T = codes[lab] - codes[base[word]]
    knots, coefs, idxs, unresolved, virtual = [], [], [], 0, 0
    for s, e in zip(starts.tolist(), np.r_[starts[1:], P].tolist(), strict=True):
        z, t, idx = list(zt[s:e]), [T[i] for i in range(s, e)], list(range(s, e))
        if np.any(t[0] != 0):
            z, t, idx = [zv, *z], [np.zeros(L), *t], [s, *idx]
            virtual += 1
        if len(z) < 2 or not any(np.any(r != t[0]) for r in t):
            continue
        S, g = np.zeros(L), np.zeros(L)
        for m in range(len(z) - 1):
            dz, need = z[m + 1] - z[m], t[m + 1] - g
            if dz <= 0.0:
                unresolved += int(np.any(need != 0))
                continue
            c = (need / dz - S).astype(np_dt).astype(np.float64)
            if np.any(c != 0):
                knots.append(z[m])
                coefs.append(c)
                idxs.append(idx[m])
                S = S + c
            g = g + S * dz
    return np.array(knots), np.array(coefs).reshape(-1, L), np.array(idxs, dtype=np.int64), unresolved, virtual


@pytest.mark.parametrize("dtype,labels,by_pos", [("float64", "ordinal", False), ("float32", "one-hot", True)])
def test_knot_units_all_groups_at_once_equal_the_point_by_point_recursion(dtype, labels, by_pos):
    # random groups of 1..40 points with repeated h (Δz = 0 after rounding: unresolved changes) and lowest points
    # off the base label (virtual points): every knot, coefficient bit, word and count as point by point
    from uatlab.constructions.paper_a.cor1_memorizer.contexts import Occurrences
    from uatlab.constructions.paper_a.cor1_memorizer.knots import knot_units, label_code_matrix

    rng = np.random.default_rng(7)
    C, V, n_groups = 5, 30, 120
    sizes = rng.integers(1, 41, size=n_groups)
    group = np.repeat(np.arange(n_groups), sizes)
    word = group % V
    h = np.concatenate([np.sort(rng.choice(rng.uniform(-1, 1, size=max(1, k // 2)), size=k)) for k in sizes])
    h[rng.random(len(h)) < 0.1] += 1e-12  # differences below float32 resolution
    h = np.concatenate([np.sort(h[group == i]) for i in range(n_groups)])
    label = rng.integers(0, C, size=len(h))
    label[rng.random(len(h)) < 0.5] = 0
    pos = (group % 7) if by_pos else None
    occ = Occurrences(word, h, label, len(h), len(h), [], 0, group=group, pos=pos)
    base = np.zeros(V, dtype=np.int64)
    codes = label_code_matrix(C, labels)
    units = knot_units(occ, base, codes, -1.25, 0.0 if by_pos else 3.0, dtype)
    knot, coef, idx, unresolved, virtual = _knot_units_point_by_point(
        occ, base, codes, -1.25, 0.0 if by_pos else 3.0, dtype
    )
    assert unresolved > 0 and len(knot) > 100
    assert virtual > 0
    assert units.knot.tobytes() == knot.tobytes() and units.coef.tobytes() == coef.tobytes()
    assert np.array_equal(units.word, word[idx])
    assert (units.pos is None) if not by_pos else np.array_equal(units.pos, pos[idx])
    assert (units.unresolved, units.virtual_points) == (unresolved, virtual)


def test_the_knot_assembler_needs_memory_linear_in_a_long_sequence(monkeypatch):
    """The extremes of a = α_w + π_k are taken from the extremes of α and π (float64 addition is monotone in each
    argument): a V × max_len table of every sum made the assembler quadratic in the length of one long sequence
    (CoNLL-2003 without its blank lines: 580 MB for a 16,000-token sentence)."""
    import tracemalloc

    import uatlab
    import uatlab.constructions.paper_a.cor1_memorizer.api as api
    from uatlab.constructions.paper_a.cor1_memorizer.layout import key_extremes

    n, V = 3000, 1500  # the table: V × n × 8 bytes = 36 MB
    data = uatlab.SequenceDataset(
        [[f"w{i % V}" for i in range(n)], ["a", "b"]], [["XY"[(i * 7919) % 3 == 0] for i in range(n)], ["X", "Y"]]
    )
    peaks, real = [], api.assemble_knot_model

    def measured(*args, **kwargs):
        tracemalloc.start()
        try:
            return real(*args, **kwargs)
        finally:
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()

    monkeypatch.setattr(api, "assemble_knot_model", measured)
    con = uatlab.compile_memorizer(data, certify=False, beta=1.0)
    assert len(peaks) == 1 and peaks[0] < V * n * 8 / 8  # linear: well under the table
    assert con.model is not None
    # the extremes of the sums are the sums of the extremes, exactly (monotone rounding), for any α and π
    rng = np.random.default_rng(0)
    alpha, pi = rng.standard_normal(500) * 1e3, rng.standard_normal(300) * 1e-3
    table = alpha[:, None] + pi[None, :200]  # every (word, position < 200) sum, as the table was formed
    assert key_extremes(alpha, pi, 200) == (table.min(), table.max())
