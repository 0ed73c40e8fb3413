"""uatlab Transformers as TransformerLens ``HookedTransformer`` models, and back.

A uatlab `uatlab.models.transformer.Transformer` is paper A's architecture (Kajitsuka & Sato,
ICLR 2024, Section 2): embedding plus positional encoding, blocks F^(FF)∘F^(SA) with skips, no
normalisation, a linear readout. TransformerLens (Nanda & Bloom 2022) holds exactly this architecture
when it is configured with ``normalization_type=None``, ``act_fn="relu"``, ``positional_embedding_type=
"standard"`` and the attention scale switched to the model's own. The export then gives
``run_with_cache``, every ``hook_*`` activation and the attention pattern of any sentence for free.

Notation map (paper A → uatlab → TransformerLens), tokens as rows, h heads, head size s:

    W_E (embedding)         embed.weight (V, d)              embed.W_E (V, d)
    positional encoding     pos (n_max, d)                   pos_embed.W_pos (n_ctx, d)
    W_Q^i (s×d)             effective_weights()["W_Q"][i]    blocks.l.attn.W_Q[i] = W_Q^iᵀ (d, s)
    W_K^i, W_V^i (s×d)      likewise                         W_K[i], W_V[i] = ᵀ (d, s); b_Q = b_K = b_V = 0
    W_O^i (d×s)             effective_weights()["W_O"][i]    W_O[i] = W_O^iᵀ (s, d); b_O = 0
    β (1/√s if asked)       score_scale                      scores divided by attn_scale = 1/score_scale
    W^(1), b^(1) (q×d, q)   ff.hidden                        mlp.W_in (d, q), mlp.b_in (q)
    W^(2), b^(2) (d×q, d)   ff.output                        mlp.W_out (q, d), mlp.b_out (d)
    readout                 readout (C, d)                   unembed.W_U (d, C), unembed.b_U (C)

Rank-r factors ``A @ B`` are exported as their product, the matrix uatlab itself multiplies by, so
the exported model computes the same function. It also rounds the same way: the feed-forward weights
are held in uatlab's memory layout (see `_store_mlp_weights_as_uatlab`), so TransformerLens calls the
same BLAS products as uatlab. In float64 the logits of the memorizer compiled from CoNLL-2003 train are
then bit-identical (max difference 0 over 1,000 sentences; 2.6e-9 with TransformerLens's own row-major
``W_out``, whose different summation order the knot feed-forward layer's steep slopes amplify). One
rounding difference remains when the attention scale is not 1: uatlab multiplies the scores by
``score_scale``, TransformerLens divides them by ``attn_scale = 1/score_scale``; the two differ by a
few units in the last place of a score, a few 1e-15 on the logits of trained models.
Feed-forward layers of different widths are padded with zero units (ReLU(0)·0 adds exactly 0; the
padded sums may still be blocked, hence rounded, differently).

What has no TransformerLens counterpart is refused with `ExportError` naming it: hardmax
attention, an F_1^(FF) before the first block (paper A, Proposition 1), a model without token
embedding (continuous inputs) or without readout, and an attention scale whose inverse is not finite
(beta = 0: TransformerLens divides the scores by ``attn_scale``).

TransformerLens 4 removed ``HookedTransformer`` (its ``TransformerBridge`` wraps Hugging Face models
only), so the ``interop`` extra pins ``transformer-lens<4``.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from safetensors.torch import load_file

from uatlab.data.dataset import Encoding
from uatlab.errors import InputError, ModelFileError
from uatlab.models.transformer import DTYPES, Transformer, TransformerConfig

if TYPE_CHECKING:  # pragma: no cover
    from transformer_lens import HookedTransformer

FORMAT_TAG = "uatlab-transformer-lens-v1"
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "weights.safetensors"


class ExportError(InputError):
    """The model uses a feature that a TransformerLens ``HookedTransformer`` cannot represent."""


def _import_transformer_lens():
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its dependencies warn on import (deprecations, pkg_resources)
            import transformer_lens
            from transformer_lens import HookedTransformer, HookedTransformerConfig
    except ImportError as exc:
        raise InputError(
            f"TransformerLens is not installed ({exc}); install the extra: pip install -e '.[interop]'"
        ) from None
    return transformer_lens, HookedTransformer, HookedTransformerConfig


def unsupported_features(model: Transformer) -> list[str]:
    """Every feature of ``model`` that a ``HookedTransformer`` cannot represent (empty: exportable)."""
    cfg = model.config
    problems = []
    if cfg.attention != "softmax":
        problems.append(f"{cfg.attention} attention (TransformerLens attention is softmax only)")
    if model.input_ff is not None:
        problems.append(
            "the feed-forward layer F_1^(FF) before the first attention layer (paper A, Proposition 1): "
            "TransformerLens blocks start with attention"
        )
    if model.embed is None:
        problems.append("continuous inputs without a token embedding (TransformerLens models read token ids)")
    if model.readout is None:
        problems.append("no linear readout (TransformerLens needs an unembedding)")
    if cfg.n_layers < 1:
        problems.append("no attention block (n_layers = 0)")
    elif not math.isfinite(1.0 / scale if (scale := model.blocks[0].attn.score_scale) else math.inf):
        problems.append(
            f"beta = {cfg.beta!r} (attention score scale {scale!r}): TransformerLens divides the scores by "
            "attn_scale = 1/scale, which is not finite (with beta = 0 every score is 0: uniform attention)"
        )
    return problems


def _encoding_json(model: Transformer, encoding: Encoding | None) -> dict[str, Any]:
    enc = encoding if encoding is not None else getattr(model, "encoding", None)
    if enc is None:
        return {"tokens": [], "labels": [], "unknown_token": None}
    cfg = model.config
    if len(enc.token_to_id) != cfg.vocab_size or len(enc.label_to_id) != cfg.num_labels:
        raise InputError(
            f"the encoding lists {len(enc.token_to_id)} tokens / {len(enc.label_to_id)} labels but the model has "
            f"vocab_size {cfg.vocab_size} / num_labels {cfg.num_labels}"
        )
    return enc.to_json()


def hooked_config_dict(model: Transformer) -> dict[str, Any]:
    """The keyword arguments of the ``HookedTransformerConfig`` that holds ``model`` exactly."""
    problems = unsupported_features(model)
    if problems:
        raise ExportError("cannot export to TransformerLens: " + "; ".join(problems))
    cfg = model.config
    widths = [cfg.layer_ff_width(i) for i in range(cfg.n_layers)]
    scale = model.blocks[0].attn.score_scale
    return {
        "n_layers": cfg.n_layers,
        "d_model": cfg.d_model,
        "n_ctx": cfg.max_len,
        "d_head": cfg.head_dim,
        "n_heads": cfg.n_heads,
        "d_mlp": max(max(widths), 1),  # padded with zero units; TransformerLens needs d_mlp >= 1
        "d_vocab": cfg.vocab_size,
        "d_vocab_out": cfg.num_labels,
        "act_fn": "relu",
        "normalization_type": None,
        "attention_dir": "causal" if cfg.causal else "bidirectional",
        "positional_embedding_type": "standard",
        "use_attn_scale": scale != 1.0,
        "attn_scale": 1.0 / scale,  # TransformerLens divides the scores by attn_scale
        "dtype": cfg.dtype,
        "default_prepend_bos": False,
        "original_architecture": "uatlab",
        "model_name": str(cfg.meta.get("construction", cfg.meta.get("trained_by", "uatlab"))),
        "init_weights": False,
        "seed": 0,
        "device": "cpu",
    }


def _hooked_state(model: Transformer, hooked_cfg: dict[str, Any]) -> dict[str, torch.Tensor]:
    """TransformerLens tensors of ``model`` (see the notation map in the module docstring)."""
    cfg = model.config
    dt = cfg.torch_dtype
    d, q_max = cfg.d_model, hooked_cfg["d_mlp"]
    h, s = cfg.n_heads, cfg.head_dim
    with torch.no_grad():
        state: dict[str, torch.Tensor] = {"embed.W_E": model.embed.weight.detach().clone()}  # (V, d)
        pos = model.pos.detach().clone() if model.pos is not None else torch.zeros(cfg.max_len, d, dtype=dt)
        state["pos_embed.W_pos"] = pos  # (n_ctx, d)
        for i, block in enumerate(model.blocks):
            w = {k: v.detach() for k, v in block.attn.effective_weights().items()}  # the products uatlab uses
            p = f"blocks.{i}."
            state[p + "attn.W_Q"] = w["W_Q"].transpose(1, 2).contiguous()  # (h, d, s)
            state[p + "attn.W_K"] = w["W_K"].transpose(1, 2).contiguous()
            state[p + "attn.W_V"] = w["W_V"].transpose(1, 2).contiguous()
            state[p + "attn.W_O"] = w["W_O"].transpose(1, 2).contiguous()  # (h, s, d)
            for b in ("b_Q", "b_K", "b_V"):
                state[p + "attn." + b] = torch.zeros(h, s, dtype=dt)
            state[p + "attn.b_O"] = torch.zeros(d, dtype=dt)
            q = block.ff.width
            w_in = torch.zeros(d, q_max, dtype=dt)  # (d, q_max): W^(1)ᵀ, zero-padded
            w_in[:, :q] = block.ff.hidden.weight.detach().T
            b_in = torch.zeros(q_max, dtype=dt)  # a bias-free layer (``ff_bias=False``) exports zero biases
            if block.ff.hidden.bias is not None:
                b_in[:q] = block.ff.hidden.bias.detach()
            w_out = torch.zeros(q_max, d, dtype=dt)  # (q_max, d): W^(2)ᵀ, zero-padded
            w_out[:q] = block.ff.output.weight.detach().T
            state[p + "mlp.W_in"], state[p + "mlp.b_in"] = w_in, b_in
            b_out = block.ff.output.bias
            state[p + "mlp.W_out"] = w_out
            state[p + "mlp.b_out"] = b_out.detach().clone() if b_out is not None else torch.zeros(d, dtype=dt)
        state["unembed.W_U"] = model.readout.weight.detach().T.contiguous()  # (d, C)
        b_u = (
            model.readout.bias.detach().clone()
            if model.readout.bias is not None
            else torch.zeros(cfg.num_labels, dtype=dt)
        )
        state["unembed.b_U"] = b_u
    return state


def _store_mlp_weights_as_uatlab(hooked) -> None:
    """Hold every ``mlp.W_in``/``mlp.W_out`` in the memory layout of uatlab's ``nn.Linear`` weights.

    TransformerLens multiplies by ``W_out`` (q, d) with ``torch.addmm``; uatlab's feed-forward
    multiplies by the transpose of its ``output.weight`` (d, q), a row-major (d, q) array. Values are
    equal, but BLAS picks its kernel (and with it the blocking of the sum over the q hidden units) by
    the operands' layout: a row-major (q, d) ``W_out`` sums the same products in another order. On the
    memorizer compiled from CoNLL-2003 train (q = 9,284, knot slopes up to ~10^6 per unit of h) that
    reordering alone moved the logits by 2.6e-9 in float64. Holding ``W_out`` as the transposed view of
    a row-major (d, q) array (and ``W_in`` as that of a row-major (q, d) array) makes TransformerLens
    call the very product uatlab calls, so the two forward passes round identically. The parameters
    keep their TransformerLens shapes, names and values; only their strides change.
    """
    from torch import nn

    with torch.no_grad():
        for block in hooked.blocks:
            mlp = block.mlp
            mlp.W_in = nn.Parameter(mlp.W_in.detach().T.contiguous().T)  # (d, q), strides (1, d) as W^(1)ᵀ
            mlp.W_out = nn.Parameter(mlp.W_out.detach().T.contiguous().T)  # (q, d), strides (1, q) as W^(2)ᵀ


def _build_hooked(cfg_dict: dict[str, Any], state: dict[str, torch.Tensor], encoding: dict[str, Any]):
    _, HookedTransformer, HookedTransformerConfig = _import_transformer_lens()
    kwargs = dict(cfg_dict)
    kwargs["dtype"] = DTYPES[kwargs["dtype"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 3.x marks HookedTransformer deprecated in favour of a HF-only bridge
        hooked = HookedTransformer(HookedTransformerConfig(**kwargs))
    own = hooked.state_dict()
    missing = sorted(k for k in own if k not in state and not k.endswith(("IGNORE", "mask")))
    if missing:
        raise ExportError(f"TransformerLens expects tensors that uatlab does not provide: {missing}")
    with torch.no_grad():
        for k, v in state.items():
            if k not in own:
                raise ExportError(f"TransformerLens has no tensor {k!r} for this configuration")
            if tuple(own[k].shape) != tuple(v.shape):
                raise ExportError(
                    f"tensor {k}: shape {tuple(v.shape)} does not fit TransformerLens's {tuple(own[k].shape)}"
                )
            hooked.get_parameter(k).copy_(v.to(own[k].dtype))
    _store_mlp_weights_as_uatlab(hooked)
    hooked.eval()
    hooked.token_list = list(encoding.get("tokens", []))  # the vocabulary (tokenizer-free): id → token string
    hooked.label_list = list(encoding.get("labels", []))  # id → label of the unembedding's outputs
    hooked.unknown_token = encoding.get("unknown_token")  # the token unknown words map to, or None
    return hooked


def to_hooked_transformer(model: Transformer, encoding: Encoding | None = None) -> HookedTransformer:
    """Export ``model`` as a TransformerLens ``HookedTransformer`` computing the same logits.

    Args:
        model: a uatlab Transformer with token embedding, softmax attention and readout.
        encoding: the token and label ids (default ``model.encoding``); exported as ``token_list``,
            ``label_list`` and ``unknown_token``.

    Returns:
        A ``HookedTransformer`` in eval mode with ``token_list`` and ``label_list`` attributes; its
        forward pass on token ids equals ``model(ids)`` up to rounding.

    Raises:
        ExportError: the model uses a feature TransformerLens cannot represent (named in the message).
    """
    cfg_dict = hooked_config_dict(model)
    return _build_hooked(cfg_dict, _hooked_state(model, cfg_dict), _encoding_json(model, encoding))


def from_hooked_transformer(hooked: HookedTransformer) -> Transformer:
    """Read a ``HookedTransformer`` of this architecture back into a uatlab Transformer.

    The attention matrices come back as full (rank unconstrained) matrices, exactly TransformerLens's
    weights; ``model.encoding`` is set from ``token_list``/``label_list`` when they are present.

    Raises:
        ExportError: the TransformerLens model uses something uatlab's architecture lacks:
            normalisation, a non-ReLU activation, rotary or absent positional embedding, biases in
            Q/K/V/O, attention-only blocks.
    """
    c = hooked.cfg
    problems = []
    if c.normalization_type is not None:
        problems.append(f"normalization {c.normalization_type!r}")
    if c.act_fn != "relu":
        problems.append(f"activation {c.act_fn!r}")
    if c.positional_embedding_type != "standard":
        problems.append(f"positional embedding {c.positional_embedding_type!r}")
    if c.attn_only:
        problems.append("attention-only blocks")
    sd = hooked.state_dict()
    for i in range(c.n_layers):
        for b in ("b_Q", "b_K", "b_V", "b_O"):
            if bool(sd[f"blocks.{i}.attn.{b}"].any()):
                problems.append(f"non-zero attention bias blocks.{i}.attn.{b}")
    if problems:
        raise ExportError("cannot read this TransformerLens model into uatlab: " + "; ".join(problems))
    dtype = {torch.float32: "float32", torch.float64: "float64"}.get(c.dtype)
    if dtype is None:
        raise ExportError(f"dtype {c.dtype} is not float32 or float64")
    scale = 1.0 / c.attn_scale if c.use_attn_scale else 1.0
    config = TransformerConfig(
        d_model=c.d_model,
        n_layers=c.n_layers,
        n_heads=c.n_heads,
        head_dim=c.d_head,
        rank=None,
        ff_width=c.d_mlp,
        vocab_size=c.d_vocab,
        num_labels=c.d_vocab_out,
        max_len=c.n_ctx,
        positional="given",
        beta=scale,
        causal=c.attention_dir == "causal",
        dtype=dtype,
        meta={"imported_from": "transformer_lens", "model_name": str(c.model_name)},
    )
    model = Transformer(config)
    with torch.no_grad():
        model.embed.weight.copy_(sd["embed.W_E"])
        model.pos.copy_(sd["pos_embed.W_pos"])
        for i, block in enumerate(model.blocks):
            p = f"blocks.{i}."
            for name in ("W_Q", "W_K", "W_V", "W_O"):
                getattr(block.attn, name).full.copy_(sd[p + "attn." + name].transpose(1, 2))
            block.ff.hidden.weight.copy_(sd[p + "mlp.W_in"].T)
            block.ff.hidden.bias.copy_(sd[p + "mlp.b_in"])
            block.ff.output.weight.copy_(sd[p + "mlp.W_out"].T)
            block.ff.output.bias.copy_(sd[p + "mlp.b_out"])
        model.readout.weight.copy_(sd["unembed.W_U"].T)
        model.readout.bias.copy_(sd["unembed.b_U"])
    model.eval()
    tokens, labels = getattr(hooked, "token_list", []), getattr(hooked, "label_list", [])
    if tokens and labels:
        model.encoding = Encoding.from_lists(tokens, labels, getattr(hooked, "unknown_token", None))
    return model


def check_new_directory(out: Path) -> None:
    """InputError unless nothing is at ``out``: `save_hooked` writes a new directory there, never over anything
    (a link, even a dangling one, is something of the user's)."""
    if out.exists() or out.is_symlink():
        what = "is a symbolic link" if out.is_symlink() else "already exists"
        raise InputError(f"{out} {what}; choose a new directory (nothing was written)")


def save_hooked(hooked: HookedTransformer, out: str | os.PathLike) -> Path:
    """Write ``hooked`` as a directory: ``config.json`` (config, vocabulary) and ``weights.safetensors``.

    ``out`` must not exist yet; the directory is written under a temporary name and renamed.
    """
    out = Path(out)
    check_new_directory(out)
    c = hooked.cfg
    cfg_dict = {
        k: getattr(c, k)
        for k in (
            "n_layers",
            "d_model",
            "n_ctx",
            "d_head",
            "n_heads",
            "d_mlp",
            "d_vocab",
            "d_vocab_out",
            "act_fn",
            "normalization_type",
            "attention_dir",
            "positional_embedding_type",
            "use_attn_scale",
            "attn_scale",
            "default_prepend_bos",
            "original_architecture",
            "model_name",
            "attn_only",
        )
    }
    cfg_dict["dtype"] = {torch.float32: "float32", torch.float64: "float64"}[c.dtype]
    doc = {
        "format": FORMAT_TAG,
        "hooked_transformer_config": cfg_dict,
        "encoding": {
            "tokens": list(getattr(hooked, "token_list", [])),
            "labels": list(getattr(hooked, "label_list", [])),
            "unknown_token": getattr(hooked, "unknown_token", None),
        },
    }
    tensors = {
        k: v.detach().contiguous().clone() for k, v in hooked.state_dict().items() if not k.endswith(("IGNORE", "mask"))
    }
    from uatlab.io_safety import atomic_dir, write_text_atomic
    from uatlab.models.safetensors_file import write_safetensors

    with atomic_dir(out) as tmp:  # the folder and its files get the umask's permissions
        write_text_atomic(tmp / CONFIG_FILE, json.dumps(doc, indent=1) + "\n")
        write_safetensors(tensors, tmp / WEIGHTS_FILE, {"format": FORMAT_TAG})
    return out


def load_hooked(path: str | os.PathLike) -> HookedTransformer:
    """Load a directory written by `save_hooked` (or ``uatlab export --to transformer-lens``)."""
    path = Path(path)
    cfg_file, weights = path / CONFIG_FILE, path / WEIGHTS_FILE
    if not cfg_file.is_file() or not weights.is_file():
        raise ModelFileError(
            f"{path} is not an exported TransformerLens model (needs {CONFIG_FILE} and {WEIGHTS_FILE})"
        )
    try:
        doc = json.loads(cfg_file.read_text())
    except json.JSONDecodeError as exc:
        raise ModelFileError(f"{cfg_file}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if doc.get("format") != FORMAT_TAG:
        raise ModelFileError(f"{cfg_file} does not carry the format tag {FORMAT_TAG!r}")
    cfg_dict = dict(doc["hooked_transformer_config"])
    cfg_dict.update(init_weights=False, seed=0, device="cpu")
    try:
        state = load_file(str(weights))
    except Exception as exc:  # safetensors raises its own error types for bad files
        raise ModelFileError(f"{weights}: cannot read tensors (truncated or corrupt?): {exc}") from None
    return _build_hooked(cfg_dict, state, doc.get("encoding", {}))


def encode(hooked: HookedTransformer, sentences: list[list[str]]) -> torch.Tensor:
    """Token ids (B, n) of equal-length sentences under the exported vocabulary ``token_list``.

    Unknown words map to ``unknown_token`` when the model has one, else they are an error naming them.
    """
    index = {t: i for i, t in enumerate(hooked.token_list)}
    unk = getattr(hooked, "unknown_token", None)
    lengths = {len(s) for s in sentences}
    if len(lengths) != 1:
        raise InputError(f"sentences have different lengths {sorted(lengths)}; encode one length at a time")
    rows = []
    for b, sent in enumerate(sentences):
        for k, tok in enumerate(sent):
            if tok not in index and unk is None:
                raise InputError(f"token {tok!r} at sentence {b}, position {k} is not in the model's vocabulary")
        rows.append([index.get(t, index.get(unk, -1)) for t in sent])
    return torch.tensor(rows, dtype=torch.int64)


@dataclass(frozen=True)
class LogitComparison:
    """uatlab's logits L against the exported model's L_TL on the same token-id sequences (`compare_logits`).

    Per position, over the labels: entries finite in both models are compared by |L − L_TL|; an entry that is
    not finite must be the same infinity in both (a position with a NaN, an infinity in one model only, or
    infinities of opposite signs is a *mismatch*: an infinite difference).

    * ``max_abs_difference``: the largest |L − L_TL| (∞ with a mismatch).
    * ``max_relative_difference``: max over positions of max_labels |L − L_TL| / max_labels |L| (the maximum taken
      over uatlab's finite logits of the position; all 0 divides by the dtype's smallest normal number). This is
      the figure a tolerance is checked on. The two models sum the same terms in possibly different orders, which
      moves a logit by a multiple of the unit roundoff times the magnitudes summed; an absolute figure cannot tell
      rounding in a model with logits of 1e21 from an error in one with logits of 1. (Logits that cancel, small
      beside the terms that form them, can show more than the unit roundoff relative to themselves.)
    * ``argmax_disagreements``: positions whose top label differs. Within a tolerance this happens only at
      near-ties (the top two logits closer than twice the difference).
    * ``nonfinite_positions``: positions where one of uatlab's logits is not finite (compared by equality there).
    * ``mismatched_positions``: positions with a mismatch (a NaN, or a non-finite logit the other model does not
      share).
    """

    positions: int
    max_abs_difference: float
    max_relative_difference: float
    argmax_disagreements: int
    nonfinite_positions: int = 0
    mismatched_positions: int = 0

    def within(self, tolerance: float) -> bool:
        """The relative difference is at most ``tolerance`` (a mismatch, an infinite difference, never is)."""
        return bool(self.max_relative_difference <= tolerance)


def default_tolerance(dtype: str) -> float:
    """The relative logit difference an export may show in ``dtype``: √ε (1.5e-8 in float64, 3.5e-4 in
    float32), half the digits: rounding in a different summation order typically moves logits by far less, a
    wrong weight by far more."""
    return math.sqrt(float(torch.finfo(DTYPES[dtype]).eps))


def compare_logits(
    model: torch.nn.Module, hooked: torch.nn.Module, ids: list[np.ndarray], batch: int = 32
) -> LogitComparison:
    """`LogitComparison` of ``model`` and ``hooked`` over the token-id sequences ``ids`` (at least one), batched
    by length (no padding), at most ``batch`` sequences at a time (wide feed-forward layers are big)."""
    if not len(ids):
        raise InputError("compare_logits needs at least one token-id sequence to compare on")
    by_len: dict[int, list[np.ndarray]] = {}
    for a in ids:
        by_len.setdefault(len(a), []).append(a)
    positions = disagree = nonfinite = mismatched = 0
    worst_abs = worst_rel = 0.0
    with torch.no_grad():
        for rows in by_len.values():
            for i in range(0, len(rows), batch):
                x = torch.as_tensor(np.stack(rows[i : i + batch]), dtype=torch.int64)  # (B, n)
                a, b = model(x), hooked(x)  # (B, n, C)
                fa, fb = torch.isfinite(a), torch.isfinite(b)
                both = fa & fb
                mismatch = ~(both | (~fa & (a == b))).all(dim=-1)  # (B, n): NaN, or non-finite and not equal
                diff = torch.where(both, (a - b).abs(), torch.zeros_like(a)).amax(dim=-1)  # (B, n)
                diff = torch.where(mismatch, torch.full_like(diff, math.inf), diff)
                scale = torch.where(fa, a.abs(), torch.zeros_like(a)).amax(dim=-1).clamp_min(torch.finfo(a.dtype).tiny)
                positions += diff.numel()
                nonfinite += int((~fa).any(dim=-1).sum())
                mismatched += int(mismatch.sum())
                worst_abs = max(worst_abs, float(diff.max()))
                worst_rel = max(worst_rel, float((diff / scale).max()))
                disagree += int((a.argmax(dim=-1) != b.argmax(dim=-1)).sum())
    return LogitComparison(positions, worst_abs, worst_rel, disagree, nonfinite, mismatched)


def max_logit_difference(
    model: torch.nn.Module, hooked: torch.nn.Module, ids: list[np.ndarray], batch: int = 32
) -> float:
    """max |model(x) − hooked(x)| over the token-id sequences ``ids`` (`compare_logits`'s absolute figure)."""
    return compare_logits(model, hooked, ids, batch).max_abs_difference
