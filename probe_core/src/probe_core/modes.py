"""What a data mode is, end to end, and how probe picks one.

A data mode (``statistics``, ``md5``, ``tensor``, ``overflow_check``, a
third party's ``xor``, ...) is registered through ``probe_data_modes`` as a
:class:`~probe_core.specs.DataModeSpec` whose ``load()`` returns a
:class:`DataMode`. That one object owns everything the mode means:

* **collection** — :meth:`DataMode.encode` turns one tensor into its
  dump.json record using only the collector's tensor operations;
  :meth:`DataMode.entry_policy` may drop entries (``overflow_check`` keeps
  only those holding NaN/Inf); :attr:`DataMode.saves_tensors` says whether
  the dump gets a ``dump_tensor_data/`` folder;
* **dumps** — :meth:`DataMode.recognises` tells a dump written in this mode
  (by probe or msprobe) from its task and first tensor record;
  :attr:`DataMode.compares_as` names the modes its dumps can also be compared
  in (a tensor dump also holds statistics);
* **compare** — the metric columns come from the comparators registered for
  the mode (``ComparatorSpec.mode``); the mode adds its verdicts
  (:meth:`DataMode.judge_row`; :meth:`DataMode.judge_io` for msprobe's
  rules), measures how far apart two leaves are for the noise-aware judge
  (:meth:`DataMode.discrepancy`), says why two leaves differ
  (:meth:`DataMode.differs`) and which of msprobe's fixed columns it shows;
* **graph** — :attr:`DataMode.graph_task`, :attr:`DataMode.legend`,
  :meth:`DataMode.tool_tips` and :meth:`DataMode.shown_metrics` say how the
  viewer names, colours and shows a compare in this mode.

The config selects a mode through the spec's ``tasks`` and
``summary_mode`` (:func:`mode_for_config`); a dump is recognised by
:func:`mode_of_dump`. Nothing in the core names a mode.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from probe_core.errors import CompareError, ConfigError, DumpError, PluginError

#: one compared leaf as the compare pipeline hands it to a mode (``probe_compare.api.RowResult``, probe-compare)
RowResult = Any

if TYPE_CHECKING:  # pragma: no cover
    from probe_core.collect.tensors import TensorOps, TensorSink
    from probe_core.dump.leaves import TensorMeta
    from probe_core.config import ProbeConfig


class EntryPolicy(Protocol):
    """Decides, per completed entry, whether the dump keeps it (see :meth:`DataMode.entry_policy`).

    ``keep(entry)`` gets the entry's dump.json value with statistics filled
    in; once ``exhausted`` is true no later entry can be kept and collection
    stops early.
    """

    exhausted: bool

    def keep(self, entry: Mapping[str, Any]) -> bool: ...


class DataMode:
    """The base of every data mode implementation; subclass it and override what differs.

    Every method has a neutral default, so a mode only states what makes it
    itself. The methods run in different processes (collection in the
    training process, compare and graph in probe's), so keep state out of
    the object except caches.
    """

    #: The mode's name, as its :class:`~probe_core.specs.DataModeSpec` registers it.
    name: str = ""

    # -- collection -------------------------------------------------------------------

    #: True when :meth:`encode` saves tensors through ``sink.save_tensor`` (the dump header then
    #: names ``dump_tensor_data/``).
    saves_tensors: bool = False

    def encode(self, tensor: Any, ops: TensorOps, sink: TensorSink, label: str) -> dict[str, Any]:
        """The dump.json record of one tensor (framework-neutral: use only ``ops`` and ``sink``).

        ``label`` says where the tensor sits in its entry (``input.0``,
        ``output.1``, ``parameters.weight``, ...). Statistics requested with
        ``sink.defer_stats(record, ops.stats(tensor))`` are filled in at the
        next flush, with one host transfer for the whole batch.
        """
        raise NotImplementedError(f"data mode {self.name!r} does not collect")

    def entry_policy(self, config: ProbeConfig) -> EntryPolicy | None:
        """A fresh :class:`EntryPolicy` for one collection, or ``None`` to keep every entry."""
        return None

    # -- reading dumps ----------------------------------------------------------------------

    #: Modes whose compare a dump of this mode also supports (its records hold their data too).
    compares_as: tuple[str, ...] = ()
    #: ``--rules msprobe``: the Result msprobe writes for a target tensor without a bench partner.
    msprobe_one_sided: str = "pass"

    def recognises(self, task: str, record: Mapping[str, Any] | None) -> bool:
        """True when a dump with header ``task`` whose first tensor record is ``record`` is in this mode.

        ``record`` is ``None`` when the dump holds no tensor. Modes are asked
        in ``(priority, name)`` order; the first that says yes reads the dump.
        """
        return False

    # -- compare -----------------------------------------------------------------------------

    #: Whether the CSV shows msprobe's eight statistics columns (``NPU max`` ... ``Bench l2norm``).
    statistics_columns: bool = True
    #: Whether the CSV shows msprobe's ``Data_name`` column (tensor files of both sides).
    data_name_column: bool = False

    def judge_row(self, row: RowResult) -> None:
        """Flag one compared leaf (``row.flag(level, message)``); both sides are tensors.

        The core has already applied the rules that hold in every mode
        (dtype, shape, requires_grad, non-tensor values, a leaf on one side);
        ``row.metrics`` holds every comparator's values for this leaf.
        """

    def judge_io(self, inputs: Sequence[RowResult], outputs: Sequence[RowResult]) -> None:
        """Flag output rows by how their error compares with the inputs' (rows matched on both sides)."""

    def discrepancy(self, row: RowResult) -> float | None:
        """How far apart the two tensors of ``row`` are, relative to their scale, for the noise-aware judge
        (:mod:`probe_compare.judge`): 0 when they agree exactly, about ``u`` when they differ by one
        rounding at unit roundoff ``u``, ``inf`` when only one side holds NaN/Inf; ``None`` when this mode
        cannot tell (the judge then skips the leaf). By default: 0 where :meth:`differs` finds no
        difference, ``inf`` where it does (a mode without a scale: any difference is a divergence)."""
        return 0.0 if self.differs(row) is None else math.inf

    def columns(self, rows: Sequence[tuple[TensorMeta, TensorMeta]]) -> tuple[Any, Any] | None:
        """The column form of many compared rows (target leaf, bench leaf), one per side, for the columnar
        compare (:mod:`probe_compare.columnar`), which hands it to :meth:`discrepancy_columns` and to
        the comparators' ``compare_columns``; ``None`` (the default): the mode has no such form, and its
        rows take the row path. ``rows`` is a :class:`~probe_compare.columnar.LeafPairs`: it also
        holds each side's statistics as one flat list, and each row's number of elements."""
        return None

    def discrepancy_columns(self, target: Any, bench: Any) -> Sequence[float] | None:
        """:meth:`discrepancy` of the rows of :meth:`columns`: one value per row, equal to what
        :meth:`discrepancy` gives row by row (``None``: take the row path)."""
        return None

    def measures_noise(self) -> bool:
        """Whether this mode has a scale of its own (:meth:`discrepancy` overridden): the noise-aware judge
        then decides on values; a mode without one keeps its row rules (``judge_row``/``judge_io``)."""
        return type(self).discrepancy is not DataMode.discrepancy

    def differs(self, row: RowResult) -> str | None:
        """Why the two tensors of ``row`` hold different values (a short reason), or ``None``.

        This decides the first divergence; shapes and presence are checked by
        the core first.
        """
        return None

    # -- graph -------------------------------------------------------------------------------

    #: ``tb_config.task`` of a compared ``.vis.db`` (msprobe: ``summary``, ``md5``, ``all``).
    graph_task: str = "summary"
    #: What the colour legend says is compared (``"statistics error of inputs/outputs"``).
    legend: str = "values of inputs/outputs"

    def load_tensor(self, path: Path | None, leaf_name: str) -> Any:
        """The tensor file ``path`` a record of this mode names, as a numpy array (modes that save tensors
        override it; tools such as the pre-check read real inputs through it). The default: the mode
        saves none."""
        raise DumpError(f"{leaf_name}: a {self.name} dump holds no tensor files; dump with task \"tensor\"")

    def tool_tips(self) -> dict[str, str]:
        """What the viewer shows when hovering a metric name."""
        return {}

    def shown_metrics(self, metrics: Mapping[str, Any]) -> dict[str, str]:
        """One leaf's metrics as the viewer shows them (text values)."""
        return {key: "null" if value is None else str(value) for key, value in metrics.items()}

    def shown_rows(self, names: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[dict[str, str]]:
        """:meth:`shown_metrics` of many leaves whose metrics have the same ``names`` (each row: the values in
        that order), as the columnar compare holds them; a mode may format them a column at a time."""
        return [self.shown_metrics(dict(zip(names, values))) for values in rows]

    def shown_columns(self, names: Sequence[str],
                      rows: Sequence[Sequence[Any]]) -> tuple[tuple[str, ...], list[list[str]]] | None:
        """:meth:`shown_rows` as columns, no dict per leaf: the shown names and, per name, a list of texts row by
        row or ``(fmt, floats)``: each float x shown as ``fmt % x`` where finite and ``repr(x)`` where not (``fmt``:
        ``"%r"`` or ``"%.<1-17>g"`` and literal text; the graph's C writer formats it without a Python string per
        value). The graph asks for this first; ``None`` (the default) sends it to :meth:`shown_rows`."""
        return None


# -- choosing a mode ------------------------------------------------------------------------------


@lru_cache(maxsize=None)
def load_mode(spec: Any) -> DataMode:
    """The implementation behind a :class:`~probe_core.specs.DataModeSpec` (loaded once), checked and named."""
    try:
        mode = spec.load()
    except Exception as exc:
        raise PluginError(f"data mode {spec.name!r} (plugin {spec.plugin!r}) failed to load: "
                          f"{type(exc).__name__}: {exc}") from None
    if not isinstance(mode, DataMode):
        raise PluginError(f"data mode {spec.name!r} (plugin {spec.plugin!r}): load() must return a "
                          f"probe_core.modes.DataMode, got {type(mode).__name__}")
    if not mode.name:
        mode.name = spec.name
    return mode


def _installed(registry: Any) -> str:
    return ", ".join(registry.data_modes) or "none"


def mode_for_config(config: ProbeConfig, registry: Any) -> DataMode:
    """The data mode ``config`` selects: a spec listing its ``task`` and its ``summary_mode``.

    Among the specs of the task, one listing the summary_mode wins, then one
    listing no summary_mode at all (the task alone selects it).
    """
    summary = config.summary_mode
    candidates = [s for s in registry.data_modes.values() if config.task in s.tasks]
    chosen = [s for s in candidates if summary in s.summary_modes] or \
        [s for s in candidates if not s.summary_modes]
    if chosen:
        return load_mode(chosen[0])
    if candidates:
        raise PluginError(f'{config.source}: summary_mode "{summary}" (task "{config.task}") is provided by no '
                          f"installed data mode (installed: {_installed(registry)}); install or enable the plugin "
                          f'that provides it ("probe plugins" lists them), or use one of: '
                          + ", ".join(f'"{m}"' for s in candidates for m in s.summary_modes))
    raise PluginError(f'{config.source}: task "{config.task}" is collected by no installed data mode '
                      f"(installed: {_installed(registry)}); install or enable its plugin "
                      '("probe plugins" lists them)')


def validate_summary_mode(config: ProbeConfig, registry: Any) -> None:
    """A ``summary_mode`` no installed mode of the task provides is a :class:`ConfigError` naming the key.

    Nothing is checked when no installed mode collects the task (then nothing can be collected, and
    collection says so).
    """
    summary = config.summary_mode
    specs = [s for s in registry.data_modes.values() if config.task in s.tasks]
    if not specs or any(not s.summary_modes for s in specs):
        return
    allowed = [m for s in specs for m in s.summary_modes]
    if summary not in allowed:
        raise ConfigError(f'{config.source}: key "{config.task}.summary_mode": "{summary}" is not allowed; allowed '
                          f"values: {', '.join(json.dumps(m) for m in allowed)} (the data modes installed "
                          'and enabled; "probe plugins" lists them)')


def mode_of_dump(task: str, record: Mapping[str, Any] | None, registry: Any, where: str) -> DataMode:
    """The installed mode that recognises a dump (``where`` names it in errors)."""
    for spec in registry.data_modes.values():
        mode = load_mode(spec)
        if mode.recognises(task, record):
            return mode
    keys = ", ".join(sorted(record)) if record else "no tensor"
    raise CompareError(f"{where}: no installed data mode reads this dump (task {task!r}, first tensor record: "
                       f"{keys}; installed modes: {_installed(registry)}); install or enable the plugin of the "
                       "mode it was dumped in")


def common_mode(target: DataMode, bench: DataMode, registry: Any) -> tuple[DataMode, bool] | None:
    """The mode two dumps are compared in and whether it is a fallback (worth a warning); ``None`` when none.

    The same mode, or one side's mode when the other side's dumps also hold
    its data (:attr:`DataMode.compares_as`).
    """
    if target.name == bench.name:
        return target, False
    for name in target.compares_as:
        if name == bench.name or name in bench.compares_as:
            return _named(name, registry, bench), True
    if target.name in bench.compares_as:
        return target, True
    return None


def pair_mode(target: DataMode, bench: DataMode, registry: Any, target_file: Any, bench_file: Any) -> DataMode:
    """The one mode two dumps are compared in, as ``probe compare`` and ``probe graph`` both decide it:
    :func:`common_mode`, a :class:`CompareError` naming both files when there is none, and a warning when it
    is a fallback (a statistics dump against an md5 dump compares statistics)."""
    common = common_mode(target, bench, registry)
    if common is None:
        raise CompareError(f"cannot compare a {target.name} dump ({target_file}) with a {bench.name} dump "
                           f"({bench_file}): dump both sides with the same task/summary_mode")
    mode, fallback = common
    if fallback:
        from probe_core.plugins import ProbeWarning  # (plugins imports this module)

        warnings.warn(f"{target_file} is a {target.name} dump and {bench_file} a {bench.name} dump: "
                      f"comparing them in {mode.name} mode", ProbeWarning, stacklevel=3)
    return mode


def _named(name: str, registry: Any, fallback: DataMode) -> DataMode:
    if name == fallback.name:
        return fallback
    spec = registry.data_modes.get(name)
    if spec is None:
        raise CompareError(f"the dumps can only be compared in {name} mode, which is not installed "
                           f"(installed: {_installed(registry)})")
    return load_mode(spec)
