"""The library as a user meets it: predict on strings, one model file format, unknown words, masks, data sets."""

import pytest
import torch

import uatlab
from uatlab.data import from_lists
from uatlab.data.synthetic import synthetic_dataset
from uatlab.errors import InputError, ModelFileError, UnknownTokenError
from uatlab.models import Transformer, TransformerConfig
from uatlab.training import TrainConfig


@pytest.fixture(scope="module")
def compiled():
    data = synthetic_dataset(40, 6, 20, 3, seed=1)
    return data, uatlab.compile_memorizer(data)


def test_predict_matches_the_certified_labels_and_survives_save_load(compiled, tmp_path):
    data, con = compiled
    pred = con.model.predict(data.tokens)
    assert con.certificate.certified
    # a certified model predicts every non-conflict token's label; this data set has no conflicts
    assert con.certificate.conflict_tokens == 0 and pred == data.labels
    path = uatlab.save(con.model, tmp_path / "m.safetensors", facts=con.facts)
    back = uatlab.load(path)
    assert back.predict(data.tokens) == pred
    assert back.encoding == con.model.encoding
    for k, v in con.model.state_dict().items():
        assert torch.equal(v, back.state_dict()[k]), k
    assert back.saved_extra["uatlab_version"] == uatlab.__version__
    assert back.saved_extra["facts"]["theorem"] == "Corollary 1"
    cert = uatlab.certify(back, data)
    assert cert.certified_tokens == con.certificate.certified_tokens


def test_unknown_words_never_become_a_real_word(compiled):
    data, con = compiled
    with pytest.raises(InputError, match="sentence 0, position 1: token 'zzz' is not in the model's vocabulary"):
        con.model.predict([[data.tokens[0][0], "zzz"]])
    with pytest.raises(UnknownTokenError) as info:
        con.model.predict([[data.tokens[0][0]], [data.tokens[0][0], data.tokens[0][0], "zzz"]])
    assert (info.value.sentence, info.value.position) == (1, 2)  # where a reader of a file finds the word's line
    assert str(info.value).endswith("is not in the model's vocabulary (this model has no unknown-word token)")
    with pytest.raises(InputError, match="unknown must be one of"):
        con.model.predict([[data.tokens[0][0]]], unknown="skip")
    with pytest.raises(InputError, match="has none"):
        con.model.predict([[data.tokens[0][0]]], unknown="unk")
    with pytest.raises(InputError, match="list of token lists"):
        con.model.predict(["Zorbia praises"])


def test_predict_names_a_sentence_longer_than_the_positional_encoding(compiled):
    data, con = compiled
    long = [data.tokens[0][0]] * (con.model.config.max_len + 1)
    with pytest.raises(InputError, match=f"sentence 1 has {len(long)} tokens"):
        con.model.predict([data.tokens[0], long])


def test_trained_model_has_an_unk_id_that_is_not_a_real_word(tmp_path):
    data = synthetic_dataset(20, 5, 12, 3, seed=2)
    uatlab.train(data, TrainConfig(epochs=1, dim=16, batch_size=8, warmup_steps=1), tmp_path / "run", progress=False)
    model = uatlab.load(tmp_path / "run" / "model.safetensors")
    enc = model.encoding
    assert enc.unknown_token == "<unk>" and enc.unknown_id == 0 and "<unk>" not in data.vocabulary()
    out = model.predict([[data.tokens[0][0], "never-seen"]])
    assert len(out[0]) == 2 and set(out[0]) <= set(data.label_set())
    cert = uatlab.certify(model, data)
    assert 0 <= cert.certified_tokens <= data.num_tokens


def test_attend_mask_that_leaves_a_query_without_keys_is_refused():
    cfg = TransformerConfig(d_model=4, n_layers=1, n_heads=1, head_dim=2, vocab_size=5, num_labels=2, max_len=3)
    model = Transformer(cfg)
    ids = torch.zeros(2, 3, dtype=torch.long)
    ok = torch.tensor([[True, True, False], [True, False, False]])
    assert model(ids, attend_mask=ok).shape == (2, 3, 2)
    with pytest.raises(InputError, match="query position 0 of sequence 1 with no key"):
        model(ids, attend_mask=torch.tensor([[True, True, True], [False, False, False]]))


def test_dataset_repr_is_one_line_and_datasets_slice():
    data = synthetic_dataset(300, 8, 50, 4, seed=0)
    r = repr(data)
    assert "\n" not in r and len(r) < 200 and "300 sequences" in r
    head = data[:10]
    assert len(head) == 10 and head.tokens == data.tokens[:10] and head.lines == data.lines[:10]
    assert data[3] == (data.tokens[3], data.labels[3])
    assert len(data[::100]) == 3


