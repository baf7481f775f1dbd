"""What ``probe compare`` writes: msprobe's CSV/XLSX layout, summary.json, the rich summary table.

Columns follow msprobe's result headers (so existing post-processing keeps
working): the data mode says which of msprobe's fixed columns it shows, its
comparators fill the metric columns, third-party columns come last.
Rows stream to disk: the CSV through :mod:`csv`, the XLSX through
:class:`~probe_compare.xlsx.StreamingXlsx` (header frozen, error rows
red, warning rows yellow; a sheet holds at most :data:`XLSX_MAX_ROWS` rows,
more go on ``compare_result2``, ...).
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import pickle
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probe_compare.comparator import LoadedComparator
from probe_compare.rules import ERROR, WARNING
from probe_core.api import (DataMode, OutputError, SHOWN_ROWS, abridged, create_exclusive, float_texts, gaps,
                            native_join_rows, numbers_json, spans, write_new, writing)


BASIC_INFO = ("NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
              "NPU Requires_grad", "Bench Requires_grad")
SUMMARY_INFO = ("NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean", "Bench l2norm")
EXTRACT_INFO = ("Requires_grad Consistent", "Result", "Err_message")
STACK = "NPU_Stack_Info"
DATA_NAME = "Data_name"
NA = "N/A"
XLSX_MAX_ROWS = 1_048_000
FILLS = {ERROR: "FFC7CE", WARNING: "FFEB9C"}


def header(mode: DataMode, comparators: Sequence[LoadedComparator]) -> list[str]:
    """The column names for a compare in ``mode`` with these comparators (msprobe's order, extras last)."""
    metrics = [c for comp in comparators if comp.placement == "metrics" for c in comp.columns]
    extras = [c for comp in comparators if comp.placement == "extra" for c in comp.columns]
    columns = list(BASIC_INFO) + metrics
    if mode.statistics_columns:
        columns += SUMMARY_INFO
    columns += list(EXTRACT_INFO) + [STACK]
    if mode.data_name_column:
        columns.append(DATA_NAME)
    seen: set[str] = set()
    return [c for c in columns + extras if not (c in seen or seen.add(c))]


def timestamp() -> str:
    """The local time as msprobe stamps its result files: 14 digits, ``%Y%m%d%H%M%S``."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime())


def result_stem(folder: Path, rank: int | None, stamp: str) -> Path:
    """``folder/compare_result_rank{R}_{stamp}`` (``compare_result_rank_{stamp}`` for a dump without a
    rank): msprobe's name, which its ``merge_result`` and ``probe merge-result`` read back."""
    return folder / f"compare_result_rank{'' if rank is None else rank}_{stamp}"


def format_value(value: Any, percent: bool = False) -> Any:
    """A cell value: ``N/A`` for missing, percent strings where asked, shapes as ``[a, b]``."""
    if value is None or value is NA:
        return NA
    if isinstance(value, tuple):
        return str(list(value))
    if percent and isinstance(value, float):
        return f"{value * 100}%" if not math.isnan(value) else "nan%"
    return value


class RowSpool:
    """Rows of a rank pair waiting for the job's verdicts: pickled a batch of entries at a time to a private
    file beside the results, read back once by :func:`probe_compare.rank.write_rank`, then removed.
    probe reads only the spools it wrote itself in this run.

    Each entry is spooled as (key, each row's result, its rows): the rows as CSV text already formatted
    (:func:`csv_texts`; written as they are unless the job's verdicts change a row), or as values when the
    XLSX, which types its cells, is written too. A run of entries whose rows all pass is one item: (their
    keys, their numbers of rows, their texts)."""

    BATCH = 256  # entries per pickle (at least)

    def __init__(self, stem: Path, done: Callable[[], list[str]] | None = None) -> None:
        #: what a failed write says (``done``: the result files written completely so far)
        self._writing = (f"the rows of {stem.name} (a temporary file in {stem.parent})", done)
        with writing(*self._writing):
            handle, name = tempfile.mkstemp(prefix=f".{stem.name}.", suffix=".rows", dir=stem.parent)
        self.path = Path(name)
        self._file = os.fdopen(handle, "wb")
        self._batch: list[tuple[Any, tuple[Any, ...], str | list[Any]]] = []
        self._entries = 0  # entries in the batch (a run holds many)

    def add(self, key: int | tuple[int, ...], results: tuple[Any, ...], rows: str | list[Any]) -> None:
        self._batch.append((key, results, rows))
        self._entries += len(key) if type(key) is tuple else 1
        if self._entries >= self.BATCH:
            self._write(self._flush)

    def _flush(self) -> None:
        if self._batch:
            pickle.dump(self._batch, self._file, protocol=pickle.HIGHEST_PROTOCOL)
            self._batch, self._entries = [], 0

    def close(self) -> None:
        if not self._file.closed:
            self._write(self._flush, self._file.close)

    def _write(self, *steps: Callable[[], None]) -> None:
        """Run ``steps``; a write that fails (a full disk) removes the spool and is one OutputError line."""
        try:
            with writing(*self._writing):
                for step in steps:
                    step()
        except OutputError:
            self.discard()
            raise

    def discard(self) -> None:
        self._batch = []
        try:
            self._file.close()
        except OSError:  # the write that failed (a full disk) fails again: the spool goes anyway
            pass
        self.path.unlink(missing_ok=True)

    @staticmethod
    def read(path: Path) -> Iterator[tuple[int, tuple[str, ...], str | list[list[Any]]]]:
        with open(path, "rb") as file:
            while True:
                try:
                    yield from pickle.load(file)  # noqa: S301 - the spool this run wrote, in a private temp file
                except EOFError:
                    return


def csv_texts(entries: Sequence[Sequence[Sequence[Any]]]) -> list[str]:
    """Each entry's rows as the result CSV holds them (formatted in one buffer for the lot)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    ends = []
    for rows in entries:
        writer.writerows(rows)
        ends.append(buffer.tell())
    text = buffer.getvalue()
    return [text[start:end] for start, end in zip([0, *ends], ends)]


def csv_field(text: str) -> str:
    """One text cell of a row as :mod:`csv`'s writer writes it (the default dialect: quoted, with quotes
    doubled, when it holds a ',', a '"' or a line break)."""
    return '"' + text.replace('"', '""') + '"' if needs_quoting(text) else text


def needs_quoting(text: str) -> bool:
    """Whether :func:`csv_field` quotes ``text`` (or a cell of it, for texts joined by a character it does
    not quote)."""
    return "," in text or '"' in text or "\n" in text or "\r" in text  # four scans: ~100x a regex's speed


@dataclass(frozen=True, slots=True)
class Numbers:
    """``width`` CSV columns of numbers (floats and ints, no bools), row-major: ``values[r * width + k]`` is
    row r's cell k, each written as ``repr`` of it, with ``suffix`` after it (``12.5%``), or as ``zero`` for
    a value equal to zero when given. :func:`join_rows` writes them without a str per number."""

    values: list
    width: int = 1
    suffix: str = ""
    zero: str | None = None

    def columns(self) -> list[list[str]]:
        """The cells as :func:`join_rows` writes them, column by column."""
        texts = float_texts(self.values, self.suffix, self.zero)
        return [texts[k::self.width] for k in range(self.width)]


def join_rows(columns: list[list[str] | Numbers], counts: list[int]) -> list[str]:
    """The CSV text of each ``counts`` run of rows whose cells ``columns`` hold, column by column (CSV fields
    already, or :class:`Numbers`): a row's cells joined by ``,``, each row ended by ``\r\n``. In C
    (``probe_core.api.native_join_rows``) when it is built and every text cell is ASCII."""
    if native_join_rows is not None:
        try:
            return native_join_rows([column if column.__class__ is list else
                                     (numbers_json(column.values), column.values, column.width, column.suffix,
                                      column.zero) for column in columns], counts)
        except (TypeError, ValueError, OverflowError):  # a cell beyond ASCII, an int beyond 64 bits: joined here
            pass
    cells = [part for column in columns
             for part in ([column] if column.__class__ is list else column.columns())]  # type: ignore[union-attr]
    lines = list(map(",".join, zip(*cells)))
    texts, end = [], 0
    for count in counts:
        start, end = end, end + count
        texts.append("\r\n".join(lines[start:end]) + "\r\n")
    return texts


def csv_rows(text: str) -> list[list[Any]]:
    """The rows of :func:`csv_texts`'s text, as strings (written again, they give the same text)."""
    return list(csv.reader(io.StringIO(text, newline="")))


