"""Every extension point of probe, in one place.

A plugin is a module (or object) named by an entry point in group ``probe``
that implements some of these hooks, decorated with
:data:`probe_core.hookimpl`. Registration hooks take no arguments and return
a list of frozen specs from :mod:`probe_core.specs`; the registry collects
them, fills in the plugin name, rejects duplicate names (naming both
plugins) and orders each family by ``(priority, name)`` — never by load
order. Event hooks are called on every enabled plugin, in plugin-name order.

No hook here is ``firstresult``: where one implementation must be chosen
(the collector for a framework), the registry chooses by spec fields, so the
choice is explicit and reported when ambiguous.

``docs/plugins.md`` has one section per hook; a test fails when one is missing.
"""

from __future__ import annotations

from typing import Any

import pluggy

from probe_core.specs import (
    AccBackendSpec,
    AccStandardSpec,
    MonitorStatSpec,
    CheckerSpec,
    CollectorSpec,
    CommandSpec,
    ComparatorSpec,
    ConfigSectionSpec,
    DataModeSpec,
    GraphMergerSpec,
    MonitorWriterSpec,
    NameMapSpec,
    RunTaskSpec,
)

PROJECT = "probe"
hookspec = pluggy.HookspecMarker(PROJECT)


# -- registration hooks -------------------------------------------------------


@hookspec
def probe_collectors() -> list[CollectorSpec]:
    """Register framework collectors.

    Called once per registry build, when a collection starts or when
    ``probe plugins`` lists what is installed. Return one
    :class:`~probe_core.specs.CollectorSpec` per framework adapter. Keep the
    plugin module light: import the framework inside ``spec.load``.
    """


@hookspec
def probe_data_modes() -> list[DataModeSpec]:
    """Register data modes: everything a mode is, from collection to the graph.

    Called once per registry build. Return
    :class:`~probe_core.specs.DataModeSpec` objects whose ``load`` returns a
    :class:`probe_core.modes.DataMode`: how a tensor becomes a record
    (framework-neutral, through the collector's tensor operations), how a
    dump is recognised as the mode, which config values select it
    (``tasks``, ``summary_modes``), its compare verdicts and its graph
    legend. Its metric columns come from comparators registered for it.
    """


@hookspec
def probe_comparators() -> list[ComparatorSpec]:
    """Register comparators for matched dump entries of one data mode: columns and, optionally, verdicts.

    Called once per registry build; ``probe compare`` and ``probe graph``
    both run them through one judge, so a comparator's column and verdict
    show in the CSV, the XLSX and the ``.vis.db``. Return
    :class:`~probe_core.specs.ComparatorSpec` objects (the object ``load``
    returns is described in ``probe_compare.comparator``, probe-compare).
    """


@hookspec
def probe_checkers() -> list[CheckerSpec]:
    """Register config_check items.

    Called once per registry build, by ``probe check collect``,
    ``ConfigChecker`` and ``probe check compare``. Return
    :class:`~probe_core.specs.CheckerSpec` objects, each with a ``collect``
    and a ``compare`` side.
    """


@hookspec
def probe_graph_mergers() -> list[GraphMergerSpec]:
    """Register graph mergers for parallel layouts (tp, pp, vpp, ...).

    Called once per registry build, by ``probe graph`` when a parallel
    layout is given. Return :class:`~probe_core.specs.GraphMergerSpec`
    objects; every merger runs in ``(priority, name)`` order as
    ``merge(graphs, layout) -> graphs`` (see ``probe_graph.merge``, probe-graph).
    """


@hookspec
def probe_commands() -> list[CommandSpec]:
    """Register ``probe`` subcommands.

    Called once when the CLI builds its parser. Return
    :class:`~probe_core.specs.CommandSpec` objects; a name already taken by
    another plugin is an error naming both.
    """


@hookspec
def probe_config_sections() -> list[ConfigSectionSpec]:
    """Register config.json sections (or top-level keys, with section name ``""``).

    Called when a config is validated. Return
    :class:`~probe_core.specs.ConfigSectionSpec` objects; keys of a section
    declared by several plugins are merged, a key declared twice is an error.
    """


@hookspec
def probe_monitor_writers() -> list[MonitorWriterSpec]:
    """Register writers of the training-state monitor (``csv``, ``tensorboard``, ...).

    Called once per registry build, when a monitor starts. Return
    :class:`~probe_core.specs.MonitorWriterSpec` objects; the monitor
    config's ``format`` names the one to use.
    """


@hookspec
def probe_monitor_stats() -> list[MonitorStatSpec]:
    """Register statistics the training-state monitor records per tensor beyond its own (min, max, mean,
    norm, zeros, nans): a kurtosis of gradients, a share of outliers, ...

    Called once per registry build, when a monitor starts. Return
    :class:`~probe_core.specs.MonitorStatSpec` objects; the monitor config's ``ops`` names them.
    """


@hookspec
def probe_acc_standards() -> list[AccStandardSpec]:
    """Register precision standards of the offline API pre-check (``probe acc-check``).

    Called once per registry build, when a pre-check starts. Return
    :class:`~probe_core.specs.AccStandardSpec` objects.
    """


@hookspec
def probe_acc_backends() -> list[AccBackendSpec]:
    """Register framework backends of the offline API pre-check (``probe acc-check``).

    Called once per registry build, when a pre-check starts. Return
    :class:`~probe_core.specs.AccBackendSpec` objects; a dump is checked by
    the backend of its ``framework``.
    """


@hookspec
def probe_run_tasks() -> list[RunTaskSpec]:
    """Register tasks ``probe run --task NAME`` attaches to an unmodified script instead of dumping.

    Called when ``probe run`` starts with a ``--task`` value. Return
    :class:`~probe_core.specs.RunTaskSpec` objects; ``load()`` returns
    ``attach(request: RunRequest) -> handle``, and ``handle.close(exit_code)``
    runs once after the script ends.
    """


@hookspec
def probe_name_maps() -> list[NameMapSpec]:
    """Register name maps between two frameworks' dumps (MindSpore -> PyTorch API names, cell classes, ...).

    Called once per registry build, when ``probe compare`` (with a mapping: ``-lm``, ``-cm``, ...) or
    ``probe graph -lm`` pairs a dump of one framework with a dump of another. Return
    :class:`~probe_core.specs.NameMapSpec` objects, one per direction; a ``(target, bench)`` pair
    registered by two plugins is an error naming both.
    """


# -- event hooks --------------------------------------------------------------


@hookspec
def probe_on_record(name: str, entry: dict[str, Any], step: int, rank: int) -> None:
    """Observe one recorded dump entry.

    Called on the collecting process after an entry (``name``, e.g.
    ``Functional.linear.0.forward``, and its dump.json value) is complete,
    with the current ``step`` and ``rank``. Return nothing; keep it cheap, it
    runs on probe's writer thread (in record order), beside training. An exception here is reported and the
    plugin's event hooks are switched off; collection goes on.
    """


@hookspec
def probe_on_step_end(step: int, rank: int, dump_dir: str) -> None:
    """Observe the end of a collected step.

    Called once per step and rank after the step's files under ``dump_dir``
    (``.../step{N}/rank{R}``) are complete on disk. Return nothing.
    """
