"""A run never replaces a user's file in its output: ``train --out``, ``reproduce --out``, ``synth OUT`` and
``compile --out``.

Each refusal is one ``error:`` line naming the file, exit code 2, and the user's file byte-identical after it;
the run's own files from an earlier run of the same kind (``train --resume``, ``reproduce`` again into its
folder, ``synth`` over its own file) are still replaced.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from uatlab.cli import main

SYNTH = ["-N", "12", "-n", "4", "-V", "10", "-C", "3"]
N_SYNTH = int(SYNTH[SYNTH.index("-N") + 1])  # lines synth writes with these options


@pytest.fixture
def work(tmp_path: Path, monkeypatch, capsys) -> Path:
    """A folder with token data ``s.jsonl`` and a compiled model ``s.safetensors`` made from it."""
    monkeypatch.chdir(tmp_path)
    assert main(["synth", "s.jsonl", *SYNTH, "--seed", "1", "--json"]) == 0
    assert main(["compile", "s.jsonl", "--out", "s.safetensors", "--json"]) == 0
    capsys.readouterr()
    return tmp_path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _refused(capsys, argv: list[str], *names: str) -> str:
    """Run ``argv``: exit 2, exactly one ``error:`` line naming every one of ``names``, nothing on stdout."""
    code = main(argv)
    cap = capsys.readouterr()
    lines = [ln for ln in cap.err.splitlines() if ln.strip()]
    assert code == 2, (code, cap.err)
    assert len(lines) == 1 and lines[0].startswith("error: "), cap.err
    assert "Traceback" not in cap.err and cap.out == ""
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


TRAIN = ["train", "s.jsonl", "--epochs", "1", "--dim", "8", "--warmup-steps", "0", "--no-f1"]


# ------------------------------------------------------------------------------------------------ train
def test_train_refuses_a_compiled_model_in_its_folder(work: Path, capsys) -> None:
    (work / "cm").mkdir()
    model = work / "cm" / "model.safetensors"
    model.write_bytes((work / "s.safetensors").read_bytes())
    before = _digest(model)
    line = _refused(capsys, [*TRAIN, "--out", "cm"], "cm/model.safetensors")
    assert "not a file uatlab train wrote" in line
    assert _digest(model) == before
    assert sorted(p.name for p in (work / "cm").iterdir()) == ["model.safetensors"]  # nothing else written


@pytest.mark.parametrize("name", ["summary.json", "metrics.csv", "metrics.jsonl"])
def test_train_refuses_any_user_file_of_its_names(work: Path, capsys, name: str) -> None:
    (work / "u").mkdir()
    (work / "u" / name).write_text("mine\n")
    _refused(capsys, [*TRAIN, "--out", "u"], f"u/{name}")
    assert (work / "u" / name).read_text() == "mine\n"


def test_train_refuses_an_init_model_it_would_replace(work: Path, capsys) -> None:
    (work / "cm2").mkdir()
    model = work / "cm2" / "model.safetensors"
    model.write_bytes((work / "s.safetensors").read_bytes())
    before = _digest(model)
    argv = ["train", "s.jsonl", "--epochs", "1", "--lr", "0.5", "--out", "cm2", "--init", "cm2/model.safetensors"]
    line = _refused(capsys, argv, "cm2/model.safetensors")
    assert "reads" in line
    assert _digest(model) == before
    # another spelling of the same file is the same file
    _refused(capsys, [*argv[:-1], str(model.resolve())], "model.safetensors")
    assert _digest(model) == before


def test_train_refuses_its_own_model_as_init_into_the_same_folder(work: Path, capsys) -> None:
    assert main([*TRAIN, "--out", "run", "--json"]) == 0
    capsys.readouterr()
    model = work / "run" / "model.safetensors"
    before = _digest(model)
    _refused(capsys, [*TRAIN, "--out", "run", "--resume", "--init", "run/model.safetensors"], "run/model.safetensors")
    assert _digest(model) == before


def test_train_resume_replaces_its_own_files_but_not_edited_ones(work: Path, capsys) -> None:
    from uatlab.data import read_jsonl
    from uatlab.training.trainer import TrainConfig, train

    data = read_jsonl(work / "s.jsonl")
    cfg = TrainConfig(dim=8, epochs=2, batch_size=4, warmup_steps=0)
    # interrupted in epoch 2 (3 batches an epoch): checkpoint, metrics of epoch 1 and summary written
    part = train(data, cfg, work / "run", progress=False, with_f1=False, stop_after_steps=4)
    assert part.status == "interrupted" and not (work / "run" / "model.safetensors").exists()
    first_metrics = (work / "run" / "metrics.jsonl").read_text()
    done = train(data, cfg, work / "run", resume=True, progress=False, with_f1=False)
    assert done.status == "completed" and done.epochs == 2
    assert (work / "run" / "metrics.jsonl").read_text() != first_metrics
    assert len((work / "run" / "metrics.jsonl").read_text().splitlines()) == 2
    assert json.loads((work / "run" / "summary.json").read_text())["status"] == "completed"
    # and a finished run resumed again from the command line (same options) writes its files again
    assert main([*TRAIN, "--out", "cli", "--json"]) == 0
    assert main([*TRAIN, "--out", "cli", "--resume", "--json"]) == 0
    capsys.readouterr()
    # a metrics file edited by the user since is not the run's any more
    (work / "cli" / "metrics.csv").write_text("my notes\n")
    line = _refused(capsys, [*TRAIN, "--out", "cli", "--resume"], "cli/metrics.csv")
    assert "changed after uatlab train wrote it" in line
    assert (work / "cli" / "metrics.csv").read_text() == "my notes\n"


def test_train_keeps_unrelated_user_files(work: Path, capsys) -> None:
    (work / "mix").mkdir()
    (work / "mix" / "notes.txt").write_text("keep\n")
    assert main([*TRAIN, "--out", "mix", "--json"]) == 0
    capsys.readouterr()
    assert (work / "mix" / "notes.txt").read_text() == "keep\n"
    assert (work / "mix" / "model.safetensors").is_file()


def test_train_interrupted_before_its_first_checkpoint_says_so(work: Path, capsys, monkeypatch) -> None:
    # Ctrl-C while the run sets up (before the loop that checkpoints): exit 130, a last line that does not promise
    # a checkpoint, and no empty folder left where the run made one; an earlier run's checkpoint is named
    from uatlab.training import trainer

    real = trainer._train_in

    def interrupted(data, cfg, out, *args):  # inside train()'s open output folder, as its set-up is
        Path(out).mkdir(parents=True, exist_ok=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(trainer, "_train_in", interrupted)
    assert main([*TRAIN, "--out", "fresh"]) == 130
    err = capsys.readouterr().err
    assert "interrupted before the first checkpoint: nothing was saved" in err and "--resume" not in err
    assert not (work / "fresh").exists()
    monkeypatch.setattr(trainer, "_train_in", real)
    assert main([*TRAIN, "--out", "done", "--json"]) == 0
    capsys.readouterr()
    ckpt = (work / "done" / "checkpoint.pt").read_bytes()
    monkeypatch.setattr(trainer, "_train_in", interrupted)
    assert main([*TRAIN, "--out", "done", "--resume"]) == 130
    assert "interrupted: done/checkpoint.pt (of an earlier run or epoch) is kept" in capsys.readouterr().err
    assert (work / "done" / "checkpoint.pt").read_bytes() == ckpt


# ------------------------------------------------------------------------------------------------ reproduce
REPRODUCE = ["reproduce", "--quick", "--only", "A.lemma1*"]


@pytest.mark.parametrize("name", ["report.md", "claims.json"])
def test_reproduce_refuses_a_user_report(work: Path, capsys, name: str) -> None:
    (work / "ud2").mkdir()
    (work / "ud2" / name).write_text("mine\n")
    _refused(capsys, [*REPRODUCE, "--out", "ud2"], f"ud2/{name}")
    assert (work / "ud2" / name).read_text() == "mine\n"
    assert sorted(p.name for p in (work / "ud2").iterdir()) == [name]


def test_reproduce_again_into_its_own_folder(work: Path, capsys) -> None:
    assert main([*REPRODUCE, "--out", "rep", "--json"]) == 0
    capsys.readouterr()
    first = (work / "rep" / "claims.json").read_text()
    assert main([*REPRODUCE, "--out", "rep", "--json"]) == 0
    capsys.readouterr()
    assert json.loads((work / "rep" / "claims.json").read_text())["generated"] >= json.loads(first)["generated"]
    # a report the user edited since is theirs
    (work / "rep" / "report.md").write_text("edited\n")
    _refused(capsys, [*REPRODUCE, "--out", "rep"], "rep/report.md")
    assert (work / "rep" / "report.md").read_text() == "edited\n"


def test_an_interrupted_training_claim_gets_no_verdict_and_keeps_the_last_report(work: Path, capsys, monkeypatch):
    # a training claim's run stopped by Ctrl-C (the trainer checkpoints and returns early): exit 130, no verdict
    # drawn from the partial run, and the report of the run before left byte-identical
    assert main([*REPRODUCE, "--out", "rep2", "--json"]) == 0
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in (work / "rep2").iterdir() if p.is_file()}
    from uatlab.training import trainer

    enter = trainer._StopFlag.__enter__

    def pressed(self):  # Ctrl-C as the first batch starts
        flag = enter(self)
        flag.signal = "SIGINT"
        return flag

    monkeypatch.setattr(trainer._StopFlag, "__enter__", pressed)
    code = main(["reproduce", "--quick", "--only", "A.sec5.rank1-trained-memorization", "--out", "rep2", "--json"])
    err = capsys.readouterr().err
    assert code == 130 and "fail" not in err
    assert "interrupted (no claim had finished): no verdict was recorded; rep2's claims.json and report" in err
    assert {p.name: p.read_bytes() for p in (work / "rep2").iterdir() if p.is_file()} == before


# ------------------------------------------------------------------------------------------------ synth
def test_synth_refuses_a_model_and_a_conll_file(work: Path, capsys) -> None:
    victim = work / "victim.safetensors"
    victim.write_bytes((work / "s.safetensors").read_bytes())
    before = _digest(victim)
    _refused(capsys, ["synth", "victim.safetensors", "-N", "2"], "victim.safetensors")
    assert _digest(victim) == before
    conll = work / "c.txt"
    conll.write_text("EU B-ORG\nrejects O\n\nPeter B-PER\n")
    _refused(capsys, ["synth", "c.txt", "-N", "2"], "c.txt")
    assert conll.read_text() == "EU B-ORG\nrejects O\n\nPeter B-PER\n"
    own = work / "own.jsonl"  # the user's JSONL data of another shape
    own.write_text('{"tokens": ["EU", "rejects"], "labels": ["B-ORG", "O"]}\n')
    _refused(capsys, ["synth", "own.jsonl", "-N", "2"], "own.jsonl")


def test_synth_replaces_its_own_file_and_an_empty_one(work: Path, capsys) -> None:
    before = (work / "s.jsonl").read_text()
    assert main(["synth", "s.jsonl", *SYNTH, "--seed", "2", "--json"]) == 0
    assert (work / "s.jsonl").read_text() != before
    (work / "empty.jsonl").write_text("")
    assert main(["synth", "empty.jsonl", "-N", "3", "--json"]) == 0
    capsys.readouterr()
    assert len((work / "empty.jsonl").read_text().splitlines()) == 3


def _relabel_line_7(text: str) -> str:
    lines = text.splitlines(keepends=True)
    lines[6] = lines[6].replace('"c', '"B-PER', 1)
    return "".join(lines)


@pytest.mark.parametrize(
    "change,bad_line",
    [
        pytest.param(
            lambda text: text + '{"tokens": ["EU", "rejects"], "labels": ["B-ORG", "O"]}\n', 13, id="appended"
        ),
        pytest.param(_relabel_line_7, 7, id="relabelled"),
        pytest.param(lambda text: text + '{"tokens": ["t1"], "labels": ["c0"]}\n', 13, id="other-length"),
        pytest.param(lambda text: text.rstrip("\n"), 12, id="no-final-newline"),
    ],
)
def test_synth_refuses_its_own_file_changed_after_the_first_line(work: Path, capsys, change, bad_line) -> None:
    # synthetic data the user extended or edited below line 1 is theirs: the whole file is checked
    data = work / "s.jsonl"
    assert len(data.read_text().splitlines()) == 12  # SYNTH's -N
    data.write_text(change(data.read_text()))
    before = _digest(data)
    msg = _refused(capsys, ["synth", "s.jsonl", *SYNTH], "s.jsonl")
    assert f"line {bad_line} " in msg
    assert _digest(data) == before


def _edit(number: int, change):
    """A change to line ``number`` (from 1) as JSON, written back in synth's own spacing: only the content differs."""

    def edit(text: str) -> str:
        lines = text.splitlines(keepends=True)
        obj = json.loads(lines[number - 1])
        change(obj)
        lines[number - 1] = json.dumps(obj) + "\n"
        return "".join(lines)

    return edit