class RowWriter:
    """Streams result rows to ``{stem}.csv`` and (optionally) ``{stem}.xlsx``, each a new file: where another
    run holds the name (two compares started in the same second), ``{stem}_1.csv``, ... (:attr:`csv_path` and
    :attr:`xlsx_path` are the files written)."""

    def __init__(self, stem: Path, columns: Sequence[str], xlsx: bool = True) -> None:
        self.columns = list(columns)
        self.result_at = self.columns.index("Result")
        self.csv_path, self._csv_file = create_exclusive(stem.parent, f"{stem.name}.csv", newline="",
                                                         encoding="utf-8")
        self._csv = csv.writer(self._csv_file)
        self._csv.writerow(self.columns)
        self._book = None
        if xlsx:
            from probe_compare.xlsx import StreamingXlsx  # (zipfile and its threading: only with --xlsx)

            self._book = StreamingXlsx(self.csv_path.with_suffix(".xlsx"), self.columns, FILLS,
                                       max_rows=XLSX_MAX_ROWS)
        self.xlsx_path = self._book.path if self._book is not None else None

    def write(self, row: list[Any]) -> None:
        self._csv.writerow(row)
        if self._book is not None:
            self._book.write(row, row[self.result_at])

    def write_text(self, text: str) -> None:
        """Rows formatted by :func:`csv_texts` (the CSV alone is written)."""
        assert self._book is None, "rows for the XLSX too are written as values"
        self._csv_file.write(text)

    def write_rows(self, rows: Sequence[list[Any]]) -> None:
        self._csv.writerows(rows)
        if self._book is not None:
            for row in rows:
                self._book.write(row, row[self.result_at])

    def close(self) -> None:
        self._csv_file.close()
        if self._book is not None:
            self._book.close()
            self._book = None


