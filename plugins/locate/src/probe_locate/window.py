"""Stage 1's run task, ``probe run --task locate-monitor -c config.json --dump-path OUT train.py``: the monitor and
an L0 statistics dump in the same run, and the script ends right after the last step the monitor records
(``start_step + (collect_times - 1) * step_interval``), so the steps after the monitored window do not run.

``config.json`` names two files, relative to its own folder: ``{"monitor": "monitor_config.json", "dump":
"l0_config.json"}``: the monitor's config (msprobe's monitor_config.json keys) and a probe run config (config.json
keys; ``dump_path`` is set here). The monitor writes to ``OUT/monitor``, the dump to ``OUT/l0`` (``step{N}/rank{R}``:
what ``probe run -c l0_config.json`` writes). Without ``"dump"`` only the monitor runs. With ``"referee":
"referee/target"`` (a folder beside the config), each step ends with every rank reporting it there and waiting for
probe locate's verdict on it (:mod:`probe_locate.referee`): the script ends after the first step where the two runs
part, on every rank of the job (all read the same verdict).

The monitor is used through the registry's ``monitor`` run task (probe-monitor), unchanged; the dump is the
framework's collector started as ``probe run`` starts it (``probe_core.api.start_script_collector``): each step
begins at the model's first forward and ends at the optimizer's step. What ends the script is counted after the
monitor and the dump have seen the step, for the optimizer that steps first (the one the monitor watches), and
``SystemExit(0)`` is raised after the last one, on every rank at the same step (none is left waiting in a
collective). PyTorch: an optimizer step post-hook registered after theirs. MindSpore (PyNative): the optimizer
cell's call, through ``nn.Cell.__call__`` wrapped over their wrappers (restored on close).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

from probe_core.api import (ConfigError, PluginError, RunRequest, human_size, process_rank, read_config,
                            start_script_collector)
from probe_locate.referee import wait_for_verdict

NAME = "locate-monitor"
#: the keys of the run task's config.json naming a file relative to the config's folder, and the others
FILES, FOLDERS = ("monitor", "dump"), ("referee",)
#: the side's output folder holds the monitor's output and the dump in these subfolders
MONITOR, DUMP = "monitor", "l0"


def steps_to_run(config: dict[str, Any]) -> int:
    """How many steps the script runs for the monitor ``config`` to record all its steps."""
    return config.get("start_step", 0) + (config["collect_times"] - 1) * config.get("step_interval", 1) + 1


def read_task_config(path: str | None) -> dict[str, Any]:
    """``config.json`` (``path``): its files and folders as paths (each must exist)."""
    if path is None:
        raise ConfigError(f"probe run --task {NAME}: give -c config.json naming the monitor's config: "
                          '{"monitor": "monitor_config.json", "dump": "l0_config.json"}')
    raw = read_config(path)
    if not isinstance(raw, dict) or "monitor" not in raw or set(raw) - set(FILES + FOLDERS):
        raise ConfigError(f"{path}: probe run --task {NAME} takes {{\"monitor\": FILE, \"dump\": FILE, "
                          f"\"referee\": FOLDER}} (paths relative to the config's folder; all but \"monitor\" "
                          f"optional), got keys {sorted(raw)}")
    values = {}
    for key, name in raw.items():
        found = Path(path).parent / name if isinstance(name, str) else None
        if found is None or not (found.is_file() if key in FILES else found.is_dir()):
            what = "file" if key in FILES else "folder (probe locate's referee folder for this side)"
            raise ConfigError(f"{path}: key {key!r}: {name!r} is not a {what} beside the config; write it there "
                              "and name it")
        values[key] = found
    return values


class MonitorWindow:
    """The monitor's handle, the L0 dump, and the hook that ends the script after ``steps_to_run`` steps."""

    def __init__(self, request: RunRequest) -> None:
        monitor = request.registry.family("run_tasks").get("monitor")
        if monitor is None:
            raise PluginError(f"probe run --task {NAME} needs the run task 'monitor' (probe-monitor); install and "
                              "enable it (probe plugins lists run_tasks)")
        config = read_task_config(request.config)
        self.output, self.registry = Path(request.output or "locate_monitor_output"), request.registry
        self.steps, self.done = steps_to_run(read_config(config["monitor"])), 0
        self.optimizer, self.hook, self.dump = None, None, None
        self.referee, self.framework = config.get("referee"), request.framework
        self.inner = monitor.load()(dataclasses.replace(request, config=str(config["monitor"]),
                                                        output=str(self.output / MONITOR)))
        if "dump" in config:
            self.dump = _dump(request, config["dump"], self.output / DUMP)
        if request.framework == "pytorch":
            from torch.optim.optimizer import register_optimizer_step_post_hook

            self.hook = register_optimizer_step_post_hook(self._after_step)
        elif request.framework == "mindspore":
            self.hook = _MindSporeStepHook(self._after_step)

    def _after_step(self, optimizer: Any, args: Any = None, kwargs: Any = None) -> None:
        if self.optimizer is None:
            self.optimizer = optimizer
        if optimizer is not self.optimizer:
            return
        self.done += 1
        if self.done >= self.steps:
            print(f"probe locate: the script ends after step {self.done - 1}, the last one stage 1 monitors",
                  file=sys.stderr)
            raise SystemExit(0)
        if self.referee is None:
            return
        parted = wait_for_verdict(self.referee, *process_rank(self.framework, self.registry), self.done - 1)
        if parted is not None:
            print(f"probe locate: the script ends after step {self.done - 1}: the runs part there "
                  f"({parted['quantity']} of {parted['name']}, step {parted['step']}, rank {parted['rank']})",
                  file=sys.stderr)
            raise SystemExit(0)

    def close(self, exit_code: int = 0) -> None:
        if self.hook is not None:
            self.hook.remove()
        try:
            if self.dump is not None:
                summary = self.dump.close()
                steps = f"steps {min(summary.steps)}-{max(summary.steps)}" if summary.steps else "NO step"
                print(f"probe locate: the dump recorded {steps}, {summary.entries} entries, "
                      f"{human_size(summary.bytes)} in {summary.dump_path}", file=sys.stderr)
        finally:
            self.inner.close(exit_code)


def _dump(request: RunRequest, config: Path, dump_path: Path) -> Any:
    """The framework's collector on ``config``, started as ``probe run`` starts it (steps end at the optimizer's
    step, each starts at the model's first forward); ``close()`` returns its summary."""
    return start_script_collector(request.framework, str(config), registry=request.registry,
                                  dump_path=str(dump_path), overwrite=request.overwrite or None)


class _MindSporeStepHook:
    """Calls ``after_step(optimizer)`` after each call of a ``mindspore.nn.Optimizer`` cell (a step), by wrapping
    ``nn.Cell.__call__`` as it is now (the monitor's and the collector's wrappers); ``remove`` puts that one back."""

    def __init__(self, after_step: Any) -> None:
        from mindspore import nn

        self.cell_class, self.inner = nn.Cell, nn.Cell.__call__
        inner, optimizer_class = self.inner, nn.Optimizer

        def __call__(cell: Any, *args: Any, **kwargs: Any) -> Any:
            output = inner(cell, *args, **kwargs)
            if isinstance(cell, optimizer_class):
                after_step(cell)
            return output

        nn.Cell.__call__ = __call__

    def remove(self) -> None:
        self.cell_class.__call__ = self.inner