def _other_label(obj: dict) -> None:  # c<k> → c<k+1 mod C>: still one of synth's labels
    obj["labels"][0] = f"c{(int(obj['labels'][0][1:]) + 1) % 3}"


def _other_token(obj: dict) -> None:  # t<k> → t<k+1 mod V>
    obj["tokens"][-1] = f"t{(int(obj['tokens'][-1][1:]) + 1) % 10}"


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


@pytest.mark.parametrize(
    "change,bad_line",
    [
        pytest.param(_edit(5, _other_label), 5, id="label-edited"),
        pytest.param(_edit(1, _other_label), 1, id="label-edited-on-line-1"),
        pytest.param(_edit(3, _other_token), 3, id="token-edited"),
        pytest.param(lambda text: "".join(_lines(text)[:3] + _lines(text)[4:]), 4, id="line-4-deleted"),
        pytest.param(lambda text: "".join(_lines(text)[:-1]), N_SYNTH, id="last-line-deleted"),
        pytest.param(lambda text: text + _lines(text)[1], N_SYNTH + 1, id="line-2-appended-again"),
        pytest.param(lambda text: "".join((ls := _lines(text))[:5] + [ls[6], ls[5]] + ls[7:]), 6, id="6-7-swapped"),
        pytest.param(_edit(1, lambda obj: obj["synth"].update(N=11)), 1, id="record-edited"),
    ],
)
def test_synth_refuses_its_own_file_edited_into_other_synthetic_looking_data(
    work: Path, capsys, change, bad_line
) -> None:
    # every line still a {"tokens": ["t…"], "labels": ["c…"]} record of the same length: only a comparison with
    # what synth wrote from the options recorded on line 1 tells the user's edit apart
    data = work / "s.jsonl"
    data.write_text(change(data.read_text()))
    assert data.read_text().count("\n") >= N_SYNTH - 1
    before = _digest(data)
    msg = _refused(capsys, ["synth", "s.jsonl", *SYNTH, "--seed", "1"], "s.jsonl")
    assert f"line {bad_line}" in msg and "move it away or choose another path" in msg
    assert _digest(data) == before


