"""What ``probe locate`` is asked to do: locate.json (``-c``) merged with the command line, checked once.

Every key of locate.json has the name of its long option (``stop_after`` for ``--stop-after``); an option given
on the command line wins. A bad key or value is one error naming the file, the key and what is allowed.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field, fields
from typing import Any

from probe_core.api import ConfigError, read_config

#: the stages in order: (name, folder under OUT)
STAGES = (("monitor", "stage1-monitor"), ("l0", "stage2-l0"), ("mix", "stage3-mix"), ("replay", "stage4-replay"))
STAGE_NAMES = tuple(name for name, _ in STAGES)

#: the monitor config stage 1 runs with: the update chain (weight gradients, parameters, optimizer moments)
MONITOR_DEFAULTS = {"wg_distribution": True, "param_distribution": True, "mv_distribution": True}
#: what stage 1 dumps in the same runs as the monitor, every step they run: stage 2 compares the step where they part
L0_CONFIG = {"task": "statistics", "level": "L0"}


@dataclass(frozen=True)
class Settings:
    bench: str | None = None               # the benchmark's command, as a user types it
    target: str | None = None              # the command of the run under test
    output: str = "locate_out"
    bench_monitor: str | None = None       # already-made monitor outputs: stage 1 compares them instead of running
    target_monitor: str | None = None
    bench_dump: str | None = None          # already-made dumps (any level): stage 2 compares them instead of running
    target_dump: str | None = None
    steps: int = 4                         # stage 1 monitors the first N steps
    rank: int | None = None                # only this rank (default: the one where the runs part first)
    stop_after: str | None = None
    parallel: bool = False                 # run the two sides of a stage at the same time
    framework: str | None = None           # probe run --framework
    monitor: dict = field(default_factory=dict)  # monitor_config.json keys over MONITOR_DEFAULTS
    rtol: float | None = None              # probe monitor compare --rtol / --noise-factor
    noise_factor: float | None = None
    tensor_budget_mb: float = 256          # stage 3 in one pair of runs when the module's tensors fit (0: never)
    device: str = "cpu"                    # probe acc-check --device / --dtype for the replay
    dtype: str | None = None

    @property
    def monitor_config(self) -> dict[str, Any]:
        return MONITOR_DEFAULTS | dict(self.monitor) | {"collect_times": self.steps, "start_step": 0}

    def key(self, stage: str) -> dict[str, Any]:
        """What a stage's result depends on: a finished stage is reused only when these are unchanged."""
        common = {"bench": self.bench, "target": self.target, "framework": self.framework, "rank": self.rank}
        if stage == "monitor":
            return common | {"bench_monitor": self.bench_monitor, "target_monitor": self.target_monitor,
                             "steps": self.steps, "monitor": self.monitor_config, "dump": L0_CONFIG, "rtol": self.rtol,
                             "noise_factor": self.noise_factor}
        if stage == "l0":
            return common | {"bench_dump": self.bench_dump, "target_dump": self.target_dump}
        if stage == "mix":
            return common | {"tensor_budget_mb": self.tensor_budget_mb}
        if stage == "replay":
            return common | {"device": self.device, "dtype": self.dtype}
        return common


_KINDS: dict[str, tuple[type, ...]] = {
    "bench": (str,), "target": (str,), "output": (str,), "bench_monitor": (str,), "target_monitor": (str,),
    "bench_dump": (str,), "target_dump": (str,), "steps": (int,), "rank": (int,), "stop_after": (str,),
    "parallel": (bool,), "framework": (str,), "monitor": (dict,), "rtol": (int, float),
    "noise_factor": (int, float), "tensor_budget_mb": (int, float), "device": (str,), "dtype": (str,)}
_PAIRS = (("bench", "target"), ("bench_monitor", "target_monitor"), ("bench_dump", "target_dump"))


def _file_values(path: str) -> dict[str, Any]:
    raw = read_config(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: locate.json must be a JSON object of keys ({', '.join(_KINDS)})")
    values = {}
    for key, value in raw.items():
        if key == "plugins":  # the CLI applied it already (probe's -c)
            continue
        if key not in _KINDS:
            raise ConfigError(f"{path}: unknown key {key!r}; known keys: {', '.join(_KINDS)}, plugins")
        values[key] = value
    return values


def _check(values: dict[str, Any], where: str) -> None:
    for key, value in values.items():
        kinds = _KINDS[key]
        if value is None or (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
            names = " or ".join("a number" if k in (int, float) else f"a {k.__name__}" for k in kinds[:1])
            raise ConfigError(f"{where}: {key} {value!r}: must be {names}")
    if values.get("steps", 1) < 1:
        raise ConfigError(f"{where}: steps {values['steps']}: must be at least 1 (the steps stage 1 monitors)")
    if values.get("rank", 0) < 0:
        raise ConfigError(f"{where}: rank {values['rank']}: must be a rank number >= 0")
    if values.get("stop_after", STAGE_NAMES[0]) not in STAGE_NAMES:
        raise ConfigError(f"{where}: stop_after {values['stop_after']!r}: choose one of {', '.join(STAGE_NAMES)}")
    for key in ("rtol", "noise_factor", "tensor_budget_mb"):
        if key in values and not (math.isfinite(values[key]) and values[key] >= 0):
            raise ConfigError(f"{where}: {key} {values[key]}: must be a finite number >= 0")


def settings_from(args: argparse.Namespace) -> Settings:
    """locate.json's values, then the command line's; checked."""
    values = _file_values(args.config) if args.config else {}
    _check(values, args.config or "")
    given = {f.name: getattr(args, f.name) for f in fields(Settings) if getattr(args, f.name, None) is not None}
    _check(given, "probe locate")
    settings = Settings(**(values | given))
    for bench, target in _PAIRS:
        if (getattr(settings, bench) is None) != (getattr(settings, target) is None):
            raise ConfigError(f"probe locate: --{bench.replace('_', '-')} and --{target.replace('_', '-')} go "
                              "together: give both sides")
    if settings.bench is None and settings.bench_monitor is None and settings.bench_dump is None:
        raise ConfigError("probe locate: nothing to compare: give --bench CMD --target CMD (the two runs' commands), "
                          "or --bench-monitor/--target-monitor, or --bench-dump/--target-dump")
    return settings
