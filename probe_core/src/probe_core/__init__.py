"""probe: precision debugging for deep-learning training.

Importing this package loads no plugin and no framework: plugins are found
and loaded on demand by :func:`probe_core.plugins.load_registry`.
"""

from __future__ import annotations

from typing import Any

from probe_core.errors import ProbeError

__all__ = ["ProbeError", "__version__", "hookimpl"]


def __getattr__(name: str) -> Any:
    """``__version__``, read on first use (from the installed distribution's metadata), and ``hookimpl``
    (pluggy's marker: decorate plugin functions with it to implement a hook from :mod:`probe_core.hookspecs`),
    made on first use: ``probe --version`` imports no pluggy."""
    if name == "__version__":
        from probe_core.installed import version

        return version("probe-core") or "0+unknown"
    if name == "hookimpl":
        import pluggy

        globals()["hookimpl"] = marker = pluggy.HookimplMarker("probe")
        return marker
    raise AttributeError(f"module 'probe_core' has no attribute {name!r}")
