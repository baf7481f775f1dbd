"""Stage 1's run task, ``probe run --task locate-monitor -c monitor_config.json``: the monitor's run task, and
the script ends right after the last step the monitor records (``start_step + (collect_times - 1) *
step_interval``), so the steps after the monitored window do not run.

The monitor is used through the registry's ``monitor`` run task (probe-monitor), unchanged; what ends a step is
counted after the monitor has seen it, for the optimizer that steps first (the one the monitor watches), and
``SystemExit(0)`` is raised after the last one, on every rank at the same step (none is left waiting in a
collective). PyTorch: an optimizer step post-hook registered after the monitor's. MindSpore (PyNative): the optimizer
cell's call, through ``nn.Cell.__call__`` wrapped over the monitor's own wrapper (restored on close).
"""

from __future__ import annotations

import sys
from typing import Any

from probe_core.api import PluginError, RunRequest, read_config

NAME = "locate-monitor"


def steps_to_run(config: dict[str, Any]) -> int:
    """How many steps the script runs for the monitor ``config`` to record all its steps."""
    return config.get("start_step", 0) + (config["collect_times"] - 1) * config.get("step_interval", 1) + 1


class MonitorWindow:
    """The monitor's handle and the hook that ends the script after ``steps_to_run`` steps."""

    def __init__(self, request: RunRequest) -> None:
        monitor = request.registry.family("run_tasks").get("monitor")
        if monitor is None:
            raise PluginError(f"probe run --task {NAME} needs the run task 'monitor' (probe-monitor); install and "
                              "enable it (probe plugins lists run_tasks)")
        self.steps, self.optimizer, self.hook = steps_to_run(read_config(request.config)), None, None
        self.done = 0
        self.inner = monitor.load()(request)
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

    def close(self, exit_code: int = 0) -> None:
        if self.hook is not None:
            self.hook.remove()
        self.inner.close(exit_code)


class _MindSporeStepHook:
    """Calls ``after_step(optimizer)`` after each call of a ``mindspore.nn.Optimizer`` cell (a step), by wrapping
    ``nn.Cell.__call__`` as it is now (the monitor's wrapper); ``remove`` puts that one back."""

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
