"""Options that cannot take effect are refused, not silently ignored: ``train --init`` with model options that
ask for another model, ``--quick`` with an option it sets itself, ``predict --unknown unk`` on a next-token
model; and options that do take effect are used as given (``capacity --task next-token --ns``, the
tokenizer a next-token model was compiled with)."""

from __future__ import annotations

import json
import random

import pytest

from uatlab.cli import main


def one_error_line(capsys, *parts: str) -> str:
    """The command printed nothing on stdout and exactly one ``error:`` line on stderr, containing ``parts``."""
    out = capsys.readouterr()
    assert out.out == ""
    lines = [ln for ln in out.err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), out.err
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def token_data(tmp_path, capsys):
    """A tiny token-classification JSONL file and the model `uatlab compile` makes of it."""
    data = tmp_path / "s.jsonl"
    assert main(["synth", str(data), "-N", "12", "-n", "4", "-V", "8", "-C", "3", "--json"]) == 0
    model = tmp_path / "s.safetensors"
    assert main(["compile", str(data), "--out", str(model), "--json"]) == 0
    capsys.readouterr()
    return data, model


def test_train_init_refuses_model_options_that_ask_for_another_model(tmp_path, capsys, token_data):
    from uatlab.models.io import load

    data, model = token_data
    mc = load(model).config
    out = tmp_path / "run"
    base = ["train", str(data), "--init", str(model), "--out", str(out), "--epochs", "1", "--no-f1"]
    wrong_dim, wrong_layers = mc.d_model + 3, mc.n_layers + 2
    assert main([*base, "--dim", str(wrong_dim), "--layers", str(wrong_layers)]) == 2
    one_error_line(capsys, f"--dim {wrong_dim}", f"--layers {wrong_layers}", "--init", f"d = {mc.d_model}")
    assert not out.exists()
    other = "float32" if mc.dtype == "float64" else "float64"
    for extra, says in (
        (["--dtype", other], f"{mc.dtype} weights"),
        (["--rank", "full"], f"rank {mc.rank}"),
        (["--heads", str(mc.n_heads + 1)], f"{mc.n_heads} head"),
        (["--head-dim", str(mc.head_dim + 1)], f"head size {mc.head_dim}"),
        (["--ff-width", str(mc.ff_width + 1)], f"feed-forward width {mc.ff_width}"),
        (["--ff-mult", "1000"], f"feed-forward width {mc.ff_width}"),
        (["--embed-std", "0.5"], "token embeddings"),
    ):
        assert main([*base, *extra]) == 2, extra
        one_error_line(capsys, extra[0], "no effect with --init", says)
        assert not out.exists()


def test_train_init_summary_records_the_model_that_was_trained(tmp_path, capsys, token_data):
    from uatlab.models.io import load

    data, model = token_data
    mc = load(model).config
    out = tmp_path / "run"
    # the init model's own values are no conflict: accepted
    argv = ["train", str(data), "--init", str(model), "--out", str(out), "--epochs", "1", "--no-f1", "--json"]
    assert main([*argv, "--dim", str(mc.d_model), "--dtype", mc.dtype]) == 0
    capsys.readouterr()
    summary = json.loads((out / "summary.json").read_text())
    cfg, trained = summary["config"], summary["model_config"]
    assert (cfg["dim"], cfg["layers"], cfg["heads"], cfg["head_dim"]) == (
        trained["d_model"],
        trained["n_layers"],
        trained["n_heads"],
        trained["head_dim"],
    )
    assert (cfg["rank"], cfg["ff_width"], cfg["dtype"]) == (trained["rank"], trained["ff_width"], trained["dtype"])
    assert cfg["embed_std"] is None and cfg["ff_mult"] is None  # the embeddings and width came from the model
    assert cfg["dim"] != 128  # not the option's default: the fixture's model is smaller
    # the same command resumes against the recorded config (it matches, since it is the model's)
    assert main([*argv, "--dim", str(mc.d_model), "--resume"]) == 0


