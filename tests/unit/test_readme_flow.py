"""The README's ten-line Python flow and the getting-started page's flow run as written."""

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
    lines = ["Zorbia B-ORG", "praises O", "Quarkish B-MISC", "plan O", "to O", "import O", "Veltan B-MISC", "tea O", ""]
    lines += ["Alva B-PER", "Morrow I-PER", "", "KELDON B-LOC", "2031-04-09 O", ""]
    lines += ["The O", "Northern B-ORG", "Council I-ORG", "noted O", "on O", "Monday O", "it O", "agreed O", ""]
    (tmp_path / "train.txt").write_text("\n".join(lines))
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    first = [line.split()[1] for line in lines[: lines.index("")]]
    assert str([first]) in out and "certified_tokens" in out
    assert (tmp_path / "memorizer.safetensors").is_file()


def test_getting_started_flow_runs_as_written(tmp_path, monkeypatch, capsys):
    page = README.parent / "docs" / "getting-started.md"
    code = re.search(r"```python\n(.*?)```", page.read_text(), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "getting-started.md", "exec"), {})
    out = capsys.readouterr().out
    assert "[['B-PER', 'I-PER'], ['B-ORG', 'O', 'B-MISC', 'O']]" in out
    assert (tmp_path / "memorizer.safetensors").is_file()
