"""config_check: prove two training environments are the same before comparing their numbers.

The core packs, unpacks and reports; every check item is a plugin
(:class:`~probe_core.specs.CheckerSpec`, hook ``probe_checkers``).
``ConfigChecker`` is the in-script API; ``probe check`` the CLI.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ConfigChecker"]


def __getattr__(name: str) -> Any:
    if name == "ConfigChecker":
        from probe_core.config_check.dynamic import ConfigChecker

        return ConfigChecker
    raise AttributeError(name)