def test_train_refuses_ff_mult_with_ff_width(tmp_path, capsys, token_data):
    """--ff-width sets the width itself: a --ff-mult beside it would be recorded in summary.json but never used."""
    data, _ = token_data
    out = tmp_path / "run"
    base = ["train", str(data), "--out", str(out), "--epochs", "1", "--dim", "8", "--no-f1", "--json"]
    assert main([*base, "--ff-width", "10", "--ff-mult", "2"]) == 2
    one_error_line(capsys, "--ff-mult has no effect with --ff-width")
    assert not out.exists()
    assert main([*base, "--ff-width", "10"]) == 0  # alone, the width is used as given
    capsys.readouterr()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model_config"]["ff_width"] == 10


@pytest.fixture
def conll_file(tmp_path):
    rng = random.Random(0)
    lines = []
    for _ in range(6):
        lines += [f"w{rng.randint(0, 5)} {rng.choice(['O', 'B-PER'])}" for _ in range(3)] + [""]
    path = tmp_path / "train.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


QUICK_CASES = [
    (["experiment", "depth-ablation", "{conll}", "--layers", "1", "--sentences", "2"], ["--dim", "16"], "--dim"),
    (["experiment", "depth-ablation", "{conll}", "--layers", "1", "--sentences", "2"], ["--epochs", "1"], "--epochs"),
    (["experiment", "rank-ablation", "{conll}", "--ranks", "1", "--sentences", "2"], ["--dim", "8"], "--dim"),
    (["experiment", "rank-ablation", "{conll}", "--ranks", "1", "--sentences", "2"], ["--lr", "0.1"], "--lr"),
    (["experiment", "capacity", "--grid", "2"], ["--kind", "conll", "--data", "{conll}"], "--kind"),
    (["experiment", "capacity", "--grid", "2"], ["--ns", "4,5"], "--ns"),
    (["experiment", "capacity", "--grid", "2"], ["--max-steps", "3"], "--max-steps"),
    (["approx", "incontext", "--task", "ridge", "--d", "1", "--context", "2"], ["--train-steps", "5"], "--train-steps"),
    (["approx", "incontext", "--task", "ridge", "--d", "1", "--context", "2"], ["--test-tasks", "2"], "--test-tasks"),
]


@pytest.mark.parametrize(("argv", "given", "flag"), QUICK_CASES, ids=lambda v: v if isinstance(v, str) else None)
def test_quick_refuses_an_option_it_sets_itself(tmp_path, capsys, conll_file, argv, given, flag):
    out = tmp_path / "out"
    full = [a.replace("{conll}", str(conll_file)) for a in [*argv, *given]]
    assert main([*full, "--quick", "--out", str(out), "--json"]) == 2
    one_error_line(capsys, f"--quick sets {flag} itself")
    assert not out.exists()


def test_capacity_next_token_quick_refuses_ns_and_data_with_synthetic_kind(tmp_path, capsys, conll_file):
    out = tmp_path / "out"
    argv = ["experiment", "capacity", "--out", str(out), "--json"]
    assert main([*argv, "--task", "next-token", "--quick", "--ns", "16,32"]) == 2
    one_error_line(capsys, "--ns", "no effect with --task next-token --quick")
    assert main([*argv, "--data", str(conll_file)]) == 2  # --kind synthetic (the default) reads no file
    one_error_line(capsys, "--data", "no effect with --kind synthetic")
    assert not out.exists()


def test_capacity_next_token_uses_the_ns_given_even_when_they_equal_the_token_default(tmp_path, capsys):
    out = tmp_path / "out"
    ns = "16,32,64,128,256"  # the token task's default list, given explicitly
    argv = ["experiment", "capacity", "--task", "next-token", "--ns", ns, "--max-steps", "1", "--grid", "4"]
    assert main([*argv, "--out", str(out), "--json"]) == 0
    capsys.readouterr()
    state = json.loads((out / "next_token_capacity.json").read_text())
    assert sorted(int(n) for n in state["compiled"]) == [16, 32, 64, 128, 256]
    assert [row["N"] for row in state["table"]] == [16, 32, 64, 128, 256]


