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


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("probe-core")
    except PackageNotFoundError:
        return "0+unknown"


__version__ = _version()
