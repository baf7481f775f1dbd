"""The streaming XLSX writer: what openpyxl reads back."""

from __future__ import annotations

import math
import warnings

import openpyxl

from probe_compare.xlsx import StreamingXlsx, column_letter


def test_values_fills_frozen_header_and_sheet_split(tmp_path):
    path = tmp_path / "r.xlsx"
    book = StreamingXlsx(path, ["name", "value", "flag", "note"], {"error": "FFC7CE", "warning": "FFEB9C"},
                         max_rows=3)
    rows = [["a<&>\x01", 1.5, True, None], ["b", math.nan, False, "x\ny"], ["c", math.inf, None, "warning"],
            ["d", 7, None, "error"]]
    for row in rows:
        book.write(row, row[3])
    book.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        workbook = openpyxl.load_workbook(path)
    assert workbook.sheetnames == ["compare_result", "compare_result2"]
    first, second = workbook["compare_result"], workbook["compare_result2"]
    assert first.freeze_panes == "A2" and second.freeze_panes == "A2"
    assert [c.value for c in first[1]] == ["name", "value", "flag", "note"] and first["A1"].font.b
    assert [c.value for c in first[2]] == ["a<&>", 1.5, True, None]
    assert [c.value for c in first[3]] == ["b", "nan", False, "x\ny"]
    assert [c.value for c in second[2]] == ["c", "inf", None, "warning"]
    assert second["A2"].fill.fgColor.rgb == "FFFFEB9C"
    assert second["B3"].fill.fgColor.rgb == "FFFFC7CE" and second["B3"].value == 7
    assert first["A2"].fill.fill_type is None


def test_column_letters():
    assert [column_letter(i) for i in (0, 25, 26, 27, 701, 702)] == ["A", "Z", "AA", "AB", "ZZ", "AAA"]
