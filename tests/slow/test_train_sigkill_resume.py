"""SIGKILL a training process mid-epoch, resume it: the final metrics and weights equal an uninterrupted run."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from uatlab.data import from_lists, write_conll

pytestmark = pytest.mark.slow


def _metrics(run):
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not k.startswith("seconds")} for r in rows]


def test_sigkill_mid_epoch_then_resume_equals_uninterrupted(tmp_path):
    rng = random.Random(0)
    toks = [[f"w{rng.randint(0, 40)}" for _ in range(rng.randint(2, 12))] for _ in range(600)]
    labs = [[rng.choice(["O", "O", "B-PER", "I-PER", "B-LOC"]) for _ in t] for t in toks]
    data = tmp_path / "train.conll"
    write_conll(from_lists(toks, labs), data)
    args = ["--epochs", "4", "--dim", "32", "--batch-size", "4", "--lr", "1e-2", "--no-f1", "--json", "--threads", "1"]
    cmd = [str(Path(sys.executable).parent / "uatlab"), "train", str(data)]  # the installed entry point
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    full = tmp_path / "full"
    subprocess.run([*cmd, "--out", str(full), *args], check=True, capture_output=True, env=env, timeout=1200)

    part = tmp_path / "part"
    proc = subprocess.Popen(
        [*cmd, "--out", str(part), *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    t0 = time.monotonic()
    while not (part / "metrics.jsonl").is_file() and time.monotonic() - t0 < 600:
        time.sleep(0.05)
    epoch_time = time.monotonic() - t0
    time.sleep(min(max(epoch_time * 0.3, 0.2), 5.0))  # well inside epoch 2
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert not (part / "model.safetensors").exists(), "killed too late: the run had already finished"
    done_before = len(_metrics(part))
    assert 1 <= done_before < 4

    res = subprocess.run([*cmd, "--out", str(part), *args, "--resume"], capture_output=True, env=env, timeout=1200)
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    assert _metrics(part) == _metrics(full)
    a, b = load_file(full / "model.safetensors"), load_file(part / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
