"""config.json: msprobe's keys, probe's ``"plugins"`` section, and what plugins add.

Loading has two phases because plugins can be disabled from the config
itself: :func:`read_config` parses the file and its ``"plugins"`` section
(no plugin is imported yet); :func:`validate_config` then checks every key
against the sections the enabled plugins declare. :func:`load_config` does
both. Every bad value is reported — all of them at once — with the file,
the key, the value, what is allowed and, for a misspelt key, a "did you
mean".
"""

from __future__ import annotations


import json
import os
import warnings
from collections.abc import Mapping
from dataclasses import field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from probe_core.errors import ConfigError
from probe_core.modes import validate_summary_mode
from probe_core.plugins import PluginSelection, ProbeWarning, Registry, current_registry
from probe_core.records import record
from probe_core.specs import ConfigKey, ConfigSectionSpec

TOP = ""  # the section name of top-level keys

#: msprobe 26.2 tasks that need an Ascend NPU: probe collects the nearest task it runs instead (with a warning).
NPU_TASKS = {"nan_check": "overflow_check", "diff_check": "statistics"}
#: msprobe tasks that dump nothing here: they load with a warning (the tasks probe collects are the installed
#: data modes' ``tasks``, see :func:`open_to_plugins`).
LEGACY_TASKS = ("free_benchmark", "run_ut", "grad_probe", "acc_check", "exception_dump")
LEVELS = ("L0", "L1", "mix", "debug", "L2")
SUMMARY_MODE_DEFAULT = "statistics"
DEFAULT_TASK = "statistics"
DATA_MODES = ("all", "forward", "backward", "input", "output")
#: The statistics a ``summary_mode`` list may name (msprobe 26.2's MindSpore options) and the dump.json key
#: each one keeps; ``None``: accepted, not computed by probe (one warning says so). Any other name in the list
#: is a data mode's summary_mode (msprobe's checksum), which then selects that mode.
SUMMARY_STATISTICS = {"max": "Max", "min": "Min", "mean": "Mean", "l2norm": "Norm",
                      "count": None, "negative zero count": None, "positive zero count": None,
                      "nan count": None, "negative inf count": None, "positive inf count": None,
                      "zero count": None, "hash": None}


class IdSet:
    """A set of non-negative ids kept as sorted, merged ``[lo, hi]`` ranges: ``"0-200000000"`` costs two
    integers, not 200 million. Supports ``in``, ``len``, iteration (ascending), ``bool``, ``max()`` via
    :attr:`last`, and equality with a tuple of its ids."""

    __slots__ = ("ranges",)

    def __init__(self, ranges: Any = ()) -> None:
        merged: list[tuple[int, int]] = []
        for lo, hi in sorted(ranges):
            if merged and lo <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
            else:
                merged.append((lo, hi))
        self.ranges: tuple[tuple[int, int], ...] = tuple(merged)

    @classmethod
    def of(cls, ids: Any) -> IdSet:
        """``ids`` as an IdSet (an IdSet is returned as is; any other iterable of ints is read)."""
        return ids if isinstance(ids, IdSet) else cls((i, i) for i in ids)

    def __contains__(self, value: object) -> bool:
        if type(value) is not int:
            return False
        import bisect

        i = bisect.bisect_right(self.ranges, (value, float("inf"))) - 1
        return i >= 0 and self.ranges[i][0] <= value <= self.ranges[i][1]

    def __iter__(self):
        for lo, hi in self.ranges:
            yield from range(lo, hi + 1)

    def __len__(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.ranges)

    def __bool__(self) -> bool:
        return bool(self.ranges)

    @property
    def last(self) -> int | None:
        return self.ranges[-1][1] if self.ranges else None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, IdSet):
            return self.ranges == other.ranges
        if isinstance(other, (tuple, list, set, frozenset)):
            return len(self) == len(other) and all(isinstance(v, int) and v in self for v in other) and \
                (not isinstance(other, (tuple, list)) or list(other) == sorted(other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.ranges)

    def __str__(self) -> str:
        """``[0, 2-4, 7]``: as the config wrote it, however large the ranges."""
        return "[" + ", ".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in self.ranges) + "]"

    def __repr__(self) -> str:
        return f"IdSet({self})"


