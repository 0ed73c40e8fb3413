"""The command line's first moments and its files: Ctrl-C before main() runs, one-line errors at any terminal
width, model and checkpoint files that leave nothing behind when interrupted and respect the umask."""

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import safetensors.torch
import torch

from uatlab.cli import INTERRUPTED
from uatlab.models import Transformer, TransformerConfig
from uatlab.models import io as model_io
from uatlab.training.checkpoint import save_checkpoint


def _script(tmp_path: Path, body: str) -> Path:
    """A script named like the ``uatlab`` console script (the name is how the CLI knows it is the command)."""
    path = tmp_path / "uatlab"
    path.write_text("import os, signal, sys\n" + body)
    return path


def test_ctrl_c_after_the_cli_module_loads_but_before_main_is_one_line(tmp_path):
    # The script's imports are still running when the interrupt arrives (as with Ctrl-C in the first ~0.1 s).
    script = _script(
        tmp_path,
        "from uatlab.cli import main\nos.kill(os.getpid(), signal.SIGINT)\nimport json  # noqa\nsys.exit(main())\n",
    )
    proc = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr == f"{INTERRUPTED}\n"
    assert proc.stdout == ""


def test_importing_the_cli_as_a_library_leaves_ctrl_c_alone():
    code = "import signal, uatlab.cli; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    assert out.strip() == "True"


@pytest.mark.parametrize("columns", ["20", "300"])
def test_an_error_is_one_line_at_any_terminal_width(tmp_path, columns):
    missing = tmp_path / ("a-very-long-folder-name-" * 6) / "sentences-that-are-not-there.txt"
    env = {**os.environ, "COLUMNS": columns, "TERM": "xterm-256color", "FORCE_COLOR": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "uatlab", "compile", str(missing), "--out", str(tmp_path / "m.safetensors")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and str(missing) in lines[0], proc.stderr


def test_a_warning_is_one_line_at_a_narrow_terminal(tmp_path):
    data = tmp_path / "data.txt"
    data.write_text("".join(f"w{i} O\nv{i} B-PER\n\n" for i in range(6)))
    env = {**os.environ, "COLUMNS": "30"}
    argv = ["train", str(data), "--out", str(tmp_path / "run"), "--epochs", "1", "--dim", "8", "--json"]
    proc = subprocess.run([sys.executable, "-m", "uatlab", *argv], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "warmup" in line or "warm-up" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: the warm-up (200 steps)"), proc.stderr
    assert warnings[0].rstrip().endswith("never reaches its peak 0.003"), proc.stderr


def _tiny_model() -> Transformer:
    cfg = TransformerConfig(d_model=4, n_layers=1, n_heads=1, head_dim=2, ff_width=3, vocab_size=5, num_labels=2)
    return Transformer(cfg)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_model_and_checkpoint_files_follow_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        model_io.save(_tiny_model(), tmp_path / "m.safetensors")
        save_checkpoint({"step": 1, "w": torch.zeros(2)}, tmp_path / "checkpoint.pt")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "m.safetensors") == 0o666 & ~umask
    assert _mode(tmp_path / "checkpoint.pt") == 0o666 & ~umask


def test_replacing_a_file_keeps_its_permissions(tmp_path):
    target = tmp_path / "m.safetensors"
    model_io.save(_tiny_model(), target)
    target.chmod(0o640)
    model_io.save(_tiny_model(), target)
    assert _mode(target) == 0o640


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, OSError])
def test_an_interrupted_save_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch, interrupt):
    target = tmp_path / "m.safetensors"
    model_io.save(_tiny_model(), target)
    before = target.read_bytes()

    def half_written(tensors, filename, metadata=None):
        Path(filename).write_bytes(b"half a model")
        raise interrupt()

    monkeypatch.setattr(safetensors.torch, "save_file", half_written)  # the writer every model file goes through
    with pytest.raises(interrupt):
        model_io.save(_tiny_model(), target)
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.safetensors"]


@pytest.mark.parametrize(
    ("argv", "text"),
    [
        (["approx", "truncated-linear", "--help"], "y values sampled on [a−(b−a), b+(b−a)]:"),
        (["experiment", "attention-range", "--help"], "(needs uatlab[ray])"),
        (
            ["certify", "--help"],
            "correct_tokens counts the tokens whose label is the top logit of the float64 reference",
        ),
    ],
)
def test_help_texts_are_printed_as_written(argv, text, capsys):
    """Brackets in a help text are text, not markup (rich would drop '[ray]' and '[a−(b−a), b+(b−a)]')."""
    from uatlab.cli import main

    assert main([*argv]) == 0
    out = " ".join(capsys.readouterr().out.split())  # help is wrapped to the terminal: compare words
    assert text in out


def test_loading_a_model_opens_its_file_once(tmp_path, monkeypatch):
    target = tmp_path / "m.safetensors"
    saved = _tiny_model()
    model_io.save(saved, target)
    opened = []
    real = model_io.safe_open

    def counting(path, framework):
        opened.append(path)
        return real(path, framework=framework)

    monkeypatch.setattr(model_io, "safe_open", counting)
    model = model_io.load(target)
    assert opened == [str(target)]
    assert all(torch.equal(v, saved.state_dict()[k]) for k, v in model.state_dict().items())


def test_atomic_dir_fsyncs_each_file_once_before_the_rename_and_the_parent_after(tmp_path, monkeypatch):
    """Durability of a folder written with `atomic_dir`: each file's data and the new folder reach the disk before
    the folder is renamed into place, the parent folder after; no file is fsynced twice."""
    from uatlab.io_safety import atomic_dir, atomic_path, write_text_atomic

    events: list[tuple[str, int]] = []
    real_fsync, real_rename = os.fsync, os.rename
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append(("fsync", os.fstat(fd).st_ino)), real_fsync(fd))[1])
    monkeypatch.setattr(os, "rename", lambda a, b: (events.append(("rename", 0)), real_rename(a, b))[1])
    with atomic_dir(tmp_path / "out") as tmp:
        write_text_atomic(tmp / "a.txt", "a")
        with atomic_path(tmp / "b.bin") as b:
            b.write_bytes(b"b")
    out = tmp_path / "out"
    files = [(out / name).stat().st_ino for name in ("a.txt", "b.bin")]
    synced = [ino for kind, ino in events if kind == "fsync"]
    assert [synced.count(ino) for ino in files] == [1, 1], events
    renamed = events.index(("rename", 0))
    before = {ino for kind, ino in events[:renamed] if kind == "fsync"}
    assert set(files) | {out.stat().st_ino} <= before, events  # the files and the new folder itself
    assert ("fsync", tmp_path.stat().st_ino) in events[renamed:], events  # the folder that now lists it


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_atomic_dir_gives_a_new_folders_permissions_and_leaves_nothing_when_it_fails(tmp_path, umask):
    from uatlab.io_safety import atomic_dir, write_text_atomic

    old = os.umask(umask)
    try:
        with atomic_dir(tmp_path / "out") as tmp:
            write_text_atomic(tmp / "a.txt", "a")
        with pytest.raises(RuntimeError), atomic_dir(tmp_path / "failed") as tmp:
            write_text_atomic(tmp / "a.txt", "a")
            raise RuntimeError("the writer failed")
        with pytest.raises(FileExistsError), atomic_dir(tmp_path / "out"):
            pass
    finally:
        os.umask(old)
    assert _mode(tmp_path / "out") == 0o777 & ~umask and _mode(tmp_path / "out" / "a.txt") == 0o666 & ~umask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert (tmp_path / "out" / "a.txt").read_text() == "a"
