"""``uatlab compile`` / ``uatlab certify`` options: bounded, checked before any file is touched, refused where
they have no effect, and clear errors for a shared or damaged work directory."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from uatlab.cli import main


def max_threads() -> int:
    """The documented cap: 4 threads per core available to this process."""
    return 4 * len(os.sched_getaffinity(0))


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def here(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    assert main(["synth", "s.jsonl", "-N", "12", "-n", "5", "-V", "20", "-C", "3", "--json"]) == 0
    lines = [json.dumps({"tokens": [f"w{k}"] * 4, "label": f"w{k}"}) for k in range(8)]
    (tmp_path / "nt.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_threads_above_the_cap_refused_before_any_file(here: Path, capsys) -> None:
    """More threads than 4 per available core: one error line, exit 2, no lock or work file left."""
    capsys.readouterr()
    cap = max_threads()
    before = _listing(here)
    for argv in (
        ["compile", "s.jsonl", "--out", "m.safetensors", "--threads", str(cap + 1)],
        ["compile", "nt.jsonl", "--task", "next-token", "--out", "m.safetensors", "--threads", str(cap + 1)],
        ["certify", "m.safetensors", "s.jsonl", "--threads", str(cap + 1)],
        ["train", "s.jsonl", "--out", "run", "--threads", str(cap + 1)],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"error: --threads {cap + 1}: at most {cap} on this machine" in err, err
        assert _listing(here) == before
    assert main(["compile", "s.jsonl", "--out", "m.safetensors", "--threads", str(cap), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["threads"]["threads"] == cap


def test_local_workers_above_the_cap_refused_before_any_file(here: Path, capsys) -> None:
    """More local worker processes than 4 per available core: one error line, exit 2, nothing written."""
    capsys.readouterr()
    cap = max_threads()
    before = _listing(here)
    assert main(["compile", "s.jsonl", "--out", "m.safetensors", "--json"]) == 0
    capsys.readouterr()
    listed = _listing(here)
    for argv in (
        ["compile", "s.jsonl", "--out", "m2.safetensors", "--workers", str(cap + 1)],
        ["certify", "m.safetensors", "s.jsonl", "--workers", str(cap + 1)],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"error: --workers {cap + 1}: at most {cap} local worker processes" in err, err
        assert _listing(here) == listed != before


def test_two_compiles_sharing_a_work_dir(here: Path) -> None:
    """Job 2 with another --out but job 1's --work-dir is refused (job 1's pid named) and touches nothing;
    job 1 then finishes. Job 1 is stopped while job 2 runs, so the order is certain."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    run = [sys.executable, "-m", "uatlab"]
    assert subprocess.run([*run, "synth", "big.jsonl", "-N", "400", "-n", "10", "-V", "300"], cwd=here).returncode == 0
    job1 = subprocess.Popen(
        [*run, "compile", "big.jsonl", "--out", "one.safetensors", "--work-dir", "shared.work"]
        + ["--chunk-tokens", "20", "--no-certify", "--json"],
        cwd=here,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (here / "shared.work" / "manifest.json").exists():
            assert job1.poll() is None and time.monotonic() < deadline, job1.communicate()
            time.sleep(0.02)
        os.kill(job1.pid, signal.SIGSTOP)
        work_before = _listing(here / "shared.work")
        job2 = subprocess.run(
            [*run, "compile", "s.jsonl", "--out", "two.safetensors", "--work-dir", "shared.work", "--json"],
            cwd=here,
            env=env,
            capture_output=True,
            text=True,
        )
        assert job2.returncode == 2, job2.stderr
        assert f"another uatlab job (pid {job1.pid}) is writing shared.work" in job2.stderr, job2.stderr
        assert "Traceback" not in job2.stderr
        assert _listing(here / "shared.work") == work_before
        assert not (here / "two.safetensors").exists()
    finally:
        os.kill(job1.pid, signal.SIGCONT)
    out, err = job1.communicate(timeout=120)
    assert job1.returncode == 0, err
    assert json.loads(out)["sequences"] == 400
    assert (here / "one.safetensors").is_file() and not (here / "shared.work").exists()


def test_resume_with_a_truncated_chunk(here: Path, capsys) -> None:
    argv = ["compile", "s.jsonl", "--out", "m.safetensors", "--chunk-tokens", "10", "--no-certify", "--json"]
    assert main([*argv, "--keep-work"]) == 0
    chunk = here / "m.safetensors.work" / "chunk_00001.npz"
    chunk.write_bytes(chunk.read_bytes()[:100])
    capsys.readouterr()
    assert main([*argv, "--resume"]) == 2
    err = capsys.readouterr().err
    assert f"error: {Path('m.safetensors.work') / 'chunk_00001.npz'}: damaged: 100 bytes, " in err, err
    advice = f"remove the work directory {Path('m.safetensors.work')} (or give another --work-dir) and start again"
    assert advice in err and "Traceback" not in err
    assert main(argv) == 2  # without --resume the kept directory is refused too, with the same way out
    assert "remove it yourself (or give another --work-dir) to start again" in capsys.readouterr().err
    shutil.rmtree(here / "m.safetensors.work")  # the advice, followed
    assert main(argv) == 0


def test_code_and_dim_checked_before_reading(here: Path, capsys) -> None:
    """A huge --code M or a --dim below any data set's minimum is refused before the data is read (a file that
    is not data at all gives the option's error) and before a work directory is made."""
    (here / "junk.jsonl").write_bytes(b"\xbc\x00 not json\n")
    capsys.readouterr()
    for option, expected in (
        (["--code", "100000000000000000000-hot"], "--code '100000000000000000000-hot': use binary"),
        (["--dim", "3"], "--dim 3 is too small: these options need d ≥ 6"),
        (["--dim", "4", "--ff", "ramps"], "--dim 4 is too small: these options need d ≥ 5"),
        (["--group", "word-posn"], "--group must be word, word-pos or auto"),
    ):
        assert main(["compile", "junk.jsonl", "--out", "m.safetensors", *option]) == 2, option
        err = capsys.readouterr().err
        assert expected in err, (option, err)
        assert not (here / "m.safetensors.work").exists()
        if option[0] == "--dim":  # the data's own minimum comes after reading it: the error says so
            assert "the data may need more" in " ".join(err.split()) and "leaving --dim out" in " ".join(err.split())


def test_code_ones_checked_against_the_vocabulary(here: Path, capsys) -> None:
    """M-hot with more ones than the data has words: refused after the read, before the attention passes."""
    capsys.readouterr()
    words = len({t for line in (here / "s.jsonl").read_text().splitlines() for t in json.loads(line)["tokens"]})
    assert main(["compile", "s.jsonl", "--out", "m.safetensors", "--code", f"{words + 1}-hot"]) == 2
    err = capsys.readouterr().err
    assert f"more ones than the {words} words of s.jsonl (use M ≤ {words}" in err, err
    assert not (here / "m.safetensors").exists()


NEXT_TOKEN_REFUSED = [
    ["--ff", "ramps"],
    ["--causal"],
    ["--code", "3-hot"],
    ["--labels", "one-hot"],
    ["--group", "word-pos"],
    ["--beta", "4"],
    ["--dim", "7"],
    ["--work-dir", "wdn"],
    ["--keep-work"],
    ["--chunk-tokens", "1"],
    ["--resume"],
    ["--max-memory", "1G"],
    ["--exp-ulp", "3"],
    ["--executor", "ray"],
    ["--workers", "2"],
]


def test_next_token_refuses_options_it_ignores(here: Path, capsys) -> None:
    capsys.readouterr()
    before = _listing(here)
    for option in NEXT_TOKEN_REFUSED:
        argv = ["compile", "nt.jsonl", "--task", "next-token", "--out", "n.safetensors", *option]
        assert main(argv) == 2, option
        err = capsys.readouterr().err
        assert f"error: {option[0]} has no effect with --task next-token" in err, (option, err)
        assert _listing(here) == before
    # and the other way round
    for option in (["--window", "3"], ["--tokenizer", "python"]):
        assert main(["compile", "s.jsonl", "--out", "m.safetensors", *option]) == 2
        assert f"error: {option[0]} has no effect with --task token" in capsys.readouterr().err
        assert _listing(here) == before


def test_next_token_honours_no_certify_and_threads(here: Path, capsys) -> None:
    capsys.readouterr()
    argv = ["compile", "nt.jsonl", "--task", "next-token", "--out", "n.safetensors", "--json"]
    assert main([*argv, "--no-certify", "--threads", "1"]) == 0
    fig = json.loads(capsys.readouterr().out)
    assert fig["certified"] is None and fig["certificate"] == "not run (--no-certify)"
    assert fig["threads"]["threads"] == 1 and fig["threads"]["chosen_by"] == "request"
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["certified"] is True


def test_deep_refuses_options_it_ignores(here: Path, capsys) -> None:
    capsys.readouterr()
    before = _listing(here)
    for option in NEXT_TOKEN_REFUSED[2:]:
        if option[0] in ("--causal", "--max-memory"):  # --causal: its own error; --max-memory: honoured
            continue
        assert main(["compile", "s.jsonl", "--ff", "deep", "--out", "d.safetensors", *option]) == 2, option
        err = capsys.readouterr().err
        assert f"error: {option[0]} has no effect with --ff deep" in err, (option, err)
        assert _listing(here) == before
    assert main(["compile", "s.jsonl", "--ff", "deep", "--dim", "3", "--beta", "8", "--out", "d.safetensors"]) == 2
    assert "error: --beta, --dim have no effect with --ff deep" in capsys.readouterr().err


def test_uncertified_compile_warns_in_every_mode(here: Path, capsys) -> None:
    """float32 with binary word codes and ordinal labels leaves tokens unproven: exit 0 (like certify), the
    model saved, and one warning line on stderr with the certificate's own counts, JSON mode included."""
    assert main(["synth", "u.jsonl", "-N", "200", "-n", "20", "-V", "200", "-C", "5", "--json"]) == 0
    risky = ["--dtype", "float32", "--code", "binary", "--group", "word", "--labels", "ordinal"]
    capsys.readouterr()
    assert main(["compile", "u.jsonl", "--out", "f.safetensors", *risky, "--json"]) == 0
    captured = capsys.readouterr()
    fig = json.loads(captured.out)
    assert fig["certified"] is False
    certified, ceiling = fig["certified_tokens"], fig["ceiling_tokens"]
    assert certified < ceiling
    warning = [line for line in captured.err.splitlines() if line.startswith("warning: the model is not certified")]
    assert len(warning) == 1, captured.err
    assert f"({certified} of {ceiling} ceiling tokens)" in warning[0]
    # why, and what to try: float64 proves every token of these data with the same options
    assert "note: float32 rounding exceeds the logit margin of some tokens" in captured.err
    assert main(["compile", "u.jsonl", "--out", "f64.safetensors", *risky[2:], "--json"]) == 0
    out64 = capsys.readouterr()
    assert json.loads(out64.out)["certified"] is True and "note: float32" not in out64.err
    assert "saved to f.safetensors" in warning[0] and (here / "f.safetensors").is_file()
    assert main(["compile", "u.jsonl", "--out", "f.safetensors", *risky]) == 0
    assert "warning: the model is not certified" in capsys.readouterr().err
    assert main(["compile", "s.jsonl", "--out", "ok.safetensors", "--json"]) == 0
    assert "warning" not in capsys.readouterr().err


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs a /proc file system")
def test_unwritable_out_named_not_its_lock(here: Path, capsys) -> None:
    capsys.readouterr()
    assert main(["compile", "s.jsonl", "--out", "/proc/m.safetensors"]) == 2
    err = capsys.readouterr().err
    assert "error: --out /proc/m.safetensors: " in err and ".lock" not in err, err


def test_one_token_text_advice(here: Path, capsys) -> None:
    (here / "one.txt").write_text("hello\n")
    capsys.readouterr()
    assert main(["compile", "one.txt", "--task", "next-token", "--window", "1", "--out", "n.safetensors"]) == 2
    err = capsys.readouterr().err
    assert "needs at least 2" in err and "--window ≤" not in err, err


def test_certify_refuses_options_exact_certificates_ignore(here: Path, capsys) -> None:
    """Next-token and deep models are certified exactly, in this process: --exp-ulp, --executor and --workers
    have no effect on them and are refused; --max-memory too for next-token models (a deep model's certificate
    pads every sequence to its context and checks the memory first)."""
    assert main(["compile", "nt.jsonl", "--task", "next-token", "--out", "n.safetensors"]) == 0
    assert main(["compile", "s.jsonl", "--ff", "deep", "--out", "d.safetensors"]) == 0
    capsys.readouterr()
    for model, data, kind in (
        ("n.safetensors", "nt.jsonl", "a next-token model"),
        ("d.safetensors", "s.jsonl", "a --ff deep model"),
    ):
        for option in (["--exp-ulp", "3"], ["--max-memory", "1G"], ["--workers", "2"]):
            if option[0] == "--max-memory" and kind == "a --ff deep model":
                continue
            assert main(["certify", model, data, *option]) == 2, (model, option)
            err = capsys.readouterr().err
            assert f"error: {option[0]} has no effect with {kind} ({model})" in err, err
        assert main(["certify", model, data, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["certified"] is True


@pytest.mark.parametrize(
    ("out", "work", "make"),
    [
        ("X", "X", None),
        ("w/m.safetensors", "w", None),
        ("./w/sub/m.safetensors", "w", None),
        ("w/m.safetensors", "./w", "w"),  # an existing folder of the user's
        ("m.safetensors", "m.safetensors/work", None),
        ("m.safetensors", "./sub/../m.safetensors", None),
    ],
)
def test_out_and_work_dir_that_overlap_are_refused_first(here: Path, capsys, out: str, work: str, make) -> None:
    """--out equal to, inside, or around --work-dir: one error naming both options, and no file is touched."""
    if make:
        (here / make).mkdir()
        (here / make / "KEEP.txt").write_text("mine")
    before = {p.relative_to(here).as_posix(): p.stat().st_mtime_ns for p in here.rglob("*")}
    capsys.readouterr()
    assert main(["compile", "s.jsonl", "--out", out, "--work-dir", work]) == 2
    err = capsys.readouterr().err
    assert f"--out {Path(out)}" in err and f"--work-dir {Path(work)}" in err, err
    after = {p.relative_to(here).as_posix(): p.stat().st_mtime_ns for p in here.rglob("*")}
    assert after == before


@pytest.mark.parametrize(
    "argv",
    [
        ["compile", "s.jsonl", "--out", "newdir/"],
        ["compile", "s.jsonl", "--out", "newdir/m.safetensors/"],
        ["synth", "newdir/"],
        ["synth", "s.jsonl/"],
    ],
    ids=["compile", "compile-nested", "synth", "synth-existing-file"],
)
def test_output_file_spelt_as_a_folder_is_refused(here: Path, capsys, argv: list[str]) -> None:
    """An output file path ending in '/' is refused naming it (a file path is needed); nothing is written."""
    before = {p.relative_to(here).as_posix(): p.stat().st_mtime_ns for p in here.rglob("*")}
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    option = "--out" if argv[0] == "compile" else "out"
    assert f"'{option}'" in err and repr(argv[-1]) in err and "file path" in err, err
    after = {p.relative_to(here).as_posix(): p.stat().st_mtime_ns for p in here.rglob("*")}
    assert after == before


def test_the_certificate_memory_refusal_suggests_no_certify_only_where_it_exists(tmp_path, monkeypatch, capsys):
    """compile's refusal of a sequence too long to certify suggests --no-certify; certify has no such option, so
    its refusal does not."""
    monkeypatch.chdir(tmp_path)
    n = 300  # 80 bytes × 300² = 6.9 MB of all-pairs bounds
    line = {"tokens": [f"w{i % 30}" for i in range(n)], "labels": ["XY"[i % 7 == 0] for i in range(n)]}
    Path("long.jsonl").write_text(json.dumps(line) + "\n")
    assert main(["compile", "long.jsonl", "--out", "m.safetensors", "--max-memory", "1M"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "certifying the sequence of 300 tokens at long.jsonl:1 would need about 6.9 MB" in err
    assert "--no-certify skips the certificate" in err
    assert main(["compile", "long.jsonl", "--out", "m.safetensors", "--json"]) == 0
    capsys.readouterr()
    assert main(["certify", "m.safetensors", "long.jsonl", "--max-memory", "1M"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "certifying the sequence of 300 tokens at long.jsonl:1 would need about 6.9 MB" in err
    assert "--no-certify" not in err