def test_synth_refuses_its_output_from_before_the_record(work: Path, capsys) -> None:
    # what synth wrote before line 1 recorded its options: the same lines without the "synth" key
    from uatlab.data.synthetic import iter_synthetic

    old = work / "old.jsonl"
    old.write_text("".join(json.dumps({"tokens": t, "labels": y}) + "\n" for t, y in iter_synthetic(12, 4, 10, 3)))
    before = _digest(old)
    msg = _refused(capsys, ["synth", "old.jsonl", *SYNTH], "old.jsonl")
    assert 'line 1 does not start with the "synth" record' in msg and "older uatlab" in msg
    assert _digest(old) == before


@pytest.mark.parametrize(
    "earlier",
    [["-N", "3", "-n", "2", "-V", "5", "-C", "2", "--no-repeats", "--seed", "9"], ["-N", "30", "--seed", "4"]],
    ids=["no-repeats", "defaults"],
)
def test_synth_replaces_its_unedited_output_of_other_options(work: Path, capsys, earlier: list[str]) -> None:
    from uatlab.data.synthetic import synthetic_lines

    assert main(["synth", "s.jsonl", *earlier, "--json"]) == 0
    assert main(["synth", "s.jsonl", *SYNTH, "--seed", "5", "--json"]) == 0
    capsys.readouterr()
    assert (work / "s.jsonl").read_text() == "".join(synthetic_lines(12, 4, 10, 3, seed=5))