def log_outcome(name: str, result: str, rows: Sequence[Sequence[Any]], columns: Sequence[str]) -> None:
    """-tensor_log: one line per compared entry: its result, rows and the first metric of its first row
    that has one (``rows`` as written, with the job's verdicts)."""
    metric = columns[len(BASIC_INFO)] if len(columns) > len(BASIC_INFO) else None
    at = columns.index(metric) if metric else None
    values = [row[at] for row in rows if at is not None and row[at] != NA]
    shown = f", {metric} {values[0]}" if values else ""
    print(f"[compare] {name}: {result} ({len(rows)} tensors{shown})", flush=True)


def write_diff_analyze(out: Path, results: Sequence[Any]) -> Path:
    """-da: ``diff_analyze_{ns}.json``: ``{"rank_{R}": [first divergent entry]}`` per compared rank."""
    found: dict[str, list[dict[str, Any]]] = {}
    for result in results:
        rank = result.label.split("_")[0].removeprefix("rank")
        if result.first_divergence:
            found.setdefault(f"rank_{rank}", []).append(result.first_divergence)
    return write_new(out, f"diff_analyze_{time.time_ns()}.json", json.dumps(found, indent=2, default=str))


def write_summary(out: Path, summary: dict[str, Any]) -> Path:
    """``out/summary.json``, or ``summary_1.json``, ... when another run's summary is there: never over it."""
    return write_new(out, "summary.json", json.dumps(summary, indent=1, default=str))


