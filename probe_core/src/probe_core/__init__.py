"""probe: precision debugging for deep-learning training.

Importing this package loads no plugin and no framework: plugins are found
and loaded on demand by :func:`probe_core.plugins.load_registry`.
"""

from __future__ import annotations

import pluggy

from probe_core.errors import ProbeError

__all__ = ["ProbeError", "__version__", "hookimpl"]

#: Decorate plugin functions with this to implement a hook from :mod:`probe_core.hookspecs`.
hookimpl = pluggy.HookimplMarker("probe")


def __getattr__(name: str) -> str:
    """``__version__``, read on first use (from the installed distribution's metadata)."""
    if name == "__version__":
        from probe_core.installed import version

        return version("probe-core") or "0+unknown"
    raise AttributeError(f"module 'probe_core' has no attribute {name!r}")
