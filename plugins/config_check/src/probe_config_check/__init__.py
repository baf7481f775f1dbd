"""probe config_check: prove two training environments are the same before comparing their numbers.

The check items (env, pip, hyperparameters, weights, dataset, random) are
checkers (:class:`~probe_core.specs.CheckerSpec`, hook ``probe_checkers``), as
are third-party ones; this distribution also packs, unpacks and reports
(``pack``, ``msprobe_layout``, ``safezip``, ``report``), compares checkpoints (``ckpt``) and
brings the ``probe check`` command. ``ConfigChecker`` is the in-script API.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ConfigChecker"]


def __getattr__(name: str) -> Any:
    # lazy: ``import probe_config_check.plugin`` (done by ``probe plugins``) stays light
    if name == "ConfigChecker":
        from probe_config_check.dynamic import ConfigChecker

        return ConfigChecker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
