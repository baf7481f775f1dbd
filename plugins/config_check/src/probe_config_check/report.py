"""Comparing two packs: each checker's compare side, then result.xlsx, summary.json and a table."""

from __future__ import annotations

import io
import json
import shutil
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from probe_core.api import CheckError, CheckRow, prepare_output_dir, ProbeWarning, Registry, replaced_whole, writing

from probe_config_check.pack import read_pack
from probe_config_check.safezip import safe_extract

SIDES = ("bench", "target")


@dataclass
class CheckerResult:
    """Every row one checker produced over all ranks, and its verdict."""

    name: str
    description: str
    rows: list[tuple[int, CheckRow]] = field(default_factory=list)

    @property
    def status(self) -> str:
        return "pass" if all(row.passed for _, row in self.rows) else "fail"

    @property
    def differences(self) -> list[dict[str, Any]]:
        return [{"rank": rank, "item": row.item, "bench": row.bench, "target": row.target, "note": row.note}
                for rank, row in self.rows if not row.passed]


def compare_data(registry: Registry, bench: dict[int, dict[str, Any]],
                 target: dict[int, dict[str, Any]]) -> list[CheckerResult]:
    """Run every registered checker that either pack has data for, rank by rank."""
    present = {name for side in (bench, target) for per_rank in side.values() for name in per_rank}
    for name in sorted(present - set(registry.checkers)):
        warnings.warn(f"the packs hold data of checker {name!r}, which is not installed or is disabled; "
                      "it is left out of the results", ProbeWarning, stacklevel=2)
    results = []
    for name, spec in registry.checkers.items():
        if name not in present:
            continue
        result = CheckerResult(name, spec.description)
        for rank in sorted(set(bench) | set(target)):
            b, t = bench.get(rank, {}).get(name), target.get(rank, {}).get(name)
            if b is None and t is None:
                continue
            if b is None or t is None:
                missing = "bench" if b is None else "target"
                result.rows.append((rank, CheckRow("(collected)", b is not None, t is not None, False,
                                                   f"not collected in the {missing} pack")))
                continue
            try:
                rows = list(spec.compare(b, t))
            except Exception as exc:
                rows = [CheckRow("(compare)", None, None, False,
                                 f"checker failed to compare: {type(exc).__name__}: {exc}")]
            result.rows.extend((rank, row) for row in rows)
        results.append(result)
    return results


def compare_packs(registry: Registry, bench_zip: str | Path, target_zip: str | Path,
                  out: str | Path, options: Mapping[str, Any] | None = None) -> list[CheckerResult]:
    """Unpack both packs (probe's or msprobe's) under ``out`` (bench/, target/), compare, write result.xlsx and
    summary.json; ``options`` are config.json's ``config_check`` section."""
    out = prepare_output_dir(out, flag="-o")
    packs = {side: read_pack(zip_path, options)[1]  # every member checked before anything is written
             for side, zip_path in zip(SIDES, (bench_zip, target_zip), strict=True)}
    results = compare_data(registry, packs["bench"], packs["target"])
    done: list[str] = []
    with writing(f"the check results in {out}", lambda: done):
        for side, zip_path in zip(SIDES, (bench_zip, target_zip), strict=True):
            _unpack(zip_path, out / side)
            done.append(f"{side}/")
        for name, write in (("summary.json", write_summary), ("result.xlsx", write_xlsx)):
            with replaced_whole(out / name) as tmp:
                write(results, tmp)
            done.append(name)
    return results


def _unpack(zip_path: str | Path, folder: Path) -> None:
    """``zip_path`` unpacked into ``folder``, replacing what an earlier run left there."""
    if folder.is_symlink() or folder.is_file():
        folder.unlink()
    elif folder.exists():
        shutil.rmtree(folder)
    safe_extract(zip_path, folder)


def summary(results: list[CheckerResult]) -> dict[str, Any]:
    return {"checkers": {r.name: {"status": r.status, "rows": len(r.rows), "differences": r.differences}
                         for r in results}}


def write_summary(results: list[CheckerResult], path: Path) -> None:
    path.write_text(json.dumps(summary(results), indent=2, default=str), encoding="utf-8")


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value, default=str, sort_keys=True)


def write_xlsx(results: list[CheckerResult], path: Path) -> None:
    """A summary sheet (pass/fail per checker) and one sheet per checker with every row."""
    try:
        from openpyxl import Workbook
        from openpyxl.styles import Font, PatternFill
    except ImportError:
        raise CheckError("writing result.xlsx needs openpyxl; pip install openpyxl") from None
    fills = {True: PatternFill("solid", fgColor="C6EFCE"), False: PatternFill("solid", fgColor="FFC7CE")}
    book = Workbook()
    sheet = book.active
    sheet.title = "summary"
    sheet.append(["checker", "status", "rows", "differences", "description"])
    for result in results:
        sheet.append([result.name, result.status, len(result.rows), len(result.differences), result.description])
        sheet.cell(sheet.max_row, 2).fill = fills[result.status == "pass"]
    for result in results:
        detail = book.create_sheet(result.name[:31])
        detail.append(["rank", "item", "bench", "target", "pass", "note"])
        for rank, row in result.rows:
            detail.append([rank, row.item, _cell(row.bench), _cell(row.target), row.passed, row.note])
            detail.cell(detail.max_row, 5).fill = fills[bool(row.passed)]
    for ws in book.worksheets:
        for cell in ws[1]:
            cell.font = Font(bold=True)
    buffer = io.BytesIO()
    book.save(buffer)  # built in memory: a full disk cannot leave openpyxl's zip open
    path.write_bytes(buffer.getvalue())


def print_table(results: list[CheckerResult], out: Path) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=f"config check: {escape(str(out))}")
    for column in ("checker", "status", "rows", "differences", "first difference"):
        table.add_column(column)
    for result in results:
        diffs = result.differences
        first = ""
        if diffs:
            d = diffs[0]
            first = f"rank {d['rank']} {d['item']}: {_short(d['bench'])} vs {_short(d['target'])}"
        colour = "green" if result.status == "pass" else "red"
        table.add_row(escape(result.name), f"[{colour}]{result.status}[/]", str(len(result.rows)), str(len(diffs)),
                      escape(first))
    Console().print(table)


def _short(value: Any, width: int = 40) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"
