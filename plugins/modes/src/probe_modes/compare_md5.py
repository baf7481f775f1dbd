"""MD5-mode comparator: the two CRC-32 values side by side (the rules flag a difference).

Implements the comparator interface of :mod:`probe_core.compare.comparator`.
"""

from __future__ import annotations

from probe_core.compare.comparator import LeafPair


class Md5Comparator:
    columns = ("NPU MD5", "BENCH MD5")
    placement = "metrics"

    def compare(self, pair: LeafPair) -> dict[str, str | None]:
        return {"NPU MD5": pair.npu.md5, "BENCH MD5": pair.bench.md5}


def load() -> Md5Comparator:
    return Md5Comparator()
