"""Finding, loading and asking plugins.

Nothing here runs at ``import probe_core``: a :class:`Registry` is built on
demand, once per process and plugin selection, by :func:`current_registry`
(CLI commands, ``load_config``/``PrecisionDebugger``, worker processes);
:func:`load_registry` builds a fresh one (tests, embedding applications).
Entry points of group ``probe`` are listed from package metadata without
importing them; a plugin the user disabled is blocked before its module is
imported; a plugin that fails to import, or implements a hook no hookspec
declares, is reported and skipped. ``PROBE_DEBUG=1`` traces every hook call.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import pluggy

from probe_core import hookspecs, installed
from probe_core.errors import PluginError
from probe_core.records import record
from probe_core.specs import SPEC_FAMILIES, CollectorSpec, ConfigSectionSpec

ENTRY_POINT_GROUP = "probe"
AUTOLOAD_ENV = "PROBE_DISABLE_PLUGIN_AUTOLOAD"
DEBUG_ENV = "PROBE_DEBUG"  # "1": trace every hook call and its result on stderr
_TRUE = {"1", "true", "yes", "on"}

#: Plugins that ship inside probe-core and are registered like any other.
BUILTIN_PLUGINS: Mapping[str, str] = {
    "core": "probe_core.builtin",
    "run": "probe_core.collect.command",
}


class ProbeWarning(UserWarning):
    """A problem probe reports and works around (failed plugin, legacy config section, ...)."""


@record
class PluginSelection:
    """config.json ``"plugins"``: names to block, and names to load even with autoload off."""

    disable: tuple[str, ...] = ()
    enable: tuple[str, ...] = ()


@record
class PluginInfo:
    """What ``probe plugins`` reports about one plugin."""

    name: str
    distribution: str
    version: str
    status: str  # "enabled", "disabled", "failed" or "not loaded"
    hooks: tuple[str, ...] = ()
    error: str = ""
    builtin: bool = False

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"hooks": list(self.hooks)}


class _Candidate:
    """An installed plugin, not imported yet (a plain class: every command makes these; no dataclass to make)."""

    __slots__ = ("name", "distribution", "version", "load", "builtin")

    def __init__(self, name: str, distribution: str, version: str, load: Any, builtin: bool) -> None:
        self.name, self.distribution, self.version, self.builtin = name, distribution, version, builtin
        self.load = load  # () -> plugin object


def autoload_enabled() -> bool:
    return os.environ.get(AUTOLOAD_ENV, "").strip().lower() not in _TRUE


def tracing_requested() -> bool:
    """True when ``PROBE_DEBUG=1``: every registry traces its hook calls on stderr."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() in _TRUE


def _candidates() -> dict[str, _Candidate]:
    """Every installed plugin, by name, without importing any of them."""
    found: dict[str, _Candidate] = {
        name: _Candidate(name, "probe-core", installed.version("probe-core") or "0+unknown",
                         lambda module=module: importlib.import_module(module), True)
        for name, module in BUILTIN_PLUGINS.items()
    }
    for ep in installed.entry_points(ENTRY_POINT_GROUP):
        if ep.name in found:
            other = found[ep.name]
            if other.distribution == ep.distribution:
                continue  # the same distribution seen twice on sys.path
            raise PluginError(
                f"two plugins are named {ep.name!r}: one from distribution {other.distribution!r}, "
                f"one from {ep.distribution!r}; uninstall one of them (pip uninstall ...)"
            )
        found[ep.name] = _Candidate(ep.name, ep.distribution, ep.version, ep.load, False)
    return found


def _check_selection(selection: PluginSelection, known: Iterable[str]) -> None:
    """An unknown name in ``enable`` is an error; in ``disable`` a warning (one config.json serves
    machines with different plugins installed)."""
    known = sorted(known)
    for name in selection.enable:
        if name not in known:
            raise PluginError(f'config "plugins.enable": unknown plugin {name!r}; installed plugins: '
                              f"{', '.join(known)}")
    for name in selection.disable:
        if name not in known:
            warnings.warn(f'config "plugins.disable": unknown plugin {name!r} (not installed here, nothing to '
                          f"disable); installed plugins: {', '.join(known)}", ProbeWarning, stacklevel=3)
    both = sorted(set(selection.disable) & set(selection.enable))
    if both:
        raise PluginError(f'config "plugins": {", ".join(both)} both enabled and disabled; keep one')
    for name in selection.disable:
        if name in BUILTIN_PLUGINS:
            raise PluginError(f'config "plugins.disable": {name!r} is part of probe-core and cannot be disabled')


