"""pass / warning / error for one compared entry: the one judge ``probe compare`` and ``probe graph`` share.

The rules work on :class:`RowResult` objects, one per leaf (tensor or
scalar) of a matched entry, whose ``metrics`` hold the values the
comparators computed (keys are the CSV column names). Three sources of
verdicts, applied in this order by :func:`judge_entry`:

1. the rules that hold in every data mode (msprobe's legend): a leaf on
   one side only (warning), tensor vs non-tensor, non-tensor values differ,
   dtype differs, shape differs, requires_grad differs (errors);
2. the data mode's own rules (:meth:`probe_core.modes.DataMode.judge_row`
   per tensor leaf, :meth:`~probe_core.modes.DataMode.judge_io` from the
   inputs' error to the outputs');
3. each comparator's optional ``judge(row)`` (a plugin's own verdict).

Exemptions: the input-based rules skip the placeholder collectives
(:data:`PLACEHOLDER_APIS`); redundant APIs (:data:`REDUNDANT_APIS`) always
pass. :func:`divergence` tells whether an entry is where numbers start to
differ (inputs agree, outputs do not), with the mode's
:meth:`~probe_core.modes.DataMode.differs`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from probe_core.compare.metrics import as_float
from probe_core.dump.leaves import TensorMeta
from probe_core.dump.names import parse_entry_name

if TYPE_CHECKING:  # pragma: no cover
    from probe_core.modes import DataMode

PASS, WARNING, ERROR, UNMATCHED = "pass", "warning", "error", "unmatched"
SEVERITY = {PASS: 0, WARNING: 1, ERROR: 2, UNMATCHED: -1}

PLACEHOLDER_APIS = frozenset({"_reduce_scatter_base", "_all_gather_base", "all_to_all_single", "batch_isend_irecv"})
REDUNDANT_APIS = frozenset({"empty", "empty_like", "numpy", "to", "setitem", "empty_with_format",
                            "new_empty_strided", "new_empty", "empty_strided"})

INPUT_ROLES = ("input", "parameters")
OUTPUT_ROLES = ("output", "parameters_grad", "debug")


@dataclass
class RowResult:
    """One compare row: a target leaf, its bench leaf (either may be ``None``), metrics, verdict."""

    npu: TensorMeta | None
    bench: TensorMeta | None
    metrics: dict[str, Any] = field(default_factory=dict)
    result: str = PASS
    messages: list[str] = field(default_factory=list)

    @property
    def role(self) -> str:
        return (self.npu or self.bench).role  # type: ignore[union-attr]

    @property
    def err_message(self) -> str:
        return " ".join(self.messages)

    def flag(self, level: str, message: str) -> None:
        """Raise this row to ``level`` (never lowers it) and record why."""
        if SEVERITY[level] > SEVERITY[self.result]:
            self.result = level
        if message not in self.messages:
            self.messages.append(message)


def api_op(entry_name: str) -> str:
    """The operation name of an API entry (``Distributed._all_gather_base.0.forward`` -> ``_all_gather_base``)."""
    parsed = parse_entry_name(entry_name)
    if parsed.kind != "api":
        return ""
    parts = parsed.base.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _is_redundant(op: str) -> bool:
    return op in REDUNDANT_APIS or op.strip("_") in REDUNDANT_APIS  # Tensor.__setitem__ -> setitem


@lru_cache(maxsize=1024)
def normalize_dtype(dtype: Any) -> str:
    """``torch.float32``, ``Float32``, ``mindspore.float32``, ``float32`` -> ``float32``."""
    text = str(dtype).lower()
    for prefix in ("torch.", "mindspore.", "numpy.", "np."):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return {"bfloat16": "bfloat16", "float": "float32", "half": "float16", "double": "float64"}.get(text, text)


def is_bad(value: Any) -> bool:
    """True for a float NaN or ±Inf."""
    return isinstance(value, float) and (math.isnan(value) or math.isinf(value))


# -- per-row rules of every mode ---------------------------------------------------------


def _row_rules(row: RowResult) -> bool:
    """The rules of every mode; True when the row holds two tensors the mode should judge."""
    npu, bench = row.npu, row.bench
    if npu is None or bench is None:
        side = "bench" if npu is None else "target"
        row.flag(WARNING, f"{'Parameters' if row.role == 'parameters' else 'Tensor'} only on the {side} side.")
        return False
    if npu.is_tensor != bench.is_tensor:
        row.flag(ERROR, "Tensor on one side, non-tensor on the other.")
        return False
    if not npu.is_tensor:
        if npu.value != bench.value and not (is_bad(npu.value) and is_bad(bench.value)):
            row.flag(ERROR, f"Scalar values differ ({npu.value!r} vs {bench.value!r}).")
        return False
    if npu.dtype is not None and bench.dtype is not None and normalize_dtype(npu.dtype) != normalize_dtype(bench.dtype):
        row.flag(ERROR, f"Dtype inconsistent ({npu.dtype} vs {bench.dtype}).")
    if npu.shape is not None and bench.shape is not None and tuple(npu.shape) != tuple(bench.shape):
        row.flag(ERROR, f"Shape inconsistent ({list(npu.shape)} vs {list(bench.shape)}).")
    if npu.requires_grad is not None and bench.requires_grad is not None and npu.requires_grad != bench.requires_grad:
        row.flag(ERROR, "Requires_grad inconsistent.")
    return True


def metric_values(rows: Sequence[RowResult], key: str) -> list[float]:
    """The numeric, non-NaN values of metric ``key`` over ``rows`` (for input -> output rules)."""
    values = []
    for row in rows:
        value = as_float(row.metrics.get(key))
        if value is not None and not math.isnan(value):
            values.append(value)
    return values


def judge_entry(entry_name: str, rows: Sequence[RowResult], mode: DataMode,
                comparators: Sequence[Any] = ()) -> str:
    """Apply every rule to the rows of one matched entry; return the entry's result.

    ``mode`` is the :class:`~probe_core.modes.DataMode` of the compare;
    ``comparators`` are loaded comparators (``.judge`` is called where a
    comparator has one). Each row's ``result`` and ``messages`` are updated
    in place; the entry's result is the worst row's (error > warning > pass).
    """
    op = api_op(entry_name)
    if _is_redundant(op):
        for row in rows:
            row.result, row.messages = PASS, ["Redundant API: not compared."]
        return PASS
    judges = [comp for comp in comparators if comp.judge is not None]
    for row in rows:
        if _row_rules(row):
            mode.judge_row(row)
        if row.npu is not None and row.bench is not None:
            for comp in judges:
                verdict = comp.run_judge(row)
                if verdict:
                    row.flag(*verdict)
    if op not in PLACEHOLDER_APIS:
        both = [r for r in rows if r.npu is not None and r.bench is not None]
        mode.judge_io([r for r in both if r.role in INPUT_ROLES], [r for r in both if r.role in OUTPUT_ROLES])
    return worst(row.result for row in rows)


def worst(results) -> str:
    """The most severe of ``results`` (``pass`` when empty)."""
    best = PASS
    for result in results:
        if SEVERITY[result] > SEVERITY[best]:
            best = result
    return best


# -- divergence ---------------------------------------------------------------------


def row_differs(row: RowResult, mode: DataMode) -> str | None:
    """Why the two sides of ``row`` differ (a short reason), or ``None`` when they agree.

    A leaf on one side only, a non-tensor value or a shape change differs
    in every mode; tensor values are the mode's call
    (:meth:`~probe_core.modes.DataMode.differs`).
    """
    npu, bench = row.npu, row.bench
    if npu is None or bench is None:
        return "present on one side only"
    if not npu.is_tensor or not bench.is_tensor:
        return None if npu.value == bench.value else f"value {npu.value!r} vs {bench.value!r}"
    if npu.shape is not None and bench.shape is not None and tuple(npu.shape) != tuple(bench.shape):
        return f"shape {list(npu.shape)} vs {list(bench.shape)}"
    return mode.differs(row)


def _short(row: RowResult) -> str:
    name = (row.npu or row.bench).name  # type: ignore[union-attr]
    return f"{name.rsplit('.', 2)[-2]}.{name.rsplit('.', 1)[-1]}"


def io_differences(rows: Sequence[RowResult], mode: DataMode) -> tuple[str | None, str | None]:
    """(why the tensor inputs differ, why the outputs differ) — each ``None`` when that side agrees.

    Non-tensor arguments (scalars, dtypes, ...) do not make the inputs differ:
    an op given another constant is where the numbers change, so a differing
    argument is named in the outputs' reason instead.
    """
    inputs_reason = outputs_reason = argument = None
    for row in rows:
        if row.role in INPUT_ROLES:
            both_tensors = row.npu is not None and row.bench is not None and row.npu.is_tensor and row.bench.is_tensor
            reason = row_differs(row, mode) if (inputs_reason is None or argument is None) else None
            if reason and (both_tensors or row.npu is None or row.bench is None):
                inputs_reason = inputs_reason or f"{_short(row)}: {reason}"
            elif reason:
                argument = argument or f"{_short(row)}: {reason}"
        elif row.role in OUTPUT_ROLES and outputs_reason is None:
            reason = row_differs(row, mode)
            outputs_reason = f"{_short(row)}: {reason}" if reason else None
    if outputs_reason and argument:
        outputs_reason += f" (non-tensor argument differs: {argument})"
    return inputs_reason, outputs_reason


def divergence(rows: Sequence[RowResult], mode: DataMode) -> str | None:
    """If this entry is where numbers start to differ — every input (and parameter) agrees and
    some output does not — the reason (``"output.0: Norm 2.1 vs 2.0"``); else ``None``."""
    inputs_reason, outputs_reason = io_differences(rows, mode)
    return outputs_reason if inputs_reason is None else None
