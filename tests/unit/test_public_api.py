"""The public API: ``uatlab.__all__`` is pinned, every name resolves, and importing uatlab does not import torch."""

import subprocess
import sys

import uatlab

PUBLIC = {
    "AttentionOnlyConfig",
    "AttentionOnlyLayer",
    "Certificate",
    "Construction",
    "Encoding",
    "FeedForward",
    "MultiHeadSelfAttention",
    "SelfAttention",
    "SequenceDataset",
    "TrainConfig",
    "Transformer",
    "TransformerConfig",
    "__version__",
    "build_hardmax_counterexample",
    "build_incontext_features",
    "build_incontext_gd",
    "build_incontext_ridge",
    "build_positional_approximator",
    "build_softmax_pooling",
    "build_theorem2_causal_layer",
    "build_theorem2_layer",
    "build_truncated_linear_attention",
    "build_universal_approximator",
    "build_yun_memorizer",
    "certify",
    "compile_memorizer",
    "compile_next_token",
    "compile_relu_network",
    "compile_relu_network_one_standard_layer_two_tokens",
    "compile_relu_network_standard",
    "compile_relu_network_two_layer",
    "compile_seq2seq_deep",
    "hardmax_counterexample_inputs",
    "load",
    "read_conll",
    "read_jsonl",
    "run_claims",
    "save",
    "train",
}


def test_all_is_pinned_and_every_name_resolves():
    assert set(uatlab.__all__) == PUBLIC
    for name in uatlab.__all__:
        assert getattr(uatlab, name) is not None, name
    assert uatlab.SelfAttention is uatlab.MultiHeadSelfAttention


def test_builders_return_the_construction_contract():
    con = uatlab.build_truncated_linear_attention([1.0], 0.0, -1.0, 1.0, anchors=9, n_tokens=9)
    assert isinstance(con, uatlab.Construction)
    assert con.facts["paper"] and con.facts["theorem"].startswith("Theorem 3.9")
    assert con.guarantee["sup_error_bound"] > 0 and con.facts["parameters"] > 0
    assert con.model is con.detail.layer


def test_every_builder_of_the_theorem_table_is_public():
    from uatlab.constructions import BY_THEOREM

    for key, builder in BY_THEOREM.items():
        assert getattr(uatlab, builder.__name__) is builder, key


def test_import_uatlab_does_not_import_torch():
    code = "import sys, uatlab; print(uatlab.__version__); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == uatlab.__version__ and out[1] == "False"


def test_subpackages_are_attributes_after_a_plain_import():
    # a fresh interpreter: in this process other tests have imported them already
    code = (
        "import uatlab; print(len(uatlab.constructions.BY_THEOREM)); print(uatlab.models.Transformer.__name__); "
        "print(callable(uatlab.verify.certificate.certify)); print(sorted(set(uatlab._SUBPACKAGES) - set(dir(uatlab))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:4] == [
        str(len(__import__("uatlab.constructions").constructions.BY_THEOREM)),
        "Transformer",
        "True",
        "[]",
    ]


def test_unknown_attribute_is_an_attribute_error():
    try:
        uatlab.no_such_name  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("uatlab.no_such_name resolved")


def test_cli_help_and_version_do_not_import_torch():
    code = (
        "import sys; from uatlab.cli import _load_commands, main; _load_commands(); "
        "print('torch' in sys.modules); main(['--version'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "False" and out[1] == f"uatlab {uatlab.__version__}"