def load_registry(
    selection: PluginSelection | None = None,
    *,
    extra: Iterable[tuple[str, object]] = (),
    autoload: bool | None = None,
) -> Registry:
    """Build a registry of the installed plugins.

    ``selection`` comes from config.json ``"plugins"``; ``extra`` registers
    in-process plugins ``(name, object)`` (tests, embedding applications);
    ``autoload`` defaults to the ``PROBE_DISABLE_PLUGIN_AUTOLOAD`` switch —
    when off, only built-ins, ``extra`` and ``selection.enable`` load.
    """
    selection = selection or PluginSelection()
    autoload = autoload_enabled() if autoload is None else autoload
    candidates = _candidates()
    extra = list(extra)
    _check_selection(selection, list(candidates) + [name for name, _ in extra])

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    infos: list[PluginInfo] = []
    for name in sorted(candidates):
        cand = candidates[name]
        info = PluginInfo(name, cand.distribution, cand.version, "enabled", builtin=cand.builtin)
        if name in selection.disable:
            pm.set_blocked(name)
            infos.append(dataclasses.replace(info, status="disabled"))
            continue
        if not (cand.builtin or autoload or name in selection.enable):
            infos.append(dataclasses.replace(info, status="not loaded"))
            continue
        infos.append(_register(pm, info, cand.load))
    for name, plugin in extra:
        if name in candidates or pm.has_plugin(name):
            raise PluginError(f"plugin name {name!r} is already taken; register it under another name")
        info = PluginInfo(name, "(in-process)", "", "enabled")
        if name in selection.disable:
            infos.append(dataclasses.replace(info, status="disabled"))
            continue
        infos.append(_register(pm, info, lambda plugin=plugin: plugin))
    try:
        pm.check_pending()  # a safety net: _register already refused every hook without a hookspec
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"plugin {exc.plugin!r}: {exc}") from None
    registry = Registry(pm, tuple(sorted(infos, key=lambda i: i.name)))
    if not extra and autoload == autoload_enabled():  # what another process rebuilds (probe_core.executor)
        registry.selection = selection
    if tracing_requested():
        registry.enable_tracing()
    return registry


def _register(pm: pluggy.PluginManager, info: PluginInfo, load: Any) -> PluginInfo:
    """Import (``load()``) and register one plugin; return its :class:`PluginInfo`.

    A plugin that fails to import, fails pluggy's validation or implements a
    hook no hookspec declares (a misspelling would otherwise never be
    called) is left unregistered, warned about and reported ``failed``: a
    broken plugin must not take probe down.
    """
    try:
        pm.register(load(), name=info.name)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    else:
        unknown = _unknown_hooks(pm, info.name)
        if not unknown:
            return dataclasses.replace(info, hooks=_hook_names(pm, info.name))
        pm.unregister(name=info.name)
        error = "; ".join(unknown)
    warnings.warn(f"plugin {info.name!r} (distribution {info.distribution!r}) failed to load: {error}",
                  ProbeWarning, stacklevel=3)
    return dataclasses.replace(info, status="failed", error=error)


def _unknown_hooks(pm: pluggy.PluginManager, name: str) -> list[str]:
    """One message per hook implementation of plugin ``name`` that matches no hookspec."""
    plugin = pm.get_plugin(name)
    if plugin is None:
        return []
    known = sorted(hook for hook, caller in vars(pm.hook).items()
                   if not hook.startswith("_") and caller.has_spec())
    bare = {hook.removeprefix("probe_"): hook for hook in known}  # the shared prefix would match anything
    problems = []
    for caller in pm.get_hookcallers(plugin) or []:
        if caller.has_spec():
            continue
        import difflib  # an unknown hook's hint only

        close = difflib.get_close_matches(caller.name.removeprefix("probe_"), bare, n=1)
        hint = f"did you mean {bare[close[0]]!r}?" if close else f"the hooks are {', '.join(known)}"
        problems.append(f"unknown hook {caller.name!r} (no such hook; {hint})")
    return sorted(problems)


_CURRENT: dict[tuple[PluginSelection, bool], Registry] = {}


