"""Running the registered checkers' collect side.

A checker's ``collect(ctx)`` returns JSON-able data, ``None`` (nothing to
collect here), or a *live* collection: an object with ``snapshot() -> Json``
whose data grows while training runs (dataset batches, RNG calls). Live
objects may also have ``bind(flush)``: they call ``flush()`` when they have
news worth writing. ``ConfigChecker`` snapshots live objects every time it
writes the pack.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from probe_core.api import CheckContext, CheckerSpec, ProbeError, ProbeWarning, Registry


def is_live(value: Any) -> bool:
    return callable(getattr(value, "snapshot", None))


def describe(registry: Registry, names: Any) -> dict[str, dict[str, str]]:
    """What the manifest says about each checker: its plugin, distribution and description."""
    out = {}
    for name in names:
        spec: CheckerSpec = registry.checkers[name]
        try:
            dist = registry.info(spec.plugin).distribution
        except KeyError:
            dist = ""
        out[name] = {"plugin": spec.plugin, "distribution": dist, "description": spec.description}
    return out


def run_collect(registry: Registry, ctx: CheckContext, *, static_only: bool) -> dict[str, Any]:
    """checker name -> collected data (or live object) for every checker that had something to say."""
    collected: dict[str, Any] = {}
    for name, spec in registry.checkers.items():
        if static_only and not spec.static:
            continue
        try:
            value = spec.collect(ctx)
        except ProbeError:
            raise
        except Exception as exc:  # one broken checker must not lose the others' data
            warnings.warn(f"checker {name!r} (plugin {spec.plugin!r}) failed to collect: "
                          f"{type(exc).__name__}: {exc}", ProbeWarning, stacklevel=2)
            continue
        if value is not None:
            collected[name] = value
    return collected


def snapshot(collected: Mapping[str, Any]) -> dict[str, Any]:
    """Plain JSON data of every collection, live ones snapshotted now."""
    out = {}
    for name, value in collected.items():
        data = value.snapshot() if is_live(value) else value
        if data is not None:
            out[name] = data
    return out
