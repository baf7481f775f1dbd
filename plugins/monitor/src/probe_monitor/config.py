"""The monitor config: msprobe's ``monitor_config.json`` keys, validated the way probe validates config.json.

Every bad key or value is one line naming the file, the key, the value and what is allowed (all of
them at once); a misspelt key gets a "did you mean". msprobe keys probe does not implement load with
a warning. ``format`` is checked against the installed writers when a monitor starts.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from probe_core.api import ConfigError, ConfigKey, ConfigSectionSpec, ProbeWarning, read_config, validate_config

#: Statistics every monitor records per tensor (plugins add more: hook ``probe_monitor_stats``).
OPS = ("min", "max", "mean", "norm", "zeros", "nans")
#: msprobe keys probe accepts and ignores (with a warning).
IGNORED = ("ur_distribution", "mg_direction", "stack_info", "squash_name", "monitor_mbs_grad", "param_count")
SPIKE_RULES = ("AnomalyZScore", "AnomalyTurbulence")
GRAD_TAGS = ("grad_unreduced", "grad_reduced", "grad_norm")


def _positive(value: int) -> str | None:
    return None if value >= 1 else "must be a positive integer"


def _non_negative(value: int) -> str | None:
    return None if value >= 0 else "must be 0 or a positive integer"


def _ranks(value: list) -> str | None:
    ok = all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
    return None if ok else "must be a list of rank numbers, e.g. [0, 1]"


def _ops(value: list) -> str | None:
    if not value or not all(isinstance(op, str) for op in value):
        return f"must name at least one statistic among {', '.join(OPS)} (or one a plugin adds)"
    return None if len(set(value)) == len(value) else "names a statistic twice"


def plugin_stats(config: MonitorConfig, registry: Any, framework: str) -> dict[str, Any]:
    """The config's ``ops`` that plugins bring (``probe_monitor_stats``), as ``framework``'s functions
    ``fn(tensor, eps)``; one not computed for ``framework`` is a :class:`ConfigError` naming those it is."""
    if registry is None:
        from probe_core.api import current_registry

        registry = current_registry()
    specs = registry.family("monitor_stats")
    found = {}
    for op in config.ops:
        if op in OPS:
            continue
        spec = specs.get(op)
        if spec is None:  # a config checked against another registry
            allowed = ", ".join(f'"{name}"' for name in (*OPS, *specs))
            raise ConfigError(f'{config.source}: key "ops": "{op}" is not allowed; allowed values: {allowed}')
        functions = spec.load()
        if framework not in functions:
            raise ConfigError(f'{config.source}: key "ops": "{op}" (plugin {spec.plugin}) is not computed for '
                              f"{framework}; it is for: {', '.join(functions) or 'no framework'}")
        found[op] = functions[framework]
    return found


def _ndigits(value: Any) -> str | None:
    return None if value is None or 0 <= value <= 20 else "must be null (full precision) or 0..20"


#: msprobe's ``cc_distribution`` object: its keys and their types; all but ``enable`` are ignored (with a warning).
CC_KEYS = {"enable": bool, "cc_codeline": list, "cc_log_only": bool, "cc_pre_hook": bool}


def _cc(value: bool | dict) -> str | None:
    if isinstance(value, bool):
        return None
    for key, item in value.items():
        kind = CC_KEYS.get(key)
        if kind is None:
            return f'unknown key "{key}"; allowed: ' + ", ".join(f'"{k}"' for k in CC_KEYS)
        if type(item) is not kind or (key == "cc_codeline" and not all(isinstance(v, str) for v in item)):
            return f'"{key}" must be {"true/false" if kind is bool else "a list of code lines (strings)"}'
    return None


def _cc_enabled(value: bool | dict, source: str) -> bool:
    """``cc_distribution`` as probe-monitor reads it: true/false, or msprobe's ``{"enable": ..., ...}``."""
    if isinstance(value, bool):
        return value
    for key in ("cc_codeline", "cc_log_only", "cc_pre_hook"):
        if value.get(key):
            warnings.warn(f'{source}: key "cc_distribution.{key}" has no effect in probe-monitor: it records the '
                          "inputs and outputs of every collective called from Python", ProbeWarning, stacklevel=4)
    return value.get("enable", False)


