"""``PrecisionDebugger``'s framework-neutral half: config, plugin and data-mode selection, the collector's lifecycle.

A framework package subclasses :class:`PrecisionDebuggerBase` and sets
``framework``; the collector comes from the registry
(``registry.collector_for(framework)``), so a third-party collector can
replace the built-in one.
"""

from __future__ import annotations

from typing import Any, ClassVar

from probe_core.collect.session import Summary, check_dump_path
from probe_core.config import ProbeConfig, load_config
from probe_core.errors import CollectionError, PluginError


def mode_name(config: ProbeConfig) -> str:
    """The data mode a config selects: ``statistics``/``md5`` (summary_mode), ``tensor`` or ``overflow_check``."""
    if config.task == "tensor":
        return "tensor"
    if config.task == "overflow_check":
        return "overflow_check"
    if config.task in ("statistics", "structure"):
        return "md5" if config.summary_mode == "md5" else "statistics"
    raise CollectionError(f'{config.source}: task "{config.task}" cannot be collected by probe; '
                          'use "statistics", "tensor" or "overflow_check"')


def load_mode(config: ProbeConfig, registry: Any) -> Any:
    name = mode_name(config)
    spec = registry.data_modes.get(name)
    if spec is None:
        have = ", ".join(registry.data_modes) or "none"
        raise PluginError(f'data mode "{name}" (task "{config.task}") is not installed (installed: {have}); '
                          "pip install probe-modes")
    return spec.load()


def build_collector(framework: str | None, config_path: Any = None, *, auto_step: bool = False,
                    **overrides: Any) -> Any:
    """Validate the config, check the dump path, load the collector and data mode; nothing is written yet.

    ``framework`` ``None`` means the config's ``framework`` key, else ``pytorch``.
    """
    if framework:
        overrides.setdefault("framework", framework)
    config, registry = load_config(config_path, **overrides)
    check_dump_path(config.dump_path)
    spec = registry.collector_for(config.framework or framework or "pytorch")
    collector_class = spec.load()
    return collector_class(config, registry, load_mode(config, registry), auto_step=auto_step)


class PrecisionDebuggerBase:
    """msprobe's ``PrecisionDebugger`` API: ``start(model)``, ``stop()``, ``step()``, ``save(...)``.

    ``config_path`` is a config.json; keyword arguments override its keys
    (``task``, ``dump_path``, ``level``, ``step``, ``rank``, ``scope``,
    ``list``, ``data_mode``, ``summary_mode``, ``async_dump``, ...). The last
    debugger created is the one ``PrecisionDebugger.save`` writes to.
    """

    framework: ClassVar[str] = ""
    _instance: ClassVar[PrecisionDebuggerBase | None] = None

    def __init__(self, config_path: Any = None, *, model: Any = None, **overrides: Any) -> None:
        self.collector = build_collector(self.framework, config_path, **overrides)
        self.model = model
        self._closed = False
        type(self)._instance = self
        PrecisionDebuggerBase._instance = self

    @property
    def session(self) -> Any:
        return self.collector.session

    def start(self, model: Any = None) -> None:
        """Start (or resume) collecting; ``model`` names the modules (the root model is no entry)."""
        self.collector.start(model if model is not None else self.model)

    def stop(self) -> None:
        """Pause collecting; everything recorded so far is flushed to the step's journal."""
        self.collector.stop()

    def step(self) -> None:
        """End the current step: its files are written atomically; the next step starts."""
        self.collector.step()

    def close(self) -> Summary:
        """Finish: write the current step's files (if it recorded anything) and remove every hook."""
        if self._closed:
            return self.session.summary
        self._closed = True
        return self.collector.close()

    @classmethod
    def save(cls, variable: Any, name: str, save_backward: bool = True) -> None:
        """Record one variable (tensor or nested structure) into ``debug.json`` as ``{name}.{n}.debug``."""
        debugger = cls._instance
        if debugger is None:
            raise CollectionError("PrecisionDebugger.save: create a PrecisionDebugger(...) first")
        debugger.collector.save(variable, name, save_backward)
