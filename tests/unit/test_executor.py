"""The sweep executor: results stored per trial, never recomputed, failures retried and reported."""

import json

import pytest

from uatlab.errors import UatlabError
from uatlab.experiments.executor import Trial, run_trials

CALLS = []


def square(params):
    CALLS.append(params["x"])
    if params["x"] == 3:
        raise RuntimeError("trial 3 always fails")
    return {"y": params["x"] ** 2}


def test_resume_and_failures(tmp_path):
    CALLS.clear()
    trials = [Trial(f"x={x}", {"x": x}) for x in range(5)]
    res = run_trials(trials, square, tmp_path, workers=1, retries=2, progress=False)
    assert [r["y"] for r in res.ordered(trials)] == [0, 1, 4, 16]
    assert set(res.failed) == {"x=3"} and "always fails" in res.failed["x=3"]
    assert CALLS.count(3) == 3  # first try + 2 retries
    stored = json.loads((tmp_path / "trials" / "x=2.json").read_text())
    assert stored["y"] == 4 and stored["x"] == 2
    CALLS.clear()
    res2 = run_trials(trials, square, tmp_path, workers=1, retries=0, progress=False)
    assert CALLS == [3]  # only the failed trial is tried again
    assert sorted(res2.reused) == ["x=0", "x=1", "x=2", "x=4"]


def test_process_pool_matches_in_process(tmp_path):
    trials = [Trial(f"x={x}", {"x": x}) for x in (0, 1, 2, 4)]
    res = run_trials(trials, square, tmp_path / "pool", workers=2, progress=False)
    assert [r["y"] for r in res.ordered(trials)] == [0, 1, 4, 16]


def test_bad_trial_ids():
    with pytest.raises(UatlabError, match="may only hold"):
        Trial("a/b")
    with pytest.raises(UatlabError, match="duplicate trial ids"):
        run_trials([Trial("a"), Trial("a")], square, "/tmp/never", progress=False)


@pytest.mark.parametrize(
    "content",
    [b"my notes, not JSON\n", b"\xff\xfe binary", b'["a", "list"]', b'{"trial_id": "x=9", "y": 81}'],
    ids=["text", "not-utf8", "json-list", "other-trial"],
)
def test_a_file_the_sweep_did_not_write_is_refused_and_kept(tmp_path, content):
    """Results are written atomically, so a file in the trial's place that is not its JSON record is someone
    else's: refused, naming it, and left as it was (never deleted, never taken as the trial's result)."""
    CALLS.clear()
    (tmp_path / "trials").mkdir()
    foreign = tmp_path / "trials" / "x=2.json"
    foreign.write_bytes(content)
    with pytest.raises(UatlabError, match=r"x=2\.json.*not a result of trial 'x=2'"):
        run_trials([Trial(f"x={x}", {"x": x}) for x in (1, 2)], square, tmp_path, workers=1, progress=False)
    assert foreign.read_bytes() == content
    assert CALLS == []  # refused before any trial ran


def _sleep_then(x, seconds):
    import time

    time.sleep(seconds)
    return x


def _marked(params):
    """A trial that leaves a mark when it starts, then takes its time."""
    import time
    from pathlib import Path

    Path(params["marks"], f"start_{params['i']}").touch()
    time.sleep(params["seconds"])
    return {"i": params["i"]}


def test_a_map_closed_early_leaves_the_shared_pool_to_the_others():
    from uatlab.experiments.executor import map_ordered

    b = map_ordered(_sleep_then, ((i, 0.2) for i in range(10)), workers=2)
    assert next(b) == 0
    a = map_ordered(_sleep_then, ((i, 1.0) for i in range(10)), workers=2)
    assert next(a) == 0
    a.close()  # its reader stops with chunks in flight: they are cancelled, the pool stays
    assert list(b) == list(range(1, 10))


def test_ctrl_c_in_a_sweep_starts_no_queued_trial(tmp_path):
    """The executor hands a few tasks to its workers' queue ahead of time; after a stop they must not start."""
    from uatlab.experiments.executor import _run_pool

    # Only the first trial is short, so exactly one worker is free before the stop: it may take one more trial
    # then. Equal times would let both workers take one in the instant before the main process sees a result.
    seconds = [0.2] + [2.5] * 9
    trials = [Trial(f"t{i}", {"i": i, "seconds": seconds[i], "marks": str(tmp_path)}) for i in range(10)]

    def finish(trial, out):
        raise KeyboardInterrupt  # Ctrl-C as the first result comes in

    with pytest.raises(KeyboardInterrupt):
        _run_pool(trials, _marked, finish, 2)
    started = sorted(p.name for p in tmp_path.iterdir())
    # the two first, and at most one taken by the freed worker before the stop; the rest were queued, and the
    # worker that ends its 2.5 s trial after the stop must not start them
    assert 2 <= len(started) <= 3 and "start_0" in started, started


def test_a_thread_still_mapping_when_the_main_thread_returns_gets_its_results(tmp_path):
    import subprocess
    import sys

    script = (
        "import threading, time\n"
        "from uatlab.experiments.executor import map_ordered\n"
        "out = []\n"
        "def bg():\n"
        "    out.extend(map_ordered(time.sleep, [(1.0,)] * 4, workers=2, window=4))\n"
        "    print('done', len(out), flush=True)\n"
        "if __name__ == '__main__':\n"
        "    threading.Thread(target=bg).start()\n"
        "    time.sleep(0.5)\n"
    )
    path = tmp_path / "s.py"
    path.write_text(script)
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip() == "done 4", proc.stdout + proc.stderr
