"""The ``torch`` plugin: registers the PyTorch collector without importing torch."""

from __future__ import annotations

import importlib
import importlib.util
import sys

from probe_core.api import CollectorSpec, ConfigKey, ConfigSectionSpec, hookimpl


def _load():
    return importlib.import_module("probe_torch.collector").TorchCollector


def communicator_rank() -> tuple[int, int] | None:
    """torch.distributed's (rank, world size) once a process group is initialised (torch not imported: none)."""
    torch = sys.modules.get("torch")
    dist = getattr(torch, "distributed", None) if torch is not None else None
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None


def _operators():
    return importlib.import_module("probe_torch.apis").operators()


@hookimpl
def probe_collectors() -> list[CollectorSpec]:
    return [CollectorSpec("torch", "pytorch", "PyTorch modules, torch/functional/Tensor/distributed APIs",
                          _load, operators=_operators, modules=("torch",), rank=communicator_rank,
                          is_available=lambda: importlib.util.find_spec("torch") is not None)]


@hookimpl
def probe_config_sections() -> list[ConfigSectionSpec]:
    return [ConfigSectionSpec("", (
        ConfigKey("dtensor", str, "local", choices=("local", "full"),
                  doc="a DTensor's values (FSDP2, tensor parallelism): local records each rank's shard (no "
                      "communication); full gathers the whole tensor on every rank (a collective per tensor)"),
    ), description="PyTorch collection")]
