"""The compiler: exact memorization checked against PyTorch's own forward pass, structure, edge cases."""

import numpy as np
import pytest
import torch

from uatlab.constructions.paper_a.cor1_memorizer import (
    compile_dataset,
    compile_memorizer,
    load_compiled,
    paper_a_param_count,
    save_compiled,
)
from uatlab.data import ceiling_report, from_lists, majority_targets
from uatlab.data.synthetic import synthetic_dataset
from uatlab.errors import InputError


def torch_predictions(model, data):
    """Labels predicted by the model's ordinary forward pass (padding + mask, the way training runs it)."""
    enc = model.encoding
    ids = enc.encode_tokens(data)
    n = max(len(i) for i in ids)
    batch = torch.zeros(len(ids), n, dtype=torch.int64)
    mask = torch.zeros(len(ids), n, dtype=torch.bool)
    for b, seq in enumerate(ids):
        batch[b, : len(seq)] = torch.from_numpy(seq)
        mask[b, : len(seq)] = True
    with torch.no_grad():
        logits = model(batch, attend_mask=mask)
    labels = enc.id_to_label
    return [[labels[int(j)] for j in logits[b, : len(seq)].argmax(-1)] for b, seq in enumerate(ids)]


@pytest.mark.parametrize("repeats", [True, False])
@pytest.mark.parametrize("causal", [False, True])
def test_memorizes_random_labels_exactly(repeats, causal):
    data = synthetic_dataset(120, 9, 25, 4, repeats=repeats, seed=3)
    con = compile_memorizer(data, causal=causal)
    model, cert = con.model, con.certificate
    assert con.guarantee["certified_tokens"] == cert.certified_tokens and con.facts["theorem"] == "Corollary 1"
    context = "prefix" if causal else "sequence"
    rep = ceiling_report(data, context=context)
    assert cert.certified and cert.certified_tokens == rep.ceiling_tokens
    assert cert.ceiling_tokens == rep.ceiling_tokens and cert.conflict_tokens == rep.conflict_tokens
    spot = cert.torch_spot_check
    assert spot["tokens"] > 0 and spot["certified_but_wrong"] == 0
    # PyTorch's forward (padded batch, mask) predicts the majority label of every input
    assert torch_predictions(model, data) == majority_targets(data, context=context)


def test_structure_one_layer_one_head_rank_one():
    data = synthetic_dataset(60, 6, 15, 3, seed=0)
    model = compile_memorizer(data).model
    cfg = model.config
    assert (cfg.n_layers, cfg.n_heads, cfg.head_dim, cfg.rank, cfg.positional) == (1, 1, 1, 1, "given")
    assert all(r == [1] for r in model.blocks[0].attn.check_ranks().values())
    # non-embedding parameters: attention counts 4(s + d) as in paper A
    d, q, C = cfg.d_model, cfg.ff_width, cfg.num_labels
    # knots: bias-free FF (the constant coordinate carries the knots) and bias-free readout
    assert model.num_parameters(non_embedding=True) == 4 * (1 + d) + 2 * d * q + C * d
    assert paper_a_param_count(d, 6, 60) == 4 * (1 + d) + d * (2 * 6 * 60 + d)
    assert model.num_parameters(non_embedding=True) <= paper_a_param_count(d, 6, 60)
    ramps = compile_dataset(data, ff="ramps", run_certificate=False).model
    d, q = ramps.config.d_model, ramps.config.ff_width
    assert ramps.num_parameters(non_embedding=True) == 4 * (1 + d) + (2 * d * q + q + d) + (C * d + C)


def test_conflicts_are_counted_listed_and_majority_assigned():
    toks = [["a", "b", "c"], ["a", "b", "c"], ["a", "b", "c"], ["b", "a"]]
    labs = [["X", "Y", "Z"], ["X", "Z", "Z"], ["X", "Z", "Z"], ["Y", "Y"]]
    data = from_lists(toks, labs)
    res = compile_dataset(data)
    fig = res.report
    assert fig["conflict_tokens"] == 1 and fig["ceiling_tokens"] == 10
    (conf,) = fig["conflicts"]
    assert conf["token"] == "b" and conf["position"] == 1 and conf["majority"] == "Z"
    assert conf["label_counts"] == {"Y": 1, "Z": 2}
    assert res.certificate.certified and res.certificate.correct_tokens == 10
    assert torch_predictions(res.model, data)[0] == ["X", "Z", "Z"]


