"""A statistic the training-state monitor records per tensor, from a plugin: the kurtosis of each tensor."""

from __future__ import annotations

from probe_core.api import MonitorStatSpec, hookimpl


def torch_kurtosis(x, eps):
    centred = x.float() - x.float().mean()
    variance = (centred ** 2).mean()
    return (centred ** 4).mean() / (variance ** 2 + eps)


@hookimpl
def probe_monitor_stats() -> list[MonitorStatSpec]:
    return [MonitorStatSpec("kurtosis", "the kurtosis of each tensor", lambda: {"pytorch": torch_kurtosis})]
