"""Paper A, Corollary 1: memorize a labelled data set with one rank-1 softmax attention layer and a ReLU
feed-forward layer, compiled for floating point and certified.

Modules: `.layout` (residual stream and codes), `.contexts` (Boltzmann attention output h and its
grouping), `.select` (query scales β), `.assemble` (the weights E, P, W_Q, W_K, W_V, W_O, W1, W2,
with their derivation), `.api` (compile entry points and the report).
"""

from uatlab.constructions.paper_a.cor1_memorizer.api import (
    CompileResult,
    ProgressFn,
    certify_chunks_with_progress,
    certify_store_with_progress,
    certify_with_progress,
    compile_dataset,
    compile_encoded,
    compile_memorizer,
    compile_store,
    load_compiled,
    paper_a_param_count,
    save_compiled,
    summarize,
)
from uatlab.constructions.paper_a.cor1_memorizer.assemble import CONSTRUCTION, assemble_ramp_model

__all__ = [
    "CONSTRUCTION",
    "CompileResult",
    "ProgressFn",
    "assemble_ramp_model",
    "certify_chunks_with_progress",
    "certify_store_with_progress",
    "certify_with_progress",
    "compile_dataset",
    "compile_encoded",
    "compile_memorizer",
    "compile_store",
    "load_compiled",
    "paper_a_param_count",
    "save_compiled",
    "summarize",
]
