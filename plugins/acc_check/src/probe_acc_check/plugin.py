"""The probe plugin: the ``acc-check`` commands and msprobe's precision standards.

Importing this module imports no framework (torch and MindSpore are imported
when a pre-check runs).
"""

from __future__ import annotations

from probe_core.api import AccBackendSpec, AccStandardSpec, CommandSpec, Deferred, hookimpl

HELP = "offline API pre-check: re-run each dumped API on the device under test and a float64 CPU benchmark"


@hookimpl
def probe_commands() -> list[CommandSpec]:
    return [CommandSpec("acc-check", HELP, Deferred("probe_acc_check.command:configure"),
                        Deferred("probe_acc_check.command:run"), priority=40,
                        aliases=("acc_check", "multi_acc_check", "api_precision_compare"))]


@hookimpl
def probe_acc_standards() -> list[AccStandardSpec]:
    from probe_acc_check import standards

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
