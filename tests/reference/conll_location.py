"""Where the tests find CoNLL-2003 (never in the repository: its licence forbids redistribution)."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def conll2003_dir() -> Path:
    """``$UATLAB_CONLL_DIR`` if set, else ``shared/data/conll2003`` beside the repository's folder."""
    env = os.environ.get("UATLAB_CONLL_DIR")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "data" / "conll2003"