@pytest.mark.parametrize("kind", ["fifo", "folder", "under-a-file", "stdout"])
def test_synth_names_its_out_as_the_user_gave_it(work: Path, capsys, kind: str) -> None:
    """synth takes OUT as an argument: a refused OUT is named so, never as an option --out it does not have."""
    given = {"under-a-file": "s.jsonl/t.jsonl", "stdout": "-"}.get(kind, "t.jsonl")
    if kind == "fifo":
        os.mkfifo(work / given)
    elif kind == "folder":
        (work / given).mkdir()
    shown = repr(given) if given == "-" else given
    line = _refused(capsys, ["synth", given, "-N", "2"], f"error: OUT {shown}")
    assert "--out" not in line


# ------------------------------------------------------------------------------------------------ approx, experiment
HEADS = ["approx", "heads", "--heads", "1,2", "--points", "201", "--out", "ao", "--json"]


def test_approx_refuses_a_user_csv_and_replaces_its_own(work: Path, capsys) -> None:
    (work / "ao").mkdir()
    (work / "ao" / "heads.csv").write_text("my table\n")
    _refused(capsys, HEADS, "ao/heads.csv")
    assert (work / "ao" / "heads.csv").read_text() == "my table\n"
    assert sorted(p.name for p in (work / "ao").iterdir()) == ["heads.csv"]
    (work / "ao" / "heads.csv").unlink()
    assert main(HEADS) == 0
    assert main(HEADS) == 0  # its own files: replaced
    capsys.readouterr()
    assert (work / "ao" / "heads.csv").read_text().startswith("anchors,heads")
    assert (work / "ao" / "heads.png").is_file()


