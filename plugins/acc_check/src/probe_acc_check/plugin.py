"""The probe plugin: the ``acc-check`` commands and msprobe's precision standards.

Importing this module imports no framework (torch and MindSpore are imported
when a pre-check runs).
"""

from __future__ import annotations

from probe_core.api import AccBackendSpec, AccStandardSpec, CommandSpec, hookimpl

from probe_acc_check import command, standards


@hookimpl
def probe_commands() -> list[CommandSpec]:
    return list(command.COMMANDS)


@hookimpl
def probe_acc_standards() -> list[AccStandardSpec]:
    return standards.specs()


def _torch_backend() -> type:
    from probe_acc_check.torch_backend import TorchBackend

    return TorchBackend


def _mindspore_backend() -> type:
    from probe_acc_check.ms_backend import MindSporeBackend

    return MindSporeBackend


@hookimpl
def probe_acc_backends() -> list[AccBackendSpec]:
    return [AccBackendSpec("torch", "PyTorch dumps: tested on --device, benchmark in float64 on the CPU",
                           _torch_backend, framework="pytorch"),
            AccBackendSpec("mindspore", "MindSpore dumps: tested in PyNative, benchmark their PyTorch twins",
                           _mindspore_backend, framework="mindspore")]
