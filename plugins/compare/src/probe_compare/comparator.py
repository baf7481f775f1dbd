"""The comparator interface: what ``ComparatorSpec.load()`` returns.

A comparator is any object with:

``columns: Sequence[str]``
    the CSV/XLSX columns it fills, in order.
``compare(pair: LeafPair) -> Mapping[str, Any]``
    the values of those columns for one matched row (a missing key is
    written ``N/A``). Numbers are raw: relative errors as fractions. Raise
    :class:`probe_core.errors.ProbeError` for a user-facing problem (e.g. a
    missing tensor file: the compare stops, or with ``--lenient`` marks the
    row as an error); any other exception is reported once as a warning and
    the comparator is left out for the rest of the compare (its columns
    read ``N/A``), so one broken plugin does not cost the whole compare.

and optionally:

``judge(row: RowResult) -> tuple[str, str] | None``
    a verdict on one matched row (``row.metrics`` holds every comparator's
    values): ``("error" | "warning", "why")`` or ``None``. A verdict raises a
    row, never lowers it; ``probe compare`` and ``probe graph`` apply it alike.
``placement: str``
    ``"metrics"`` puts the columns where msprobe puts its metric columns
    (between the tensor shapes and the statistics); ``"extra"`` (default)
    appends them after msprobe's columns, so existing post-processing keeps
    working.
``percent_columns: Collection[str]``
    columns written as percent strings (``"1.5%"``), as msprobe writes
    statistics-mode relative errors.
``tool_tips: Mapping[str, str]``
    what ``probe graph``'s viewer shows when hovering one of its columns.
``compare_columns(target, bench) -> Mapping[str, Sequence[Any]]``
    :meth:`compare` for many rows at once (the columnar compare,
    :mod:`probe_compare.columnar`), given the data mode's column form
    of both sides (``DataMode.columns``; the statistics mode's
    ``StatColumns``): each column's values, one per row, equal to what
    ``compare`` gives row by row. Without it, ``compare`` is called on
    each row of the plain entries while the other comparators keep their
    column form; with a ``judge``, each plain row is also shown to it (an
    entry it raises is compared again on the row path): a comparator
    costs its own rows, never the columnar path of the others.

Comparators run for the mode of the dumps (their spec's ``mode``), in the
registry's ``(priority, name)`` order. ``pair.cache`` is shared by the
comparators of one row, so e.g. loaded tensor arrays are read once.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from probe_core.api import PluginError, ProbeError, ProbeWarning, TensorMeta

LEVELS = ("warning", "error")


@dataclass(slots=True)
class LeafPair:
    """One row to compare: the target (``npu``) and bench leaves and, when saved, their tensor files (a row's
    own state, such as a loaded tensor, goes in :attr:`cache`: a pair takes no other attribute)."""

    entry: str
    npu: TensorMeta
    bench: TensorMeta
    mode: str
    npu_path: Path | None = None
    bench_path: Path | None = None
    cache: dict[str, Any] = field(default_factory=dict)
    #: ``--config`` tensor post-processing: ``{(side, data_name): [(direction, calibration file), ...]}``
    postprocess: Mapping[tuple[str, str], Sequence[tuple[str, str]]] | None = None


class Comparator(Protocol):
    columns: Sequence[str]

    def compare(self, pair: LeafPair) -> Mapping[str, Any]: ...


@dataclass
class LoadedComparator:
    """A comparator object with its spec's name and plugin, its options resolved, isolated from failures."""

    name: str
    plugin: str
    impl: Any
    columns: tuple[str, ...]
    placement: str
    percent_columns: frozenset[str]
    judge: Callable[[Any], Any] | None = None
    tool_tips: Mapping[str, str] = field(default_factory=dict)
    failed: bool = False

    @property
    def columnar(self) -> bool:
        """Whether this comparator computes many rows at once (``compare_columns``)."""
        return not self.failed and callable(getattr(self.impl, "compare_columns", None))

    def run_columns(self, target: Any, bench: Any) -> Mapping[str, Sequence[Any]] | None:
        """The comparator's columns for many rows, or ``None`` when it raised (those rows then take the row path,
        where a failure is reported as usual)."""
        try:
            return self.impl.compare_columns(target, bench)
        except Exception:  # noqa: BLE001 - the row path reports it with the row's name
            return None

    def run(self, pair: LeafPair) -> Mapping[str, Any] | None:
        """The comparator's values for one row (``None`` once it has failed); ProbeErrors pass through."""
        if self.failed:
            return None
        try:
            return self.impl.compare(pair)
        except Exception as exc:
            if isinstance(exc, ProbeError):
                raise
            self._fail("compare", pair.npu.name, exc)
            return None

    def run_judge(self, row: Any) -> tuple[str, str] | None:
        """The comparator's verdict on one row, checked (``None`` once it has failed)."""
        if self.failed or self.judge is None:
            return None
        try:
            verdict = self.judge(row)
            if verdict is None:
                return None
            level, message = verdict
            if level not in LEVELS:
                raise ValueError(f"judge returned level {level!r}; use one of {', '.join(LEVELS)}")
            return level, str(message)
        except Exception as exc:
            if isinstance(exc, ProbeError):
                raise
            self._fail("judge", (row.npu or row.bench).name, exc)
            return None

    def _fail(self, method: str, where: str, exc: Exception) -> None:
        self.failed = True
        warnings.warn(f"comparator {self.name!r} (plugin {self.plugin!r}) raised in {method} on {where}: "
                      f"{type(exc).__name__}: {exc}; it is left out for the rest of this compare (its columns "
                      "read N/A)", ProbeWarning, stacklevel=4)


def load_comparators(registry: Any, mode: str) -> list[LoadedComparator]:
    """Load every registered comparator for ``mode``, checking each honours the interface."""
    loaded = []
    for spec in registry.comparators.values():
        if spec.mode != mode:
            continue
        try:
            impl = spec.load()
        except Exception as exc:
            raise PluginError(f"comparator {spec.name!r} (plugin {spec.plugin!r}) failed to load: "
                              f"{type(exc).__name__}: {exc}") from None
        columns = getattr(impl, "columns", None)
        if not callable(getattr(impl, "compare", None)) or not isinstance(columns, (list, tuple)):
            raise PluginError(f"comparator {spec.name!r} (plugin {spec.plugin!r}) must have a 'columns' "
                              f"list and a 'compare(pair)' method; see probe_compare.comparator")
        placement = getattr(impl, "placement", "extra")
        if placement not in ("metrics", "extra"):
            raise PluginError(f"comparator {spec.name!r}: placement must be 'metrics' or 'extra', got {placement!r}")
        judge = getattr(impl, "judge", None)
        loaded.append(LoadedComparator(spec.name, spec.plugin, impl, tuple(columns), placement,
                                       frozenset(getattr(impl, "percent_columns", ())),
                                       judge if callable(judge) else None,
                                       dict(getattr(impl, "tool_tips", None) or {})))
    return loaded


def known_modes(registry: Any) -> list[str]:
    """The data modes some installed comparator handles."""
    return sorted({spec.mode for spec in registry.comparators.values()})
