"""probe for PyTorch: the PyTorch collector and PrecisionDebugger.

``from probe_torch import PrecisionDebugger, seed_all, TrainerMon``. Importing this
package imports torch; listing plugins does not (see :mod:`probe_torch.plugin`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["PrecisionDebugger", "seed_all", "TrainerMon"]


def __getattr__(name: str) -> Any:
    if name == "TrainerMon":  # the training-state monitor (probe-monitor)
        from probe_monitor.torch_monitor import TrainerMon

        return TrainerMon
    if name in __all__:
        from probe_torch import debugger

        return getattr(debugger, name)
    raise AttributeError(name)
