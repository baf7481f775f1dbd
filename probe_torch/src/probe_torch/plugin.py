"""The ``torch`` plugin: registers the PyTorch collector without importing torch."""

from __future__ import annotations

import importlib
import importlib.util

from probe_core.api import CollectorSpec, hookimpl


def _load():
    return importlib.import_module("probe_torch.collector").TorchCollector


def _operators():
    return importlib.import_module("probe_torch.apis").operators()


@hookimpl
def probe_collectors() -> list[CollectorSpec]:
    return [CollectorSpec("torch", "pytorch", "PyTorch modules, torch/functional/Tensor/distributed APIs",
                          _load, operators=_operators, modules=("torch",),
                          is_available=lambda: importlib.util.find_spec("torch") is not None)]
