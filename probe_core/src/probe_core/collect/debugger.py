"""``PrecisionDebugger``'s framework-neutral half: config, plugins, the data mode, the collector's lifecycle.

A framework package subclasses :class:`PrecisionDebuggerBase` and sets
``framework``; the collector comes from the registry
(``registry.collector_for(framework)``), so a third-party collector can
replace the built-in one.
"""

from __future__ import annotations

from typing import Any, ClassVar

from probe_core.collect.session import Summary, check_dump_path
from probe_core.config import LEGACY_TASKS, ProbeConfig, load_config
from probe_core.errors import CollectionError
from probe_core.modes import mode_for_config


def build_collector(framework: str | None, config_path: Any = None, *, auto_step: bool = False,
                    registry: Any = None, detected: str | None = None, **overrides: Any) -> Any:
    """Validate the config, check the dump path, load the collector and data mode; nothing is written yet.

    The framework is ``framework`` (``--framework``, ``PrecisionDebugger``'s), else the config's
    ``framework`` key, else ``detected`` (from the script's imports), else the registry's default (the
    available collector of lowest priority). ``registry`` defaults to the process-wide one for the
    config's ``"plugins"`` section.
    """
    if framework:
        overrides.setdefault("framework", framework)
    config, registry = load_config(config_path, registry=registry, **overrides)
    chosen = config.framework or detected or registry.default_framework()
    if config.task in LEGACY_TASKS:  # an msprobe task that dumps nothing here (the config warned why)
        return InertCollector(config, chosen)
    check_dump_path(config.dump_path, overwrite=config.overwrite)
    spec = registry.collector_for(chosen)
    collector_class = spec.load()
    return collector_class(config, registry, mode_for_config(config, registry), auto_step=auto_step)


def start_script_collector(framework: str | None, config_path: Any = None, **overrides: Any) -> Any:
    """A collector started as ``probe run`` starts one around a training script: each step begins at the model's
    first forward and ends at the optimizer's step (``auto_step``). ``close()`` it when the script is over: it
    returns the run's :class:`Summary`. The arguments are :func:`build_collector`'s."""
    collector = build_collector(framework, config_path, auto_step=True, **overrides)
    collector.start(None, from_first_forward=True)
    return collector


class _NoSession:
    def __init__(self, config: ProbeConfig) -> None:
        self.config = config
        self.summary = Summary(dump_path=config.dump_path)


class InertCollector:
    """The collector of a task probe does not dump (``acc_check``, ``exception_dump``, ...): the script runs
    unchanged and nothing is written; loading the config said why, once."""

    forward_seen = False

    def __init__(self, config: ProbeConfig, framework: str) -> None:
        self.session = _NoSession(config)
        self.framework = framework

    def start(self, model: Any = None, **_: Any) -> None:
        """Nothing to record."""

    def stop(self) -> None:
        """Nothing to record."""

    def step(self) -> None:
        """Nothing to record."""

    def save(self, variable: Any, name: str, save_backward: bool = True) -> None:
        """Nothing to record."""

    def close(self) -> Summary:
        return self.session.summary


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

    def start(self, model: Any = None, token_range: Any = None, rank_id: Any = None,
              scheduled_tokens: dict[str, int] | None = None) -> None:
        """Start (or resume) collecting; ``model`` names the modules (the root model is no entry).
        ``scheduled_tokens`` (``{request_id: tokens}`` of an inference batch) with config ``request_id``:
        dump only that request's tokens, or nothing of this step when it is not in the batch.
        ``token_range`` and ``rank_id`` are accepted for msprobe's signature."""
        self.collector.start(model if model is not None else self.model)
        if scheduled_tokens is not None:
            schedule = getattr(self.session, "schedule_tokens", None)
            if schedule is not None:
                schedule(scheduled_tokens)

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
