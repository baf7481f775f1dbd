"""Rows as the CSV/XLSX hold them: an entry's compared rows (:func:`render_rows`) and, a column at a time,
the rows of the plain entries the columnar path compared (:func:`render_plains`); both give the same cells.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from itertools import chain
from typing import Any

from probe_compare import output
from probe_compare.columnar import Plain, Rows
from probe_compare.entries import EntryOutcome
from probe_compare.rules import PASS
from probe_core.api import DumpEntry, float_texts


@lru_cache(maxsize=8)
def _layout(columns: tuple[str, ...]) -> tuple[tuple[str, ...], bool, bool, tuple[str, ...]]:
    """Split :func:`output.header`'s columns into (metric columns, has statistics, has Data_name, extras)."""
    metrics_end = columns.index("NPU max") if "NPU max" in columns else columns.index("Requires_grad Consistent")
    tail = columns.index(output.STACK) + 1
    has_data_name = tail < len(columns) and columns[tail] == output.DATA_NAME
    return (columns[len(output.BASIC_INFO):metrics_end], "NPU max" in columns, has_data_name,
            columns[tail + has_data_name:])


@lru_cache(maxsize=8)
def _metric_plan(metric_cols: tuple[str, ...], percent: frozenset[str]) -> tuple[tuple[str, bool], ...]:
    return tuple((col, col in percent) for col in metric_cols)


@lru_cache(maxsize=4096)
def _shape_text(shape: tuple[int, ...]) -> str:
    return str(list(shape))


def render_rows(outcome: EntryOutcome, columns: Sequence[str], percent: frozenset[str]) -> Iterator[list[Any]]:
    """The CSV/XLSX rows of one entry, values in ``columns`` order (``N/A`` for missing values)."""
    metric_cols, has_stats, has_data_name, extra_cols = _layout(tuple(columns))
    plan = _metric_plan(metric_cols, percent)
    stack_entry = outcome.npu_entry or outcome.bench_entry
    stack = str(list(stack_entry.stack)) if stack_entry is not None and stack_entry.stack else None
    na = output.NA
    no_stats = (None,) * 4
    first = True
    for row in outcome.rows:
        if not row.shown:  # a row the rules do not write (msprobe's: a tensor on the bench side only)
            continue
        npu, bench, metrics = row.npu, row.bench, row.metrics
        if npu is not None:
            values = [npu.name, None, npu.dtype, None, None if npu.shape is None else _shape_text(npu.shape), None,
                      npu.requires_grad, None]
        else:
            values = [None] * 8
        if bench is not None:
            values[1], values[3], values[7] = bench.name, bench.dtype, bench.requires_grad
            values[5] = None if bench.shape is None else _shape_text(bench.shape)
        get = metrics.get
        for col, is_percent in plan:
            value = get(col)
            if is_percent and value.__class__ is float:
                value = "0%" if value == 0.0 else output.format_value(value, True)
            values.append(value)
        if has_stats:
            values += npu.stats if npu is not None else no_stats
            values += bench.stats if bench is not None else no_stats
        n_grad, b_grad = values[6], values[7]
        values += (None if n_grad is None or b_grad is None else n_grad == b_grad, row.result,
                   row.err_message or None, stack if first else None)
        first = False
        if has_data_name:
            names = [leaf.data_name if leaf is not None else None for leaf in (npu, bench)]
            values.append(str([n or "-1" for n in names]))
        for col in extra_cols:
            value = get(col)
            values.append(output.format_value(value, True) if col in percent and type(value) is float else value)
        yield [na if v is None else v for v in values]


