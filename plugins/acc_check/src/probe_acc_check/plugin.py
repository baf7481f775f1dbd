"""The probe plugin: the ``acc-check`` commands and msprobe's precision standards.

Importing this module imports no framework (torch and MindSpore are imported
when a pre-check runs).
"""

from __future__ import annotations

from probe_core import hookimpl
from probe_core.specs import AccStandardSpec, CommandSpec

from probe_acc_check import command, standards


@hookimpl
def probe_commands() -> list[CommandSpec]:
    return list(command.COMMANDS)


@hookimpl
def probe_acc_standards() -> list[AccStandardSpec]:
    return standards.specs()
