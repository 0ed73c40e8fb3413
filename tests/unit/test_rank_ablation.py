"""Rank ablation: option parsing, configs per rank, and a tiny run writing its table."""

import json

import pytest

from uatlab.cli import main
from uatlab.cli.rank_ablation import parse_ranks
from uatlab.errors import InputError
from uatlab.experiments.rank_ablation import rank_config, run_rank_ablation


def test_parse_and_config():
    assert parse_ranks("1, 2,full") == (1, 2, None)
    with pytest.raises(InputError, match="'x'"):
        parse_ranks("1,x")
    with pytest.raises(InputError, match="positive"):
        parse_ranks("0")
    assert rank_config(None, {"dim": 16})["head_dim"] == 16
    assert rank_config(2, {"dim": 16}) | {} == {"dim": 16, "layers": 1, "heads": 1, "rank": 2, "head_dim": 2}


def test_tiny_run_writes_table(tmp_path):
    data = tmp_path / "d.jsonl"
    rows = [{"tokens": ["a", "b", "c"], "labels": ["X", "Y", "X"]}, {"tokens": ["b", "a"], "labels": ["Y", "Y"]}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = {
        "dim": 8,
        "ff_mult": 2,
        "lr": 1e-2,
        "batch_size": 2,
        "embed_std": 0.1,
        "epochs": 3,
        "seed": 0,
        "warmup_steps": 1,
    }
    s = run_rank_ablation(data, tmp_path / "out", (1, None), None, cfg, progress=False)
    assert [r["rank"] for r in s["table"]] == ["1", "full"]
    assert (tmp_path / "out" / "rank_table.csv").is_file()
    assert s["table"][1]["parameters_non_embedding"] > s["table"][0]["parameters_non_embedding"]


def test_cli_bad_ranks(capsys):
    code = main(["experiment", "rank-ablation", "nofile.txt", "--ranks", "1,q"])
    err = capsys.readouterr().err
    assert code == 2 and "--ranks" in err and "Traceback" not in err
