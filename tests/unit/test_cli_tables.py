"""The CLI's row tables: one column per name, one row per dict, values formatted, gaps filled."""

from rich.console import Console

from uatlab.cli.app import rows_table


def _text(table) -> str:
    console = Console(record=True, width=200)
    console.print(table)
    return console.export_text()


def test_rows_table_formats_each_value_and_fills_missing_columns():
    rows = [{"N": 16, "bits": 0.000123456, "reached": True}, {"N": 32, "reached": False}]
    table = rows_table("sweep", ["N", "bits", "reached"], rows, missing="—", header_style="bold")
    assert [c.header for c in table.columns] == ["N", "bits", "reached"]
    assert table.row_count == 2
    text = _text(table)
    lines = [ln for ln in text.splitlines() if "16" in ln or "32" in ln]
    assert "1.2346e-04" in lines[0] and "True" in lines[0]
    assert "—" in lines[1] and "False" in lines[1] and "1.2346e-04" not in lines[1]


def test_rows_table_justifies_every_column_as_asked():
    table = rows_table("t", ["a", "b"], [{"a": 1, "b": 2}], justify="right")
    assert {c.justify for c in table.columns} == {"right"}
