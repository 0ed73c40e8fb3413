"""A work directory's removal is one step for Ctrl-C and SIGTERM: the signal is delivered after it."""

import os
import signal
import threading

import pytest

from uatlab.data.keys import input_keys
from uatlab.data.token_store import TokenStore
from uatlab.io_safety import interrupts_deferred


def test_ctrl_c_inside_the_block_is_raised_after_it_completes():
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            steps.append("after the signal")  # still runs: the signal was only recorded
            steps.append("end of block")
    assert steps == ["after the signal", "end of block"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler restored


def test_a_python_sigterm_handler_is_called_once_after_the_block():
    calls = []
    old = signal.signal(signal.SIGTERM, lambda signum, frame: calls.append(signum))
    try:
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)
            assert calls == []
        assert calls == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, old)


def test_no_signal_leaves_handlers_as_they_were():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with interrupts_deferred():
        pass
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_outside_the_main_thread_the_block_runs_unprotected():
    seen = []

    def run():
        with interrupts_deferred():
            seen.append(signal.getsignal(signal.SIGINT))

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert seen == [signal.default_int_handler]


def test_ctrl_c_during_work_directory_removal_removes_it_whole(tmp_path, monkeypatch):
    store = TokenStore(tmp_path / "work", "<memory>", "sequence", chunk_tokens=4)
    rows = [(["a", "b", "c"], ["X", "Y", "X"]), (["d", "e"], ["Y", "Y"])] * 4
    store.read(((t, y, line) for line, (t, y) in enumerate(rows, 1)), input_keys)
    assert len(list((tmp_path / "work").glob("chunk_*.npz"))) > 1
    real_unlink = type(tmp_path).unlink
    sent = []

    def unlink_then_interrupt(self, *args, **kwargs):  # Ctrl-C right after the first file is gone
        real_unlink(self, *args, **kwargs)
        if not sent:
            sent.append(self.name)
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(type(tmp_path), "unlink", unlink_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        store.remove()
    assert sent and not (tmp_path / "work").exists()
