"""Token-wise feed-forward layer with skip connection (paper A, Section 2):

    F^(FF)(Z) = Z + W^(2) σ_R[W^(1) Z + b^(1) 1_nᵀ] + b^(2) 1_nᵀ

Paper A: W^(1) ∈ R^{q×d}, b^(1) ∈ R^q, W^(2) ∈ R^{d×q}, b^(2) ∈ R^d. uatlab (row layout):
``out = x + relu(x W1ᵀ + b1) W2ᵀ + b2`` with ``self.hidden`` = (W1, b1), ``self.output`` = (W2, b2).
``width = 0`` is allowed (the layer is the identity plus b2). ``bias=False`` drops b1 and b2 (a construction
can carry a constant coordinate in the residual stream instead; paper A's count d(2nN + d) has no bias term).
``device="meta"`` builds the layer without memory or random initialisation (`Transformer.from_tensors`).
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from uatlab.errors import InputError


class FeedForward(nn.Module):
    """Paper A's F^(FF): x + W2 ReLU(W1 x + b1) + b2, applied to each token."""

    def __init__(
        self,
        d_model: int,
        width: int,
        dtype: torch.dtype = torch.float32,
        bias: bool = True,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        if d_model < 1 or width < 0:
            raise InputError(f"feed-forward needs d_model ≥ 1 and width ≥ 0, got d={d_model}, width={width}")
        self.d_model, self.width = d_model, width
        with warnings.catch_warnings():
            # width 0 (no hidden units) is legitimate: torch warns that initialising empty tensors is a no-op
            warnings.filterwarnings("ignore", message="Initializing zero-element tensors is a no-op")
            self.hidden = nn.Linear(d_model, width, bias=bias, dtype=dtype, device=device)  # W1: (q, d), b1: (q,)
            self.output = nn.Linear(width, d_model, bias=bias, dtype=dtype, device=device)  # W2: (d, q), b2: (d,)

    def forward(self, x: torch.Tensor, max_activations: int | None = None) -> torch.Tensor:
        """x: (B, n, d) -> (B, n, d). ``max_activations``: form at most this many hidden activations (tokens ×
        width) at a time, in slices of tokens (each token's output depends on that token alone; a compiled
        memorizer's layer of 10^5–10^6 units would otherwise hold an (n × width) array per sequence)."""
        tokens = x.shape[:-1].numel()
        if max_activations is None or tokens * self.width <= max_activations or tokens <= 1:
            return x + self.output(torch.relu(self.hidden(x)))
        step = max(1, max_activations // max(self.width, 1))
        flat = x.reshape(tokens, x.shape[-1])
        parts = [
            flat[s : s + step] + self.output(torch.relu(self.hidden(flat[s : s + step])))
            for s in range(0, tokens, step)
        ]
        return torch.cat(parts).reshape(x.shape)