def test_load_refuses_an_encoding_that_does_not_fit_the_model(tmp_path):
    cfg = TransformerConfig(d_model=4, n_layers=1, n_heads=1, head_dim=2, vocab_size=3, num_labels=2, max_len=3)
    import json

    from safetensors import safe_open
    from safetensors.torch import save_file

    enc = uatlab.Encoding.from_lists(["a", "b"], ["X", "Y"])
    with pytest.raises(InputError, match="lists 2 tokens, the model has vocab_size 3"):  # refused on save
        uatlab.save(Transformer(cfg), tmp_path / "m.safetensors", encoding=enc)
    good = uatlab.Encoding.from_lists(["a", "b", "c"], ["X", "Y"])
    path = uatlab.save(Transformer(cfg), tmp_path / "m.safetensors", encoding=good)
    with safe_open(str(path), framework="pt") as f:  # a file written otherwise (or edited) is refused on load
        meta, tensors = dict(f.metadata()), {k: f.get_tensor(k) for k in f.keys()}
    extra = json.loads(meta["uatlab_extra"])
    extra["encoding"] = enc.to_json()
    save_file(tensors, str(path), metadata={**meta, "uatlab_extra": json.dumps(extra)})
    with pytest.raises(ModelFileError, match="lists 2 tokens"):
        uatlab.load(path)


def test_an_encoding_given_out_of_id_order_keeps_its_ids_through_save_and_load(tmp_path):
    cfg = TransformerConfig(d_model=4, n_layers=1, n_heads=1, head_dim=2, vocab_size=3, num_labels=2, max_len=3)
    enc = uatlab.Encoding({"c": 2, "a": 0, "b": 1}, {"Y": 1, "X": 0})  # dict order is not id order
    assert enc.id_to_token == ["a", "b", "c"] and enc.id_to_label == ["X", "Y"]
    assert [enc.id_to_token[enc.token_to_id[t]] for t in "abc"] == list("abc")
    back = uatlab.load(uatlab.save(Transformer(cfg), tmp_path / "m.safetensors", encoding=enc)).encoding
    assert back.token_to_id == {"a": 0, "b": 1, "c": 2} and back.label_to_id == {"X": 0, "Y": 1}


@pytest.mark.parametrize(
    "tokens,named",
    [({"a": 0, "b": 0}, "'a' has id 0"), ({"a": 0, "b": 2}, "'b' has id 2"), ({"a": "0"}, "'a' has id '0'")],
)
def test_an_encoding_with_ids_that_are_not_0_to_n_is_refused_naming_one(tokens, named):
    with pytest.raises(InputError, match=f"token ids must be 0..{len(tokens) - 1}, each once: {named}"):
        uatlab.Encoding(tokens, {"X": 0})


def test_encode_tokens_validates_the_unknown_policy():
    data = from_lists([["a", "b"]], [["X", "Y"]])
    enc = uatlab.Encoding.fit(data, unknown_token="<unk>")
    other = from_lists([["a", "c"]], [["X", "Y"]])
    assert enc.encode_tokens(other, unknown="unk")[0].tolist() == [1, 0]
    with pytest.raises(InputError, match="token 'c'"):
        enc.encode_tokens(other)
    with pytest.raises(InputError, match="unknown must be one of"):
        enc.encode_tokens(other, unknown="drop")


def test_compile_memorizer_from_a_token_store_matches_memory_and_reports_every_stage(tmp_path):
    from uatlab.data.keys import input_keys
    from uatlab.data.token_store import TokenStore

    data = synthetic_dataset(50, 6, 20, 3, seed=4)

    def records():
        return ((t, y, line) for t, y, line in zip(data.tokens, data.labels, data.lines, strict=True))

    store = TokenStore(tmp_path / "work", "<memory>", "sequence", chunk_tokens=60)
    store.read(records(), input_keys)
    seen: dict[str, tuple[int, int | None]] = {}
    con = uatlab.compile_memorizer(store, records=records, progress=lambda s, d, t: seen.__setitem__(s, (d, t)))
    mem = uatlab.compile_memorizer(data)
    for k, v in mem.model.state_dict().items():
        assert torch.equal(v, con.model.state_dict()[k]), k
    assert con.guarantee == mem.guarantee and con.facts["buckets"] == store.bucket_count > 1
    assert {"attention", "group contexts", "feed-forward assembly", "certify"} <= set(seen)
    assert seen["group contexts"] == (store.bucket_count, store.bucket_count)
    assert seen["certify"][0] == len(data)
    # without records= the certificate reads the store's encoded chunks: the same certificate
    seen.clear()
    from_store = uatlab.compile_memorizer(store, progress=lambda s, d, t: seen.__setitem__(s, (d, t)))
    a, b = con.certificate.to_dict(), from_store.certificate.to_dict()
    a.pop("seconds"), b.pop("seconds")
    assert a == b and seen["certify"] == (len(data), len(data))


def test_save_model_keeps_the_encoding_too(compiled, tmp_path):
    from uatlab.models import save_model

    _, con = compiled
    back = uatlab.load(save_model(con.model, tmp_path / "m.safetensors"))
    assert back.encoding == con.model.encoding