def test_repeated_word_with_different_labels_in_one_sequence():
    data = from_lists([["x", "x", "x", "y"], ["y", "x", "x", "x"]], [["A", "B", "A", "C"], ["C", "A", "A", "B"]])
    con = compile_memorizer(data)
    model, cert = con.model, con.certificate
    assert cert.certified and cert.certified_tokens == 8
    assert torch_predictions(model, data) == data.labels


def test_single_label_words_need_no_units():
    data = from_lists([["a", "b"], ["b", "a"], ["c"]], [["P", "Q"], ["Q", "P"], ["P"]])
    con = compile_memorizer(data)
    model, cert = con.model, con.certificate
    assert model.config.ff_width == 0 and cert.certified


def test_float32_reports_how_far_it_got():
    data = synthetic_dataset(150, 10, 40, 4, seed=5)
    res = compile_dataset(data, dtype="float32")
    cert = res.certificate
    assert res.model.config.dtype == "float32"
    assert 0 < cert.certified_fraction <= 1 and cert.certified_tokens <= cert.ceiling_tokens
    assert cert.certified == (cert.certified_tokens == cert.ceiling_tokens)
    # every token the certificate proves is predicted correctly by PyTorch in float32
    pred = torch_predictions(res.model, data)
    _, rL_ok = _certified_mask(res.model, data)
    for b, k in zip(*np.nonzero(rL_ok), strict=True):
        assert pred[b][k] == data.labels[b][k]


def _certified_mask(model, data):
    from uatlab.verify.certificate import logit_bounds

    ids = np.stack(model.encoding.encode_tokens(data))
    ys = np.stack(model.encoding.encode_labels(data))
    L, rL, bad = logit_bounds(model, ids)
    Lc = np.take_along_axis(L, ys[..., None], -1)
    rc = np.take_along_axis(rL, ys[..., None], -1)
    low = np.where(np.arange(L.shape[-1]) == ys[..., None], np.inf, Lc - L - 2 * (rc + rL)).min(-1)
    return L, (low > 0) & ~bad


def test_dim_pads_and_too_small_dim_is_an_error():
    data = synthetic_dataset(30, 5, 10, 3, seed=1)
    small = compile_dataset(data, run_certificate=False).model.config.d_model
    res = compile_dataset(data, d_model=small + 5)
    assert res.model.config.d_model == small + 5 and res.certificate.certified
    with pytest.raises(InputError, match="too small"):
        compile_dataset(data, d_model=small - 1)


def test_save_load_keeps_encoding_and_predictions(tmp_path):
    data = synthetic_dataset(40, 6, 12, 3, seed=2)
    res = compile_dataset(data)
    path = save_compiled(res.model, tmp_path / "m.safetensors", res.report)
    back = load_compiled(path)
    assert back.encoding.token_to_id == res.model.encoding.token_to_id
    assert back.encoding.label_to_id == res.model.encoding.label_to_id
    assert torch_predictions(back, data) == torch_predictions(res.model, data)


def test_bad_beta_and_dtype():
    data = synthetic_dataset(10, 4, 6, 2, seed=0)
    with pytest.raises(InputError, match="power of two"):
        compile_dataset(data, beta=3.0)
    with pytest.raises(InputError, match="dtype"):
        compile_dataset(data, dtype="float16")


@pytest.mark.parametrize("code", ["binary", "2-hot", "3-hot"])
def test_code_schemes_all_memorize_and_use_the_gated_certificate(code):
    from uatlab.constructions.paper_a.cor1_memorizer.layout import word_codes

    codes, m = word_codes(37, code)
    assert len({tuple(c) for c in codes}) == 37  # distinct codes
    assert m == {"binary": 0, "2-hot": 2, "3-hot": 3}[code]
    if code == "binary":
        assert np.all(np.abs(codes) == 1)  # ±1 codes
    else:
        assert np.all((codes == 0) | (codes == 1)) and np.all(codes.sum(1) == m)  # constant weight m
    data = synthetic_dataset(80, 7, 37, 3, seed=6)
    res = compile_dataset(data, code=code)
    assert res.certificate.certified and res.certificate.method == "gated-sparse"
    assert res.report["code"] == code
    with pytest.raises(InputError, match="code scheme"):
        word_codes(5, "fancy")


