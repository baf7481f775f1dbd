"""``probe merge-result``: per-rank compare results merged into one sheet per metric (msprobe's merge_result)."""

from __future__ import annotations

from pathlib import Path

import openpyxl

from .dumps import tiny_model_entries, write_dump
from .helpers import run_probe

CONFIG = "api:\n  - Functional.linear\ncompare_index:\n  - Max diff\n  - MaxRelativeErr\n"


def two_rank_results(tmp_path: Path, *flags: str) -> Path:
    for side, scale in (("t", 1.01), ("b", 1.0)):
        for rank in (0, 1):
            write_dump(tmp_path / side / "step0" / f"rank{rank}", tiny_model_entries(scale if rank else 1.0))
    done = run_probe("compare", tmp_path / "t", tmp_path / "b", "-o", tmp_path / "out", "--quiet", *flags)
    assert done.returncode == 0, done.stderr
    return tmp_path / "out"


def sheets(path: Path) -> dict[str, list[list]]:
    book = openpyxl.load_workbook(path)
    return {ws.title: [[c.value for c in row] for row in ws.iter_rows()] for ws in book}


def test_merges_csv_and_xlsx_results(tmp_path):
    (tmp_path / "merge.yaml").write_text(CONFIG)
    for flags in ((), ("--xlsx",)):
        out = two_rank_results(tmp_path / f"run{len(flags)}", *flags)
        done = run_probe("merge-result", "-i", out, "-o", tmp_path / f"merged{len(flags)}", "-config",
                         tmp_path / "merge.yaml")
        assert done.returncode == 0, done.stderr
        (merged,) = (tmp_path / f"merged{len(flags)}").glob("multi_ranks_compare_merge_*.xlsx")
        tables = sheets(merged)
        assert list(tables) == ["Max diff", "MaxRelativeErr"]
        rows = {row[0]: row[1:] for row in tables["Max diff"]}
        assert rows["NPU Name"] == ["rank0", "rank1"]
        assert set(rows) - {"NPU Name"} == {f"Functional.linear.{i}.forward.{io}" for i in (0, 1)
                                           for io in ("input.0", "input.1", "output.0")}
        assert rows["Functional.linear.0.forward.output.0"][0] == 0  # rank 0 is the same run
        assert rows["Functional.linear.1.forward.input.0"][1] != 0  # rank 1's fc1 differs, fc2 sees it


def test_bad_inputs_are_one_line_errors(tmp_path):
    out = two_rank_results(tmp_path)
    config = tmp_path / "merge.yaml"
    config.write_text("compare_index: [Max diff]\n")
    done = run_probe("merge-result", "-i", out, "-o", tmp_path / "m", "-config", config)
    assert done.returncode == 2 and "'api' is missing" in done.stderr and "Traceback" not in done.stderr
    config.write_text("api: [Functional.linear]\ncompare_index: [Cosine]\n")
    done = run_probe("merge-result", "-i", out, "-o", tmp_path / "m", "-config", config)
    assert done.returncode == 2 and "Cosine" in done.stderr and "Max diff" in done.stderr
    for path in out.glob("compare_result_rank1_*"):
        path.unlink()
    config.write_text(CONFIG)
    done = run_probe("merge-result", "-i", out, "-o", tmp_path / "m", "-config", config)
    assert done.returncode == 2 and "two ranks or more" in done.stderr
