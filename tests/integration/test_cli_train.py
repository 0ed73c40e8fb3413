"""``uatlab train`` / ``data-report`` end to end through the CLI entry point (in-process)."""

from __future__ import annotations

import json
import random

import pytest

from uatlab.cli import main
from uatlab.data import from_lists, write_conll


@pytest.fixture
def conll_file(tmp_path):
    rng = random.Random(0)
    toks, labs = [], []
    for _ in range(16):
        n = rng.randint(2, 6)
        toks.append([f"w{rng.randint(0, 9)}" for _ in range(n)])
        labs.append([rng.choice(["O", "O", "B-PER", "B-LOC"]) for _ in range(n)])
    toks.append(toks[0])  # a duplicate sentence with one conflicting label
    labs.append(["B-ORG" if labs[0][0] != "B-ORG" else "O"] + labs[0][1:])
    path = tmp_path / "train.conll"
    write_conll(from_lists(toks, labs, source=str(path)), path)
    return path


def run_json(capsys, argv):
    code = main(argv)
    out = capsys.readouterr()
    return code, (json.loads(out.out) if out.out.strip() else None), out.err


def test_train_json_fields_and_resume_error(tmp_path, capsys, conll_file):
    out = tmp_path / "run"
    argv = ["train", str(conll_file), "--out", str(out), "--epochs", "3", "--dim", "16", "--lr", "1e-2"]
    code, data, _ = run_json(capsys, [*argv, "--batch-size", "4", "--warmup-steps", "2", "--json"])
    assert code == 0
    assert data["epochs"] == 3 and len(data["history"]) == 3
    assert 0 <= data["train_accuracy"] <= 1 and data["seconds_per_epoch"] > 0
    assert set(data["epochs_to"]) == {"0.9872", "0.999", "0.9995", "ceiling"}
    assert data["data"]["conflict_tokens"] == 1
    # same folder again without --resume: a clear error, exit code 2, nothing overwritten
    code, _, err = run_json(capsys, [*argv, "--batch-size", "4", "--warmup-steps", "2", "--json"])
    assert code == 2 and "already exists: pass --resume" in err
    # --resume with another shape: names the differing field
    code, _, err = run_json(capsys, [*argv, "--batch-size", "8", "--warmup-steps", "2", "--resume", "--json"])
    assert code == 2 and "batch_size: checkpoint has 4, this run asks for 8" in err


def test_data_report_json(capsys, conll_file):
    code, data, _ = run_json(capsys, ["data-report", str(conll_file), "--json"])
    assert code == 0
    assert data["sequences"] == 17 and data["duplicate_sequences"] == 1 and data["conflict_tokens"] == 1
    assert data["ceiling_accuracy"] == pytest.approx((data["tokens"] - 1) / data["tokens"])
    assert data["conflicts"][0]["position"] == 0
    assert data["baseline_all_majority_label"] <= data["baseline_per_word_majority"] <= data["ceiling_accuracy"]
    assert data["conflict_inputs"] == len(data["conflicts"]) == 1