@record
class ProbeConfig:
    """A validated configuration. ``sections`` holds every task section, defaults filled in."""

    task: str = "statistics"
    dump_path: str = "./probe_dump"
    rank: IdSet = IdSet()
    step: IdSet = IdSet()
    level: str = "mix"
    async_dump: bool = False
    extra_info: bool = True
    framework: str | None = None
    overwrite: bool = False
    plugins: PluginSelection = PluginSelection()
    sections: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    top: Mapping[str, Any] = field(default_factory=dict)
    source: str = "<defaults>"

    #: the task the config named, when probe collects another one in its place (``nan_check`` → ``overflow_check``)
    requested_task: str | None = None

    def option(self, key: str, default: Any = None) -> Any:
        """A key of the active task's section (``scope``, ``list``, ``data_mode``, ``summary_mode``, ...); for a task
        probe runs in place of another (``nan_check``), the requested task's section first."""
        if self.requested_task:
            section = self.sections.get(self.requested_task, {})
            if key in section:
                return section[key]
        return self.sections.get(self.task, {}).get(key, default)

    @property
    def dump_enable(self) -> bool | None:
        """msprobe's hot switch: ``None`` (key absent) is static; ``True``/``False`` turns dumping on/off, and
        the file is re-read at each step boundary while the run goes on."""
        return self.top.get("dump_enable")

    @property
    def precision(self) -> str:
        return str(self.top.get("precision") or "high")

    @property
    def custom_op_namespaces(self) -> tuple[str, ...]:
        return tuple(self.top.get("custom_op_namespaces") or ())

    @property
    def load(self) -> Mapping[str, Any] | None:
        """The ``load`` section (module inputs replaced by tensors of an earlier tensor dump), or ``None``."""
        return self.top.get("load")

    @property
    def slice(self) -> tuple[Mapping[str, int], ...]:
        """``[{"dim", "begin", "end", "size"}, ...]``: each tensor is cut before its statistics (and file)."""
        return tuple(self.option("slice", ()) or ())

    @property
    def tensor_list(self) -> tuple[str, ...]:
        """Entries (substring of the name) whose tensors are also saved whole in a statistics dump."""
        return tuple(self.option("tensor_list", ()) or ())

    @property
    def request_id(self) -> str | None:
        return self.option("request_id") or None

    @property
    def summary_statistics(self) -> tuple[str, ...] | None:
        """The dump.json statistics a ``summary_mode`` list keeps (``("Max", "Norm")``); ``None``: all of them."""
        value = self.option("summary_mode", SUMMARY_MODE_DEFAULT)
        if isinstance(value, str):
            return None
        return tuple(key for key in (SUMMARY_STATISTICS.get(v) for v in value) if key)

    @property
    def risk_level(self) -> str:
        """``CORE``, ``FOCUS`` (msprobe's default) or ``ALL``: which APIs the collector records."""
        return str(self.top.get("risk_level", "FOCUS"))

    @property
    def scope(self) -> tuple[str, ...]:
        return tuple(self.option("scope", ()))

    @property
    def list(self) -> tuple[str, ...]:
        return tuple(self.option("list", ()))

    @property
    def data_mode(self) -> tuple[str, ...]:
        return tuple(self.option("data_mode", ("all",)))

    @property
    def summary_mode(self) -> str:
        """The ``summary_mode`` that selects the data mode; in msprobe's list form (a subset of the
        statistics), a name that is no statistic (a checksum) selects its mode, else the default one."""
        value = self.option("summary_mode", SUMMARY_MODE_DEFAULT)
        if isinstance(value, str):
            return value
        return next((name for name in value if name not in SUMMARY_STATISTICS), SUMMARY_MODE_DEFAULT)


# -- reading ------------------------------------------------------------------


def read_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse a config.json file into a dict; errors name the file, line and column."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{source}: config file not found; pass the path of an existing config.json") from None
    except IsADirectoryError:
        raise ConfigError(f"{source}: is a folder; pass the path of a config.json file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: invalid UTF-8 byte 0x{exc.object[exc.start]:02x} at byte {exc.start}; "
                          "save the config file as UTF-8") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise ConfigError(f"{source}: cannot read the config file: {exc}") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}; "
                          "fix the JSON syntax (quotes, commas, brackets)") from None
    except (RecursionError, ValueError) as exc:  # nesting too deep for Python, a 5,000-digit integer
        why = "nested too deeply" if isinstance(exc, RecursionError) else "holds an integer literal too long to read"
        raise ConfigError(f"{source}: not a usable config: the JSON {why}; a config.json is a flat object of "
                          "msprobe keys: fix the file") from None
    from probe_core.dump.jsonstream import check_depth  # the dump reader: not every command reads dumps

    try:
        check_depth(raw, 32)
    except ValueError:
        raise ConfigError(f"{source}: not a usable config: values are nested deeper than 32 levels; a config.json "
                          "is a flat object of msprobe keys: fix the file") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the top level must be a JSON object {{...}}, not {_json_type(raw)}")
    return raw


