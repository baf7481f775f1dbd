"""This process' rank and world size: the one reader every collector, monitor and checker uses.

The framework's communicator answers once it is initialised (each collector plugin says how, through
:attr:`probe_core.specs.CollectorSpec.rank`); before that, and for a framework without one, the
launcher's environment does: ``RANK``, else ``RANK_ID`` (MindSpore's launchers), else 0; ``WORLD_SIZE``,
else ``RANK_SIZE``, else 1.
"""

from __future__ import annotations

import os
from typing import Any


def _env_int(names: tuple[str, ...], default: int) -> int:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            try:
                return int(value)
            except ValueError:
                continue
    return default


def launcher_rank() -> tuple[int, int]:
    """``(rank, world size)`` from the launcher's environment (torchrun, msrun, mpirun-style variables)."""
    rank = _env_int(("RANK", "RANK_ID"), 0)
    return rank, max(_env_int(("WORLD_SIZE", "RANK_SIZE"), 1), rank + 1)


def process_rank(framework: str | None = None, registry: Any = None) -> tuple[int, int]:
    """``(rank, world size)`` of this process: ``framework``'s initialised communicator (its collector's
    ``rank``), else the launcher's environment."""
    if framework:
        from probe_core.errors import PluginError
        from probe_core.plugins import current_registry

        try:
            spec = (registry or current_registry()).collector_for(framework)
        except PluginError:
            spec = None
        found = spec.rank() if spec is not None and spec.rank is not None else None
        if found is not None:
            return found
    return launcher_rank()