@pytest.fixture
def python_text_model(tmp_path, capsys):
    """A next-token model compiled from text with punctuation, tokenized as Python."""
    rng = random.Random(1)
    words = ["a", "b", "c", "(d)", "e,", "f."]
    text = tmp_path / "pytext.txt"
    text.write_text(" ".join(rng.choice(words) for _ in range(120)) + "\n")
    model = tmp_path / "ntp.safetensors"
    argv = ["compile", str(text), "--task", "next-token", "--window", "4", "--tokenizer", "python"]
    assert main([*argv, "--out", str(model), "--json"]) == 0
    capsys.readouterr()
    return text, model


def test_predict_splits_lines_with_the_tokenizer_of_the_model_and_agrees_with_certify(
    tmp_path, capsys, python_text_model
):
    from uatlab.data.next_token import read_text_windows

    text, model = python_text_model
    assert main(["certify", str(model), str(text), "--json"]) == 0
    cert = json.loads(capsys.readouterr().out)
    assert cert["certified"] is True
    # the windows certify proves, written back as text the way a person would (no spaces inside "(d)", "e,")
    d = read_text_windows(text, 4, "python")
    windows = [[d.token_vocab[t] for t in row if t != d.pad_id] for row in d.tokens.tolist()]
    nexts = [d.label_vocab[y] for y in d.labels.tolist()]
    seen: dict[tuple[str, ...], set[str]] = {}
    for w, y in zip(windows, nexts, strict=True):
        seen.setdefault(tuple(w), set()).add(y)
    unique = [(w, next(iter(ys))) for w, ys in seen.items() if len(ys) == 1]  # the ceiling: no conflicting next
    assert len(unique) >= 10 and any("(" in w for w, _ in unique)

    def as_text(tokens):
        s = " ".join(tokens)
        for a, b in (("( ", "("), (" )", ")"), (" ,", ","), (" .", ".")):
            s = s.replace(a, b)
        return s

    query = tmp_path / "q.txt"
    query.write_text("".join(as_text(w) + "\n" for w, _ in unique))
    assert "(d)" in query.read_text()
    assert main(["predict", str(model), str(query), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["next"]
    assert got == [y for _, y in unique]
    # a line ending inside an open bracket is a prefix like any other
    open_bracket = [(w, y) for w, y in unique if w[-1] == "("]
    if open_bracket:
        query.write_text(as_text(open_bracket[0][0]) + "\n")
        assert main(["predict", str(model), str(query), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["next"] == [open_bracket[0][1]]


def test_predict_refuses_unknown_unk_on_a_next_token_model(tmp_path, capsys, python_text_model):
    _, model = python_text_model
    query = tmp_path / "q.txt"
    query.write_text("a b\n")
    assert main(["predict", str(model), str(query), "--unknown", "unk"]) == 2
    one_error_line(capsys, "--unknown unk", "next-token model", "no unknown-word token")
    assert main(["predict", str(model), str(query), "--unknown", "error"]) == 0  # what it does anyway: accepted


def test_train_refuses_focus_margin_without_focus(tmp_path, capsys, conll_file):
    out = tmp_path / "run"
    argv = ["train", str(conll_file), "--out", str(out), "--epochs", "1", "--dim", "8", "--no-f1", "--json"]
    for focus in ([], ["--focus", "0"]):
        assert main([*argv, *focus, "--focus-margin", "2"]) == 2
        one_error_line(capsys, "--focus-margin", "no effect without --focus")
        assert not out.exists()
    assert main([*argv, "--focus", "0.5", "--focus-margin", "2"]) == 0  # with the margin loss on, it is used
    summary = json.loads(capsys.readouterr().out)
    assert (summary["config"]["focus"], summary["config"]["focus_margin"]) == (0.5, 2.0)


def test_compile_refuses_exp_ulp_with_no_certify(tmp_path, capsys, token_data):
    data, _ = token_data
    out = tmp_path / "m.safetensors"
    argv = ["compile", str(data), "--out", str(out), "--json"]
    assert main([*argv, "--no-certify", "--exp-ulp", "3"]) == 2
    one_error_line(capsys, "--exp-ulp", "no effect with --no-certify")
    assert not out.exists()
    assert main([*argv, "--exp-ulp", "3"]) == 0  # with the certificate it is the error the certificate assumes
    assert json.loads(capsys.readouterr().out)["exp_ulps"] == 3.0


@pytest.fixture
def conll_dir(tmp_path, conll_file):
    folder = tmp_path / "conll"
    folder.mkdir()
    (folder / "train.txt").write_text(conll_file.read_text())
    return folder


def test_reproduce_refuses_data_dir_when_no_selected_claim_reads_conll(tmp_path, capsys, conll_dir):
    from uatlab.claims.registry import all_claims

    claims = all_claims()
    never = next(c.id for c in claims if c.reads_conll == "never")
    full_only = next(c.id for c in claims if c.reads_conll == "full")
    out = tmp_path / "report"
    argv = ["reproduce", "--data-dir", str(conll_dir), "--out", str(out), "--json"]
    assert main([*argv, "--only", never]) == 2
    one_error_line(capsys, "--data-dir", f"no effect with --only {never}", "no selected claim reads CoNLL-2003")
    assert main([*argv, "--only", full_only, "--quick"]) == 2
    one_error_line(capsys, "--data-dir", "no effect with --quick", full_only)
    assert not out.exists()


def test_reproduce_passes_data_dir_to_a_claim_that_reads_conll(tmp_path, capsys, conll_dir, monkeypatch):
    import dataclasses

    from uatlab.claims import registry

    claim = next(c for c in registry.all_claims() if c.reads_conll == "always")

    def where_conll_is(ctx):  # stands in for the (minutes-long) check: reports the file it would read
        return registry.ClaimResult(verdict="pass", figures={"conll": str(ctx.conll_train())})

    monkeypatch.setitem(registry._REGISTRY, claim.id, dataclasses.replace(claim, check=where_conll_is))
    out = tmp_path / "report"
    argv = ["reproduce", "--data-dir", str(conll_dir), "--out", str(out), "--only", claim.id, "--quick", "--json"]
    assert main(argv) == 0
    runs = json.loads(capsys.readouterr().out)["claims"]
    assert [r["measured"]["conll"] for r in runs] == [str(conll_dir / "train.txt")]


def test_reproduce_reads_a_malformed_train_file_before_any_claim_runs(tmp_path, capsys, monkeypatch):
    """A train.txt with a bad line is one file:line error (exit 2) before any claim runs, not a claim that
    fails after the others ran; the same for the folder $UATLAB_CONLL_DIR names."""
    import dataclasses

    from uatlab.claims import registry

    ran = []
    for c in registry.all_claims():  # no check runs: each would record its id
        monkeypatch.setitem(
            registry._REGISTRY, c.id, dataclasses.replace(c, check=lambda ctx, i=c.id: ran.append(i) or None)
        )
    folder = tmp_path / "dd"
    folder.mkdir()
    (folder / "train.txt").write_text("t1 c0\nt2 c1\nt3\nt4 c0\n\nt5 c1\n")
    always = next(c.id for c in registry.all_claims() if c.reads_conll == "always")
    out = tmp_path / "report"
    assert main(["reproduce", "--data-dir", str(folder), "--out", str(out), "--quick", "--json"]) == 2
    one_error_line(capsys, f"{folder / 'train.txt'}:3: expected at least 2 columns")
    monkeypatch.setenv("UATLAB_CONLL_DIR", str(folder))
    assert main(["reproduce", "--out", str(out), "--only", always, "--quick", "--json"]) == 2
    one_error_line(capsys, f"{folder / 'train.txt'}:3: expected at least 2 columns")
    assert ran == [] and not out.exists()


def test_claims_declare_whether_they_read_conll():
    """A check that calls `ClaimContext.conll_train` (directly or through `conll_or_synthetic`) declares it."""
    import inspect

    from uatlab.claims.registry import all_claims

    for claim in all_claims():
        source = inspect.getsource(claim.check)
        reads = "conll_train(" in source or "conll_or_synthetic(" in source
        assert (claim.reads_conll != "never") == reads, claim.id
        if claim.reads_conll == "full":
            assert "None if ctx.quick else ctx.conll_train()" in source, claim.id


def test_reproduce_help_names_the_exit_codes_it_returns(tmp_path, capsys, monkeypatch):
    import dataclasses
    import re

    from uatlab.claims import registry

    claim = next(c for c in registry.all_claims() if c.reads_conll == "never")
    verdicts = iter(["pass", "fail"])

    def stand_in(ctx):  # the claim's check, replaced: passes once, then fails
        return registry.ClaimResult(verdict=next(verdicts), figures={"x": 1.0})

    monkeypatch.setitem(registry._REGISTRY, claim.id, dataclasses.replace(claim, check=stand_in))
    argv = ["reproduce", "--only", claim.id, "--quick", "--json", "--out"]
    returned = {main([*argv, str(tmp_path / "passed")])}
    returned.add(main([*argv, str(tmp_path / "failed")]))
    assert (tmp_path / "failed" / "claims.json").is_file()  # a failed claim still has its report
    returned.add(main([*argv, str(tmp_path / "bad"), "--seed", "-1"]))
    capsys.readouterr()
    assert main(["reproduce", "--help"]) == 0
    text = capsys.readouterr().out
    listed = text[text.index("Exit codes:") :].split("\n\n")[0]
    named = {int(m) for m in re.findall(r"^\s+(\d+)\s", listed, flags=re.M)}
    # 130 (interrupted) is produced by the CLI entry for every command (tests/integration/test_bad_input.py)
    assert returned == {0, 1, 2} and named == returned | {130}, listed


def test_universal_first_token_product_refuses_out_which_it_never_writes(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "ao"
    argv = ["approx", "universal", "--target", "first-token-product", "--quick", "--json"]
    assert main([*argv, "--out", str(out)]) == 2
    one_error_line(capsys, "--out", "no effect with --target first-token-product")
    assert not out.exists()
    assert main(argv) == 0  # without --out: the table, no file
    assert json.loads(capsys.readouterr().out)["target"] == "first-token-product"
    assert list(tmp_path.iterdir()) == []  # not even the default folder


@pytest.mark.parametrize(
    "argv",
    [
        ["experiment", "depth-ablation", "{conll}", "--layers", "1"],
        ["experiment", "rank-ablation", "{conll}", "--ranks", "1"],
    ],
    ids=lambda v: v[1],
)
def test_ablation_refuses_more_sentences_than_the_file_has(tmp_path, capsys, conll_file, argv):
    """As ``capacity --ns`` does: a sweep asked for N sentences does not run on fewer without saying so."""
    from uatlab.data import read_sequences

    have = len(read_sequences(conll_file))
    out = tmp_path / "out"
    full = [a.replace("{conll}", str(conll_file)) for a in argv]
    base = [*full, "--epochs", "1", "--dim", "8", "--out", str(out), "--json"]
    assert main([*base, "--sentences", str(have + 1)]) == 2
    one_error_line(capsys, f"--sentences {have + 1} is larger than the {have} sentences of {conll_file}")
    assert not out.exists()
