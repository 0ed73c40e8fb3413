"""Every builder returns a Construction: each entry of ``constructions.BY_THEOREM`` and every public
``build_*`` / ``compile_*`` function of ``uatlab.constructions``, called with small arguments."""

import importlib
import inspect
import pkgutil
from fractions import Fraction

import numpy as np
import pytest
import torch
from torch import nn

import uatlab.constructions as constructions
from uatlab.constructions import BY_THEOREM, Construction
from uatlab.constructions.baselines.yun2020 import random_set_labels
from uatlab.constructions.paper_a.thm2_contextual_mapping import random_vocabulary
from uatlab.constructions.paper_b.lem3_11_relu_network import random_relu_network
from uatlab.data.synthetic import synthetic_dataset

V3 = random_vocabulary(3, 2, 0.5, 1.0, 2.0, seed=0)
NET = random_relu_network(n=2, d=1, hidden=2, seed=0)
YUN_DELTA = Fraction(1, 3)
NT_TOKENS = np.array([[0, 1], [1, 2], [2, 0], [1, 1]])

#: builder name → a call with small arguments.
CHEAP_CALLS = {
    "build_hardmax_counterexample": lambda f: f(2, 4),
    "build_theorem2_layer": lambda f: f(V3, 2, 0.5, 1.0, 2.0),
    "build_theorem2_causal_layer": lambda f: f(V3, 2, 0.5, 1.0, 2.0),
    "compile_memorizer": lambda f: f(synthetic_dataset(6, 4, 8, 2, seed=0)),
    "build_universal_approximator": lambda f: f(
        lambda x: x * x.mean(axis=1, keepdims=True), (0.0, 1.0), grid=2, n=2, d=1
    ),
    "build_positional_approximator": lambda f: f(2, n=2),
    "build_truncated_linear_attention": lambda f: f([1.0], 0.0, -1.0, 1.0, anchors=9, n_tokens=9),
    "compile_relu_network": lambda f: f(NET, anchors=9),
    "compile_relu_network_two_layer": lambda f: f(NET, anchors=9),
    "compile_relu_network_standard": lambda f: f(NET, anchors=9),
    "compile_relu_network_one_standard_layer_two_tokens": lambda f: f(NET, sigmoids=4),
    "build_incontext_gd": lambda f: f(2, 4, steps=1, lr=0.1),
    "build_incontext_ridge": lambda f: f(2, 4, 0.1, steps=1, lr=0.1),
    "build_incontext_features": lambda f: f(2, 8, 0.1, steps=1, lr=0.1),
    "build_softmax_pooling": lambda f: f(NET, 4.0),
    "compile_next_token": lambda f: f(NT_TOKENS, np.array([0, 1, 2, 0]), V=3, C=3),
    "compile_seq2seq_deep": lambda f: f(
        [np.array([0, 1, 2]), np.array([2, 1])], [np.array([0, 1, 1]), np.array([1, 0])], 3, 2
    ),
    "build_yun_memorizer": lambda f: f(random_set_labels(1, 2, YUN_DELTA, 2, seed=0), 1, 2, YUN_DELTA),
}

#: Stages of a compiler that return its parts (not a Construction); the compiler named beside each wraps them.
STAGES = {
    ("uatlab.constructions.paper_a.cor1_memorizer.api", "compile_encoded"): "compile_memorizer",
    ("uatlab.constructions.paper_a.cor1_memorizer.api", "compile_store"): "compile_memorizer",
    ("uatlab.constructions.paper_a.cor1_memorizer.api", "compile_dataset"): "compile_memorizer",
    ("uatlab.constructions.paper_c.next_token_memorizer", "compile_memorizer"): "compile_next_token",
    ("uatlab.constructions.paper_c.seq2seq_memorizer", "compile_seq2seq"): "compile_seq2seq_deep",
    ("uatlab.constructions.paper_c.seq2seq_memorizer", "build_circuit"): "compile_seq2seq_deep",
    ("uatlab.constructions.paper_b.appB_incontext_features", "build_feature_layer"): "build_incontext_features",
}


def public_builders() -> dict[tuple[str, str], object]:
    """Every function named build_* or compile_* defined in a module of uatlab.constructions."""
    found = {}
    for info in pkgutil.walk_packages(constructions.__path__, "uatlab.constructions."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if (
                inspect.isfunction(obj)
                and obj.__module__ == module.__name__
                and name.startswith(("build_", "compile_"))
            ):
                found[(module.__name__, name)] = obj
    return found


def check_contract(con: object, where: str) -> None:
    assert isinstance(con, Construction), f"{where} returned {type(con).__name__}"
    assert isinstance(con.model, nn.Module), where
    assert con.paper and con.theorem, f"{where}: facts must name the paper and the theorem"
    assert isinstance(con.facts.get("parameters"), int) and con.facts["parameters"] >= 0, where
    for key, value in con.guarantee.items():
        assert isinstance(value, (int, float)), f"{where}: guarantee[{key!r}] = {value!r} is not a number"
    with pytest.raises(AttributeError):
        con.model = None  # frozen


def test_every_public_builder_has_a_call_here_or_is_a_named_stage():
    found = public_builders()
    names = {name for (module, name) in found if (module, name) not in STAGES}
    assert names == set(CHEAP_CALLS), "add the new builder to CHEAP_CALLS (or fix a stale entry)"
    assert set(STAGES) <= set(found), "a stage listed here no longer exists: drop it from STAGES"
    assert {f.__name__ for f in BY_THEOREM.values()} <= set(CHEAP_CALLS)


@pytest.mark.parametrize("key", sorted(BY_THEOREM), ids=lambda k: f"{k[0]}:{k[1]}")
def test_every_theorem_entry_returns_a_construction(key):
    builder = BY_THEOREM[key]
    check_contract(CHEAP_CALLS[builder.__name__](builder), f"{key} ({builder.__name__})")


def test_every_public_builder_returns_a_construction():
    seen = set()
    for (module, name), builder in public_builders().items():
        if (module, name) in STAGES or name in seen:
            continue
        seen.add(name)
        check_contract(CHEAP_CALLS[name](builder), f"{module}.{name}")


def test_stages_really_are_not_constructions():
    """A stage that starts returning a Construction belongs in CHEAP_CALLS instead."""
    data = synthetic_dataset(6, 4, 8, 2, seed=0)
    from uatlab.constructions.paper_a.cor1_memorizer.api import compile_dataset
    from uatlab.constructions.paper_c.next_token_memorizer import compile_memorizer

    assert not isinstance(compile_dataset(data, run_certificate=False), Construction)
    assert not isinstance(compile_memorizer(NT_TOKENS, np.array([0, 1, 2, 0]), V=3, C=3), Construction)


def test_builders_leave_the_global_torch_generator_alone():
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    CHEAP_CALLS["build_hardmax_counterexample"](BY_THEOREM[("A", "Theorem 1")])
    assert torch.equal(torch.rand(3), before)