def print_summary(summary: dict[str, Any], console=None) -> None:
    """The table a user reads first: counts per result, unmatched entries, the first divergent entry."""
    from rich.console import Console
    from rich.markup import escape

    from probe_core.api import print_table

    console = console or Console()
    keys = ("pass", "warning", "error", "unmatched")
    columns = ("rank / step", *keys, "first divergent entry")
    ranks, first = summary["ranks"], summary["first_divergence"]
    shown = abridged(len(ranks), [i for i, rank in enumerate(ranks) if first and rank["label"] == first.get("rank")])
    skipped = dict(gaps(shown, len(ranks)))
    rows, row_styles = [], []
    for index in [*shown, len(ranks)]:
        if index in skipped:
            rows.append([f"... {skipped[index]} more", *[""] * 5])
            row_styles.append("grey50")
        if index == len(ranks):
            break
        rank = ranks[index]
        counts, found = rank["counts"], rank["first_divergence"]
        rows.append([rank["label"], *(str(counts[k]) for k in keys), found["name"] if found else "-"])
        row_styles.append("")
    if skipped:
        rows.append([f"all {len(ranks)}", *(str(summary["counts"].get(k, 0)) for k in keys), ""])
        row_styles.append("bold")
    print_table(console, f"probe compare ({summary['mode']} mode)", columns, rows,
                styles={"pass": "green", "warning": "yellow", "error": "red", "unmatched": "grey50"},
                justify={k: "right" for k in keys}, row_styles=row_styles)
    for path in summary.get("partial") or ():
        console.print(f"[yellow]partial:[/] {escape(str(path))} is an interrupted step: entries after its last "
                      "record are missing (unmatched on the other side)", highlight=False, soft_wrap=True)
    if first:
        where = f" (step {first['step']}, rank {first['rank_id']})" if "step" in first else ""
        name, reason = escape(first["name"]), escape(first["reason"])
        causes = _causes(summary, first)
        if causes:  # the cause first, then the effect
            console.print(f"[bold]First divergence{where}:[/] [red]{name}[/] is called differently: "
                          f"{escape(causes)}", highlight=False, soft_wrap=True)
            console.print(f"  effect: {reason}", highlight=False, soft_wrap=True)
        else:
            console.print(f"[bold]First divergence{where}:[/] [red]{name}[/] ({reason})", highlight=False,
                          soft_wrap=True)
        concurrent: dict[str, list[int]] = {}
        for other in first.get("concurrent") or ():
            concurrent.setdefault(other["name"], []).append(other["rank"])
        for name, others in concurrent.items():
            console.print(f"  at the same time on rank{'s' if len(others) > 1 else ''} {spans(others)}: {name}",
                          highlight=False, markup=False)
        if first.get("module"):
            console.print(f"  module: {first['module']}", highlight=False, markup=False)
        from probe_core.api import parse_stack

        frames = parse_stack(first.get("stack"))
        for frame in ([f for f in frames if f.user] or frames)[:3]:  # innermost frames of the user's code first
            console.print(f"  {frame.one_line()}", highlight=False, soft_wrap=True, markup=False)
    else:
        console.print("[green]No divergent entry: no entry adds more error than its inputs and precision explain.[/]")
    unmatched: dict[tuple[str, tuple[str, ...]], list[str]] = {}  # the same names on many ranks: one line
    for rank in ranks:
        for side in ("target", "bench"):
            if rank["unmatched"][side]:
                unmatched.setdefault((side, tuple(rank["unmatched"][side])), []).append(rank["label"])
    for n, ((side, names), labels) in enumerate(unmatched.items()):
        if n == SHOWN_ROWS:
            console.print(f"[grey50]... and {len(unmatched) - n} more lists of unmatched entries (summary.json)[/]")
            break
        who = labels[0] if len(labels) == 1 else f"{labels[0]} and {len(labels) - 1} more"
        listed = ", ".join(names[:5]) + (f", ... ({len(names)} in all)" if len(names) > 5 else "")
        console.print(f"[grey50]{escape(who)}: only in {side}: {escape(listed)}[/]", highlight=False)
    console.print(f"Results in {summary['output']}: {written_files(summary)}", highlight=False, markup=False,
                  soft_wrap=True)


def _causes(summary: dict[str, Any], first: dict[str, Any]) -> str:
    """The first divergent entry's arguments that differ (read from its rank and step's result CSV), ``""`` for
    none."""
    from probe_core.api import csv_argument_changes

    item = next((r for r in summary["ranks"] if r.get("label") == first.get("rank") and r.get("csv")), None)
    if item is None:
        return ""
    return "; ".join(change.text() for change in csv_argument_changes(item["csv"], first["name"]))


def written_files(summary: dict[str, Any]) -> str:
    """The files this run wrote, as the summary names them, relative to its output folder (a long job: the
    summary file and how many result files it lists)."""
    out = Path(summary["output"])
    results = [path for rank in summary["ranks"] for path in (rank.get("csv"), rank.get("xlsx")) if path]
    shown = [summary.get("summary_file"), summary.get("diff_analyze")]
    if len(results) > SHOWN_ROWS:
        return ", ".join(_relative(p, out) for p in shown if p) + f" and the {len(results)} result files it lists"
    return ", ".join(_relative(p, out) for p in [*shown, *results] if p)


def _relative(path: str, out: Path) -> str:
    try:
        return str(Path(path).relative_to(out))
    except ValueError:
        return path
