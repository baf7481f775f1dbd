"""A data mode that brings its own task: ``"task": "histogram"`` records each tensor's sign counts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probe_compare.api import ERROR
from probe_core.api import DataMode, DataModeSpec, hookimpl

KEY = "histogram"


def signs(buffer: Any, dtype: str) -> list[int]:
    """How many elements are negative, zero and positive (float32 tensors; others count as zero)."""
    import numpy as np

    if dtype != "torch.float32":
        return [0, 0, 0]
    values = np.frombuffer(buffer, dtype=np.float32)
    return [int((values < 0).sum()), int((values == 0).sum()), int((values > 0).sum())]


class HistogramMode(DataMode):
    name = "histogram"
    statistics_columns = False
    graph_task = "md5"
    legend = "sign counts of inputs/outputs"

    def encode(self, tensor: Any, ops: Any, sink: Any, label: str) -> dict[str, Any]:
        record = ops.describe(tensor)
        record[KEY] = signs(ops.raw_bytes(tensor), record.get("dtype", ""))
        return record

    def recognises(self, task: str, record: Mapping[str, Any] | None) -> bool:
        return task == "histogram"

    def judge_row(self, row: Any) -> None:
        if self.differs(row):
            row.flag(ERROR, "sign counts differ.")

    def differs(self, row: Any) -> str | None:
        a, b = ((leaf.raw or {}).get(KEY) if leaf is not None else None for leaf in (row.npu, row.bench))
        return None if a == b else f"signs {a} vs {b}"


@hookimpl
def probe_data_modes() -> list[DataModeSpec]:
    return [DataModeSpec("histogram", "sign counts of each float32 tensor", HistogramMode, tasks=("histogram",))]
