"""CoNLL-2003 at full scale: every split compiles at the ceiling and is certified, in both dtypes.

Marked ``slow`` (about 20-45 CPU seconds per compile); ``.ci/run`` runs it whenever the data folder exists
(``shared/data/conll2003`` beside the repository, or ``$UATLAB_CONLL_DIR``) and reports its time.
"""

from __future__ import annotations

import resource
import time

import pytest
from conll_location import conll2003_dir

DATA = conll2003_dir()

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # a shared machine can be slow


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("split", ["train", "valid", "test"])
def test_conll_at_ceiling_and_certified(split, dtype):
    path = DATA / f"{split}.txt"
    if not path.is_file():
        pytest.skip(f"{path} not found: CoNLL-2003 {split} not checked")
    from uatlab.constructions.paper_a.cor1_memorizer import compile_dataset
    from uatlab.data import ceiling_report, read_conll
    from uatlab.numerics.float_bounds import DEFAULT_EXP_ULPS

    data = read_conll(path)
    t0, c0 = time.perf_counter(), time.process_time()
    res = compile_dataset(data, dtype=dtype)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    rep = ceiling_report(data)
    cert = res.certificate
    assert cert.dtype == dtype and cert.exp_ulps == DEFAULT_EXP_ULPS and cert.environment["ok"]
    assert cert.ceiling_tokens == rep.ceiling_tokens and cert.correct_tokens == rep.ceiling_tokens
    assert cert.certified and cert.certified_tokens == rep.ceiling_tokens
    assert cert.torch_spot_check["certified_but_wrong"] == 0
    assert res.report["params_non_embedding"] <= 0.10 * res.report["paper_a_param_count"]
    assert res.model.config.n_layers == 1 and res.model.config.n_heads == 1
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < 6 * 1024 * 1024
    assert seconds < 600
    print(
        f"\nCoNLL-2003 {split} {dtype}: {cert.certified_tokens}/{cert.ceiling_tokens} certified "
        f"(fraction {cert.certified_fraction}, exp {cert.exp_ulps:g} ulp, min margin "
        f"{cert.min_certified_margin:.4g}), compile + certify {seconds:.1f} s wall, {cpu:.1f} s CPU"
    )
