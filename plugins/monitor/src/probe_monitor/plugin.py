"""The ``monitor`` plugin: the csv and tensorboard writers, ``probe monitor compare`` and ``probe run --task monitor``.

Importing it imports no framework (torch/mindspore load when a monitor starts).
"""

from __future__ import annotations

from probe_core.api import CommandSpec, hookimpl, MonitorWriterSpec, RunTaskSpec


def _csv():
    from probe_monitor.writers.csv_writer import CsvWriter

    return CsvWriter


def _tensorboard():
    from probe_monitor.writers.tensorboard_writer import TensorBoardWriter

    return TensorBoardWriter


def _run_task():
    from probe_monitor.run_task import attach

    return attach


def _configure(parser):
    from probe_monitor.compare.command import configure

    configure(parser)


def _run(args):
    from probe_monitor.compare.command import run

    return run(args)


@hookimpl
def probe_monitor_writers() -> list[MonitorWriterSpec]:
    return [MonitorWriterSpec("csv", "msprobe's layout: rank{R}/{tag}_{first}-{last}.csv", _csv),
            MonitorWriterSpec("tensorboard", "TensorBoard scalars {tag}/{name}/{op} per rank", _tensorboard,
                              priority=10)]


@hookimpl
def probe_commands() -> list[CommandSpec]:
    return [CommandSpec("monitor", "training-state monitor outputs: probe monitor compare A B -o OUT",
                        _configure, _run)]


@hookimpl
def probe_run_tasks() -> list[RunTaskSpec]:
    return [RunTaskSpec("monitor", "per-step gradient/parameter/optimizer statistics (-c monitor_config.json)",
                        _run_task)]