def test_data_report_says_how_many_conflicts_its_table_shows(tmp_path, capsys):
    """The table lists --conflicts N of them and says so when there are more (it listed 10 of 21 silently)."""
    path = tmp_path / "c.jsonl"
    rows = [({"tokens": [f"w{i}"], "labels": [y]}) for i in range(3) for y in ("A", "B")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, data, _ = run_json(capsys, ["data-report", str(path), "--conflicts", "2", "--json"])
    assert code == 0 and data["conflict_inputs"] == 3 and len(data["conflicts"]) == 2
    assert main(["data-report", str(path), "--conflicts", "2"]) == 0
    assert "2 of 3 shown, --conflicts N shows more" in " ".join(capsys.readouterr().out.split())
    assert main(["data-report", str(path), "--conflicts", "3"]) == 0
    assert "shown" not in capsys.readouterr().out


def test_scheme_iob2_says_when_there_is_nothing_to_convert(tmp_path, capsys, conll_file):
    """--scheme iob2 on labels without B-/I- tags converts nothing: a note says so (it was silent); on IOB labels
    there is no note."""
    plain = tmp_path / "pos.conll"
    write_conll(from_lists([["a", "b"], ["b", "a"]], [["DT", "NN"], ["NN", "DT"]], source=str(plain)), plain)
    for path, noted in ((plain, True), (conll_file, False)):
        code, data, err = run_json(capsys, ["data-report", str(path), "--scheme", "iob2", "--json"])
        assert code == 0 and data["sequences"] > 0
        assert ("--scheme iob2: " + str(path) + " has no B- or I- tags" in " ".join(err.split())) == noted


def test_malformed_file_is_named(tmp_path, capsys):
    bad = tmp_path / "bad.conll"
    bad.write_text("a O\nb\n")
    code, _, err = run_json(capsys, ["train", str(bad), "--out", str(tmp_path / "r"), "--json"])
    assert code == 2 and "bad.conll:2" in err


def test_train_focus_dtype_and_stop_at_ceiling_flags(tmp_path, capsys, conll_file):
    out = tmp_path / "run"
    argv = ["train", str(conll_file), "--out", str(out), "--epochs", "200", "--dim", "16", "--lr", "2e-2"]
    argv += ["--batch-size", "4", "--warmup-steps", "2", "--no-f1", "--json"]
    code, data, _ = run_json(capsys, [*argv, "--focus", "1", "--dtype", "float64", "--stop-at-ceiling"])
    assert code == 0 and data["status"] == "ceiling" and data["epochs"] < 200
    assert data["train_errors"] <= data["data"]["conflict_tokens"] == 1
    assert data["config"]["focus"] == 1.0 and data["model_config"]["dtype"] == "float64"
    code, _, err = run_json(capsys, [*argv, "--out", str(tmp_path / "bad"), "--focus", "-1"])
    assert code == 2 and "--focus" in err and not (tmp_path / "bad").exists()


def _swap_two_lines(path):
    """Swap the first two different lines of a sentence: same size, same tokens and labels, other content."""
    lines = path.read_text().splitlines(keepends=True)
    i = next(k for k in range(len(lines) - 1) if lines[k].strip() and lines[k + 1].strip() and lines[k] != lines[k + 1])
    lines[i], lines[i + 1] = lines[i + 1], lines[i]
    before = path.stat().st_size
    path.write_text("".join(lines))
    assert path.stat().st_size == before


@pytest.mark.parametrize("role", ["train", "valid"])
def test_resume_refuses_a_data_file_whose_content_changed(tmp_path, capsys, conll_file, role):
    import hashlib

    valid = tmp_path / "valid.conll"
    valid.write_text(conll_file.read_text())
    out = tmp_path / "run"
    argv = ["train", str(conll_file), "--valid", str(valid), "--out", str(out), "--epochs", "1", "--dim", "8"]
    argv += ["--batch-size", "8", "--warmup-steps", "1", "--no-f1", "--json"]
    code, data, _ = run_json(capsys, argv)
    assert code == 0
    assert data["data"]["data_hash"] == "sha256"
    assert data["data"]["train_sha256"] == hashlib.sha256(conll_file.read_bytes()).hexdigest()
    assert data["data"]["valid_sha256"] == hashlib.sha256(valid.read_bytes()).hexdigest()
    changed = conll_file if role == "train" else valid
    _swap_two_lines(changed)
    kept = {p.name: p.read_bytes() for p in out.iterdir()}
    code, _, err = run_json(capsys, [*argv, "--resume"])
    assert code == 2
    assert f"{role} data file {changed}" in err and "written for other data" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == kept  # nothing deleted or rewritten


def test_resume_accepts_the_same_train_file_moved(tmp_path, capsys, conll_file):
    # the content is proved the same by its SHA-256: a moved or renamed file is the same data
    out = tmp_path / "run"
    opts = ["--out", str(out), "--epochs", "2", "--dim", "8", "--batch-size", "8", "--warmup-steps", "1", "--no-f1"]
    code, first, _ = run_json(capsys, ["train", str(conll_file), *opts, "--max-minutes", "1e-9", "--json"])
    assert code == 3 and first["epochs"] < 2  # stopped by the time budget, checkpoint saved
    moved = tmp_path / "elsewhere" / "renamed.conll"
    moved.parent.mkdir()
    conll_file.rename(moved)
    code, data, err = run_json(capsys, ["train", str(moved), *opts, "--resume", "--json"])
    assert code == 0, err
    assert "resumed from" in err and data["status"] == "completed" and data["epochs"] == 2
    # other content at the old path is still refused
    moved.rename(conll_file)
    _swap_two_lines(conll_file)
    code, _, err = run_json(capsys, ["train", str(conll_file), *opts, "--resume", "--json"])
    assert code == 2 and "written for other data" in err


def test_resume_of_a_checkpoint_without_data_hashes_warns_and_goes_on(tmp_path, capsys, conll_file):
    import hashlib

    from uatlab.training.checkpoint import load_checkpoint, save_checkpoint

    out = tmp_path / "run"
    argv = ["train", str(conll_file), "--out", str(out), "--epochs", "2", "--dim", "8", "--batch-size", "8"]
    argv += ["--warmup-steps", "1", "--no-f1", "--json"]
    code, _, _ = run_json(capsys, [*argv[:5], "1", *argv[6:]])  # one epoch now, the second one resumed
    assert code == 0
    state = load_checkpoint(out / "checkpoint.pt")
    assert state["data"]["train_sha256"] == hashlib.sha256(conll_file.read_bytes()).hexdigest()
    state = {k: v for k, v in state.items() if k != "format"}
    state["data"] = {k: v for k, v in state["data"].items() if not k.endswith("sha256") and k != "data_hash"}
    state["train_config"]["epochs"] = 2  # as if the older run had asked for two epochs and stopped after one
    save_checkpoint(state, out / "checkpoint.pt")
    code, data, err = run_json(capsys, [*argv, "--resume"])
    assert code == 0 and data["epochs"] == 2
    assert "records no data hashes" in err and "unknown" in err
    assert data["data"]["train_sha256"] == hashlib.sha256(conll_file.read_bytes()).hexdigest()


@pytest.fixture
def interrupt_the_loop(monkeypatch):
    """Calling it makes the next training loop see a Ctrl-C at once (it checkpoints and returns 'interrupted')."""
    from uatlab.training import trainer

    def arm():
        real_enter = trainer._StopFlag.__enter__

        def interrupted_at_once(self):
            real_enter(self)
            self.signal = "SIGINT"
            return self

        monkeypatch.setattr(trainer._StopFlag, "__enter__", interrupted_at_once)

    return arm


def test_train_help_names_its_exit_codes(tmp_path, capsys, conll_file, interrupt_the_loop):
    import re

    argv = ["train", str(conll_file), "--epochs", "1", "--dim", "8", "--batch-size", "8", "--warmup-steps", "1"]
    argv += ["--no-f1", "--json"]
    returned = {
        main([*argv, "--out", str(tmp_path / "done")]),
        main([*argv, "--out", str(tmp_path / "bad"), "--lr", "-1"]),
        main([*argv, "--out", str(tmp_path / "budget"), "--max-minutes", "1e-9"]),
    }
    interrupt_the_loop()
    returned.add(main([*argv, "--out", str(tmp_path / "stopped")]))
    capsys.readouterr()
    assert main(["train", "--help"]) == 0
    text = capsys.readouterr().out
    listed = text[text.index("Exit codes:") :].split("\n\n")[0]
    named = {int(m) for m in re.findall(r"^\s+(\d+)\s", listed, flags=re.M)}
    assert returned == {0, 2, 3, 130} and named == returned, listed


@pytest.mark.parametrize("json_out", [False, True])
def test_an_interrupted_run_ends_with_a_line_naming_its_checkpoint(
    tmp_path, capsys, conll_file, interrupt_the_loop, json_out
):
    """Ctrl-C or SIGTERM in the training loop: the loop checkpoints and returns; the process's last line (after the
    summary) names the checkpoint to resume, not the generic "partial results, if any" line."""
    interrupt_the_loop()
    out = tmp_path / "stopped"
    argv = ["train", str(conll_file), "--epochs", "1", "--dim", "8", "--batch-size", "8", "--no-f1", "--out", str(out)]
    assert main([*argv, *(["--json"] if json_out else [])]) == 130
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"interrupted: {out / 'checkpoint.pt'} is saved; continue with the same command plus --resume"
    assert (out / "checkpoint.pt").is_file()


def test_a_checkpoint_path_that_is_no_checkpoint_is_named_with_a_way_out(tmp_path, capsys, conll_file):
    """A folder where the checkpoint goes: no --resume advice that cannot work; an unreadable checkpoint (it may
    be the user's file): moved away, never "delete it"."""
    out = tmp_path / "run"
    (out / "checkpoint.pt").mkdir(parents=True)
    argv = ["train", str(conll_file), "--epochs", "1", "--dim", "8", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{out / 'checkpoint.pt'} is a directory" in err and "move it away, or choose another --out" in err
    assert "--resume" not in err
    assert main([*argv, "--resume"]) == 2
    assert f"checkpoint {out / 'checkpoint.pt'} is a directory, not a regular file (nothing to resume)" in (
        capsys.readouterr().err
    )
    (out / "checkpoint.pt").rmdir()
    (out / "checkpoint.pt").write_bytes(b"the user's bytes")
    assert main([*argv, "--resume"]) == 2
    err = capsys.readouterr().err
    assert "is unreadable" in err and "move it away to start again" in err and "delete" not in err
    assert (out / "checkpoint.pt").read_bytes() == b"the user's bytes"


def test_resume_refuses_another_label_scheme(tmp_path, capsys):
    """IOB1 labels whose IOB2 conversion keeps the label set: only the recorded scheme tells the runs apart."""
    path = tmp_path / "iob1.conll"
    path.write_text("a I-PER\nb O\n\nc I-PER\nd B-PER\ne O\n\nf O\na I-PER\na I-PER\n\n")
    out = tmp_path / "run"
    argv = ["train", str(path), "--out", str(out), "--epochs", "1", "--dim", "8", "--warmup-steps", "1", "--no-f1"]
    code, data, _ = run_json(capsys, [*argv, "--json"])
    assert code == 0 and data["data"]["label_scheme"] == "keep"
    code, _, err = run_json(capsys, [*argv, "--scheme", "iob2", "--resume", "--json"])
    assert code == 2 and "label_scheme: checkpoint has 'keep', this run asks for 'iob2'" in err
    code, _, _ = run_json(capsys, [*argv, "--scheme", "keep", "--resume", "--json"])
    assert code == 0


EDITS = {  # a field of the checkpoint edited by hand → the words the refusal uses
    "rng-none": (lambda s: s.update(rng=None), "rng is"),
    "epoch-negative": (lambda s: s.update(epoch=-3), "epoch is -3"),
    "epoch-past-the-run": (lambda s: s.update(epoch=500), "epoch is 500"),
    "step-not-a-number": (lambda s: s.update(step="x"), "step is 'x'"),
    "batch-past-the-epoch": (lambda s: s.update(batch_in_epoch=999), "batch_in_epoch 999 is past the"),
    "history-of-another-form": (lambda s: s.update(history=[{"epoch": 7}]), "history is"),
    # emptied: the resumed run's metrics.csv and summary.json would then disagree with the old epoch's rows
    "history-emptied": (lambda s: s.update(history=[]), "with rows for epochs 1 (edited?)"),
    "history-repeated": (lambda s: s.update(history=s["history"] * 2), "history is"),
    "hard-sequence-out-of-range": (lambda s: s.update(hard_sequences=[10**9]), "hard_sequences is"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_resume_refuses_a_checkpoint_whose_position_was_edited(tmp_path, capsys, conll_file, edit):
    """A resumed run continues from the checkpoint's epoch, batch, step, random state, history and replay list:
    one that is out of range or of another type (edited by hand) is one error line naming the field, exit 2, and
    the run folder as it was, never a traceback or a run that continues from nonsense."""
    from uatlab.training.checkpoint import load_checkpoint, save_checkpoint

    out = tmp_path / "run"
    argv = ["train", str(conll_file), "--out", str(out), "--epochs", "2", "--dim", "8", "--batch-size", "8"]
    argv += ["--warmup-steps", "1", "--no-f1", "--json"]
    code, _, _ = run_json(capsys, argv)
    assert code == 0
    state = {k: v for k, v in load_checkpoint(out / "checkpoint.pt").items() if k != "format"}
    state["epoch"] = 1  # as if stopped after the first of the two epochs
    state["history"] = [r for r in state["history"] if r["epoch"] <= 1]
    make, words = EDITS[edit]
    make(state)
    save_checkpoint(state, out / "checkpoint.pt")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    code, _, err = run_json(capsys, [*argv, "--resume"])
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and "Traceback" not in err, err
    assert lines[-1].startswith("error: ") and words in err and "edited?" in err, err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