def _alert(value: dict) -> str | None:
    unknown = sorted(set(value) - {"rules", "dump"})
    if unknown:
        return f'unknown key "{unknown[0]}"; allowed: "rules", "dump"'
    rules = value.get("rules", [])
    if not isinstance(rules, list):
        return '"rules" must be a list of {"rule_name": ..., "args": {...}}'
    for rule in rules:
        if not isinstance(rule, dict) or rule.get("rule_name") not in SPIKE_RULES:
            return f'each rule needs "rule_name" among {", ".join(SPIKE_RULES)}; got {json.dumps(rule)}'
        args = rule.get("args", {})
        if not isinstance(args, dict) or set(args) - {"threshold", "window", "min_history", "tags"}:
            return (f'rule {rule["rule_name"]}: "args" may hold "threshold", "window", "min_history", "tags"; '
                    f"got {json.dumps(args)}")
        if not isinstance(args.get("threshold", 1.0), (int, float)) or args.get("threshold", 1.0) <= 0:
            return f'rule {rule["rule_name"]}: "threshold" must be a positive number'
        for key in ("window", "min_history"):
            if not isinstance(args.get(key, 1), int) or args.get(key, 1) < 1:
                return f'rule {rule["rule_name"]}: "{key}" must be a positive integer'
    return None


KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("targets", dict, {}, doc="module names to monitor (their parameters and activations); {}: all"),
    ConfigKey("wg_distribution", bool, False, doc="weight gradients: unreduced (local) and reduced (before the optimizer)"),
    ConfigKey("param_distribution", bool, False, doc="parameters before (param_origin) and after (param_updated) the update"),
    ConfigKey("mv_distribution", bool, False, doc="optimizer moments exp_avg / exp_avg_sq after the update"),
    ConfigKey("xy_distribution", bool, False, doc="module inputs/outputs (actv) and their gradients (actv_grad)"),
    ConfigKey("cc_distribution", (bool, dict), False, check=_cc,
              doc='inputs/outputs of torch.distributed collectives (comm): true, or msprobe\'s {"enable": true}'),
    ConfigKey("all_xy", bool, False, doc="activations of every module, whatever targets says"),
    ConfigKey("forward_only", bool, False, doc="activations only, no activation gradients"),
    ConfigKey("backward_only", bool, False, doc="activation gradients only"),
    ConfigKey("ops", list, ["min", "max", "mean", "norm"], check=_ops,
              doc="statistics per tensor: " + ", ".join(OPS) + " and those plugins add (probe plugins lists them)"),
    ConfigKey("eps", (int, float), 1e-8, doc="|x| below eps counts as zero for the zeros statistic"),
    ConfigKey("ndigits", (int, type(None)), None, check=_ndigits, doc="round CSV values (msprobe: 6); null: full float32 precision"),
    ConfigKey("format", str, "csv", doc="the writer: csv, tensorboard or a third-party one (probe plugins)"),
    ConfigKey("start_step", int, 0, check=_non_negative, doc="first step recorded"),
    ConfigKey("step_interval", int, 1, check=_positive, doc="record every N-th step"),
    ConfigKey("collect_times", int, 100_000_000, check=_positive, doc="record at most this many steps"),
    ConfigKey("step_count_per_record", int, 1, check=_positive, doc="recorded steps per CSV file"),
    ConfigKey("module_ranks", list, [], check=_ranks, doc="ranks that record; []: all"),
    ConfigKey("print_struct", bool, False, doc="print the module and parameter names (write module_struct.json)"),
    ConfigKey("dynamic_on", bool, False, doc="with DYNAMIC_MONITOR=true: switch recording on while training runs"),
    ConfigKey("overwrite", bool, False, doc="replace a monitor run already in the output folder (else it is refused)"),
    ConfigKey("dtensor", str, "local", choices=("local", "full"),
              doc="a sharded (DTensor) tensor's statistics: local (this rank's shard, no communication) or full "
                  "(the whole tensor: global norms across shards, one all-gather per tensor on every rank)"),
    ConfigKey("alert", dict, {}, check=_alert, doc='spike rules: {"rules": [{"rule_name": "AnomalyZScore", "args": {...}}]}'),
) + tuple(ConfigKey(name, (bool, int, float, str, list, dict, type(None)), None, doc="msprobe key, ignored")
          for name in IGNORED)

SECTION = ConfigSectionSpec("", KEYS, description="probe-monitor config (msprobe's monitor_config.json keys)")


