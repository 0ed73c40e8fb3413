"""The paper's Transformer: embedding, optional positional encoding, blocks F^(FF)∘F^(SA), readout.

One config dataclass (`TransformerConfig`) describes every model uatlab builds or trains, so
that a constructed model and a trained model are the same class, saved and loaded alike
(`uatlab.models.io`).

Layout (tokens as rows, ``(batch, n, d)``):

    x = embed(tokens) [+ pos[:n]]            token embedding (or continuous inputs given directly)
    x = input_ff(x)                          optional F_1^(FF) (paper A, Proposition 1: FF∘SA∘FF)
    for block in blocks: x = ff(sa(x))       Block = F^(FF) ∘ F^(SA)
    logits = readout(x)                      optional linear map to labels (argmax = prediction)
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import torch
from torch import nn

if TYPE_CHECKING:
    import numpy as np

from uatlab._util import check_flag, check_integer
from uatlab.errors import InputError, SentenceTooLongError
from uatlab.models.attention import MultiHeadSelfAttention
from uatlab.models.feedforward import FeedForward

DTYPES = {"float32": torch.float32, "float64": torch.float64}


@dataclass(frozen=True)
class TransformerConfig:
    """Hyperparameters of a uatlab Transformer.

    Attributes:
        d_model: token dimension d.
        n_layers: number of blocks F^(FF)∘F^(SA).
        n_heads: heads per attention layer (h).
        head_dim: head size (s).
        rank: rank limit of W_Q, W_K, W_V, W_O (None = full; 1 = paper A).
        ff_width: hidden width q of each block's feed-forward layer (int, or one per layer).
        vocab_size: size of the token embedding; None means the model takes vectors (B, n, d).
        num_labels: size of the linear readout; None means no readout (the model returns vectors).
        max_len: longest sequence (needed for a positional encoding).
        positional: "none", "learned" (trainable) or "given" (a fixed buffer set by a construction).
        attention: "softmax" or "hardmax".
        beta: inverse temperature of every attention layer.
        scale_by_sqrt_head_dim: divide scores by √s (off in paper A).
        causal: causal masking in every attention layer.
        input_ff_width: width of an extra F_1^(FF) before the first block (None = absent).
        readout_bias: whether the readout has a bias.
        ff_bias: whether the blocks' feed-forward layers have biases b1, b2.
        dtype: "float32" or "float64".
        meta: free-form provenance (construction name, data set hash...), saved with the model.
    """

    d_model: int
    n_layers: int = 1
    n_heads: int = 1
    head_dim: int = 1
    rank: int | None = 1
    ff_width: int | tuple[int, ...] = 4
    vocab_size: int | None = None
    num_labels: int | None = None
    max_len: int = 512
    positional: Literal["none", "learned", "given"] = "none"
    attention: Literal["softmax", "hardmax"] = "softmax"
    beta: float = 1.0
    scale_by_sqrt_head_dim: bool = False
    causal: bool = False
    input_ff_width: int | None = None
    readout_bias: bool = True
    ff_bias: bool = True
    dtype: Literal["float32", "float64"] = "float32"
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        for name in ("d_model", "n_layers", "n_heads", "head_dim", "max_len", "rank", "vocab_size", "num_labels"):
            value = getattr(self, name)
            if value is None and name in ("rank", "vocab_size", "num_labels"):
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise InputError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
        for name in ("scale_by_sqrt_head_dim", "causal", "readout_bias", "ff_bias"):
            object.__setattr__(self, name, check_flag(getattr(self, name), name))
        if self.d_model < 1 or self.n_layers < 0 or self.n_heads < 1 or self.head_dim < 1:
            raise InputError(
                f"invalid sizes: d_model={self.d_model}, n_layers={self.n_layers}, "
                f"n_heads={self.n_heads}, head_dim={self.head_dim}"
            )
        for name in ("vocab_size", "num_labels", "max_len"):  # None means absent; 0 would be an empty table
            value = getattr(self, name)
            if value is not None and value < 1:
                raise InputError(f"{name} must be at least 1 (or None), got {value}")
        if self.dtype not in DTYPES:
            raise InputError(f"dtype must be one of {sorted(DTYPES)}, got {self.dtype!r}")
        if not isinstance(self.meta, dict):
            raise InputError(f"meta must be a dict, got {type(self.meta).__name__}")
        if self.positional not in ("none", "learned", "given"):
            raise InputError(f"positional must be 'none', 'learned' or 'given', got {self.positional!r}")
        if self.attention not in ("softmax", "hardmax"):
            raise InputError(f"attention must be 'softmax' or 'hardmax', got {self.attention!r}")
        if isinstance(self.beta, bool) or not isinstance(self.beta, numbers.Real) or not 0 <= self.beta < math.inf:
            raise InputError(f"beta (the inverse temperature β) must be a finite number ≥ 0, got {self.beta!r}")
        if self.rank is not None and not 1 <= self.rank <= min(self.d_model, self.head_dim):
            raise InputError(
                f"rank {self.rank} is impossible for the {self.head_dim}×{self.d_model} attention maps: it must lie "
                f"in [1, {min(self.d_model, self.head_dim)}] (or None: full rank)"
            )
        if isinstance(self.ff_width, (list, tuple)):
            object.__setattr__(self, "ff_width", tuple(int(w) for w in self.ff_width))
            if len(self.ff_width) != self.n_layers:
                raise InputError(f"ff_width lists {len(self.ff_width)} widths for {self.n_layers} layers")

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]

    def layer_ff_width(self, layer: int) -> int:
        return self.ff_width[layer] if isinstance(self.ff_width, tuple) else int(self.ff_width)

    def to_json(self) -> str:
        d = dataclasses.asdict(self)
        if isinstance(d["ff_width"], tuple):
            d["ff_width"] = list(d["ff_width"])
        return json.dumps(d, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TransformerConfig:
        d = json.loads(text)
        if not isinstance(d, dict):
            raise InputError(f"the config must be a JSON object, got {type(d).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise InputError(f"unknown config fields {sorted(unknown)}")
        if isinstance(d.get("ff_width"), list):
            d["ff_width"] = tuple(d["ff_width"])
        return cls(**d)


class Block(nn.Module):
    """F^(FF) ∘ F^(SA): one attention layer then one feed-forward layer, both with skips."""

    def __init__(self, config: TransformerConfig, layer: int, ff_device: str | None = None) -> None:
        super().__init__()
        dt = config.torch_dtype
        self.attn = MultiHeadSelfAttention(
            config.d_model,
            n_heads=config.n_heads,
            head_dim=config.head_dim,
            rank=config.rank,
            attention=config.attention,
            beta=config.beta,
            scale_by_sqrt_head_dim=config.scale_by_sqrt_head_dim,
            causal=config.causal,
            dtype=dt,
        )
        self.ff = FeedForward(
            config.d_model, config.layer_ff_width(layer), dtype=dt, bias=config.ff_bias, device=ff_device
        )

    def forward(
        self, x: torch.Tensor, attend_mask: torch.Tensor | None = None, max_activations: int | None = None
    ) -> torch.Tensor:
        return self.ff(self.attn(x, attend_mask), max_activations)


def _check_size(config: TransformerConfig, init_ff: bool) -> None:
    """Refuse (InputError, `uatlab.memory_guard`) a config whose largest tensors alone exceed the memory limit:
    embedding, positional table, readout and (when allocated) the feed-forward weights, 2·d·width each."""
    from uatlab.memory_guard import check_memory

    d = config.d_model
    rows = (config.vocab_size or 0) + (config.num_labels or 0) + (config.max_len if config.positional != "none" else 0)
    ff = sum(config.layer_ff_width(i) for i in range(config.n_layers)) + (config.input_ff_width or 0)
    numel = d * rows + (2 * d * ff if init_ff else 0)
    check_memory(
        float(numel) * torch.finfo(config.torch_dtype).bits / 8,
        f"Transformer(d_model={d})",
        f"{numel:.3g} weights in {config.dtype}: embedding, positional table, readout, feed-forward",
    )


class Transformer(nn.Module):
    """Token embedding → [positional encoding] → [F_1^(FF)] → L blocks → [readout].

    ``encoding`` (an `uatlab.data.Encoding`, or None) maps token and label strings to the
    embedding and readout rows; compiled, trained and loaded models carry it.
    """

    encoding: Any

    def __init__(self, config: TransformerConfig, *, init_ff: bool = True) -> None:
        """``init_ff=False`` builds the feed-forward layers on PyTorch's meta device (no memory, no random
        initialisation): only for `from_tensors`, which replaces them."""
        super().__init__()
        _check_size(config, init_ff)
        ff_device = None if init_ff else "meta"
        self.config = config
        self.encoding = None
        dt = config.torch_dtype
        self.embed = nn.Embedding(config.vocab_size, config.d_model, dtype=dt) if config.vocab_size else None
        if config.positional == "learned":
            self.pos = nn.Parameter(torch.zeros(config.max_len, config.d_model, dtype=dt))
            nn.init.normal_(self.pos, std=0.02)
        elif config.positional == "given":
            self.register_buffer("pos", torch.zeros(config.max_len, config.d_model, dtype=dt))
        else:
            self.pos = None
        self.input_ff = (
            FeedForward(config.d_model, config.input_ff_width, dtype=dt, device=ff_device)
            if config.input_ff_width is not None
            else None
        )
        self.blocks = nn.ModuleList(Block(config, i, ff_device) for i in range(config.n_layers))
        self.readout = (
            nn.Linear(config.d_model, config.num_labels, bias=config.readout_bias, dtype=dt)
            if config.num_labels
            else None
        )

    @classmethod
    def from_tensors(cls, config: TransformerConfig, tensors: Mapping[str, torch.Tensor]) -> Transformer:
        """A model whose parameters and buffers are ``tensors`` (by `state_dict` name, in the config's dtype: a
        tensor already in it is used in place, not copied), every one not given set to zero.

        Unlike ``Transformer(config)`` the feed-forward layers are not initialised at random (they are built on
        PyTorch's meta device, which allocates and draws nothing): for weights that are set right after, e.g. a
        construction's feed-forward layer of 6·10⁵ units, whose random initialisation would take longer than
        computing its weights. (The other, small modules are initialised as usual, then replaced.)

        Raises:
            InputError: a name that is not a parameter or buffer of the model, or a tensor of the wrong shape.
        """
        model = cls(config, init_ff=False)
        expected = model.state_dict()  # names, shapes, dtypes (the feed-forward tensors on the meta device)
        unknown = sorted(set(tensors) - set(expected))
        if unknown:
            raise InputError(f"{unknown} are not parameters or buffers of this model")
        filled = {}
        for name, slot in expected.items():
            if name not in tensors:
                filled[name] = torch.zeros(slot.shape, dtype=slot.dtype)
                continue
            t = torch.as_tensor(tensors[name])
            if tuple(t.shape) != tuple(slot.shape):
                raise InputError(f"tensor {name} has shape {tuple(t.shape)}, the config needs {tuple(slot.shape)}")
            filled[name] = t.to(slot.dtype)
        model.load_state_dict(filled, assign=True)
        left = [n for n, t in (*model.named_parameters(), *model.named_buffers()) if t.is_meta]
        if left:
            raise AssertionError(f"tensors {left} were not materialised")
        return model

    # ------------------------------------------------------------------ forward
    def embed_inputs(self, inputs: torch.Tensor) -> torch.Tensor:
        """Token ids (B, n) or vectors (B, n, d) → vectors (B, n, d) with positional encoding added."""
        if self.embed is not None:
            if inputs.dim() != 2 or inputs.dtype not in (torch.int64, torch.int32):
                raise InputError(f"expected integer token ids of shape (batch, n), got {tuple(inputs.shape)}")
            bad = (inputs < 0) | (inputs >= self.config.vocab_size)
            if bool(bad.any()):
                b, k = (int(v) for v in bad.nonzero()[0])
                raise InputError(
                    f"token id {int(inputs[b, k])} at sequence {b}, position {k} is outside the vocabulary "
                    f"[0, {self.config.vocab_size})"
                )
            x = self.embed(inputs)  # (B, n, d)
        else:
            if inputs.dim() != 3 or inputs.shape[-1] != self.config.d_model:
                raise InputError(
                    f"expected vectors of shape (batch, n, {self.config.d_model}), got {tuple(inputs.shape)}"
                )
            finite = torch.isfinite(inputs).all(dim=-1)  # (B, n)
            if not bool(finite.all()):
                b, k = (int(v) for v in (~finite).nonzero()[0])
                raise InputError(f"token vector at sequence {b}, position {k} is not finite (NaN or inf)")
            x = inputs.to(self.config.torch_dtype)
        if self.pos is not None:
            n = x.shape[1]
            if n > self.config.max_len:
                raise InputError(f"sequence length {n} exceeds max_len {self.config.max_len}")
            x = x + self.pos[:n]  # (B, n, d)
        return x

    def hidden_states(
        self, inputs: torch.Tensor, attend_mask: torch.Tensor | None = None, max_activations: int | None = None
    ) -> torch.Tensor:
        """The vectors before the readout, (B, n, d). ``max_activations``: see `FeedForward.forward`."""
        x = self.embed_inputs(inputs)
        if self.input_ff is not None:
            x = self.input_ff(x, max_activations)
        for block in self.blocks:
            x = block(x, attend_mask, max_activations)
        return x

    def forward(
        self, inputs: torch.Tensor, attend_mask: torch.Tensor | None = None, max_activations: int | None = None
    ) -> torch.Tensor:
        """Logits (B, n, num_labels) if there is a readout, else the hidden vectors (B, n, d).
        ``max_activations``: bound the feed-forward layers' hidden activations formed at a time (tokens × width;
        default: all at once), see `FeedForward.forward`."""
        x = self.hidden_states(inputs, attend_mask, max_activations)
        return self.readout(x) if self.readout is not None else x

    # ------------------------------------------------------------------ strings in, strings out
    def encode_sentences(self, sentences: Sequence[Sequence[str]], unknown: str | None = None) -> list[np.ndarray]:
        """Token ids of ``sentences`` under `encoding` (``unknown``: as in `predict`), after the checks `predict`
        makes before it runs anything: an unknown word (policy "error") and a sentence longer than the positional
        encoding raise, naming the sentence."""
        if self.encoding is None:
            raise InputError("the model carries no encoding (model.encoding); it cannot map token strings to ids")
        ids = self.encoding.encode_sentences(sentences, unknown=unknown)
        if self.pos is not None:
            for i, row in enumerate(ids):
                if len(row) > self.config.max_len:
                    raise SentenceTooLongError(
                        f"sentence {i} has {len(row)} tokens; the model's positional encoding covers "
                        f"{self.config.max_len}",
                        i,
                    )
        return ids

    def predict(
        self, sentences: Sequence[Sequence[str]], unknown: str | None = None, max_tokens: int = 8192
    ) -> list[list[str]]:
        """Labels (strings) of every token of ``sentences`` (lists of token strings; integers are read as their
        decimal strings, as `uatlab.data.from_lists` reads them).

        Encodes with `encoding`, pads, masks and batches (at most ``max_tokens`` padded tokens per
        batch, sentences of similar length together), runs the model in evaluation mode without gradients
        and decodes the argmax. ``unknown`` is the unknown-word policy of
        `uatlab.data.Encoding.encode_sentences` (default: the unknown-word token if the encoding has
        one, else an error naming the word).

        Raises:
            InputError: no encoding or no readout; an unknown word (policy "error"); a sentence longer than
                the positional encoding (naming the sentence and its length).
        """
        if self.encoding is None:
            raise InputError("the model carries no encoding (model.encoding); it cannot map token strings to ids")
        if self.readout is None or self.embed is None:
            raise InputError("predict needs a model with a token embedding and a readout")
        check_integer(max_tokens, "max_tokens", 1, None, "predict()")
        labels = self.encoding.id_to_label
        if len(labels) != self.config.num_labels:  # an argmax past the list has no name
            raise InputError(
                f"the model has {self.config.num_labels} labels but its encoding lists {len(labels)}: set "
                "model.encoding to the encoding the model was built with"
            )
        ids = self.encode_sentences(sentences, unknown)
        out: list[list[str]] = [[] for _ in ids]
        order = sorted((i for i in range(len(ids)) if len(ids[i])), key=lambda i: len(ids[i]))
        was_training = self.training
        self.eval()
        try:
            start = 0
            while start < len(order):
                stop = start + 1
                while stop < len(order) and (stop + 1 - start) * len(ids[order[stop]]) <= max_tokens:
                    stop += 1
                batch = order[start:stop]
                n = len(ids[batch[-1]])
                x = torch.zeros(len(batch), n, dtype=torch.long)  # (B, n), padding id 0 is masked out
                mask = torch.zeros(len(batch), n, dtype=torch.bool)  # (B, n), True for real tokens
                for r, i in enumerate(batch):
                    x[r, : len(ids[i])] = torch.from_numpy(ids[i])
                    mask[r, : len(ids[i])] = True
                with torch.no_grad():
                    pred = self(x, attend_mask=mask).argmax(-1)  # (B, n)
                for r, i in enumerate(batch):
                    out[i] = [labels[j] for j in pred[r, : len(ids[i])].tolist()]
                start = stop
        finally:
            self.train(was_training)
        return out

    # ------------------------------------------------------------------ counting
    def num_parameters(self, non_embedding: bool = False, nonzero: bool = False) -> int:
        """Number of scalar parameters (trainable tensors and a 'given' positional buffer).

        ``non_embedding=True`` leaves out the token embedding and the positional encoding
        (nanoGPT's convention); attention, feed-forward layers and readout are counted.
        Low-rank matrices count their factors (paper A counts a rank-1 s×d matrix as s + d).
        ``nonzero=True`` counts only the entries that are not 0 (the dense count is the default).
        """

        def size(t: torch.Tensor) -> int:
            return int(torch.count_nonzero(t)) if nonzero else t.numel()

        total = sum(size(p) for p in self.parameters())
        if self.config.positional == "given":
            total += size(self.pos)
        if non_embedding:
            if self.embed is not None:
                total -= size(self.embed.weight)
            if self.pos is not None:
                total -= size(self.pos)
        return total
