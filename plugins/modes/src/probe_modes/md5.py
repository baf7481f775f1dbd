"""The ``md5`` data mode (plugin ``md5``; task statistics with ``summary_mode: "md5"``).

msprobe calls it md5 but writes ``zlib.crc32`` of the tensor's raw bytes as 8
lower-case hex digits under the key ``md5``; probe writes the same value,
beside the statistics. Compare shows both sides' CRC-32 (msprobe's ``NPU MD5``
and ``BENCH MD5`` columns, no statistics columns) and calls a different CRC an
error; two leaves differ when their CRCs do. A non-tensor's CRC is that of
its ``str(value)``. The CRC comes from zlib-ng where it is installed (the same
CRC-32, vectorised: about 4x zlib's speed, measured on 8 MB buffers), else
from zlib.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from probe_compare.api import ERROR, LeafPair, RowResult, WARNING
from probe_core.api import ComparatorSpec, DataMode, DataModeSpec, hookimpl
from probe_modes.statistics import StatisticsMode

try:
    from zlib_ng.zlib_ng import crc32
except ImportError:  # installed without its dependencies: the same values, slower
    from zlib import crc32


def crc32_hex(buffer: Any) -> str:
    """``zlib.crc32`` of a buffer as 8 hex digits (msprobe's "md5")."""
    return f"{crc32(buffer) & 0xFFFFFFFF:08x}"


def checksum(leaf: Any) -> str | None:
    """A leaf's CRC-32: the tensor's recorded ``md5``, or the CRC of a non-tensor's text."""
    if leaf.is_tensor:
        value = (leaf.raw or {}).get("md5")
        return value if isinstance(value, str) else None
    return crc32_hex(str(leaf.value).encode())


class Md5Mode(StatisticsMode):
    name = "md5"
    statistics_columns = False
    graph_task = "md5"
    legend = "CRC-32 of inputs/outputs"
    msprobe_one_sided = WARNING  # --rules msprobe: a target tensor without a bench partner (msprobe's md5 legend)

    def extend(self, record: dict[str, Any], tensor: Any, ops: Any, sink: Any, label: str) -> None:
        # a tensor met twice in a batch is hashed once
        record["md5"] = ops.once_per_batch(tensor, "md5", lambda: crc32_hex(ops.raw_bytes(tensor)))

    def recognises(self, task: str, record: Mapping[str, Any] | None) -> bool:
        return record is not None and isinstance(record.get("md5"), str)

    def discrepancy(self, row: RowResult) -> float | None:
        a, b = checksum(row.npu), checksum(row.bench)
        return None if a is None or b is None else (0.0 if a == b else math.inf)

    def judge_row(self, row: RowResult) -> None:
        if checksum(row.npu) != checksum(row.bench):
            row.flag(ERROR, "CRC-32 differs.")

    def judge_io(self, inputs: Any, outputs: Any) -> None:
        """A CRC says equal or not: no input -> output rule."""

    def differs(self, row: RowResult) -> str | None:
        a, b = checksum(row.npu), checksum(row.bench)
        return None if a == b else f"CRC-32 {a} vs {b}"

    def tool_tips(self) -> dict[str, str]:
        return {"md5": "CRC-32 of the tensor's bytes; equal values mean identical data"}

    shown_metrics = DataMode.shown_metrics  # the CRCs as they are, not the statistics' renaming


class Md5Comparator:
    columns = ("NPU MD5", "BENCH MD5")
    placement = "metrics"

    def compare(self, pair: LeafPair) -> dict[str, str | None]:
        return {"NPU MD5": checksum(pair.npu), "BENCH MD5": checksum(pair.bench)}


@hookimpl
def probe_data_modes() -> list[DataModeSpec]:
    return [DataModeSpec("md5", "statistics plus CRC-32 of the raw bytes (summary_mode md5)", Md5Mode,
                         tasks=("statistics",), summary_modes=("md5",))]


@hookimpl
def probe_comparators() -> list[ComparatorSpec]:
    return [ComparatorSpec("md5", "md5", "CRC-32 of both sides (equal or not)", Md5Comparator)]