def test_code_width_is_the_width_of_the_codes_word_codes_builds():
    import math

    from uatlab.constructions.paper_a.cor1_memorizer.layout import code_width, word_codes

    for scheme in ("binary", "1-hot", "2-hot", "3-hot", "5-hot"):
        for count in (1, 2, 3, 4, 5, 9, 10, 11, 37, 64, 65, 200):
            codes, m = word_codes(count, scheme)
            k = code_width(count, scheme)
            assert codes.shape == (count, k), (scheme, count)
            if m:  # the smallest k with enough m-subsets
                assert math.comb(k, m) >= count and (k == m or math.comb(k - 1, m) < count), (scheme, count)
    with pytest.raises(InputError, match="code scheme"):
        code_width(5, "0-hot")


def test_auto_options_follow_the_dtype_and_keep_explicit_choices():
    from uatlab.constructions.paper_a.cor1_memorizer.layout import resolve_auto

    assert resolve_auto("float64") == ("binary", "ordinal", "word")
    assert resolve_auto("float32") == ("3-hot", "one-hot", "word-pos")
    assert resolve_auto("float32", "binary", "ordinal", "word") == ("binary", "ordinal", "word")
    data = synthetic_dataset(30, 6, 20, 3, seed=2)
    for dtype in ("float64", "float32"):
        rep = compile_dataset(data, dtype=dtype, run_certificate=False).report
        assert (rep["code"], rep["label_code"]) == resolve_auto(dtype)[:2]


@pytest.mark.parametrize("ff", ["ramps", "knots"])
def test_the_clis_dimension_floor_is_the_layouts(ff):
    """`uatlab compile --dim` refuses below the floor the model's own layout has: at the floor it compiles."""
    from uatlab.cli.compile import dim_floor

    data = synthetic_dataset(30, 6, 20, 3, seed=2)
    V, C = len({t for seq in data.tokens for t in seq}), len({y for seq in data.labels for y in seq})
    for dtype in ("float64", "float32"):
        floor, _ = dim_floor(ff, dtype, "auto", "auto", "auto", V, C, max(map(len, data.tokens)), exact=True)
        d = compile_dataset(data, dtype=dtype, ff=ff, run_certificate=False).report["d_model"]
        if ff == "ramps":
            assert d == floor  # exact: the layout's k + 3 + C (+ position code)
        else:
            assert d >= floor  # a lower bound (the gate code covers only the ambiguous words)


def test_float32_groups_by_word_and_position_and_certifies_the_ceiling():
    data = synthetic_dataset(150, 10, 40, 4, seed=5)
    res = compile_dataset(data, dtype="float32")
    model, cert = res.model, res.certificate
    meta = model.config.meta
    assert meta["group"] == "word-pos" and meta["pos_code_bits"] > 0
    assert cert.certified and cert.certified_tokens == cert.ceiling_tokens
    assert all(r == [1] for r in model.blocks[0].attn.check_ranks().values())
    # the position code lives in the positional encoding only (2 ones per position), never in the embedding
    d, kp = model.config.d_model, meta["pos_code_bits"]
    P = model.pos.detach().numpy()[:, d - kp :]
    E = model.embed.weight.detach().numpy()[:, d - kp :]
    assert np.all(E == 0) and np.all(P.sum(1) == 2) and len({tuple(p) for p in P}) == len(P)
    assert torch_predictions(model, data) == majority_targets(data)
    # same seed, same model
    again = compile_dataset(data, dtype="float32", run_certificate=False).model
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True))


def test_position_groups_whose_lowest_label_differs_from_the_word_base_get_an_offset_ramp():
    # "a" is P at position 0 and Q at position 1 in every context: no label change inside a (word, position)
    # group, but the two groups start with different labels, so one of them needs the offset ramp
    toks = [["a", "b"], ["b", "a"], ["a", "c"], ["c", "a"], ["a", "a"]]
    labs = [["P", "R"], ["R", "Q"], ["P", "R"], ["R", "Q"], ["P", "Q"]]
    res = compile_dataset(from_lists(toks, labs), dtype="float32")
    assert res.report["certified"] and res.model.config.ff_width == 2  # one offset ramp = two units
    assert torch_predictions(res.model, from_lists(toks, labs)) == labs
    word = compile_dataset(from_lists(toks, labs), dtype="float32", group="word")
    assert word.report["certified"] and word.model.config.meta["group"] == "word"
    with pytest.raises(InputError, match="group"):
        compile_dataset(from_lists(toks, labs), group="sentence")


def test_float64_keeps_word_groups_and_binary_codes_by_default():
    res = compile_dataset(synthetic_dataset(60, 6, 15, 3, seed=0))
    assert res.model.config.meta["group"] == "word" and res.report["code"] == "binary"
    assert res.model.config.meta["pos_code_bits"] == 0 and res.certificate.certified
