"""Ctrl-C during a job that runs on a local process pool (``--workers 2``): the terminal sends SIGINT to the whole
process group, workers included. The job ends with its one status line and exit code 130, prints no worker
traceback, leaves no worker behind, and what it kept resumes to the model of an uninterrupted run."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

import pytest

from uatlab.data.synthetic import synthetic_dataset
from uatlab.models.io import load


def _write_jsonl(path, data) -> None:
    import json

    with open(path, "w") as fh:
        for t, y in zip(data.tokens, data.labels, strict=True):
            fh.write(json.dumps({"tokens": t, "labels": y}) + "\n")


def _workers_of(pid: int) -> list[int]:
    """The pool workers (spawned ``multiprocessing.spawn`` children) of process ``pid``, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and b"multiprocessing.spawn" in cmd:
            found.append(int(entry))
    return found


def _interrupt_at_work(argv, cwd, timeout: float = 240):
    """Run the CLI in a new process group; once its pool's workers exist, send SIGINT to the whole group (as a
    terminal's Ctrl-C does). Returns (exit code, stderr, whether anything of the group was left running)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "uatlab", *argv],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    err = b""
    end = time.monotonic() + timeout
    while not _workers_of(proc.pid) and proc.poll() is None and time.monotonic() < end:
        ready, _, _ = select.select([proc.stderr], [], [], 0.05)
        if ready:
            err += os.read(proc.stderr.fileno(), 1 << 16)
    assert proc.poll() is None, "the job ended before its workers started: " + err.decode(errors="replace")[-2000:]
    time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGINT)
    try:
        _, rest = proc.communicate(timeout=120)
    finally:
        end = time.monotonic() + 10  # the workers end with the job (exited ones may wait a moment to be reaped)
        while _running_in_group(proc.pid) and time.monotonic() < end:
            time.sleep(0.1)
        alive = _running_in_group(proc.pid)
        if alive:
            os.killpg(proc.pid, signal.SIGKILL)
    err += rest
    return proc.returncode, err.decode(errors="replace"), alive


def _running_in_group(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that have not exited (zombies, awaiting their reaping, excluded), from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry))
    return found


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    folder = tmp_path_factory.mktemp("workers")
    data = folder / "big.jsonl"
    _write_jsonl(data, synthetic_dataset(12_000, 16, 1_500, 5, seed=3))
    return folder, data


def test_ctrl_c_during_a_compile_on_two_workers_is_one_line_and_resumes(big):
    folder, data = big
    out = folder / "m.safetensors"
    argv = ["compile", str(data), "--out", str(out), "--workers", "2"]
    code, err, alive = _interrupt_at_work(argv, folder)
    assert code == 130, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert not alive  # no worker left behind
    assert not out.exists()
    assert "interrupted" in err.splitlines()[-1]
    done = subprocess.run(
        [sys.executable, "-m", "uatlab", *argv, "--resume"], cwd=folder, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    ref = folder / "ref.safetensors"
    subprocess.run(
        [sys.executable, "-m", "uatlab", "compile", str(data), "--out", str(ref)],
        cwd=folder,
        capture_output=True,
        check=True,
        timeout=600,
    )
    a, b = load(out).state_dict(), load(ref).state_dict()
    assert a.keys() == b.keys() and all(a[k].equal(b[k]) for k in a)


def test_ctrl_c_during_a_certify_on_two_workers_is_one_line(big):
    folder, data = big
    model = folder / "c.safetensors"
    subprocess.run(
        [sys.executable, "-m", "uatlab", "compile", str(data), "--out", str(model), "--no-certify"],
        cwd=folder,
        capture_output=True,
        check=True,
        timeout=600,
    )
    code, err, alive = _interrupt_at_work(["certify", str(model), str(data), "--workers", "2"], folder)
    assert code == 130, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert not alive