@pytest.mark.parametrize(
    "argv,name",
    [
        (["experiment", "depth-ablation", "s.jsonl", "--layers", "1", "--epochs", "1", "--dim", "8"], "summary.json"),
        (["experiment", "rank-ablation", "s.jsonl", "--ranks", "1", "--epochs", "1", "--dim", "8"], "rank_table.csv"),
        (["experiment", "capacity", "--ns", "8", "--max-steps", "5"], "capacity.csv"),
        (["experiment", "attention-heatmap", "--quick"], "attention-heatmap.png"),
    ],
)
def test_experiments_refuse_a_user_file_before_any_work(work: Path, capsys, argv: list[str], name: str) -> None:
    (work / "eo").mkdir()
    (work / "eo" / name).write_text("mine\n")
    _refused(capsys, [*argv, "--out", "eo"], f"eo/{name}")
    assert (work / "eo" / name).read_text() == "mine\n"
    assert sorted(p.name for p in (work / "eo").iterdir()) == [name]  # no trial started


# ------------------------------------------------------------------------------------------------ compile
NEXT_TOKEN_LINES = "".join(
    json.dumps({"tokens": toks.split(), "label": label}) + "\n"
    for toks, label in (("the cat sat", "a"), ("a dog ran", "the"), ("the dog sat", "cat"))
)
COMPILE_PATHS = {  # every way compile writes its one model file: data, then options
    "token": ["s.jsonl"],
    "deep": ["s.jsonl", "--ff", "deep"],
    "next-token": ["nt.jsonl", "--task", "next-token"],
}


