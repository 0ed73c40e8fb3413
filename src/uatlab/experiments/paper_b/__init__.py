"""Paper B's experiments (Hu et al. 2025; repository MAGICS-LAB/UAP_Attention), re-implemented.

Stages, one module each:

* :mod:`.data` — truncated-linear (ramp) targets at parity and corrected; the random ReLU seq2seq target;
* :mod:`.models` — the repository's architecture (``ExtendedMappingA`` + biased multi-head attention),
  attn_map.py's manual key/value model, the two-layer seq2seq model and its feed-forward baseline;
* :mod:`.closed_form` — the interpolation construction written into the trained model class;
* :mod:`.train` / :mod:`.stacked` — fixed-epoch and converged training (one model, or one stacked
  model per seed group);
* :mod:`.sweeps`, :mod:`.heatmap`, :mod:`.seq2seq` — trial functions for the executor;
* :mod:`.runner` — CSV, summary and figures (:mod:`.plots`) of each experiment.
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