def render_plains(entries: Sequence[tuple[DumpEntry, Plain]], columns: Sequence[str], percent: frozenset[str],
                  text: bool) -> list[Any]:
    """:func:`render_rows` of entries the columnar path compared (every row passes; both sides of a row have
    the same dtype, shape and requires_grad; every statistic is a number), built a column at a time over all
    their rows. Per entry: its rows as the CSV holds them (``text``: what :func:`output.csv_texts` makes of
    them; the numbers' columns as :class:`output.Numbers`, written as the rows are joined, the cells from dtype
    to requires_grad kept per signature), or as value lists (for the XLSX)."""
    if not entries:
        return []
    metric_cols, has_stats, has_data_name, extra_cols = _layout(tuple(columns))
    na = output.NA
    plains = [plain for _, plain in entries]
    count = sum(plain.count for plain in plains)
    names = ([plain.name + suffix for plain in plains for suffix in plain.rows.suffixes],
             [plain.bench_name + suffix for plain in plains for suffix in plain.rows.suffixes])
    if text:
        cells: list[Any] = [*map(_csv_fields, names), [cell for plain in plains for cell in _kept_cells(plain.rows)]]
    else:
        dtypes = [dtype for plain in plains for dtype in plain.rows.dtypes]
        shapes = [_shape_text(shape) for plain in plains for shape in plain.rows.shapes]
        grads = [na if grad is None else grad for plain in plains for grad in plain.rows.grads]
        cells = [*names, dtypes, dtypes, shapes, shapes, grads, grads]
    metrics = _plain_columns(plains, count)
    for col in metric_cols:
        cells.append(_metric_cells(metrics.get(col), col in percent, True, text, count))
    if has_stats:
        for side in (0, 1):
            stats = list(chain.from_iterable(plain.stats[side] for plain in plains))
            if text:
                cells.append(output.Numbers(stats, 4))
            else:
                cells += [stats[k::4] for k in range(4)]
    stacks: list[Any] = []
    for npu, plain in entries:
        stacks.append(_stack_cell(npu.stack, text) if npu.stack else na)
        stacks += [na] * (plain.count - 1)
    if text:
        cells += [[cell for plain in plains for cell in _kept_cells(plain.rows, True)], stacks]
    else:
        cells += [[na if grad is na else True for grad in grads], [PASS] * count, [na] * count, stacks]
    if has_data_name:
        data_name = str(["-1", "-1"])
        cells.append([output.csv_field(data_name) if text else data_name] * count)
    for col in extra_cols:
        cells.append(_metric_cells(metrics.get(col), col in percent, False, text, count))
    if text:
        return output.join_rows(cells, [plain.count for plain in plains])
    out, end = [], 0
    rows = list(map(list, zip(*cells)))
    for plain in plains:
        start, end = end, end + plain.count
        out.append(rows[start:end])
    return out


def _kept_cells(rows: Rows, tail: bool = False) -> tuple[str, ...]:
    """CSV text of each row of a signature: the cells from NPU Dtype to Bench Requires_grad, or (``tail``)
    those from Requires_grad Consistent to Err_message (a plain row passes), kept with the rows."""
    if rows.text is None:
        na = output.NA
        middle, end = [], []
        for dtype, shape, grad in zip(rows.dtypes, rows.shapes, rows.grads):
            dtype_cell, shape_cell = _text_field(dtype), _shape_field(shape)
            grad_cell = na if grad is None else str(grad)
            middle.append(",".join((dtype_cell, dtype_cell, shape_cell, shape_cell, grad_cell, grad_cell)))
            end.append(",".join((na if grad is None else "True", PASS, na)))
        rows.text = (tuple(middle), tuple(end))
    return rows.text[tail]


def _plain_columns(plains: Sequence[Plain], count: int) -> Mapping[str, Sequence[Any]]:
    """The metric columns of the rows of ``plains`` by name (one compare: every Plain has the same names):
    their chunk's own when they are all of its rows, in order."""
    chunk = plains[0].chunk
    if len(chunk.errs) == count and all(plain.chunk is chunk for plain in plains):
        return chunk.columns
    return {col: [value for plain in plains
                  for value in plain.chunk.columns[col][plain.start:plain.start + plain.count]]
            for col in chunk.names}


def _metric_cells(values: Sequence[Any] | None, is_percent: bool, zero_percent: bool, text: bool,
                  count: int) -> list[Any] | output.Numbers:
    """One metric column's cells (``None``: no comparator gives it); a percent column shows a float as
    ``12.5%`` (``0%`` for zero when ``zero_percent``). A column of floats is :class:`output.Numbers` for the
    CSV, formatted as the rows are joined."""
    na = output.NA
    if values is None:
        return [na] * count
    if set(map(type, values)) == {float}:  # the common case: a column of floats
        if is_percent:  # f"{x}" is repr(x) for a float
            numbers = output.Numbers([value * 100 for value in values], 1, "%", "0%" if zero_percent else None)
            return numbers if text else numbers.columns()[0]
        return output.Numbers(list(values)) if text else list(values)
    fmt, cells = output.format_value, []
    for value in values:
        if value is None:
            value = na
        elif is_percent and value.__class__ is float:
            value = "0%" if zero_percent and value == 0.0 else fmt(value, True)
        elif text:
            value = float_texts([value])[0] if value.__class__ is float else _cell_text(value)
        cells.append(value)
    return cells


def _csv_fields(texts: list[str]) -> list[str]:
    """Each text as a CSV cell (:func:`output.csv_field`); one search when none needs quoting."""
    if output.needs_quoting("\x00".join(texts)):
        return [output.csv_field(text) for text in texts]
    return texts


@lru_cache(maxsize=4096)  # the entries of a call site share one stack
def _stack_cell(stack: tuple[str, ...], text: bool) -> str:
    shown = str(list(stack))
    return output.csv_field(shown) if text else shown


@lru_cache(maxsize=4096)
def _shape_field(shape: tuple[int, ...]) -> str:
    return output.csv_field(_shape_text(shape))


_text_field = lru_cache(maxsize=1024)(output.csv_field)  # for the few texts many rows share (dtypes)


def _cell_text(value: Any) -> str:
    """Any other cell as csv.writer writes it: ``repr`` of a float (a numpy float too), ``str`` of the rest."""
    return output.csv_field(repr(value) if isinstance(value, float) else str(value))
