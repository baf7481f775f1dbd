"""The ``statistics`` data mode (plugin ``statistics``): Max/Min/Mean/Norm per tensor, end to end.

* collection: type, dtype, shape, requires_grad and the four statistics,
  computed on the tensor's device and fetched in batches;
* dumps: any dump whose tensors carry statistics (the catch-all mode:
  asked last, it also reads overflow_check and structure dumps);
* compare: msprobe's eight columns (diff and relative error of each
  statistic) and, with ``--rules msprobe``, its legend's rules as msprobe
  applies them — target max/min holds NaN/Inf while the bench's does not
  (error); the inputs' largest norm relative error below 0.1 and an output's
  above 0.5 (error on that output); the outputs' largest more than 10x the
  inputs' (more than 0.1 when the inputs' is 0: a warning on the first
  output). An input is any row but an output (parameters and their
  gradients too); a relative error that is no finite number (the bench's
  Norm 0, NaN) counts in neither maximum, and an infinite one is an output
  error. Two leaves differ when a statistic is off by more than
  ``1e-8 + 1e-5 * |bench|``;
* graph: task ``summary``; the viewer shows ``MaxAbsErr`` ... (the size of
  each diff, never signed) and relative errors in percent.

The md5, tensor and overflow_check modes build on :class:`StatisticsMode`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from probe_compare.api import ERROR, LeafPair, NA, RowResult, WARNING, is_bad, largest
from probe_core.api import ComparatorSpec, DataMode, DataModeSpec, as_float, hookimpl, relative_error

STAT_KEYS = ("Max", "Min", "Mean", "Norm")
DIFF_COLUMNS = ("Max diff", "Min diff", "Mean diff", "L2norm diff")
RELATIVE_COLUMNS = ("MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr")
RELATIVE_SET = frozenset(RELATIVE_COLUMNS)
SHOWN_DIFF = dict(zip(DIFF_COLUMNS, ("MaxAbsErr", "MinAbsErr", "MeanAbsErr", "NormAbsErr")))

NORM_INPUT_MAX = 0.1          # error: input norm rel. error below this ...
NORM_OUTPUT_ERROR = 0.5       # ... and output above this
NORM_WARNING_RATIO = 10.0     # warning: output rel. error more than 10x the input's
NORM_WARNING_ALONE = 0.1      # ... or above this when the inputs' is 0
#: Divergence tolerance: two values agree when |a - b| <= ATOL + RTOL * |b|.
DIVERGENCE_RTOL = 1e-5
DIVERGENCE_ATOL = 1e-8


def statistics_metrics(npu: Any, bench: Any) -> dict[str, Any]:
    """Diffs (target - bench) and relative errors of Max, Min, Mean, Norm; ``N/A`` where not numbers."""
    out: dict[str, Any] = {}
    for diff_col, rel_col, a, b in zip(DIFF_COLUMNS, RELATIVE_COLUMNS, npu.stats, bench.stats):
        if type(a) is float and type(b) is float:  # the common case
            x, y = a, b
        else:
            x, y = as_float(a), as_float(b)
            if x is None or y is None:
                out[diff_col] = out[rel_col] = NA
                continue
        if x == y:
            out[diff_col] = out[rel_col] = 0.0
            continue
        out[diff_col] = x - y if not (math.isinf(x) and x == y) else 0.0
        out[rel_col] = relative_error(x, y)
    return out


class StatColumns:
    """One side of many compared rows, the statistics mode's column form: ``flat`` (four numbers per row, flat:
    Max, Min, Mean, Norm), ``counts`` (each tensor's number of elements, from the bench's shape) and ``bigs``
    (the largest finite value of each row's dtype, 0 for integers: :func:`probe_core.api.largest`); as numpy
    arrays (made when first read): ``stats`` (rows x 4 float64), ``count`` and ``big`` (float64).

    The built-in comparator and the discrepancies read the lists with :mod:`probe_modes._stats` (C), so a
    compare of statistics never imports numpy; without that extension they read the arrays."""

    __slots__ = ("flat", "counts", "bigs", "_arrays")

    def __init__(self, flat: list[Any], counts: list[Any], bigs: list[float]) -> None:
        self.flat, self.counts, self.bigs = flat, counts, bigs
        self._arrays: tuple[Any, Any, Any] | None = None

    def _numpy(self) -> tuple[Any, Any, Any]:
        if self._arrays is None:
            import numpy as np

            self._arrays = (np.array(self.flat, dtype=np.float64).reshape(-1, 4),
                            np.array(self.counts, dtype=np.float64), np.array(self.bigs, dtype=np.float64))
        return self._arrays

    @property
    def stats(self) -> Any:
        return self._numpy()[0]

    @property
    def count(self) -> Any:
        return self._numpy()[1]

    @property
    def big(self) -> Any:
        return self._numpy()[2]

    @classmethod
    def of(cls, rows: Sequence[tuple[Any, Any]]) -> tuple[StatColumns, StatColumns]:
        """(target, bench) columns of rows whose statistics are all numbers (from the columns of a
        :class:`~probe_compare.columnar.LeafPairs`, else row by row)."""
        if hasattr(rows, "target_stats"):
            bigs = _bigs(rows.dtypes)
            return cls(rows.target_stats, rows.counts, bigs), cls(rows.bench_stats, rows.counts, bigs)
        counts = [_count(bench.shape) for _, bench in rows]
        return (cls([value for npu, _ in rows for value in npu.stats], counts, _bigs([npu.dtype for npu, _ in rows])),
                cls([value for _, bench in rows for value in bench.stats], counts,
                    _bigs([bench.dtype for _, bench in rows])))


def _bigs(dtypes: Sequence[Any]) -> list[float]:
    """:func:`largest` of each dtype (looked up once per dtype)."""
    table = {dtype: largest(dtype) for dtype in set(dtypes)}
    return [table[dtype] for dtype in dtypes]


def _count(shape: Any) -> int:
    count = 1
    for size in shape or ():
        count *= size
    return count


try:
    from probe_modes import _stats
except ImportError:  # built without a C compiler: numpy computes the columns
    _stats = None

METRIC_ORDER = tuple(name for pair in zip(DIFF_COLUMNS, RELATIVE_COLUMNS) for name in pair)


def statistics_columns(target: StatColumns, bench: StatColumns) -> dict[str, list[float]]:
    """:func:`statistics_metrics` of many rows at once (statistics that are all numbers): the same values,
    column by column."""
    if _stats is not None:
        try:
            return dict(zip(METRIC_ORDER, _stats.metrics(target.flat, bench.flat)))
        except (TypeError, ValueError, OverflowError):
            pass  # lists the C does not read (a tuple, an int beyond a double): numpy's conversion decides
    return _metrics_numpy(target, bench)


def _metrics_numpy(target: StatColumns, bench: StatColumns) -> dict[str, list[float]]:
    import numpy as np

    a, b = target.stats, bench.stats
    with np.errstate(all="ignore"):
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        diff = np.where(a == b, 0.0, a - b)
        rel = np.where(same, 0.0, np.where(np.isnan(a) | np.isnan(b), np.nan,
                                           np.where(b == 0, np.inf, np.abs((a - b) / b))))
    out: dict[str, list[float]] = {}
    for i, (diff_col, rel_col) in enumerate(zip(DIFF_COLUMNS, RELATIVE_COLUMNS)):
        out[diff_col] = diff[:, i].tolist()
        out[rel_col] = rel[:, i].tolist()
    return out


def discrepancy_columns(target: StatColumns, bench: StatColumns) -> list[float]:
    """:func:`stats_discrepancy` of many rows at once (four numeric statistics per row)."""
    if _stats is not None:
        try:
            return _stats.discrepancies(target.flat, bench.flat, bench.counts, target.bigs, bench.bigs)
        except (TypeError, ValueError, OverflowError):
            pass
    return _discrepancies_numpy(target, bench)


def _discrepancies_numpy(target: StatColumns, bench: StatColumns) -> list[float]:
    import numpy as np

    a, b = target.stats, bench.stats
    with np.errstate(all="ignore"):
        big_a, big_b = target.big[:, None], bench.big[:, None]
        sat_a = np.isinf(a) | ((big_a > 0) & (np.abs(a) >= SATURATED * big_a))
        sat_b = np.isinf(b) | ((big_b > 0) & (np.abs(b) >= SATURATED * big_b))
        kept = ~((np.isnan(a) & np.isnan(b)) | ((a == b) & np.isinf(a)) | (sat_a & sat_b & ((a > 0) == (b > 0))))
        broken = (kept & ~(np.isfinite(a) & np.isfinite(b))).any(axis=1)
        extremes = np.where(kept[:, :2], np.maximum(np.abs(a[:, :2]), np.abs(b[:, :2])), 0.0)
        magnitude = np.nan_to_num(extremes, posinf=0.0).max(axis=1)
        rms = np.where(kept[:, 3], b[:, 3] / np.sqrt(np.maximum(bench.count, 1.0)), magnitude)
        scales = np.stack([magnitude, magnitude, rms, b[:, 3]], axis=1)
        off = np.where(scales > 0, np.abs(a - b) / scales, np.inf)
        worst = np.where(kept & (a != b), off, 0.0).max(axis=1)
        worst = np.where(broken, np.inf, worst)
        worst = np.where((a == b).all(axis=1), 0.0, worst)
    return worst.tolist()


def norm_error(row: RowResult) -> float | None:
    """A row's Norm relative error as msprobe's legend reads it: ``None`` where it is no number (a row on
    one side, NaN on either side), ``inf`` where the bench's Norm is 0 or either side's infinite."""
    if row.npu is None or row.bench is None:
        return None
    a, b = as_float(row.npu.norm), as_float(row.bench.norm)
    if a is None or b is None:
        return None
    if a == b:
        return 0.0
    if math.isnan(a) or math.isnan(b):
        return None
    if math.isinf(a) or math.isinf(b) or b == 0:
        return math.inf
    return abs((a - b) / b)


def _largest_finite(errors: Sequence[float | None]) -> float:
    return max((e for e in errors if e is not None and e != math.inf), default=0.0)


def close(a: Any, b: Any) -> bool:
    """Whether two statistics agree within the divergence tolerance (NaN agrees with NaN only)."""
    if a.__class__ is float and b.__class__ is float and a - a == 0.0 and b - b == 0.0:  # both finite: the common case
        return abs(a - b) <= DIVERGENCE_ATOL + DIVERGENCE_RTOL * abs(b)
    x, y = as_float(a), as_float(b)
    if x is None or y is None:
        return a == b
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    return abs(x - y) <= DIVERGENCE_ATOL + DIVERGENCE_RTOL * abs(y)


def _numbers(stats: Any) -> tuple[float, ...]:
    """The leading statistics that are numbers: all four for a float tensor, Max and Min for an integer one."""
    out = []
    for value in stats:
        number = as_float(value)
        if number is None:
            break
        out.append(number)
    return tuple(out)


#: a statistic within this fraction of its dtype's largest value (or infinite) is *saturated*: it is made of a
#: constant the model derives from its dtype (``finfo(dtype).min`` in a causal mask), or overflowed
SATURATED = 2.0 ** -4


def _saturated(value: float, big: float) -> bool:
    return math.isinf(value) or (big > 0 and abs(value) >= SATURATED * big)


def _comparable(a: tuple[float, ...], b: tuple[float, ...], big_a: float, big_b: float) -> tuple[bool, ...]:
    """Which statistics say something about the values: not a NaN on both sides, and not saturated on both
    sides with one sign (each side at its own dtype's scale: float32's -3.4e38 and float64's -1.8e308 are the
    same ``finfo.min``; -inf and -inf are the same overflow)."""
    return tuple(not ((x != x and y != y) or (x == y and math.isinf(x))
                      or (_saturated(x, big_a) and _saturated(y, big_b) and (x > 0) == (y > 0)))
                 for x, y in zip(a, b))


def stats_discrepancy(npu: Any, bench: Any) -> float | None:
    """How far apart two tensors' statistics are, each against its natural scale: Max and Min against the
    larger magnitude of both, Mean against the root mean square (Norm / sqrt(n)), Norm against itself
    (an integer tensor has Max and Min only). For a tensor whose every element is off by a relative ``e``
    the result is at most about ``e``; ``None`` when the statistics cannot be compared.

    Statistics that are not :func:`_comparable` are left out (a masked tensor's Min and Mean, an overflowed
    Norm on both sides): the others decide. A statistic that is NaN or infinite on one side only (and not
    saturated on the other) is infinitely apart."""
    a, b = _numbers(npu.stats), _numbers(bench.stats)
    if len(a) < 2 or len(a) != len(b):
        return None
    if a == b:
        return 0.0
    kept = (True,) * len(a)
    if not all(map(math.isfinite, a + b)) or _saturated(a[1], largest(npu.dtype)) \
            or _saturated(a[0], largest(npu.dtype)):
        kept = _comparable(a, b, largest(npu.dtype), largest(bench.dtype))
        if any(k and not (math.isfinite(x) and math.isfinite(y)) for k, x, y in zip(kept, a, b)):
            return math.inf
    extremes = [abs(v) for k, x, y in zip(kept[:2], a, b) if k for v in (x, y)]
    magnitude = max(extremes, default=0.0)
    scales = [magnitude, magnitude]
    if len(a) == 4:
        rms = b[3] / math.sqrt(max(_count(bench.shape), 1)) if kept[3] else magnitude
        scales += [rms, b[3]]
    worst = 0.0
    for keep, x, y, scale in zip(kept, a, b, scales):
        if keep and x != y:
            worst = max(worst, abs(x - y) / scale if scale > 0 else math.inf)
    return worst


class StatisticsMode(DataMode):
    """The default data mode; md5, tensor and overflow_check extend its record and rules."""

    name = "statistics"
    graph_task = "summary"
    legend = "statistics error of inputs/outputs"

    def encode(self, tensor: Any, ops: Any, sink: Any, label: str) -> dict[str, Any]:
        record = ops.describe(tensor)
        record["Max"] = record["Min"] = record["Mean"] = record["Norm"] = None
        requires_grad = ops.requires_grad(tensor)
        if requires_grad is not None:  # MindSpore tensors carry no flag (msprobe writes none there)
            record["requires_grad"] = requires_grad
        sink.defer_stats(record, ops.stats(tensor))
        self.extend(record, tensor, ops, sink, label)
        return record

    def extend(self, record: dict[str, Any], tensor: Any, ops: Any, sink: Any, label: str) -> None:
        """Where a mode built on this one adds keys after the statistics (md5, data_name)."""

    def recognises(self, task: str, record: Mapping[str, Any] | None) -> bool:
        return record is None or any(key in record for key in STAT_KEYS)

    def judge_row(self, row: RowResult) -> None:
        npu, bench = row.npu, row.bench
        if (is_bad(npu.max) or is_bad(npu.min)) and not (is_bad(bench.max) or is_bad(bench.min)):
            row.flag(ERROR, "Target max/min contains nan/inf, bench does not.")

    def judge_io(self, inputs: Sequence[RowResult], outputs: Sequence[RowResult]) -> None:
        """msprobe's legend on the rows msprobe writes (``--rules msprobe``; the noise judge decides otherwise)."""
        in_errs = [norm_error(row) for row in inputs]
        out_errs = [norm_error(row) for row in outputs]
        worst_in, worst_out = _largest_finite(in_errs), _largest_finite(out_errs)
        if worst_in < NORM_INPUT_MAX:
            for row, err in zip(outputs, out_errs):
                if err is not None and err > NORM_OUTPUT_ERROR:
                    row.flag(ERROR, f"Output norm relative error {err:.4g} > {NORM_OUTPUT_ERROR} while inputs' "
                                    f"< {NORM_INPUT_MAX}.")
        if worst_out > (NORM_WARNING_RATIO * worst_in if worst_in else NORM_WARNING_ALONE):
            outputs[0].flag(WARNING, f"Outputs' norm relative error {worst_out:.4g} is over "
                                     f"{NORM_WARNING_RATIO:g}x the inputs' ({worst_in:.4g}).")

    def discrepancy(self, row: RowResult) -> float | None:
        return stats_discrepancy(row.npu, row.bench)

    def columns(self, rows: Sequence[tuple[Any, Any]]) -> tuple[StatColumns, StatColumns] | None:
        if type(self).discrepancy is not StatisticsMode.discrepancy:
            return None  # a mode built on this one measures otherwise: its rows take the row path
        return StatColumns.of(rows)

    def discrepancy_columns(self, target: StatColumns, bench: StatColumns) -> list[float]:
        return discrepancy_columns(target, bench)

    def differs(self, row: RowResult) -> str | None:
        npu, bench = row.npu.stats, row.bench.stats
        if npu == bench:
            return None
        a, b = _numbers(npu), _numbers(bench)
        kept = _comparable(a, b, largest(row.npu.dtype), largest(row.bench.dtype)) if len(a) == len(b) else ()
        for i, (label, x, y) in enumerate(zip(STAT_KEYS, npu, bench)):
            if (i >= len(kept) or kept[i]) and not close(x, y):  # a saturated statistic says nothing
                return f"{label} {x!r} vs {y!r}"
        return None

    def tool_tips(self) -> dict[str, str]:
        return {f"{stat}{kind}": f"{label} of the {stat} statistic, target vs bench"
                for stat in STAT_KEYS
                for kind, label in (("AbsErr", "absolute difference"), ("RelativeErr", "relative difference"))}

    def shown_metrics(self, metrics: Mapping[str, Any]) -> dict[str, str]:
        shown: dict[str, str] = {}
        for column, value in metrics.items():
            renamed = SHOWN_DIFF.get(column)
            if renamed is not None:  # MaxAbsErr ...: the size of the signed diff, as msprobe's MaxAbsErr
                shown[renamed] = str(abs(value)) if value.__class__ is float else str(value)
            elif value.__class__ is float and value - value == 0.0 and column in RELATIVE_SET:  # finite
                shown[column] = PERCENT % (value * 100)
            else:
                shown[column] = "null" if value is None else str(value)
        return shown

    def shown_columns(self, names: Sequence[str],
                      rows: Sequence[Sequence[Any]]) -> tuple[tuple[str, ...], list[Any]] | None:
        """:meth:`shown_rows` as columns, no dict per leaf (the optional fast form the graph asks for first): a
        column of floats as ``(fmt, floats)``, the graph's writer formats it; ``None`` for a mode built on this
        one that shows its metrics otherwise."""
        if type(self).shown_metrics is not StatisticsMode.shown_metrics \
                or type(self).shown_rows is not DataMode.shown_rows:
            return None
        keys, columns = [], []
        for column, values in zip(names, zip(*rows)):  # a column of floats at once; any other value by value
            renamed = SHOWN_DIFF.get(column)
            keys.append(renamed or column)
            if set(map(type, values)) != {float}:
                columns.append([self.shown_metrics({column: value})[keys[-1]] for value in values])
            elif column in RELATIVE_SET:
                columns.append(_percents(values))
            else:  # str of a float is its repr
                columns.append(("%r", list(map(abs, values)) if renamed else list(values)))
        return tuple(keys), columns


#: how shown_metrics writes a finite relative error (times 100)
PERCENT = "%.6g%%"


def _percents(values: Sequence[float]) -> tuple[str, list[float]] | list[str]:
    """The shown column of relative errors (floats): ``(PERCENT, values times 100)``, shown as shown_metrics
    shows each (NaN and the infinities as their repr); the texts where a finite one overflows times 100."""
    scaled = [value * 100 for value in values]
    total = sum(scaled)
    if total - total != 0.0 and any(value - value == 0.0 and big - big != 0.0 for value, big in zip(values, scaled)):
        return [PERCENT % big if value - value == 0.0 else str(value) for value, big in zip(values, scaled)]
    return PERCENT, scaled


class StatisticsComparator:
    """msprobe's eight summary columns, in msprobe's position; relative errors as percent strings."""

    columns = DIFF_COLUMNS + RELATIVE_COLUMNS
    placement = "metrics"
    percent_columns = frozenset(RELATIVE_COLUMNS)

    def compare(self, pair: LeafPair) -> dict[str, Any]:
        return statistics_metrics(pair.npu, pair.bench)

    def compare_columns(self, target: StatColumns, bench: StatColumns) -> dict[str, list[float]]:
        return statistics_columns(target, bench)


@hookimpl
def probe_data_modes() -> list[DataModeSpec]:
    return [DataModeSpec("statistics", "Max/Min/Mean/Norm per tensor, computed on device, fetched in batches",
                         StatisticsMode, tasks=("statistics", "structure"), summary_modes=("statistics",),
                         priority=100)]


@hookimpl
def probe_comparators() -> list[ComparatorSpec]:
    return [ComparatorSpec("statistics", "statistics", "Max/Min/Mean/Norm diff and relative error",
                           StatisticsComparator)]
