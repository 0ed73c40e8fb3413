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
