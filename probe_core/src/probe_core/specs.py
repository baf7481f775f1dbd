"""What plugins hand to probe: small frozen dataclasses, one per extension family.

Registration hooks (see :mod:`probe_core.hookspecs`) return lists of these.
Each spec carries a ``name`` that is unique within its family; the registry
fills in ``plugin`` (the registering plugin's name) so that a clash can name
both sides. Heavy work sits behind callables, so that listing plugins never
imports torch or mindspore.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import Any

from probe_core.records import record

#: what a name map plugin loads (``probe_compare.api.NameMap``, probe-compare)
NameMap = Any

#: JSON-able data: what checkers collect and what config values are.
Json = Any


@record
class Deferred:
    """The callable ``"package.module:name"``, imported on its first call: what a plugin gives a spec's callable
    field (a command's ``configure`` and ``run``, a checker's ``collect``) so that loading the plugin imports none
    of the code behind it. Every ``probe`` command loads every plugin: one whose module imports its whole
    implementation slows them all. A target that does not import is a :class:`~probe_core.errors.PluginError`
    naming it, at the first call."""

    target: str

    def __post_init__(self) -> None:
        module, _, name = self.target.partition(":")
        if not module or not name.isidentifier():
            raise ValueError(f"Deferred({self.target!r}): give 'package.module:name'")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from importlib import import_module

        from probe_core.errors import PluginError

        module, _, name = self.target.partition(":")
        try:
            found = getattr(import_module(module), name)
        except (ImportError, AttributeError) as exc:
            raise PluginError(f"{self.target}: {type(exc).__name__}: {exc}") from None
        return found(*args, **kwargs)


@record
class CollectorSpec:
    """A framework adapter that hooks modules/cells and APIs during collection.

    ``load`` imports and returns the collector implementation; it is called
    only when a collection for ``framework`` starts. ``is_available`` must be
    cheap (e.g. ``importlib.util.find_spec("torch") is not None``).

    ``operators`` (optional) loads the collector's operator table: a callable
    taking a recorded API name (``Functional.gelu``, ``Tensor.__add__``) and
    returning the framework callable the collector records under that name, or
    ``None`` for any name that is not one of the framework's value operators.
    Tools that re-run APIs from a dump (``probe acc-check``) call nothing else,
    so a hostile dump cannot name ``os.system`` or a file loader.

    ``modules``: the top-level modules whose import in a script selects this
    collector under ``probe run`` (``("torch",)``). ``priority`` also orders
    the frameworks: a script that names none (and no ``--framework`` or
    config ``framework``) runs under the available collector of lowest
    priority. ``rank`` (optional): ``(rank, world size)`` from the
    framework's initialised communicator, ``None`` before it is initialised
    (:func:`probe_core.ranks.process_rank` then reads the launcher's
    environment); it must not import the framework.
    """

    name: str
    framework: str
    description: str
    load: Callable[[], Any]
    is_available: Callable[[], bool] = field(default=lambda: True)
    priority: int = 0
    plugin: str = ""
    operators: Callable[[], Callable[[str], Any]] | None = None
    modules: tuple[str, ...] = ()
    rank: Callable[[], tuple[int, int] | None] | None = None


@record
class DataModeSpec:
    """A data mode: how tensors become records, how its dumps compare and show (``statistics``, ``md5``, ...).

    ``load`` returns the :class:`probe_core.modes.DataMode` that owns the
    whole behaviour. ``tasks`` are the config.json tasks that select it and
    ``summary_modes`` the ``summary_mode`` values (``()``: the task alone
    selects it); among the modes of one task, one naming the config's
    summary_mode wins over one naming none. ``priority`` orders the modes
    asked to recognise a dump (lower first): give a catch-all mode a high one.
    """

    name: str
    description: str
    load: Callable[[], Any]
    tasks: tuple[str, ...] = ()
    summary_modes: tuple[str, ...] = ()
    priority: int = 0
    plugin: str = ""


@record
class ComparatorSpec:
    """Metrics (columns) and optionally verdicts for matched entries of one data mode.

    ``mode`` names the data mode the comparator serves; several comparators
    may serve one mode (each adds its own columns), run in ``(priority,
    name)`` order, in ``probe compare`` and ``probe graph`` alike. ``load``
    returns the comparator object (see ``probe_compare.comparator``, probe-compare).
    """

    name: str
    mode: str
    description: str
    load: Callable[[], Any]
    priority: int = 0
    plugin: str = ""


@record
class CheckRow:
    """One line of a checker's comparison: an item, both sides' values, a verdict."""

    item: str
    bench: Json
    target: Json
    passed: bool
    note: str = ""


@record
class CheckContext:
    """What a checker may look at while collecting.

    ``shell_paths``: training scripts and config files named by the user;
    ``model``: the live model (dynamic mode) or ``None``; ``framework``:
    ``"pytorch"``, ``"mindspore"`` or ``None``; ``rank``: this process' rank.
    """

    shell_paths: Sequence[str] = ()
    model: Any = None
    framework: str | None = None
    rank: int = 0
    options: Mapping[str, Json] = field(default_factory=dict)


@record
class CheckerSpec:
    """A config_check item: ``collect`` gathers JSON-able data, ``compare`` diffs two of them.

    ``collect(ctx: CheckContext) -> Json`` (``None`` when there is nothing to
    collect in this context); ``compare(bench: Json, target: Json) ->
    list[CheckRow]``. ``static`` checkers run in ``probe check collect``;
    the others only with a live model. ``prepare(framework)``, when given,
    runs at ``ConfigChecker.apply_patches(fmk)`` — before the model exists —
    for checkers that must watch from the start (e.g. counting RNG calls).
    """

    name: str
    description: str
    collect: Callable[[CheckContext], Json]
    compare: Callable[[Json, Json], list[CheckRow]]
    static: bool = True
    priority: int = 0
    plugin: str = ""
    prepare: Callable[[str | None], None] | None = None


@record
class LoadableSpec:
    """The common shape of a family whose plugins hand over one object: a unique ``name``, a line
    for ``probe plugins``, ``load`` (imports and returns the object only when it is used), the
    ``(priority, name)`` order and the registering ``plugin`` (filled in by the registry)."""

    name: str
    description: str
    load: Callable[[], Any]
    priority: int = 0
    plugin: str = ""


@record
class GraphMergerSpec(LoadableSpec):
    """Merges per-rank graphs under a parallel layout (``tp``, ``pp``, ``vpp``, ...).

    ``load`` returns the merger object: ``merge(graphs, layout) -> graphs``,
    returning its input when it has nothing to do for the layout. Every
    installed merger runs, in ``(priority, name)`` order (probe-parallel-merge:
    tp 0, vpp 10, pp 20), on a data-parallel group's graphs ordered by (pp, tp).
    """


@record
class CommandSpec:
    """A ``probe`` subcommand.

    ``configure(parser)`` adds the command's arguments; ``run(args)`` does the
    work and returns the exit code. ``args.registry`` is the
    :class:`probe_core.plugins.Registry` the CLI loaded (config.json's
    ``"plugins"`` section applied). Raise :class:`probe_core.errors.ProbeError`
    for user errors: the CLI prints it as one red line.

    ``aliases``: other names of the command (msprobe's spellings, e.g.
    ``graph_visualize`` for ``graph``): the same parser and ``run``, listed
    once in ``probe --help`` beside the name; ``args.command`` is the name the
    user typed. A name or alias another command already has is an error naming
    both plugins.
    """

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    priority: int = 0
    plugin: str = ""
    aliases: tuple[str, ...] = ()


@record
class ConfigKey:
    """One key of a config.json section and what values it takes.

    ``kind``: a Python type or tuple of types the value must be.
    ``choices``: allowed values (for a list value: allowed items).
    ``check``: an extra test returning an error text, or ``None`` when fine.
    ``ignored``: for a key msprobe accepts that has no effect in probe, why (and what to do instead): a config
    setting it to anything but ``default`` loads with a warning naming the key and this text.
    """

    name: str
    kind: type | tuple[type, ...]
    default: Json = None
    choices: tuple[Json, ...] = ()
    check: Callable[[Json], str | None] | None = None
    doc: str = ""
    ignored: str = ""


@record
class ConfigSectionSpec:
    """A config.json section a plugin understands (``statistics``, ``tensor``, ...).

    ``name`` is the section key (``""`` for the top level). ``runs`` is False
    for sections of tasks probe knows but does not run: they load with a
    warning and are not validated key by key.
    """

    name: str
    keys: tuple[ConfigKey, ...]
    description: str = ""
    runs: bool = True
    plugin: str = ""


@record
class MonitorWriterSpec(LoadableSpec):
    """Where the training-state monitor writes its per-step statistics (``csv``, ``tensorboard``, ...).

    ``name`` is the monitor config's ``format`` value that selects it;
    ``load`` returns the writer factory (its interface is documented by
    the monitor distribution, probe-monitor).
    """


@record
class MonitorStatSpec(LoadableSpec):
    """A statistic the training-state monitor can record per tensor (its config's ``ops`` names it).

    ``load`` returns ``{framework: fn(tensor, eps) -> 0-d tensor}``: how each framework's monitor
    computes it on the tensor's device (``eps`` is the config's). A monitor whose framework the
    mapping lacks refuses a config naming it.
    """


@record
class AccBackendSpec(LoadableSpec):
    """A framework backend of the offline API pre-check: re-runs the APIs of ``framework``'s dumps
    (dump.json's ``"framework"``) on the device under test and on a float64 CPU benchmark.

    ``load`` returns the backend class (its interface is documented by the
    pre-check distribution, probe-acc-check); the lowest ``priority`` of a
    framework's backends is used.
    """

    framework: str = ""


@record
class AccStandardSpec(LoadableSpec):
    """A precision standard of the offline API pre-check: how an API's tested output is judged
    against its high-precision benchmark (msprobe's dtype-aware standards, an operator's own, ...).

    ``load`` returns the standard object (its interface is documented by the
    pre-check distribution, probe-acc-check); standards are consulted in
    ``(priority, name)`` order.
    """


@record
class RunRequest:
    """What ``probe run --task NAME`` hands a run task: the script to be run and probe run's options.

    ``config``: the ``-c`` file (the task's own format) or ``None``; ``output``: ``--dump-path`` or
    ``None`` (the task's default); ``framework``: ``--framework``, else the one framework whose
    collector's modules the script imports, else the default (the available collector of lowest
    priority); ``registry``: the loaded registry;
    ``overwrite``: ``--overwrite`` (replace a run already in the output folder instead of refusing).
    """

    script: str
    config: str | None = None
    output: str | None = None
    framework: str = ""
    registry: Any = None
    overwrite: bool = False


@record
class RunTaskSpec:
    """A task ``probe run --task NAME`` attaches to an unmodified script instead of dumping.

    ``load`` returns ``attach(request: RunRequest) -> handle``: called before the script starts, it
    installs what the task needs (hooks, global optimizer hooks, ...); ``handle.close(exit_code)`` is
    called once after the script ended (also when it raised or called ``sys.exit``: the code is then
    the script's, 1 when it raised) and finishes the task's files and prints its summary. A config.json task of the same name is not a run task's business.
    """

    name: str
    description: str
    load: Callable[[], Callable[[RunRequest], Any]]
    priority: int = 0
    plugin: str = ""


@record
class NameMapSpec:
    """How the entry names of ``target``'s dumps become those of ``bench``'s, for a cross-framework
    compare or graph (dump.json's ``"framework"`` values, e.g. ``"mindspore"`` and ``"pytorch"``).

    ``load`` returns a ``probe_compare.api.NameMap`` (API names and prefixes, module
    classes, parameter names, ...); it is called for each compared pair of dumps whose frameworks are
    ``target`` and ``bench``, and the caller adds the user's mapping files (``-lm``/``-cm``/``-am``/
    ``-dm``) to a copy of it. One plugin per ``(target, bench)`` pair; register each direction on its
    own. ``name`` (``"target->bench"``) is what ``probe plugins`` shows.
    """

    target: str
    bench: str
    description: str
    load: Callable[[], NameMap]
    plugin: str = ""

    @property
    def name(self) -> str:
        return f"{self.target}->{self.bench}"


SPEC_FAMILIES: dict[str, type] = {
    "collectors": CollectorSpec,
    "data_modes": DataModeSpec,
    "comparators": ComparatorSpec,
    "checkers": CheckerSpec,
    "graph_mergers": GraphMergerSpec,
    "commands": CommandSpec,
    "config_sections": ConfigSectionSpec,
    "monitor_writers": MonitorWriterSpec,
    "monitor_stats": MonitorStatSpec,
    "acc_standards": AccStandardSpec,
    "acc_backends": AccBackendSpec,
    "run_tasks": RunTaskSpec,
    "name_maps": NameMapSpec,
}
"""Registration family → the spec class its hook returns (hook ``probe_<family>``)."""
