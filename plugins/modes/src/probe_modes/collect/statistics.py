"""``statistics``: type, dtype, shape, Max/Min/Mean/Norm (computed on device, fetched in batches), requires_grad."""

from __future__ import annotations

from typing import Any


class StatisticsMode:
    """The default data mode; the other modes extend its record."""

    name = "statistics"
    only_overflow = False

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
        """Hook for modes that add keys after the statistics (md5, data_name)."""


def load() -> StatisticsMode:
    return StatisticsMode()
