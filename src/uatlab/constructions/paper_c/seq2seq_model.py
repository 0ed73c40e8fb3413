"""The compiled seq2seq deep memorizer as a torch module (Kajitsuka & Sato, ICLR 2025, seq2seq memorization).

Forward pass, for token ids (B, n) with n ≤ n' (shorter sentences right-padded with the pad id V):

1. pad to n' with V; x_j = (ν[j, w_j], 1, μ_j, v[w_j])                                        (B, n', 4)
2. rank-1 single-head attention with skip (paper A's F^(SA)), softmax over keys:
   q = x W_Q^T, k = x W_K^T, val = x W_V^T (B, n', 1); x ← x + softmax(q k^T) val W_O^T     (B, n', 4)
3. the deep integer ReLU circuit reads (x_3, x_4) = (token id, v) of every position → y_ret   (B, n')
4. y = y_ret + v − 1; logits_c = 2c·y − c²                                                   (B, n', C)

All weights are integers (or 0/1 and n') of at most 53 bits, so in float64 the pass is exact on the
compiled data (`uatlab.verify.seq2seq_deep` proves it); logits are returned for the first n positions.
`Seq2SeqDeepModel.predict` maps token strings to label strings with the model's ``encoding``; `uatlab.save`
and `uatlab.load` write and read it (`uatlab.constructions.paper_c.seq2seq_file`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from uatlab.constructions.paper_c.model import apply_circuit, circuit_layers
from uatlab.constructions.paper_c.seq2seq_memorizer import Seq2SeqMemorizer
from uatlab.errors import InputError, PrecisionError

_MANTISSA = {torch.float64: 53, torch.float32: 24}


class Seq2SeqDeepModel(nn.Module):
    """One rank-1 attention layer + a deep sparse integer ReLU network + a linear readout."""

    def __init__(self, memo: Seq2SeqMemorizer, dtype: torch.dtype = torch.float64) -> None:
        super().__init__()
        bits = _MANTISSA[dtype]
        if memo.circuit.max_weight_bits() > bits or int(memo.h_max).bit_length() > bits:
            raise PrecisionError(f"weights of {memo.circuit.max_weight_bits()} bits do not fit {dtype}")
        self.dtype, self.context, self.V, self.C = dtype, memo.context, memo.V, memo.C
        self.memo = memo  # the exact construction (saved by uatlab.save, read by the certificate)
        self.encoding: Any = None  # a uatlab.data.Encoding (token i ↔ str(i) when None); set by the compiler
        self.register_buffer("nu", torch.tensor(memo.nu, dtype=dtype))  # (n', V+1)
        self.register_buffer("mu", torch.tensor(memo.mu, dtype=dtype))  # (n',)
        self.register_buffer("v", torch.tensor(memo.v, dtype=dtype))  # (V+1,)
        for name, w in memo.attention_weights().items():
            self.register_buffer(name, torch.tensor(w, dtype=dtype))
        self._layers = circuit_layers(memo.circuit, dtype)
        c = torch.arange(memo.C, dtype=dtype)
        self.register_buffer("readout_w", 2 * c)  # (C,)
        self.register_buffer("readout_b", -(c * c))  # (C,)

    def stream(self, tokens: torch.Tensor) -> torch.Tensor:
        """The residual stream after the attention layer, (B, n', 4)."""
        B, n = tokens.shape
        if n > self.context:
            raise InputError(f"sequences of {n} tokens are longer than the model's context {self.context}")
        ids = torch.cat([tokens.long(), torch.full((B, self.context - n), self.V, dtype=torch.long)], dim=1)
        pos = torch.arange(self.context)
        x = torch.stack(
            [
                self.nu[pos[None, :], ids],
                torch.ones(B, self.context, dtype=self.dtype),
                self.mu[None, :].expand(B, -1),
                self.v[ids],
            ],
            dim=-1,
        )  # (B, n', 4)
        q, k, val = x @ self.W_Q.T, x @ self.W_K.T, x @ self.W_V.T  # (B, n', 1) each
        a = torch.softmax(q @ k.transpose(1, 2), dim=-1)  # (B, n', n'), exactly 1/n' each
        return x + (a @ val) @ self.W_O.T  # (B, n', 4)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[1]
        x = self.stream(tokens)[:, :n]  # (B, n, 4)
        B = x.shape[0]
        u = x[..., 2:4].reshape(B * n, 2).T  # (2, B n): token id and v
        y = apply_circuit(self._layers, u)[0] + u[1] - 1  # (B n,)
        logits = y[:, None] * self.readout_w[None, :] + self.readout_b[None, :]  # (B n, C)
        return logits.reshape(B, n, self.C)

    def predict(
        self, sentences: Sequence[Sequence[str]], unknown: str | None = None, max_tokens: int = 65536
    ) -> list[list[str]]:
        """Labels (strings) of every token of ``sentences`` (lists of token strings).

        Encodes with `encoding` (token i ↔ ``str(i)`` when it is None), right-pads with the pad token V,
        batches (≤ ``max_tokens`` padded positions, each sentence padded to the context n') and decodes the
        argmax. ``unknown``: ``"error"`` (the default and the only policy: this model has no unknown-word
        id) raises an InputError naming the word, the sentence and the position.

        Raises:
            InputError: an unknown word; a sentence longer than the context n' (naming it and its length).
        """
        from uatlab.constructions.paper_c.seq2seq_file import default_encoding

        enc = self.encoding if self.encoding is not None else default_encoding(self.V, self.C)
        ids = enc.encode_sentences(sentences, unknown=unknown)
        for i, row in enumerate(ids):
            if len(row) > self.context:
                raise InputError(f"sentence {i} has {len(row)} tokens; the model's context covers {self.context}")
        labels = enc.id_to_label
        out: list[list[str]] = [[] for _ in ids]
        order = sorted((i for i in range(len(ids)) if len(ids[i])), key=lambda i: len(ids[i]))
        per_batch = max(1, max_tokens // self.context)
        for start in range(0, len(order), per_batch):
            batch = order[start : start + per_batch]
            x = torch.full((len(batch), len(ids[batch[-1]])), self.V, dtype=torch.long)  # (B, n), pad id V
            for r, i in enumerate(batch):
                x[r, : len(ids[i])] = torch.from_numpy(ids[i])
            with torch.no_grad():
                pred = self(x).argmax(-1)  # (B, n)
            for r, i in enumerate(batch):
                out[i] = [labels[j] if j < len(labels) else f"<class {j}>" for j in pred[r, : len(ids[i])].tolist()]
        return out