def current_registry(selection: PluginSelection | None = None) -> Registry:
    """The process-wide registry for ``selection`` (built on first use, then shared).

    Every command, ``PrecisionDebugger`` and worker process asks here, so the
    plugins are loaded once per process; :func:`load_registry` builds a fresh
    one (tests, embedding applications).
    """
    key = (selection or PluginSelection(), autoload_enabled())
    registry = _CURRENT.get(key)
    if registry is None:
        registry = _CURRENT[key] = load_registry(key[0])
    return registry


def _hook_names(pm: pluggy.PluginManager, name: str) -> tuple[str, ...]:
    plugin = pm.get_plugin(name)
    callers = (pm.get_hookcallers(plugin) or []) if plugin is not None else []
    return tuple(sorted(caller.name for caller in callers))


class Registry:
    """The loaded plugins and what they registered, family by family.

    Each family is a dict ``name -> spec`` ordered by ``(priority, name)``.
    A registration hook that raises disables that plugin's contribution
    (with a warning); two plugins registering one name is a
    :class:`PluginError` that names both.

    Every hook is called through pluggy, one plugin at a time (a
    ``subset_hook_caller`` per plugin and hook, built once): each result is
    attributed to its plugin, one plugin's exception never stops the
    others, and pluggy's tracing (:meth:`enable_tracing`) shows every call.
    """

    def __init__(self, pm: pluggy.PluginManager, plugins: tuple[PluginInfo, ...]) -> None:
        self.pm = pm
        self.plugins = plugins
        #: the config.json plugin selection a worker process rebuilds this registry from; ``None`` when it
        #: holds in-process plugins or another autoload setting, which no other process can rebuild
        self.selection: PluginSelection | None = None
        self._muted: set[str] = set()
        self._callers: dict[str, tuple[tuple[str, Any], ...]] = {}
        self._families: dict[str, dict[str, Any]] = {}  # each collected on first use: a command asks for few
        self._untrace: Any = None

    def callers(self, hook: str) -> tuple[tuple[str, Any], ...]:
        """``(plugin name, HookCaller calling only that plugin)`` for every plugin implementing ``hook``,
        in plugin-name order; built on first use, then cached (events are hot)."""
        callers = self._callers.get(hook)
        if callers is None:
            names = sorted({impl.plugin_name for impl in getattr(self.pm.hook, hook).get_hookimpls()})
            plugins = self.pm.list_name_plugin()
            callers = self._callers[hook] = tuple(
                (name, self.pm.subset_hook_caller(hook, [p for n, p in plugins if n != name and p is not None]))
                for name in names)
        return callers

    def enable_tracing(self) -> None:
        """Write every hook call (hook, arguments, the plugin called) and its result to stderr (idempotent)."""
        if self._untrace is not None:
            return
        self.pm.trace.root.setwriter(lambda text: sys.stderr.write(text))
        hooktrace = self.pm.trace.root.get("hook")
        undo_plugins = self.pm.add_hookcall_monitoring(  # runs inside pluggy's "<hook> [hook]" line
            lambda hook_name, methods, kwargs: hooktrace("plugin", ", ".join(repr(m.plugin_name) for m in methods)),
            lambda outcome, hook_name, methods, kwargs: None)
        undo_calls = self.pm.enable_tracing()

        def undo() -> None:
            undo_calls()
            undo_plugins()

        self._untrace = undo

    @property
    def failures(self) -> tuple[PluginInfo, ...]:
        return tuple(p for p in self.plugins if p.status == "failed")

    def info(self, name: str) -> PluginInfo:
        for plugin in self.plugins:
            if plugin.name == name:
                return plugin
        raise KeyError(name)

    def family(self, family: str) -> dict[str, Any]:
        found = self._families.get(family)
        if found is None:
            found = self._families[family] = self._collect(family, SPEC_FAMILIES[family])
        return found

    def _collect(self, family: str, cls: type) -> dict[str, Any]:
        specs: dict[str, Any] = {}
        for plugin, caller in self.callers(f"probe_{family}"):
            try:
                items = [item for result in caller() for item in (result or ())]
            except Exception as exc:
                warnings.warn(f"plugin {plugin!r} failed in probe_{family}: "
                              f"{type(exc).__name__}: {exc}", ProbeWarning, stacklevel=3)
                continue
            for item in items:
                if not isinstance(item, cls):
                    raise PluginError(f"plugin {plugin!r}: probe_{family} must return "
                                      f"{cls.__name__} objects, got {type(item).__name__}")
                item = dataclasses.replace(item, plugin=plugin)
                if family == "config_sections":
                    specs[item.name] = _merge_section(specs.get(item.name), item)
                    continue
                if item.name in specs:
                    raise PluginError(self._clash(family, item.name, specs[item.name].plugin, item.plugin))
                specs[item.name] = item
        ordered = sorted(specs.values(), key=lambda s: (getattr(s, "priority", 0), s.name))
        return {spec.name: spec for spec in ordered}

    def _clash(self, family: str, name: str, first: str, second: str) -> str:
        def where(plugin: str) -> str:
            try:
                return f"plugin {plugin!r} (distribution {self.info(plugin).distribution!r})"
            except KeyError:
                return f"plugin {plugin!r}"
        noun = family.rstrip("s").replace("_", " ")
        return f"{noun} {name!r} is registered twice: by {where(first)} and by {where(second)}; disable one in config.json \"plugins\""

    # -- convenient views -------------------------------------------------

    @property
    def collectors(self) -> dict[str, Any]:
        return self.family("collectors")

    @property
    def data_modes(self) -> dict[str, Any]:
        return self.family("data_modes")

    @property
    def comparators(self) -> dict[str, Any]:
        return self.family("comparators")

    @property
    def checkers(self) -> dict[str, Any]:
        return self.family("checkers")

    @property
    def graph_mergers(self) -> dict[str, Any]:
        return self.family("graph_mergers")

    @property
    def commands(self) -> dict[str, Any]:
        return self.family("commands")

    @property
    def config_sections(self) -> dict[str, ConfigSectionSpec]:
        return self.family("config_sections")

    @property
    def name_maps(self) -> dict[str, Any]:
        """``"target->bench"`` -> :class:`~probe_core.specs.NameMapSpec` (one per pair of frameworks)."""
        return self.family("name_maps")

    def default_framework(self) -> str:
        """The framework of the available collector of lowest ``(priority, name)``: what a script that names
        no framework runs under."""
        for spec in self.collectors.values():
            if spec.is_available():
                return spec.framework
        raise PluginError("no collector is installed (or its framework cannot be imported); install probe-torch "
                          "or another collector plugin")

    def collector_for(self, framework: str) -> CollectorSpec:
        """The available collector for ``framework`` (lowest priority value wins a tie-free choice)."""
        matching = [c for c in self.collectors.values() if c.framework == framework]
        if not matching:
            have = sorted({c.framework for c in self.collectors.values()}) or ["none"]
            raise PluginError(f"no collector plugin for framework {framework!r} is installed "
                              f"(collectors for: {', '.join(have)}); install probe-{framework}")
        available = [c for c in matching if c.is_available()]
        if not available:
            raise PluginError(f"the {framework} collector ({matching[0].plugin}) is installed but "
                              f"{framework} cannot be imported; pip install {framework}")
        best = min(c.priority for c in available)
        top = [c for c in available if c.priority == best]
        if len(top) > 1:
            raise PluginError(f"collectors {', '.join(c.name for c in top)} all claim {framework!r} with "
                              f"priority {best}; disable all but one in config.json \"plugins\"")
        return top[0]

    # -- events -------------------------------------------------------------

    def listens(self, event: str) -> bool:
        """True when some enabled plugin implements event hook ``event`` (cheap; check before emitting)."""
        return any(name not in self._muted for name, _ in self.callers(event))

    def unmute(self) -> None:
        """Give every muted event plugin a fresh start (a new collection run begins)."""
        self._muted.clear()

    def emit(self, event: str, **kwargs: Any) -> None:
        """Call event hook ``event`` on every plugin, in name order; a plugin that raises is muted."""
        for plugin, caller in self.callers(event):
            if plugin in self._muted:
                continue
            try:
                caller(**kwargs)
            except Exception as exc:
                self._muted.add(plugin)
                warnings.warn(f"plugin {plugin!r} raised in {event} and is muted for this run: "
                              f"{type(exc).__name__}: {exc}", ProbeWarning, stacklevel=2)


def _merge_section(old: ConfigSectionSpec | None, new: ConfigSectionSpec) -> ConfigSectionSpec:
    if old is None:
        return new
    taken = {key.name: old.plugin for key in old.keys}
    for key in new.keys:
        if key.name in taken:
            section = new.name or "top level"
            raise PluginError(f"config key {key.name!r} ({section}) is declared by plugin {taken[key.name]!r} "
                              f"and by plugin {new.plugin!r}")
    return dataclasses.replace(old, keys=old.keys + new.keys, runs=old.runs and new.runs)
