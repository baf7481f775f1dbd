"""The comparator interface: what ``ComparatorSpec.load()`` returns.

A comparator is any object with:

``columns: Sequence[str]``
    the CSV/XLSX columns it fills, in order.
``compare(pair: LeafPair) -> Mapping[str, Any]``
    the values of those columns for one matched row (a missing key is
    written ``N/A``). Numbers are raw: relative errors as fractions. Raise
    :class:`probe_core.errors.ProbeError` for a user-facing problem (e.g. a
    missing tensor file); any other exception is reported as a plugin error.

and optionally:

``placement: str``
    ``"metrics"`` puts the columns where msprobe puts its metric columns
    (between the tensor shapes and the statistics); ``"extra"`` (default)
    appends them after msprobe's columns, so existing post-processing keeps
    working.
``percent_columns: Collection[str]``
    columns written as percent strings (``"1.5%"``), as msprobe writes
    statistics-mode relative errors.

Comparators run for the mode of the dumps (their spec's ``mode``), in the
registry's ``(priority, name)`` order; the values of every comparator of a
row land in ``RowResult.metrics``, which the legend rules of
:mod:`probe_core.compare.rules` read (``NormRelativeErr``, ``Cosine``,
``One Thousandth Err Ratio``). ``pair.cache`` is shared by the comparators
of one row, so e.g. loaded tensor arrays are read once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from probe_core.dump.leaves import TensorMeta
from probe_core.errors import PluginError


@dataclass
class LeafPair:
    """One row to compare: the target (``npu``) and bench leaves and, in tensor mode, their files."""

    entry: str
    npu: TensorMeta
    bench: TensorMeta
    mode: str
    npu_path: Path | None = None
    bench_path: Path | None = None
    cache: dict[str, Any] = field(default_factory=dict)


class Comparator(Protocol):
    columns: Sequence[str]

    def compare(self, pair: LeafPair) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class LoadedComparator:
    """A comparator object with its spec's name, plugin and resolved options."""

    name: str
    plugin: str
    impl: Any
    columns: tuple[str, ...]
    placement: str
    percent_columns: frozenset[str]


def load_comparators(registry, mode: str) -> list[LoadedComparator]:
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
                              f"list and a 'compare(pair)' method; see probe_core.compare.comparator")
        placement = getattr(impl, "placement", "extra")
        if placement not in ("metrics", "extra"):
            raise PluginError(f"comparator {spec.name!r}: placement must be 'metrics' or 'extra', got {placement!r}")
        loaded.append(LoadedComparator(spec.name, spec.plugin, impl, tuple(columns), placement,
                                       frozenset(getattr(impl, "percent_columns", ()))))
    return loaded


def known_modes(registry) -> list[str]:
    """The data modes some installed comparator handles."""
    return sorted({spec.mode for spec in registry.comparators.values()})
