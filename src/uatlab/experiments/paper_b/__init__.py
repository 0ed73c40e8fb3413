"""Paper B's experiments (Hu et al. 2025; repository MAGICS-LAB/UAP_Attention), re-implemented.

Stages, one module each:

* `.data` — truncated-linear (ramp) targets at parity and corrected; the random ReLU seq2seq target;
* `.models` — the repository's architecture (``ExtendedMappingA`` + biased multi-head attention),
  attn_map.py's manual key/value model, the two-layer seq2seq model and its feed-forward baseline;
* `.closed_form` — the interpolation construction written into the trained model class;
* `.train` / `.stacked` — fixed-epoch and converged training (one model, or one stacked
  model per seed group);
* `.sweeps`, `.heatmap`, `.seq2seq` — trial functions for the executor;
* `.runner` — CSV, summary and figures (`.plots`) of each experiment.
"""

from uatlab.experiments.paper_b.closed_form import closed_form_model, write_interpolation_weights
from uatlab.experiments.paper_b.models import TruncatedAttentionConfig, TruncatedAttentionModel
from uatlab.experiments.paper_b.runner import run_heatmap, run_seq2seq, run_truncated_sweep

__all__ = [
    "TruncatedAttentionConfig",
    "TruncatedAttentionModel",
    "closed_form_model",
    "run_heatmap",
    "run_seq2seq",
    "run_truncated_sweep",
    "write_interpolation_weights",
]
