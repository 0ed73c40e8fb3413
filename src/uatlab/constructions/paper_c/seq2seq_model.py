"""The compiled seq2seq deep memorizer as a torch module (Kajitsuka & Sato, ICLR 2025, seq2seq memorization).

Forward pass, for token ids (B, n) with n ≤ n' (shorter sentences right-padded with the pad id V):

1. pad to n' with V; x_j = (ν[j, w_j], 1, μ_j, v[w_j])                                        (B, n', 4)
2. rank-1 single-head attention with skip (paper A's F^(SA)), softmax over keys:
   q = x W_Q^T, k = x W_K^T, val = x W_V^T (B, n', 1); x ← x + softmax(q k^T) val W_O^T     (B, n', 4)
3. the deep integer ReLU circuit reads (x_3, x_4) = (token id, v) of every position → y_ret   (B, n')
   (each layer a dense matrix product u ← ReLU(W u + b); its dense size is the parameter count); the
   gate (the first two layers) runs on every position, the rest, which reads only the gated id g, once per
   distinct g (every unambiguous word's token has g = 0)
4. y = y_ret + v − 1; logits_c = 2c·y − c²                                                   (B, n', C)

All weights are integers (or 0/1 and n') of at most 53 bits, so in float64 the pass is exact on the
compiled data (`uatlab.verify.seq2seq_deep` proves that every partial sum of every unit is an integer of
magnitude ≤ 2^53 in any summation order, so a BLAS product is as exact as the sparse exact evaluation);
logits are returned for the first n positions.
`Seq2SeqDeepModel.predict` maps token strings to label strings with the model's ``encoding``; `uatlab.save`
and `uatlab.load` write and read it (`uatlab.constructions.paper_c.seq2seq_file`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from uatlab.constructions.paper_c.model import DTYPE_MANTISSA_BITS, REGIME_DTYPES, first_tensor_difference
from uatlab.constructions.paper_c.relu_circuit import Circuit
from uatlab.constructions.paper_c.seq2seq_memorizer import GATE_LAYERS, Seq2SeqMemorizer
from uatlab.errors import InputError, PrecisionError, SentenceTooLongError

ATTENTION_BLOCK = 1 << 22  # attention weights formed at a time (B × queries × n'): 32 MB in float64


def dense_layers(circuit: Circuit, dtype: torch.dtype) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Every layer of an integer circuit as a dense (width, inputs) matrix and a (width,) bias in ``dtype``."""
    return list(_dense_layer_iter(circuit, dtype))


def _dense_layer_iter(circuit: Circuit, dtype: torch.dtype) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    n_in = circuit.n_inputs
    for layer in circuit.layers:
        W = torch.zeros(layer.width, n_in, dtype=dtype)  # (width, inputs)
        rows = torch.repeat_interleave(torch.arange(layer.width), torch.from_numpy(np.diff(layer.ptr)))
        cols = torch.from_numpy(np.asarray(layer.cols, dtype=np.int64))
        W.index_put_((rows, cols), torch.tensor(layer.weights, dtype=dtype), accumulate=True)
        yield W, torch.tensor(layer.bias, dtype=dtype)
        n_in = layer.width


