"""Monitor writers: the interface third-party writers implement, and how the config's ``format`` picks one.

A writer is registered with the ``probe_monitor_writers`` hook (a
:class:`~probe_core.specs.MonitorWriterSpec` whose ``name`` is the ``format`` value). Its ``load()``
returns a **factory** ``factory(context: WriterContext) -> writer``, called once per rank when the
monitor starts; the writer has two methods:

* ``write_step(step: int, rows: list[Row]) -> None`` — once per recorded step, with every
  :class:`~probe_monitor.records.Row` of that step (all quantities, in record order);
* ``close() -> None`` — once, when training ends: write what is buffered.

``context.directory`` is this rank's output folder (created, checked writable).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probe_core.api import ConfigError


@dataclass(frozen=True)
class WriterContext:
    """What a writer factory gets: this rank's folder, its rank, the statistics recorded, the whole config."""

    directory: Path
    rank: int
    ops: tuple[str, ...]
    config: Any  # probe_monitor.config.MonitorConfig


def open_writer(config: Any, registry: Any, context: WriterContext) -> Any:
    """The writer the config's ``format`` names, built for ``context``; an unknown format lists the installed ones."""
    if registry is None:
        from probe_core.api import current_registry

        registry = current_registry()
    writers = registry.family("monitor_writers")
    spec = writers.get(config.format)
    if spec is None:
        have = ", ".join(f'"{name}"' for name in writers) or "none"
        raise ConfigError(f'{config.source}: key "format": "{config.format}" is not an installed monitor writer; '
                          f"installed: {have} (probe plugins lists them)")
    return spec.load()(context)
