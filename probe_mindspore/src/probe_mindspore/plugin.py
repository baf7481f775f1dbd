"""The ``mindspore`` plugin: registers the MindSpore collector and the MindSpore<->PyTorch name maps without
importing mindspore."""

from __future__ import annotations

import importlib
import importlib.util
import sys

from probe_core.api import CollectorSpec, NameMapSpec, hookimpl



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


def _names(function: str):
    return lambda: getattr(importlib.import_module("probe_mindspore.names"), function)()


@hookimpl
def probe_name_maps() -> list[NameMapSpec]:
    return [NameMapSpec("mindspore", "pytorch", "MindSpore -> PyTorch API names, cell classes, parameter names",
                        _names("mindspore_to_pytorch")),
            NameMapSpec("pytorch", "mindspore", "PyTorch -> MindSpore API names, module classes, parameter names",
                        _names("pytorch_to_mindspore"))]