@dataclass(frozen=True)
class SpikeRule:
    """A value far outside its own recent history: ``AnomalyZScore`` (|z| over ``window`` values) or
    ``AnomalyTurbulence`` (relative distance from the recent mean)."""

    name: str = "AnomalyZScore"
    threshold: float = 8.0
    window: int = 10
    min_history: int = 5
    tags: tuple[str, ...] = GRAD_TAGS


@dataclass(frozen=True)
class MonitorConfig:
    """A validated monitor config (defaults filled in)."""

    targets: Mapping[str, Any] = field(default_factory=dict)
    wg_distribution: bool = False
    param_distribution: bool = False
    mv_distribution: bool = False
    xy_distribution: bool = False
    cc_distribution: bool = False
    all_xy: bool = False
    forward_only: bool = False
    backward_only: bool = False
    ops: tuple[str, ...] = ("min", "max", "mean", "norm")
    eps: float = 1e-8
    ndigits: int | None = None
    format: str = "csv"
    start_step: int = 0
    step_interval: int = 1
    collect_times: int = 100_000_000
    step_count_per_record: int = 1
    module_ranks: tuple[int, ...] = ()
    print_struct: bool = False
    dynamic_on: bool = False
    overwrite: bool = False
    dtensor: str = "local"
    rules: tuple[SpikeRule, ...] = (SpikeRule(),)
    source: str = "<defaults>"

    def targeted(self, name: str) -> bool:
        """Whether module or parameter ``name`` lies under one of ``targets`` (all when empty)."""
        if not self.targets:
            return True
        return any(name == t or name.startswith(t + ".") or not t for t in self.targets)


#: What ``probe run --task monitor`` records without a config: the update chain.
RUN_DEFAULTS = {"wg_distribution": True, "param_distribution": True, "mv_distribution": True}


def load_monitor_config(path: str | Path | None, defaults: Mapping[str, Any] | None = None,
                        registry: Any = None) -> MonitorConfig:
    """Read and validate a monitor config (its ``ops`` against the statistics built in and those the
    ``registry``'s plugins add); ``defaults`` stand in when ``path`` is None."""
    raw = read_config(path) if path is not None else dict(defaults or {})
    return parse_monitor_config(raw, str(path) if path is not None else "<defaults>", registry)


def _section(registry: Any) -> ConfigSectionSpec:
    """:data:`SECTION` with ``ops`` taking the built-in statistics and those of ``probe_monitor_stats``."""
    if registry is None:
        from probe_core.api import current_registry

        registry = current_registry()
    allowed = OPS + tuple(name for name in registry.family("monitor_stats") if name not in OPS)
    return replace(SECTION, keys=tuple(replace(key, choices=allowed) if key.name == "ops" else key
                                       for key in SECTION.keys))


def parse_monitor_config(raw: Mapping[str, Any], source: str, registry: Any = None) -> MonitorConfig:
    top = validate_config(raw, {"": _section(registry)}, source).top
    for name in IGNORED:
        if raw.get(name) not in (None, False):
            warnings.warn(f'{source}: key "{name}" is an msprobe option probe-monitor does not implement; '
                          "ignored", ProbeWarning, stacklevel=3)
    if top["forward_only"] and top["backward_only"]:
        raise ConfigError(f'{source}: keys "forward_only" and "backward_only" are both true; keep one')
    if top["dtensor"] == "full" and top["module_ranks"]:
        raise ConfigError(f'{source}: key "dtensor": "full" gathers each sharded tensor with a collective that '
                          f'every rank joins, so it needs every rank recording; remove "module_ranks": '
                          f'{top["module_ranks"]} or use "dtensor": "local"')
    rules = tuple(_rule(rule) for rule in top["alert"].get("rules", [])) if "rules" in top["alert"] else (SpikeRule(),)
    fields = {key: top[key] for key in MonitorConfig.__dataclass_fields__ if key in top}
    return MonitorConfig(**fields | {"ops": tuple(top["ops"]), "module_ranks": tuple(top["module_ranks"]),
                                     "targets": dict(top["targets"]), "eps": float(top["eps"]),
                                     "cc_distribution": _cc_enabled(top["cc_distribution"], source),
                                     "rules": rules, "source": source})


def _rule(rule: Mapping[str, Any]) -> SpikeRule:
    args = dict(rule.get("args", {}))
    if "tags" in args:
        args["tags"] = tuple(args["tags"])
    defaults = {"AnomalyTurbulence": {"threshold": 0.5}}.get(rule["rule_name"], {})
    return SpikeRule(rule["rule_name"], **(defaults | args))
