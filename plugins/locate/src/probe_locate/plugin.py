"""The ``locate`` plugin: ``probe locate``. Importing it imports no framework and none of the stages."""

from __future__ import annotations

from probe_core.api import CommandSpec, RunTaskSpec, hookimpl


def _configure(parser):
    from probe_locate.command import configure

    configure(parser)


def _run(args):
    from probe_locate.command import run

    return run(args)


@hookimpl
def probe_commands() -> list[CommandSpec]:
    return [CommandSpec("locate", "from two runs that drift to the operator: monitor, L0 of that step, mix/tensor of "
                        "that module, replay of that API", _configure, _run)]


def _window():
    from probe_locate.window import MonitorWindow

    return MonitorWindow


@hookimpl
def probe_run_tasks() -> list[RunTaskSpec]:
    return [RunTaskSpec("locate-monitor", "probe locate's stage 1: the monitor and an L0 dump in the same run, the "
                        "script ending after the steps monitored (-c config.json: {\"monitor\": FILE, \"dump\": "
                        "FILE})", _window)]
