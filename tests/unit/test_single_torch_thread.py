"""Thread settings: the one-thread block used by the claims restores torch's count afterwards."""

import pytest
import torch

from uatlab.threads import single_torch_thread


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_single_torch_thread_runs_the_block_on_one_thread_and_restores_the_count(two_threads):
    with single_torch_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2


def test_single_torch_thread_restores_the_count_when_the_block_raises(two_threads):
    with pytest.raises(RuntimeError, match="inside"), single_torch_thread():
        raise RuntimeError("inside")
    assert torch.get_num_threads() == 2


def test_thread_request_one_spelling_rule_for_the_cli_and_the_library(monkeypatch):
    from uatlab import threads as th
    from uatlab.cli.options import thread_count

    monkeypatch.setattr(th, "cores_available", lambda: 2)  # at most 8 threads
    assert th.thread_request("auto") == "auto" and th.thread_request("3") == 3 and th.thread_request(8) == 8
    for bad, message in [
        ("x", "must be a positive integer or 'auto', got 'x'"),
        ("-2", "got '-2'"),
        ("0", "must be ≥ 1, got 0"),
        ("9", "9: at most 8 on this machine"),
    ]:
        with pytest.raises(ValueError, match=message):
            th.thread_request(bad)
        with pytest.raises(ValueError, match=message):  # the library's request goes through the same rule
            th.choose_threads(bad)
    with pytest.raises(ValueError, match="threads must be a positive integer, got 'auto'"):
        th.thread_request("auto", auto=False)
    from uatlab.errors import InputError

    with pytest.raises(InputError, match="--threads must be a positive integer or 'auto', got 'x'"):
        thread_count()("x")
    assert thread_count()("auto") == "auto" and thread_count(auto=False)(4) == 4
