"""The ``mindspore`` plugin: registers the MindSpore collector without importing mindspore."""

from __future__ import annotations

import importlib
import importlib.util
import sys

from probe_core.api import CollectorSpec, hookimpl



def _load() -> type:
    return importlib.import_module("probe_mindspore.collector").MindSporeCollector


def communicator_rank() -> tuple[int, int] | None:
    """MindSpore communication's (rank, world size) once initialised (mindspore not imported: none)."""
    if "mindspore" not in sys.modules:
        return None
    try:
        from mindspore.communication import GlobalComm, get_group_size, get_rank

        if GlobalComm.INITED:
            return int(get_rank()), int(get_group_size())
    except Exception:  # noqa: BLE001 - no communication backend in this build
        pass
    return None


def _operators():
    return importlib.import_module("probe_mindspore.apis").operators()


@hookimpl
def probe_collectors() -> list[CollectorSpec]:
    return [CollectorSpec("mindspore", "mindspore", "MindSpore (PyNative) cells, mint/ops/Tensor/communication APIs",
                          _load, operators=_operators, modules=("mindspore",), rank=communicator_rank,
                          priority=10,
                          is_available=lambda: importlib.util.find_spec("mindspore") is not None)]