class Seq2SeqDeepModel(nn.Module):
    """One rank-1 attention layer + a deep sparse integer ReLU network + a linear readout."""

    def __init__(self, memo: Seq2SeqMemorizer, dtype: torch.dtype = torch.float64) -> None:
        super().__init__()
        bits = DTYPE_MANTISSA_BITS[dtype]
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
        self._layers = dense_layers(memo.circuit, dtype)
        c = torch.arange(memo.C, dtype=dtype)
        self.register_buffer("readout_w", 2 * c)  # (C,)
        self.register_buffer("readout_b", -(c * c))  # (C,)

    def construction_mismatch(self) -> str | None:
        """The first of this module's tensors (or sizes) that is not its construction ``memo`` rendered in the
        regime's dtype, or None. The certificate proves the construction (`uatlab.verify.seq2seq_deep`), so it
        covers this module's forward pass only when None: an in-memory edit of a buffer or a layer, or a cast
        (``.float()`` casts the buffers but not the layers), makes them differ."""
        memo, dtype = self.memo, REGIME_DTYPES.get(self.memo.layout.regime)
        if dtype is None or self.dtype != dtype:
            return f"dtype ({self.dtype}, regime {memo.layout.regime})"
        if (self.context, self.V, self.C) != (memo.context, memo.V, memo.C):
            return "sizes (context, V, C)"
        c = np.arange(memo.C)
        expected = {"nu": memo.nu, "mu": memo.mu, "v": memo.v, **memo.attention_weights()}
        expected.update(readout_w=2 * c, readout_b=-(c * c))
        diff = first_tensor_difference(
            (f"tensor {name}", getattr(self, name), torch.as_tensor(np.asarray(value), dtype=dtype))
            for name, value in expected.items()
        )
        if diff is not None:
            return diff[0]
        if len(self._layers) != len(memo.circuit.layers):
            return "the number of circuit layers"
        diff = first_tensor_difference(  # one dense layer of the construction at a time
            (f"circuit layer {i} {part}", mine, theirs)
            for i, (layer, ref) in enumerate(zip(self._layers, _dense_layer_iter(memo.circuit, dtype), strict=True))
            for part, mine, theirs in zip(("weights", "bias"), layer, ref, strict=True)
        )
        return None if diff is None else diff[0]

    def stream(self, tokens: torch.Tensor, queries: int | None = None) -> torch.Tensor:
        """The residual stream after the attention layer at the first ``queries`` positions (default all n'),
        (B, queries, 4). Every query attends to all n' positions (pads included); the attention weights are
        formed for blocks of queries of at most `ATTENTION_BLOCK` weights at a time, so a long context does not
        hold a (B, n', n') array (each query's row is the same computation whatever the block)."""
        B, n = tokens.shape
        if n > self.context:
            raise InputError(f"sequences of {n} tokens are longer than the model's context {self.context}")
        cast = next(((k, b.dtype) for k, b in self.named_buffers() if b.dtype != self.dtype), None)
        if cast is not None:  # .float() / .to(dtype) casts the buffers, not the circuit's layers: a mixed module
            raise InputError(
                f"the model's tensor {cast[0]} is {str(cast[1]).removeprefix('torch.')}, but it computes in "
                f"{str(self.dtype).removeprefix('torch.')} (its regime); a seq2seq deep model is not cast: compile "
                "it with the other regime, or load it again (uatlab.load)"
            )
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
        nq = self.context if queries is None else queries
        rows = max(1, ATTENTION_BLOCK // (B * self.context))  # queries per block
        heads = torch.empty(B, nq, 1, dtype=self.dtype)  # (B, nq, 1)
        for start in range(0, nq, rows):
            stop = min(start + rows, nq)
            a = torch.softmax(q[:, start:stop] @ k.transpose(1, 2), dim=-1)  # (B, ≤ rows, n'), exactly 1/n' each
            heads[:, start:stop] = a @ val
        return x[:, :nq] + heads @ self.W_O.T  # (B, nq, 4)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[1]
        x = self.stream(tokens, queries=n)  # (B, n, 4)
        B = x.shape[0]
        u = x[..., 2:4].reshape(B * n, 2).T  # (2, B n): token id and v
        h = u
        for W, b in self._layers[:GATE_LAYERS]:  # the gate: g = k for ambiguous words, else 0
            h = torch.relu(torch.addmm(b[:, None], W, h))  # (width, B n)
        g, inv = torch.unique(h[0], return_inverse=True)  # the rest reads g only: once per distinct value
        h = g[None, :]  # (1, G)
        for W, b in self._layers[GATE_LAYERS:]:
            h = torch.relu(torch.addmm(b[:, None], W, h))  # (width, G)
        y = h[0][inv] + u[1] - 1  # (B n,)
        logits = y[:, None] * self.readout_w[None, :] + self.readout_b[None, :]  # (B n, C)
        return logits.reshape(B, n, self.C)

    def _encoding(self) -> Any:
        """`encoding`, or token i ↔ ``str(i)`` when it is None."""
        from uatlab.data.dataset import Encoding

        return self.encoding if self.encoding is not None else Encoding.of_ids(self.V, self.C)

    def encode_sentences(self, sentences: Sequence[Sequence[str]], unknown: str | None = None) -> list[np.ndarray]:
        """Token ids of ``sentences`` after the checks `predict` makes before it runs anything (an unknown word, a
        sentence longer than the context n': `SentenceTooLongError`, an InputError naming the sentence)."""
        ids = self._encoding().encode_sentences(sentences, unknown=unknown)
        for i, row in enumerate(ids):
            if len(row) > self.context:
                raise SentenceTooLongError(
                    f"sentence {i} has {len(row)} tokens; the model's context covers {self.context}", i
                )
        return ids

    def predict(
        self, sentences: Sequence[Sequence[str]], unknown: str | None = None, max_tokens: int = 16384
    ) -> list[list[str]]:
        """Labels (strings) of every token of ``sentences`` (lists of token strings).

        Encodes with `encoding` (token i ↔ ``str(i)`` when it is None), right-pads with the pad token V,
        batches sentences of similar length (≤ ``max_tokens`` padded positions a batch) and decodes the
        argmax. ``unknown``: ``"error"`` (the default and the only policy: this model has no unknown-word
        id) raises an InputError naming the word, the sentence and the position.

        Raises:
            InputError: an unknown word; a sentence longer than the context n' (naming it and its length).
        """
        ids = self.encode_sentences(sentences, unknown)
        labels = self._encoding().id_to_label
        out: list[list[str]] = [[] for _ in ids]
        order = sorted((i for i in range(len(ids)) if len(ids[i])), key=lambda i: len(ids[i]))
        start = 0
        while start < len(order):  # sentences of similar length together: ≤ max_tokens padded positions
            stop = start + 1
            while stop < len(order) and (stop + 1 - start) * len(ids[order[stop]]) <= max_tokens:
                stop += 1
            batch, start = order[start:stop], stop
            x = torch.full((len(batch), len(ids[batch[-1]])), self.V, dtype=torch.long)  # (B, n), pad id V
            for r, i in enumerate(batch):
                x[r, : len(ids[i])] = torch.from_numpy(ids[i])
            with torch.no_grad():
                pred = self(x).argmax(-1)  # (B, n)
            for r, i in enumerate(batch):
                out[i] = [labels[j] if j < len(labels) else f"<class {j}>" for j in pred[r, : len(ids[i])].tolist()]
        return out
