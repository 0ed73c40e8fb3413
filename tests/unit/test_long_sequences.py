"""Long sequences: attention values in blocks of queries (memory linear in n), memory stated and refused
above a limit, linear-time ceiling counting, and the warning about a sentence far longer than the rest."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from uatlab.constructions.paper_a.cor1_memorizer.contexts import boltzmann_context
from uatlab.data import SequenceDataset, ceiling_report, majority_targets
from uatlab.errors import InputError
from uatlab.memory_guard import check_memory, memory_limit, parse_size, set_memory_limit


@pytest.mark.parametrize("causal", [False, True])
def test_blocked_contexts_are_bit_identical(causal: bool) -> None:
    rng = np.random.default_rng(0)
    alpha, pi = rng.normal(size=50), 0.1 * rng.normal(size=400)
    b = 1 + np.arange(400) / 512
    words = [rng.integers(0, 50, size=n) for n in (400, 400, 250, 7, 1)]
    whole = boltzmann_context(words, alpha, pi, b, causal)
    blocked = boltzmann_context(words, alpha, pi, b, causal, batch_tokens=999)  # every n > 31 in query blocks
    for x, y in zip(whole, blocked, strict=True):
        assert np.array_equal(x, y)


def test_blocked_contexts_memory_is_linear() -> None:
    """Peak memory for one sequence of n tokens grows ~linearly, not with n²."""
    rng = np.random.default_rng(1)
    alpha = rng.normal(size=100)
    peaks = {}
    for n in (4000, 8000):
        pi, b = 0.01 * rng.normal(size=n), 1 + np.arange(n) / 2**14
        words = [rng.integers(0, 100, size=n)]
        tracemalloc.start()
        boltzmann_context(words, alpha, pi, b, causal=False, batch_tokens=200_000)
        peaks[n] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peaks[8000] < 8e6  # an n × n float64 table would be 512 MB
    assert peaks[8000] / peaks[4000] < 2.5  # linear (≈2), not quadratic (4)


def test_memory_limit_refuses_and_can_be_raised(monkeypatch) -> None:
    assert parse_size("1.5G") == int(1.5 * 2**30) and parse_size("512M") == 512 * 2**20 and parse_size("100") == 100
    with pytest.raises(InputError, match="memory size"):
        parse_size("lots")
    monkeypatch.setenv("UATLAB_MAX_MEMORY", "1G")
    set_memory_limit(None)
    assert memory_limit() == 2**30
    with pytest.raises(InputError, match=r"would need about 2\.0 GB .* above the limit of 1\.0 GB"):
        check_memory(2 * 2**30, "this", "a test")
    set_memory_limit("4G")
    check_memory(2 * 2**30, "this", "a test")  # raised: passes
    set_memory_limit(None)


def _brute_ceiling(data: SequenceDataset, context: str) -> int:
    from collections import Counter, defaultdict

    groups: dict = defaultdict(Counter)
    for toks, labs in data:
        for k, lab in enumerate(labs):
            groups[(tuple(toks), k) if context == "sequence" else tuple(toks[: k + 1])][lab] += 1
    return sum(max(c.values()) for c in groups.values())


@pytest.mark.parametrize("context", ["sequence", "prefix"])
def test_ceiling_counts_match_brute_force(context: str) -> None:
    rng = np.random.default_rng(2)
    toks = [[f"t{v}" for v in rng.integers(0, 3, size=rng.integers(1, 5))] for _ in range(300)]
    labs = [[f"y{v}" for v in rng.integers(0, 2, size=len(t))] for t in toks]
    data = SequenceDataset(toks, labs)
    rep = ceiling_report(data, context)
    assert rep.ceiling_tokens == _brute_ceiling(data, context) < data.num_tokens
    targets = majority_targets(data, context)
    assert sum(y == t for ys, ts in zip(labs, targets, strict=True) for y, t in zip(ys, ts, strict=True)) == (
        rep.ceiling_tokens
    )
    for c in rep.conflicts:
        assert all(toks[i][c.position] == c.token for i in c.sequences)


def test_ceiling_of_one_long_sentence_is_fast() -> None:
    import time

    n = 40_000
    data = SequenceDataset([[f"w{i % 5000}" for i in range(n)]], [["O"] * n])
    t0 = time.process_time()
    assert ceiling_report(data, "sequence").ceiling_tokens == n
    assert ceiling_report(data, "prefix").ceiling_tokens == n
    assert time.process_time() - t0 < 5.0  # quadratic rehashing took minutes at this length


def test_long_sentence_warning(tmp_path, capsys) -> None:
    from uatlab.cli import main

    lines = [f"w{i} O" for i in range(1500)] + [""] + [f"s{i} O\n" for i in range(3)] + [""]
    (tmp_path / "lost.txt").write_text("\n".join(lines) + "\n")
    assert main(["data-report", str(tmp_path / "lost.txt"), "--json"]) == 0
    err = capsys.readouterr().err
    assert "lost.txt:1: a sentence of 1500 tokens, far longer than the rest" in err


def test_long_sequence_warning_names_the_likely_cause_in_the_files_terms(tmp_path, capsys) -> None:
    # CoNLL (one token per line): lost blank lines; JSONL (one sequence per line): several sentences in one record
    import json

    from uatlab.cli import main

    lines = [f"w{i} O" for i in range(1500)] + [""] + [f"s{i} O\n" for i in range(3)] + [""]
    (tmp_path / "lost.txt").write_text("\n".join(lines) + "\n")
    records = [{"tokens": [f"w{i % 50}" for i in range(1500)], "labels": ["O"] * 1500}]
    records += [{"tokens": ["a", "b"], "labels": ["O", "O"]}] * 3
    (tmp_path / "one.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    for name, hint in (("lost.txt", "were blank lines between sentences lost?"), ("one.jsonl", "several sentences")):
        for argv in (["data-report", str(tmp_path / name), "--json"],
                     ["compile", str(tmp_path / name), "--out", str(tmp_path / f"{name}.safetensors"), "--no-certify",
                      "--json"]):  # fmt: skip
            assert main(argv) == 0, argv
            err = capsys.readouterr().err
            assert f"{name}:1: a se" in err and hint in err, (argv, err)
            other = "several sentences" if name == "lost.txt" else "blank lines"
            assert other not in err, (argv, err)
