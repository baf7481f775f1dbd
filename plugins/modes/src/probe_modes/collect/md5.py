"""``md5`` (statistics task, ``summary_mode: "md5"``): statistics plus the CRC-32 of the raw bytes.

msprobe calls it md5 but writes ``zlib.crc32`` of the tensor's bytes as 8
lower-case hex digits; probe writes the same value.
"""

from __future__ import annotations

import zlib
from typing import Any

from probe_modes.collect.statistics import StatisticsMode


def crc32_hex(buffer: Any) -> str:
    """``zlib.crc32`` of a buffer as 8 hex digits (msprobe's "md5")."""
    return f"{zlib.crc32(buffer) & 0xFFFFFFFF:08x}"


class Md5Mode(StatisticsMode):
    name = "md5"

    def extend(self, record: dict[str, Any], tensor: Any, ops: Any, sink: Any, label: str) -> None:
        cached = getattr(ops, "cached_checksum", None)  # a tensor met twice in a batch is hashed once
        record["md5"] = cached(tensor, lambda: crc32_hex(ops.raw_bytes(tensor))) if cached is not None \
            else crc32_hex(ops.raw_bytes(tensor))


def load() -> Md5Mode:
    return Md5Mode()
