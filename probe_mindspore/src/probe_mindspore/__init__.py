"""probe for MindSpore: the MindSpore collector and PrecisionDebugger.

``from probe_mindspore import PrecisionDebugger, seed_all, TrainerMon``. Importing this
package does not import mindspore until one of them is used; listing plugins
never does (see :mod:`probe_mindspore.plugin`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["PrecisionDebugger", "seed_all", "TrainerMon"]


def __getattr__(name: str) -> Any:
    if name == "TrainerMon":  # the training-state monitor (probe-monitor)
        from probe_monitor.mindspore_monitor import TrainerMon

        return TrainerMon
    if name in __all__:
        from probe_mindspore import debugger

        return getattr(debugger, name)
    raise AttributeError(name)
