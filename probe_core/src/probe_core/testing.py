"""A testing kit for plugin authors: run probe in-process, with your plugins, from your own tests.

Everything here takes an explicit registry, so a test sees exactly the plugins it names::

    from probe_core import testing

    registry = testing.registry_with(MyModePlugin(), enable=["torch"])   # + the PyTorch collector
    a = testing.collect(train_step, tmp_path / "a", registry=registry, summary_mode="mine")
    b = testing.collect(perturbed_step, tmp_path / "b", registry=registry, summary_mode="mine")
    summary = testing.compare(b, a, tmp_path / "out", registry=registry)
    assert summary["first_divergence"]["name"] == "Functional.linear.1.forward"

* :func:`registry_with` — a fresh registry: probe-core's built-in plugins, the plugin objects you
  pass (modules, classes or instances with ``@hookimpl`` methods) and the installed plugins you
  ``enable``; entry-point autoloading is off unless you ask for it;
* :func:`collect` — a collection in-process through the registry's collector (a training script,
  as ``probe run`` runs it, or a callable that runs one step);
* :func:`compare` — ``probe compare`` in-process (probe-compare installed); returns the ``summary.json`` data;
* :func:`graph` — ``probe graph`` in-process (probe-graph installed); returns the ``.vis.db`` path;
* :func:`command` — any ``probe`` command in-process with the registry's commands;
* :func:`check` and :func:`check_rows` — a checker's ``collect`` and ``compare`` as
  ``probe check`` calls them, with the collected data round-tripped through JSON;
* :func:`run_script` — a script run as ``probe run`` runs it (run tasks' tests).

A graph merger's tests build graphs and merge them with ``probe_graph.api``'s ``build_graph``, ``Layout`` and
``merge_side``.

With pytest, ``pytest_plugins = ["probe_core.testing"]`` (in your top-level conftest.py) gives the
``probe_kit`` fixture: the same functions, with relative dump and output paths placed under the
test's ``tmp_path``.

Importing :mod:`probe_core` does not import this module; this module imports neither torch (only
:func:`collect` does, through the collector) nor pytest unless pytest is installed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from probe_core.plugins import PluginSelection, Registry, load_registry
from probe_core.specs import CheckContext, CheckerSpec, CheckRow

__all__ = ["ProbeKit", "check", "check_rows", "collect", "command", "compare", "graph", "registry_with",
           "run_script"]


def __getattr__(name: str) -> Any:
    if name == "run_script":  # the engine's, imported on first use
        from probe_core.collect.command import run_script

        return run_script
    if name in ("build_graph", "Layout", "merge_side"):
        raise AttributeError(f"probe_core.testing.{name} moved to probe_graph.api (distribution probe-graph)")
    raise AttributeError(f"module 'probe_core.testing' has no attribute {name!r}")

PathLike = str | os.PathLike


def _plugin_name(plugin: Any) -> str:
    name = getattr(plugin, "__name__", None) or type(plugin).__name__
    return str(name).replace(".", "_")


def registry_with(*plugins: Any, names: Iterable[str] | None = None, enable: Iterable[str] = (),
                  disable: Iterable[str] = (), autoload: bool = False) -> Registry:
    """A fresh :class:`~probe_core.plugins.Registry` with ``plugins`` registered in-process.

    ``plugins`` are objects implementing hooks (a module, a class, an instance) or ``(name,
    object)`` pairs; ``names`` names them instead (one per plugin; default: the object's
    ``__name__`` or its class name). A name must not be the name of an installed plugin (even one
    that is not loaded). ``enable`` loads installed plugins by name although autoloading is off
    (``["torch"]`` for the PyTorch collector, the name of a built-in data mode's plugin, ...);
    ``disable`` blocks them; ``autoload=True`` loads every installed plugin, as the CLI does.
    """
    pairs = [p if isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) else (None, p) for p in plugins]
    chosen = list(names) if names is not None else [None] * len(pairs)
    if len(chosen) != len(pairs):
        raise ValueError(f"registry_with: {len(pairs)} plugins but {len(chosen)} names")
    extra = [(name or given or _plugin_name(plugin), plugin)
             for (given, plugin), name in zip(pairs, chosen, strict=True)]
    selection = PluginSelection(disable=tuple(disable), enable=tuple(enable))
    return load_registry(selection, extra=extra, autoload=autoload)


def _registry(registry: Registry | None) -> Registry:
    if registry is not None:
        return registry
    from probe_core.plugins import current_registry

    return current_registry()


def collect(target: PathLike | Callable[[], Any], dump_path: PathLike, *, registry: Registry | None = None,
            steps: int = 1, model: Any = None, args: Iterable[str] = (), config_path: PathLike | None = None,
            framework: str | None = None, **config: Any) -> Path:
    """Collect a dump in-process through ``registry``'s collector for ``framework``; return ``dump_path``.

    ``target`` is either a training script, run as ``probe run`` runs it (recording from the first
    forward, a step at each optimizer step; ``args`` are its arguments), or a callable that runs one
    training step, called ``steps`` times between ``start(model)`` and ``stop()``/``step()``
    (``model`` names the modules; ``None``: the first module called at top level is the model).
    ``config`` overrides config.json keys (``task``, ``level``, ``summary_mode``, ``step``, ``list``,
    ...) of ``config_path`` or of the defaults. ``registry`` defaults to the installed plugins.
    """
    from probe_core.collect.debugger import build_collector, start_script_collector
    from probe_core.errors import CollectionError

    registry = _registry(registry)
    if not callable(target):
        from probe_core.collect.command import run_script

        collector = start_script_collector(framework, config_path, registry=registry, dump_path=str(dump_path),
                                           **config)
        try:
            code = run_script(Path(target), list(args))
        finally:
            collector.close()
        if code != 0:
            raise CollectionError(f"{target}: the training script exited with code {code}")
        return Path(dump_path)
    collector = build_collector(framework, config_path, registry=registry, dump_path=str(dump_path), **config)
    try:
        for _ in range(steps):
            collector.start(model)
            target()
            collector.stop()
            collector.step()
    finally:
        collector.close()
    return Path(dump_path)


def compare(target: PathLike, bench: PathLike, output: PathLike, *, registry: Registry | None = None,
            **options: Any) -> dict[str, Any]:
    """``probe compare TARGET BENCH -o OUTPUT`` in-process (probe-compare's command, through the registry);
    returns what it writes to ``summary.json``.

    ``options`` are the command's long options, ``_`` for ``-``: ``fuzzy=True`` is ``--fuzzy``, ``steps="0,1"``
    is ``--steps 0,1``, a list repeats the value after the flag; ``False`` and ``None`` leave an option out. The
    CSV/XLSX files are named in ``summary["ranks"][i]["csv"]`` / ``["xlsx"]``.
    """
    _run_plugin_command("compare", "probe-compare", ["compare", target, bench, "-o", output, "--quiet"], options,
                        registry)
    return json.loads((Path(output) / "summary.json").read_text(encoding="utf-8"))


def _run_plugin_command(name: str, distribution: str, argv: list[Any], options: Mapping[str, Any],
                        registry: Registry | None) -> None:
    """``probe ARGV`` plus ``options`` as long flags (``True``: the flag alone; ``False``/``None``: left out; a list:
    its values after the flag) in-process; a clear error when no plugin gives the command ``name``."""
    from probe_core.errors import PluginError

    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value not in (False, None):
            argv += [flag, *(value if isinstance(value, (list, tuple)) else [value])]
    if name not in _registry(registry).commands:
        raise PluginError(f"testing.{name} runs probe {name}, the command of the plugin {name!r} (distribution "
                          f"{distribution}): pip install {distribution}, and enable it: registry_with(..., "
                          f"enable=[{name!r}])")
    code = command([str(part) for part in argv], registry)
    if code != 0:
        raise AssertionError(f"probe {' '.join(map(str, argv))} exited with code {code}")


def command(argv: Sequence[str], registry: Registry | None = None) -> int:
    """``probe ARGV...`` in-process with ``registry``'s commands (the one the CLI would build when ``None``):
    :func:`probe_core.api.run_command`; returns the exit code. A :class:`~probe_core.errors.ProbeError`
    propagates (the CLI prints it)."""
    from probe_core.cli import run_command

    return run_command(argv, _registry(registry))


def graph(target: PathLike, bench: PathLike | None, output: PathLike, *, registry: Registry | None = None,
          layouts: tuple[Any, Any] | None = None, **options: Any) -> Path:
    """``probe graph`` in-process (probe-graph's command, through the registry): build (``bench`` ``None``) or
    compare graphs; returns the ``.vis.db`` written.

    ``layouts`` is ``(target, bench)`` ``probe_graph.api.Layout`` objects, given as
    ``--rank-size/--tp/--pp/--vpp/--order``, to merge parallel ranks with the registry's graph mergers;
    ``options`` are the command's other flags by their long names (``fuzzy=True``, ``rules="msprobe"``).
    The registry must hold the graph plugin: ``registry_with(..., enable=["graph"])``.
    """
    argv: list[Any] = ["graph", target, *([bench] if bench is not None else []), "-o", output]
    for field in ("rank_size", "tp", "pp", "vpp", "order") if layouts else ():
        argv += [f"--{field.replace('_', '-')}", *(getattr(layout, field) for layout in layouts)]
    before = set(Path(output).glob("*.vis.db"))
    _run_plugin_command("graph", "probe-graph", argv, options, registry)
    written = sorted(set(Path(output).glob("*.vis.db")) - before, key=lambda p: p.stat().st_mtime)
    if not written:
        raise AssertionError(f"probe graph wrote no .vis.db in {output}")
    return written[-1]


def _checker(checker: CheckerSpec | str, registry: Registry | None) -> CheckerSpec:
    if isinstance(checker, CheckerSpec):
        return checker
    specs = _registry(registry).checkers
    if checker not in specs:
        raise KeyError(f"no checker {checker!r} in the registry (checkers: {', '.join(specs) or 'none'})")
    return specs[checker]


def check_rows(checker: CheckerSpec | str, bench: Any, target: Any, *,
               registry: Registry | None = None) -> list[CheckRow]:
    """``checker.compare(bench, target)``, checked: it must return :class:`~probe_core.specs.CheckRow` objects.

    ``checker`` is a :class:`~probe_core.specs.CheckerSpec` or a checker's name in ``registry``.
    """
    spec = _checker(checker, registry)
    rows = list(spec.compare(bench, target))
    wrong = [type(row).__name__ for row in rows if not isinstance(row, CheckRow)]
    if wrong:
        raise TypeError(f"checker {spec.name!r}: compare must return CheckRow objects, got {', '.join(wrong)}")
    return rows


def _context(value: CheckContext | Mapping[str, Any] | None) -> CheckContext:
    if isinstance(value, CheckContext):
        return value
    return CheckContext(**dict(value or {}))


def check(checker: CheckerSpec | str, bench: CheckContext | Mapping[str, Any] | None = None,
          target: CheckContext | Mapping[str, Any] | None = None, *,
          registry: Registry | None = None) -> list[CheckRow]:
    """Collect with ``checker`` in two contexts and compare them, as ``probe check`` would.

    ``bench``/``target`` are :class:`~probe_core.specs.CheckContext` objects or dicts of its
    fields (``shell_paths``, ``model``, ``framework``, ``rank``, ``options``). Collected data goes
    through ``json.dumps``/``json.loads`` (packs store JSON), so data that is not JSON-able fails
    here, as it would in a pack. A live collection (an object with ``snapshot()``) is snapshotted.
    """
    spec = _checker(checker, registry)
    data = []
    for ctx in (_context(bench), _context(target)):
        if spec.prepare is not None:
            spec.prepare(ctx.framework)
        value = spec.collect(ctx)
        if callable(getattr(value, "snapshot", None)):
            value = value.snapshot()
        data.append(json.loads(json.dumps(value)))
    return check_rows(spec, data[0], data[1])


class ProbeKit:
    """The kit's functions with relative paths placed under ``root`` (the ``probe_kit`` fixture's ``tmp_path``)."""

    def __init__(self, root: PathLike) -> None:
        self.root = Path(root)

    def path(self, value: PathLike) -> Path:
        path = Path(value)
        return path if path.is_absolute() else self.root / path

    registry_with = staticmethod(registry_with)
    check = staticmethod(check)
    check_rows = staticmethod(check_rows)

    def collect(self, target: PathLike | Callable[[], Any], dump_path: PathLike = "dump", **kwargs: Any) -> Path:
        return collect(target, self.path(dump_path), **kwargs)

    def compare(self, target: PathLike, bench: PathLike, output: PathLike = "compare_out",
                **kwargs: Any) -> dict[str, Any]:
        return compare(self.path(target), self.path(bench), self.path(output), **kwargs)

    def graph(self, target: PathLike, bench: PathLike | None = None, output: PathLike = "graph_out",
              **kwargs: Any) -> Path:
        return graph(self.path(target), self.path(bench) if bench is not None else None, self.path(output),
                     **kwargs)


try:
    import pytest
except ImportError:  # pragma: no cover - the kit works without pytest; only the fixture needs it
    pytest = None

if pytest is not None:

    @pytest.fixture
    def probe_kit(tmp_path: Path) -> ProbeKit:
        """The testing kit, relative paths under this test's ``tmp_path``."""
        return ProbeKit(tmp_path)
