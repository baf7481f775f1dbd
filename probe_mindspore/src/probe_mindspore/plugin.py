"""The ``mindspore`` plugin: registers the MindSpore collector without importing mindspore."""

from __future__ import annotations

import importlib
import importlib.util

from probe_core.api import CollectorSpec, hookimpl



def _load() -> type:
    return importlib.import_module("probe_mindspore.collector").MindSporeCollector


def _operators():
    return importlib.import_module("probe_mindspore.apis").operators()


@hookimpl
def probe_collectors() -> list[CollectorSpec]:
    return [CollectorSpec("mindspore", "mindspore", "MindSpore (PyNative) cells, mint/ops/Tensor/communication APIs",
                          _load, operators=_operators, modules=("mindspore",), priority=10,
                          is_available=lambda: importlib.util.find_spec("mindspore") is not None)]