def _foreign_safetensors(path: Path) -> None:
    """A safetensors file another program wrote: tensors and metadata, but no uatlab format tag."""
    import torch
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(2)}, str(path), metadata={"format": "pt"})


VICTIMS = {  # what the user keeps at --out → how compile says it is not a model
    "conll-copy": (lambda p: p.write_text("a O\n\nb O\n"), "not a safetensors file"),
    "link-to-empty": (lambda p: (p.parent / "empty").write_bytes(b"") or p.symlink_to("empty"), "a symbolic link"),
    # the model would replace the link, not the model it names
    "link-to-model": (lambda p: p.symlink_to("s.safetensors"), "a symbolic link"),
    "other-safetensors": (_foreign_safetensors, "without a uatlab model's tag"),
}


@pytest.mark.parametrize("path", sorted(COMPILE_PATHS))
@pytest.mark.parametrize("victim", sorted(VICTIMS))
def test_compile_refuses_to_replace_a_file_that_is_not_a_model(work: Path, capsys, path: str, victim: str) -> None:
    (work / "nt.jsonl").write_text(NEXT_TOKEN_LINES)
    make, why = VICTIMS[victim]
    target = work / "valid.txt"
    make(target)
    before, listing = _digest(target), sorted(p.name for p in work.iterdir())
    line = _refused(capsys, ["compile", *COMPILE_PATHS[path], "--out", "valid.txt"], "--out valid.txt")
    assert "is not a uatlab model file" in line and why in line, line
    assert _digest(target) == before
    assert sorted(p.name for p in work.iterdir()) == listing  # no work directory, lock or temporary file


@pytest.mark.parametrize("path", sorted(COMPILE_PATHS))
def test_compile_replaces_an_empty_file(work: Path, capsys, path: str) -> None:
    """An empty regular file at --out (``out=$(mktemp --suffix .safetensors)``) holds nothing to lose: compile
    writes its model there, as synth replaces an empty file. Its mode is kept (mktemp's 0600)."""
    from uatlab.models.io import MODEL_TAGS, file_format

    (work / "nt.jsonl").write_text(NEXT_TOKEN_LINES)
    target = work / "tmp.safetensors"
    target.write_bytes(b"")
    target.chmod(0o600)
    assert main(["compile", *COMPILE_PATHS[path], "--out", "tmp.safetensors", "--json"]) == 0
    capsys.readouterr()
    assert file_format(target) in MODEL_TAGS
    assert target.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("path", sorted(COMPILE_PATHS))
def test_compile_refuses_a_non_model_out_before_reading_the_data(work: Path, capsys, path: str) -> None:
    # data that would be an error of its own once read: the refusal of --out comes first
    data = COMPILE_PATHS[path][0]
    (work / data).write_text('{"tokens": ["a", "b"]}\n')
    (work / "valid.txt").write_text("mine\n")
    line = _refused(capsys, ["compile", *COMPILE_PATHS[path], "--out", "valid.txt"], "valid.txt")
    assert "is not a uatlab model file" in line and data not in line, line
    assert (work / "valid.txt").read_text() == "mine\n"


def test_compile_refuses_a_broken_link_at_out(work: Path, capsys) -> None:
    (work / "link.safetensors").symlink_to(work / "nowhere")
    line = _refused(capsys, ["compile", "s.jsonl", "--out", "link.safetensors"], "link.safetensors")
    assert "broken symbolic link" in line
    assert (work / "link.safetensors").is_symlink() and not (work / "nowhere").exists()


