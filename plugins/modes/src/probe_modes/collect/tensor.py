"""``tensor``: statistics plus the tensor itself, saved under ``dump_tensor_data/`` and named by ``data_name``."""

from __future__ import annotations

from typing import Any

from probe_modes.collect.statistics import StatisticsMode


class TensorMode(StatisticsMode):
    name = "tensor"

    def extend(self, record: dict[str, Any], tensor: Any, ops: Any, sink: Any, label: str) -> None:
        record["data_name"] = sink.save_tensor(tensor, label)


def load() -> TensorMode:
    return TensorMode()