def plugin_selection(raw: Mapping[str, Any], source: str = "<config>") -> PluginSelection:
    """The ``"plugins"`` section of a raw config, checked for shape (names are checked by the registry)."""
    value = raw.get("plugins", {})
    if not isinstance(value, dict):
        raise ConfigError(f'{source}: key "plugins": must be an object like {{"disable": ["name"], '
                          f'"enable": []}}, not {_json_type(value)}')
    problems = [_unknown_key(source, "plugins", key, ("disable", "enable")) for key in value
                if key not in ("disable", "enable")]
    lists = {}
    for key in ("disable", "enable"):
        names = value.get(key, [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            problems.append(f'{source}: key "plugins.{key}": must be a list of plugin names, got {names!r}')
            names = []
        lists[key] = tuple(names)
    if problems:
        raise ConfigError(*problems)
    return PluginSelection(**lists)


# -- validating -----------------------------------------------------------------


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    registry: Registry | None = None,
    **overrides: Any,
) -> tuple[ProbeConfig, Registry]:
    """Read, select plugins, validate. Returns the config and the registry it was checked against.

    ``overrides`` are top-level keys (``task``, ``dump_path``, ``level``, ...)
    or keys of the task's section (``scope``, ``list``, ``data_mode``,
    ``summary_mode``, ...), as ``PrecisionDebugger(**kwargs)`` passes them;
    ``None`` values are ignored.
    """
    raw = read_config(path) if path is not None else {}
    source = str(path) if path is not None else "<arguments>"
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if registry is None:
        registry = current_registry(plugin_selection(raw, source))
    sections = open_to_plugins(registry.config_sections, registry)
    raw = _apply_overrides(raw, overrides, sections)
    _refuse_summary_mode_as_task(raw.get("task"), registry, source)
    config = validate_config(raw, sections, source)
    validate_summary_mode(config, registry)
    return config, registry


def _refuse_summary_mode_as_task(task: Any, registry: Registry, source: str) -> None:
    """A ``task`` that is an installed mode's ``summary_mode`` (msprobe's checksum, say) is refused, saying how
    msprobe spells it."""
    for spec in registry.data_modes.values():
        if isinstance(task, str) and task in spec.summary_modes and task not in spec.tasks and spec.tasks:
            home = spec.tasks[0]
            raise ConfigError(f'{source}: key "task": "{task}" is a summary_mode of task "{home}", not a task; '
                              f'msprobe spells it "task": "{home}", "{home}": {{"summary_mode": "{task}"}}: put '
                              f'that in a config.json and pass -c config.json (PrecisionDebugger: task="{home}", '
                              f'summary_mode="{task}")')


def open_to_plugins(sections: Mapping[str, ConfigSectionSpec], registry: Registry) -> Mapping[str, ConfigSectionSpec]:
    """``sections`` with the top-level ``task`` and ``framework`` keys taking what is installed: the tasks of
    the installed data modes (plus msprobe's NPU and legacy tasks, which load with a warning) and the
    frameworks of the installed collectors. With none installed the key takes any name, and collection
    says what is missing."""
    top = sections.get(TOP)
    if top is None:
        return sections
    tasks = tuple(dict.fromkeys(task for spec in registry.data_modes.values() for task in spec.tasks))
    frameworks = tuple(sorted({spec.framework for spec in registry.collectors.values()}))
    choices = {"task": tasks + tuple(NPU_TASKS) + LEGACY_TASKS if tasks else (), "framework": frameworks}
    keys = tuple(replace(key, choices=choices[key.name]) if choices.get(key.name) else key
                 for key in top.keys)
    return {**sections, TOP: replace(top, keys=keys)}


def _apply_overrides(raw: dict[str, Any], overrides: dict[str, Any],
                     sections: Mapping[str, ConfigSectionSpec]) -> dict[str, Any]:
    merged = dict(raw)
    top_keys = {key.name for key in sections[TOP].keys} if TOP in sections else set()
    for key, value in overrides.items():
        if key in top_keys or key == "plugins":
            merged[key] = value
    task = merged.get("task", "statistics")
    for key, value in overrides.items():
        if key not in top_keys and key != "plugins":
            section = dict(merged.get(task) or {})
            section[key] = value
            merged[task] = section
    return merged


def validate_config(raw: Mapping[str, Any], sections: Mapping[str, ConfigSectionSpec],
                    source: str = "<config>") -> ProbeConfig:
    """Check ``raw`` against ``sections`` and build a :class:`ProbeConfig`; all problems in one error."""
    problems: list[str] = []
    top_spec = sections.get(TOP, ConfigSectionSpec(TOP, ()))
    top_keys = {key.name: key for key in top_spec.keys}
    top: dict[str, Any] = {}
    parsed_sections: dict[str, Mapping[str, Any]] = {}
    for key, value in raw.items():
        if key == "plugins":
            continue
        if key in top_keys:
            top[key] = _check_value(source, key, top_keys[key], value, problems)
        elif key in sections:
            spec = sections[key]
            if not isinstance(value, dict):
                problems.append(f'{source}: key "{key}": must be an object {{...}} of {key} options, '
                                f"not {_json_type(value)}")
                continue
            if not spec.runs:
                warnings.warn(f'{source}: section "{key}" is for a task probe does not run yet; it is kept '
                              "but not used", ProbeWarning, stacklevel=3)
                parsed_sections[key] = MappingProxyType(dict(value))
                continue
            parsed_sections[key] = _check_section(source, spec, value, problems)
        else:
            problems.append(_unknown_key(source, None, key, list(top_keys) + list(sections) + ["plugins"]))
    for key in top_keys.values():
        top.setdefault(key.name, key.default)
    for name, spec in sections.items():
        if name != TOP and spec.runs and name not in parsed_sections:
            parsed_sections[name] = _check_section(source, spec, {}, problems)
    if problems:
        raise ConfigError(*problems)
    task, level, requested = _fit_to_this_machine(top, parsed_sections, source)
    return ProbeConfig(
        task=task,
        requested_task=requested,
        dump_path=top.get("dump_path") or "./probe_dump",
        rank=expand_ids(top.get("rank") or []),
        step=expand_ids(top.get("step") or []),
        level=level,
        async_dump=bool(top.get("async_dump")),
        extra_info=bool(top.get("extra_info", True)),
        framework=top.get("framework"),
        overwrite=bool(top.get("overwrite", False)),
        plugins=plugin_selection(raw, source),
        sections=MappingProxyType(parsed_sections),
        top=MappingProxyType(top),
        source=source,
    )


def _warn(source: str, text: str) -> None:
    warnings.warn(f"{source}: {text}", ProbeWarning, stacklevel=4)


def _fit_to_this_machine(top: Mapping[str, Any], sections: Mapping[str, Mapping[str, Any]],
                         source: str) -> tuple[str, str, str | None]:
    """``(task, level, requested task)`` probe collects for the config: msprobe keys that need an Ascend NPU, or
    that probe does not apply, load with exactly one warning each saying what happens instead."""
    task = top.get("task", "statistics")
    level = top.get("level") or "mix"
    requested = None
    if task in NPU_TASKS:
        requested, task = task, NPU_TASKS[task]
        why = {"nan_check": "finds the first API whose output holds NaN/Inf on an Ascend NPU (it needs torch_npu); "
                            "probe collects task overflow_check instead: only entries holding NaN/Inf are kept",
               "diff_check": "compares each API live against the tensor dump in bench_path (msprobe's NPU online "
                             "check); probe collects task statistics instead: compare the dump with "
                             "\"probe compare DUMP BENCH\""}[requested]
        _warn(source, f'task "{requested}" {why}')
    elif task in LEGACY_TASKS:
        _warn(source, f'task "{task}" is not a dump task probe runs; nothing is dumped'
                      + ('; run "probe acc-check -api_info dump.json" on a dump instead'
                         if task in ("acc_check", "run_ut") else ""))
    if level == "L2":
        level = "L1"
        _warn(source, 'level "L2" dumps the kernels of one API through ACL on an Ascend NPU; probe records that '
                      'API at level "L1" instead (its inputs and outputs, forward and backward)')
    if task == "structure" and level not in ("L0", "mix"):
        _warn(source, f'task "structure" records the module structure: level "{level}" is read as "mix", as msprobe '
                      "does")
        level = "mix"
    if top.get("precision") == "low":
        _warn(source, 'precision "low": probe always accumulates Mean and Norm of 16-bit tensors in float32 '
                      '(msprobe\'s "high"), so the statistics are the precise ones')
    summary = sections.get(requested or task, {}).get("summary_mode")
    if isinstance(summary, list):
        skipped = [name for name in summary if name in SUMMARY_STATISTICS and SUMMARY_STATISTICS[name] is None]
        if skipped:
            _warn(source, f'summary_mode {", ".join(json.dumps(n) for n in skipped)}: counters msprobe computes '
                          "in MindSpore graph-mode kernel dumps on an Ascend NPU; probe writes Max/Min/Mean/Norm "
                          "(those the list names)")
    if top.get("enable_dataloader"):
        _warn(source, '"enable_dataloader" is deprecated and ignored; call debugger.step() or use '
                      "probe run, which ends a step at each optimizer step")
    return task, level, requested


def _check_section(source: str, spec: ConfigSectionSpec, value: Mapping[str, Any],
                   problems: list[str]) -> Mapping[str, Any]:
    keys = {key.name: key for key in spec.keys}
    parsed = {}
    for name, item in value.items():
        if name in keys:
            parsed[name] = _check_value(source, f"{spec.name}.{name}", keys[name], item, problems)
        else:
            problems.append(_unknown_key(source, spec.name, name, list(keys)))
    for key in spec.keys:
        parsed.setdefault(key.name, key.default)
    return MappingProxyType(parsed)


def _check_value(source: str, where: str, key: ConfigKey, value: Any, problems: list[str]) -> Any:
    def bad(why: str) -> Any:
        problems.append(f'{source}: key "{where}": {why}')
        return key.default

    if not _is_kind(value, key.kind):
        return bad(f"expected {_kind_name(key.kind)}, got {_short_json(value)} ({_json_type(value)})")
    if key.choices:
        items = value if isinstance(value, list) else [value]
        wrong = [item for item in items if item not in key.choices]
        if wrong:
            allowed = ", ".join(json.dumps(c) for c in key.choices)
            return bad(f"{_short_json(wrong[0])} is not allowed; allowed values: {allowed}")
    if key.check is not None:
        why = key.check(value)
        if why:
            return bad(why)
    if key.ignored and value != key.default:
        warnings.warn(f'{source}: key "{where}" has no effect in probe: {key.ignored}', ProbeWarning, stacklevel=4)
    return value


def _is_kind(value: Any, kind: type | tuple[type, ...]) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool):
        return bool in kinds
    return isinstance(value, kinds)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {bool: "true/false", int: "an integer", float: "a number", str: "a string", list: "a list",
             dict: "an object", type(None): "null"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _json_type(value: Any) -> str:
    return {bool: "boolean", int: "number", float: "number", str: "string", list: "list", dict: "object",
            type(None): "null"}.get(type(value), type(value).__name__)


def _unknown_key(source: str, section: str | None, key: str, known: list[str]) -> str:
    import difflib  # a typo's hint only

    where = f'in section "{section}"' if section else "at the top level"
    guess = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    hint = f'did you mean "{guess[0]}"?' if guess else f"known keys: {', '.join(sorted(known))}"
    return f'{source}: unknown key "{key}" {where}; {hint}'


# -- value checks shared by the built-in sections ---------------------------------


def expand_ids(value: list[Any]) -> IdSet:
    """``[0, "2-4", 7]`` → the ids 0, 2, 3, 4, 7 (kept as ranges); raises ValueError on a bad item."""
    ranges: list[tuple[int, int]] = []
    for item in value:
        if isinstance(item, int) and not isinstance(item, bool) and item >= 0:
            ranges.append((item, item))
            continue
        if isinstance(item, str) and len(item) <= 64:
            text = item.strip()
            if text.isdigit() and text.isascii():
                ranges.append((int(text), int(text)))
                continue
            lo, sep, hi = text.partition("-")
            lo, hi = lo.strip(), hi.strip()
            if sep and lo.isdigit() and hi.isdigit() and lo.isascii() and hi.isascii() and int(lo) <= int(hi):
                ranges.append((int(lo), int(hi)))
                continue
        raise ValueError(item)
    return IdSet(ranges)


def check_ids(value: list[Any]) -> str | None:
    try:
        expand_ids(value)
    except ValueError as exc:
        return (f"{_short_json(exc.args[0])} is not a valid id; use non-negative integers or "
                '"a-b" ranges with a <= b, e.g. [0, "2-4"]')
    return None


def _short_json(value: Any) -> str:
    try:
        text = json.dumps(value)
    except ValueError:  # an integer too long to print
        text = f"a {type(value).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."


def check_scope(value: list[Any]) -> str | None:
    if not all(isinstance(v, str) and v for v in value):
        return "must be a list of API or module names"
    if len(value) not in (0, 2):
        return f"must name 0 or 2 entries (the first and last of a range), got {len(value)}"
    return None


def check_names(value: list[Any]) -> str | None:
    if not all(isinstance(v, str) and v for v in value):
        return "must be a list of non-empty strings"
    return None


def check_summary_mode(value: Any) -> str | None:
    """A name (the data modes installed decide which, when a collection starts) or msprobe's list of statistics,
    with at most one summary mode's name among them (msprobe's checksum)."""
    if isinstance(value, str):
        return None if value.strip() else "must name a summary mode (\"probe plugins\" lists the data modes)"
    modes = [v for v in value if v not in SUMMARY_STATISTICS]
    if not value or not all(isinstance(v, str) and v.strip() for v in value) or len(modes) > 1:
        return (f'a list must name statistics among {", ".join(json.dumps(s) for s in SUMMARY_STATISTICS)}, '
                f"and at most one summary mode (a checksum such as the md5 mode's)")
    return None


SLICE_KEYS = ("dim", "begin", "end", "size")


def check_slice(value: list[Any]) -> str | None:
    """msprobe's ``slice``: ``[{"dim": 0, "begin": 0, "end": 4, "size": 16}, ...]``, integers only."""
    for item in value:
        if not isinstance(item, dict):
            return f'must be a list of objects like {{"dim": 0, "begin": 0, "end": 4}}, got {_short_json(item)}'
        for key, number in item.items():
            if key not in SLICE_KEYS:
                return f'unknown field "{key}" in {_short_json(item)}; fields: {", ".join(SLICE_KEYS)}'
            if type(number) is not int:
                return f'field "{key}" must be an integer, got {_short_json(number)}'
            if key in ("dim", "size") and number < 0:
                return f'field "{key}" cannot be negative, got {number}'
    return None


def check_load(value: dict[str, Any]) -> str | None:
    """msprobe's ``load``: ``{"path": tensor dump root, "modules": ["Module.x.Class.forward.0"], "step": [],
    "rank": [], "dump_after_load": false}``."""
    allowed = ("path", "modules", "step", "rank", "dump_after_load")
    extra = [key for key in value if key not in allowed]
    if extra:
        return f'unknown field "{extra[0]}"; fields: {", ".join(allowed)}'
    path = value.get("path")
    if not isinstance(path, str) or not os.path.isdir(path):
        return f'"path" must be the folder of an earlier tensor dump, got {_short_json(path)}'
    modules = value.get("modules")
    if not isinstance(modules, list) or not modules or not all(isinstance(m, str) for m in modules):
        return '"modules" must be a non-empty list of module forward names like "Module.fc1.Linear.forward.0"'
    for name in modules:
        head, _, count = name.rpartition(".forward.")
        if not name.startswith(("Module.", "Cell.")) or not head or not count.isdigit():
            return f'"modules": {_short_json(name)} is not a module forward name like "Module.fc1.Linear.forward.0"'
    if len(set(modules)) != len(modules):
        return '"modules" names a module twice'
    for key in ("step", "rank"):
        why = check_ids(value.get(key, [])) if isinstance(value.get(key, []), list) else "must be a list"
        if why:
            return f'"{key}" {why}'
    if not isinstance(value.get("dump_after_load", False), bool):
        return '"dump_after_load" must be true or false'
    return None


def check_overflow_nums(value: int) -> str | None:
    return None if value == -1 or value >= 1 else "must be -1 (no limit) or a positive integer"


def check_dump_path(value: str) -> str | None:
    if "\x00" in value:
        return "holds a NUL byte, which no file name can; choose another folder path"
    return None if value.strip() else "must be a non-empty folder path"
