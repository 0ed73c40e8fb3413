"""The README's ten-line Python flow runs as written (on a small CoNLL file standing in for train.txt)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def _flow() -> str:
    text = README.read_text()
    section = text.split("## Python in ten lines", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_flow_runs_as_written(tmp_path, monkeypatch, capsys):
    code = _flow()
    assert len(code.strip().splitlines()) <= 10
    lines = ["EU B-ORG", "rejects O", "German B-MISC", "call O", "to O", "boycott O", "British B-MISC", "lamb O", ""]
    lines += ["Peter B-PER", "Blackburn I-PER", "", "BRUSSELS B-LOC", "1996-08-22 O", ""]
    lines += ["The O", "European B-ORG", "Commission I-ORG", "said O", "on O", "Thursday O", "it O", "disagreed O", ""]
    (tmp_path / "train.txt").write_text("\n".join(lines))
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "['B-ORG', 'O', 'B-MISC', 'O']" in out and "certified_tokens" in out
    assert (tmp_path / "memorizer.safetensors").is_file()
