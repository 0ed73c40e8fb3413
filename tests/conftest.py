"""Shared test configuration: deterministic, single-threaded torch."""

import torch

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
