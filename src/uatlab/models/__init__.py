"""Paper A's models: rank-r multi-head self-attention, feed-forward with skip, blocks, Transformer."""

from uatlab.models.attention import MultiHeadSelfAttention, hardmax, masked_softmax
from uatlab.models.convention import paper_self_attention, to_columns, to_rows
from uatlab.models.feedforward import FeedForward
from uatlab.models.io import load, load_model, read_metadata, save, save_model
from uatlab.models.transformer import Block, Transformer, TransformerConfig

__all__ = [
    "Block",
    "FeedForward",
    "MultiHeadSelfAttention",
    "Transformer",
    "TransformerConfig",
    "hardmax",
    "load",
    "load_model",
    "masked_softmax",
    "paper_self_attention",
    "read_metadata",
    "save",
    "save_model",
    "to_columns",
    "to_rows",
]
