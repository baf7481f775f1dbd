"""pass / warning / error for one compared entry, by msprobe's graph-comparison legend.

The rules (numbers as in the legend) work on :class:`RowResult` objects, one
per leaf (tensor or scalar) of a matched entry, whose ``metrics`` hold the
values the comparators computed (keys are the CSV column names:
``NormRelativeErr``, ``Cosine``, ``One Thousandth Err Ratio``, ...; relative
errors as fractions, not percent).

Errors: (1) NaN/Inf in the target's max or min while the bench has none;
(2) tensor mode: input One Thousandth Err Ratio > 0.9 and output < 0.6;
(3) statistics mode: input norm relative error < 0.1 and output > 0.5;
(4) requires_grad differs; (5) non-tensor values differ; (6) md5 mode: CRC
differs; (7) dtype differs; (8) shape differs.
Warnings: (1) statistics: output norm relative error more than 10x the
inputs'; (2) tensor: input cosine > 0.9 and the cosine drops by more than
0.1 from input to output; (3) md5: parameters do not match (a leaf on one
side only). Exemptions: the input-based rules skip the placeholder
collectives (:data:`PLACEHOLDER_APIS`); redundant APIs
(:data:`REDUNDANT_APIS`) always pass. Rules (2), (3) and warnings (1), (2)
mark the output rows only. probe adds one guard: warning (1) needs an output
norm relative error above :data:`NOISE_FLOOR`, so float rounding noise on
identical inputs is not flagged.

:func:`judge_entry` applies all rules; :func:`divergence` tells whether an
entry is where numbers start to differ (inputs agree, outputs do not).
Both are pure functions over rows, usable by ``probe graph``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from dataclasses import dataclass, field
from typing import Any

from probe_core.dump.leaves import TensorMeta
from probe_core.dump.names import parse_entry_name

PASS, WARNING, ERROR, UNMATCHED = "pass", "warning", "error", "unmatched"
SEVERITY = {PASS: 0, WARNING: 1, ERROR: 2, UNMATCHED: -1}

NORM_INPUT_MAX = 0.1          # error 3: input norm rel. error below this ...
NORM_OUTPUT_ERROR = 0.5       # ... and output above this
NORM_WARNING_RATIO = 10.0     # warning 1: output rel. error more than 10x the input's
NOISE_FLOOR = 1e-6            # probe's guard for warning 1
THOUSANDTH_INPUT_MIN = 0.9    # error 2
THOUSANDTH_OUTPUT_MAX = 0.6
COSINE_INPUT_MIN = 0.9        # warning 2
COSINE_DROP = 0.1

#: Divergence tolerance: two values agree when |a - b| <= ATOL + RTOL * |b|.
DIVERGENCE_RTOL = 1e-5
DIVERGENCE_ATOL = 1e-8

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


def _bad(value: Any) -> bool:
    return isinstance(value, float) and (math.isnan(value) or math.isinf(value))


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


# -- per-row rules ---------------------------------------------------------------


def _row_rules(row: RowResult, mode: str) -> None:
    npu, bench = row.npu, row.bench
    if npu is None or bench is None:
        side = "bench" if npu is None else "target"
        row.flag(WARNING, f"{'Parameters' if row.role == 'parameters' else 'Tensor'} only on the {side} side.")
        return
    if npu.is_tensor != bench.is_tensor:
        row.flag(ERROR, "Tensor on one side, non-tensor on the other.")
        return
    if not npu.is_tensor:
        if npu.value != bench.value and not (_bad(npu.value) and _bad(bench.value)):
            row.flag(ERROR, f"Scalar values differ ({npu.value!r} vs {bench.value!r}).")
        return
    if npu.dtype is not None and bench.dtype is not None and normalize_dtype(npu.dtype) != normalize_dtype(bench.dtype):
        row.flag(ERROR, f"Dtype inconsistent ({npu.dtype} vs {bench.dtype}).")
    if npu.shape is not None and bench.shape is not None and tuple(npu.shape) != tuple(bench.shape):
        row.flag(ERROR, f"Shape inconsistent ({list(npu.shape)} vs {list(bench.shape)}).")
    if npu.requires_grad is not None and bench.requires_grad is not None and npu.requires_grad != bench.requires_grad:
        row.flag(ERROR, "Requires_grad inconsistent.")
    if mode == "md5":
        if npu.md5 != bench.md5:
            row.flag(ERROR, "CRC-32 differs.")
        return
    npu_bad = _bad(npu.max) or _bad(npu.min)
    if npu_bad and not (_bad(bench.max) or _bad(bench.min)):
        row.flag(ERROR, "Target max/min contains nan/inf, bench does not.")


# -- input -> output rules ----------------------------------------------------------


def _metric(rows: Sequence[RowResult], key: str) -> list[float]:
    values = []
    for row in rows:
        value = _num(row.metrics.get(key))
        if value is not None and not math.isnan(value):
            values.append(value)
    return values


def _io_rules(inputs: list[RowResult], outputs: list[RowResult], mode: str) -> None:
    if mode == "statistics":
        in_err = _metric(inputs, "NormRelativeErr")
        worst_in = max(in_err) if in_err else 0.0
        for row in outputs:
            out_err = _num(row.metrics.get("NormRelativeErr"))
            if out_err is None or math.isnan(out_err):
                continue
            if in_err and worst_in < NORM_INPUT_MAX and out_err > NORM_OUTPUT_ERROR:
                row.flag(ERROR, f"Output norm relative error {out_err:.4g} > {NORM_OUTPUT_ERROR} while inputs' "
                                f"< {NORM_INPUT_MAX}.")
            elif out_err > NOISE_FLOOR and out_err > NORM_WARNING_RATIO * worst_in:
                row.flag(WARNING, f"Output norm relative error {out_err:.4g} is over {NORM_WARNING_RATIO:g}x "
                                  f"the inputs' ({worst_in:.4g}).")
    elif mode == "tensor":
        in_ratio = _metric(inputs, "One Thousandth Err Ratio")
        in_cos = _metric(inputs, "Cosine")
        for row in outputs:
            out_ratio = _num(row.metrics.get("One Thousandth Err Ratio"))
            if in_ratio and out_ratio is not None and min(in_ratio) > THOUSANDTH_INPUT_MIN and out_ratio < THOUSANDTH_OUTPUT_MAX:
                row.flag(ERROR, f"Output One Thousandth Err Ratio {out_ratio:.4g} < {THOUSANDTH_OUTPUT_MAX} "
                                f"while inputs' > {THOUSANDTH_INPUT_MIN}.")
            out_cos = _num(row.metrics.get("Cosine"))
            if in_cos and out_cos is not None and min(in_cos) > COSINE_INPUT_MIN and min(in_cos) - out_cos > COSINE_DROP:
                row.flag(WARNING, f"Cosine drops from {min(in_cos):.4g} (inputs) to {out_cos:.4g} (output).")


def judge_entry(entry_name: str, rows: Sequence[RowResult], mode: str) -> str:
    """Apply the legend's rules to the rows of one matched entry; return the entry's result.

    ``mode`` is ``statistics``, ``md5`` or ``tensor``. Each row's ``result``
    and ``messages`` are updated in place; the entry's result is the worst
    row's (error > warning > pass).
    """
    op = api_op(entry_name)
    if _is_redundant(op):
        for row in rows:
            row.result, row.messages = PASS, ["Redundant API: not compared."]
        return PASS
    for row in rows:
        _row_rules(row, mode)
    if op not in PLACEHOLDER_APIS:
        inputs = [r for r in rows if r.npu is not None and r.bench is not None and r.role in INPUT_ROLES]
        outputs = [r for r in rows if r.npu is not None and r.bench is not None and r.role in OUTPUT_ROLES]
        _io_rules(inputs, outputs, mode)
    return worst(row.result for row in rows)


def worst(results) -> str:
    """The most severe of ``results`` (``pass`` when empty)."""
    best = PASS
    for result in results:
        if SEVERITY[result] > SEVERITY[best]:
            best = result
    return best


# -- divergence ---------------------------------------------------------------------


def _close(a: Any, b: Any) -> bool:
    x, y = _num(a), _num(b)
    if x is None or y is None:
        return a == b
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    return abs(x - y) <= DIVERGENCE_ATOL + DIVERGENCE_RTOL * abs(y)


def row_differs(row: RowResult, mode: str) -> str | None:
    """Why the two sides of ``row`` differ (a short reason), or ``None`` when they agree.

    statistics: any of Max/Min/Mean/Norm beyond the divergence tolerance;
    md5: CRC-32; tensor: MaxAbsErr beyond the tolerance of the bench's
    magnitude. A leaf on one side only, or a dtype/shape change, differs.
    """
    npu, bench = row.npu, row.bench
    if npu is None or bench is None:
        return "present on one side only"
    if not npu.is_tensor or not bench.is_tensor:
        return None if npu.value == bench.value else f"value {npu.value!r} vs {bench.value!r}"
    if npu.shape is not None and bench.shape is not None and tuple(npu.shape) != tuple(bench.shape):
        return f"shape {list(npu.shape)} vs {list(bench.shape)}"
    if mode == "md5":
        return None if npu.md5 == bench.md5 else f"CRC-32 {npu.md5} vs {bench.md5}"
    if mode == "tensor" and "MaxAbsErr" in row.metrics:
        err = _num(row.metrics.get("MaxAbsErr"))
        scale = max(abs(_num(bench.max) or 0.0), abs(_num(bench.min) or 0.0))
        if err is not None and (math.isnan(err) or err > DIVERGENCE_ATOL + DIVERGENCE_RTOL * scale):
            cosine = row.metrics.get("Cosine")
            return f"MaxAbsErr {err:.4g}, Cosine {cosine}"
        return None
    if npu.stats == bench.stats:
        return None
    for label, a, b in zip(("Max", "Min", "Mean", "Norm"), npu.stats, bench.stats):
        if not _close(a, b):
            return f"{label} {a!r} vs {b!r}"
    return None


def _short(row: RowResult) -> str:
    name = (row.npu or row.bench).name  # type: ignore[union-attr]
    return f"{name.rsplit('.', 2)[-2]}.{name.rsplit('.', 1)[-1]}"


def io_differences(rows: Sequence[RowResult], mode: str) -> tuple[str | None, str | None]:
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


def divergence(rows: Sequence[RowResult], mode: str) -> str | None:
    """If this entry is where numbers start to differ — every input (and parameter) agrees and
    some output does not — the reason (``"output.0: Norm 2.1 vs 2.0"``); else ``None``."""
    inputs_reason, outputs_reason = io_differences(rows, mode)
    return outputs_reason if inputs_reason is None else None
