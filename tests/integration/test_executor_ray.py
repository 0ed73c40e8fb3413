"""The Ray back end of the sweep executor (skipped when the optional 'ray' extra is not installed)."""

import pytest

ray = pytest.importorskip("ray")

from uatlab.experiments.executor import Trial, run_trials  # noqa: E402


def cube(params):
    if params["x"] < 0:
        raise ValueError("negative")
    return {"y": params["x"] ** 3}


@pytest.mark.filterwarnings("ignore")
def test_ray_executor_matches_local_and_resumes(tmp_path):
    import sys

    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import the test module
    trials = [Trial(f"x={x}", {"x": x}) for x in (-1, 1, 2, 3)]
    try:
        res = run_trials(trials, cube, tmp_path, executor="ray", retries=1, progress=False)
    finally:
        ray.shutdown()
    assert [r["y"] for r in res.ordered(trials)] == [1, 8, 27]
    assert set(res.failed) == {"x=-1"} and "negative" in res.failed["x=-1"]
    local = run_trials(trials, cube, tmp_path, executor="local", workers=1, retries=0, progress=False)
    assert sorted(local.reused) == ["x=1", "x=2", "x=3"] and set(local.failed) == {"x=-1"}
