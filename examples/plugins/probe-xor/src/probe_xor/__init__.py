"""msprobe's ``xor`` summary mode as a third-party probe data mode (plugin ``xor``).

The record of a tensor is ``{"type", "dtype", "shape", "requires_grad", "md5": <int>}``: the XOR of
the tensor's raw bytes read as little-endian signed 64-bit words, the last word zero-padded — where
msprobe 26.2 writes it (an integer under ``md5``, no statistics). The whole mode is this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from probe_compare.api import ERROR
from probe_core.api import ComparatorSpec, DataMode, DataModeSpec, hookimpl

KEY = "md5"  # where msprobe writes the checksum in xor mode


def xor_checksum(buffer: Any) -> int:
    """XOR of ``buffer``'s bytes as little-endian int64 words (zero-padded), as a signed int."""
    import numpy as np

    data = np.frombuffer(buffer, dtype=np.uint8)
    if data.size % 8:
        data = np.concatenate([data, np.zeros(8 - data.size % 8, dtype=np.uint8)])
    if data.size == 0:
        return 0
    return int(np.bitwise_xor.reduce(data.view("<i8")))


def checksum_of(leaf: Any) -> int | None:
    value = (leaf.raw or {}).get(KEY) if leaf.is_tensor else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def shown(value: int | None) -> str | None:
    """A checksum as 16 hex digits (two's complement), the way people compare them by eye."""
    return None if value is None else f"{value & 0xFFFF_FFFF_FFFF_FFFF:016x}"


class XorMode(DataMode):
    name = "xor"
    statistics_columns = False
    graph_task = "md5"
    legend = "XOR checksum of inputs/outputs"

    def encode(self, tensor: Any, ops: Any, sink: Any, label: str) -> dict[str, Any]:
        record = ops.describe(tensor)
        requires_grad = ops.requires_grad(tensor)
        if requires_grad is not None:
            record["requires_grad"] = requires_grad
        record[KEY] = ops.cached_checksum(tensor, lambda: xor_checksum(ops.raw_bytes(tensor)))
        return record

    def recognises(self, task: str, record: Mapping[str, Any] | None) -> bool:
        value = record.get(KEY) if record is not None else None
        return isinstance(value, int) and not isinstance(value, bool)

    def judge_row(self, row: Any) -> None:
        if checksum_of(row.npu) != checksum_of(row.bench):
            row.flag(ERROR, "XOR checksum differs.")

    def differs(self, row: Any) -> str | None:
        a, b = checksum_of(row.npu), checksum_of(row.bench)
        return None if a == b else f"XOR {shown(a)} vs {shown(b)}"

    def tool_tips(self) -> dict[str, str]:
        return {"NPU XOR": "XOR of the target tensor's bytes as 64-bit words",
                "BENCH XOR": "XOR of the bench tensor's bytes as 64-bit words"}


class XorComparator:
    columns = ("NPU XOR", "BENCH XOR")
    placement = "metrics"

    def compare(self, pair: Any) -> dict[str, Any]:
        return {"NPU XOR": shown(checksum_of(pair.npu)), "BENCH XOR": shown(checksum_of(pair.bench))}


@hookimpl
def probe_data_modes() -> list[DataModeSpec]:
    return [DataModeSpec("xor", "XOR checksum of each tensor's bytes (msprobe's summary_mode xor)", XorMode,
                         tasks=("statistics",), summary_modes=("xor",))]


@hookimpl
def probe_comparators() -> list[ComparatorSpec]:
    return [ComparatorSpec("xor", "xor", "both sides' XOR checksums (equal or not)", XorComparator)]
