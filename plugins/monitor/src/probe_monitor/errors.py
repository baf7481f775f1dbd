"""probe-monitor's error: a :class:`~probe_core.errors.CollectionError`, printed by the CLI as one red line."""

from __future__ import annotations

from probe_core.api import CollectionError


class MonitorError(CollectionError):
    """The monitor cannot start or go on: unwritable output, no optimizer, unknown writer, ..."""