def test_compile_replaces_a_uatlab_model_of_any_kind(work: Path, capsys) -> None:
    from uatlab.models.io import NEXT_TOKEN_TAG, SEQ2SEQ_DEEP_TAG, file_format

    (work / "nt.jsonl").write_text(NEXT_TOKEN_LINES)
    model = work / "s.safetensors"  # a compiled token model (the fixture's)
    for path, tag in (("next-token", NEXT_TOKEN_TAG), ("deep", SEQ2SEQ_DEEP_TAG)):
        before = _digest(model)
        assert main(["compile", *COMPILE_PATHS[path], "--out", "s.safetensors", "--json"]) == 0
        capsys.readouterr()
        assert _digest(model) != before and file_format(model) == tag
    assert main(["compile", *COMPILE_PATHS["token"], "--out", "s.safetensors", "--json"]) == 0
    capsys.readouterr()
    assert file_format(model) == "uatlab-transformer-v1"


MEANWHILE = {  # what another program puts at --out while compile runs: (make it, check it is intact)
    "file": (lambda p: p.write_text("mine\n"), lambda p: p.read_text() == "mine\n"),
    "link-to-model": (lambda p: p.symlink_to("s.safetensors"), lambda p: p.is_symlink() and p.resolve().is_file()),
    "link-loop": (lambda p: p.symlink_to(p.name), lambda p: p.is_symlink()),
}


@pytest.mark.parametrize("path", sorted(COMPILE_PATHS))
@pytest.mark.parametrize("given", [True, False], ids=["--out", "default-out"])
@pytest.mark.parametrize("what", sorted(MEANWHILE))
def test_compile_refuses_a_file_put_at_out_while_it_ran(
    work: Path, capsys, monkeypatch, path: str, given: bool, what: str
) -> None:
    """--out is checked before the data is read and again when the finished model is renamed into place: a
    file (or a link) another program put there in between is the user's and stays as it is (the model is not
    saved)."""
    import uatlab.io_safety as io_safety

    (work / "nt.jsonl").write_text(NEXT_TOKEN_LINES)
    name = "valid.txt" if given else "model.safetensors"
    target = work / name
    make, intact = MEANWHILE[what]
    real = io_safety._guard_for  # the first thing `atomic_path` does with the path it writes
    model_before = _digest(work / "s.safetensors")

    def user_writes_meanwhile(p: Path):  # the moment compile starts writing its model
        if p.absolute() == target and not target.is_symlink() and not target.exists():
            make(target)
        return real(p)

    monkeypatch.setattr(io_safety, "_guard_for", user_writes_meanwhile)
    argv = ["compile", *COMPILE_PATHS[path], *(["--out", name] if given else []), "--json"]
    line = _refused(capsys, argv, name, "while this job ran")
    assert intact(target) and _digest(work / "s.safetensors") == model_before
    left = sorted(p.name for p in work.iterdir() if p.name.startswith(name))
    # no temporary or lock file; the token task keeps the data it read for --resume, and says where
    assert left == ([name, f"{name}.work"] if path == "token" else [name]), left
    if path == "token":
        assert f"{name}.work" in line and "--resume" in line, line


@pytest.mark.parametrize("target", ["s.jsonl", "nowhere.jsonl"], ids=["to-its-own-output", "dangling"])
def test_synth_refuses_a_symbolic_link_at_out(work: Path, capsys, target: str) -> None:
    """synth would replace the link itself with a regular file (not write through it): refused, like compile
    --out, even when the link names synth's own unedited output."""
    link = work / "l.jsonl"
    link.symlink_to(target)
    before = _digest(work / "s.jsonl")
    line = _refused(capsys, ["synth", "l.jsonl", *SYNTH, "--seed", "1", "--json"], "l.jsonl", "symbolic link")
    assert "left unchanged" in line
    assert link.is_symlink() and os.readlink(link) == target and _digest(work / "s.jsonl") == before
