"""PyTorch settings changed for the length of a test block and restored after it, also on failure."""

import contextlib

import torch


@contextlib.contextmanager
def float32_matmul_precision(mode: str):
    """PyTorch's float32 matmul precision set to ``mode`` inside the block, restored after it (also on failure)."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(mode)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)
