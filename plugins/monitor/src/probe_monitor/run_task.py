"""``probe run --task monitor [-c monitor_config.json] [--dump-path OUT] train.py``: the monitor on an unmodified script.

PyTorch: a global module forward pre-hook finds each root model at its first forward (a module with
parameters called while no monitored model runs) and hooks it; global optimizer hooks bind the first
optimizer that steps, and each of its steps (``step(closure)`` included) ends a monitored step.
MindSpore: the same through :mod:`probe_monitor.mindspore_monitor`. Without ``-c`` the update chain is
recorded (``wg``, ``param``, ``mv``); the output goes to ``--dump-path``, else ``$MONITOR_OUTPUT_DIR``,
else ``./monitor_output``.
"""

from __future__ import annotations

import sys
from dataclasses import replace
import warnings
from typing import Any

from probe_core.api import ProbeWarning, RunRequest
from probe_monitor.config import RUN_DEFAULTS, load_monitor_config
from probe_monitor.engine import MonitorEngine, output_root
from probe_monitor.errors import MonitorError


def attach(request: RunRequest) -> Any:
    """The run task's ``attach``: build the framework's monitor before the script starts."""
    config = load_monitor_config(request.config, RUN_DEFAULTS, request.registry)
    if request.overwrite:  # probe run --overwrite
        config = replace(config, overwrite=True)
    if request.framework == "mindspore":
        from probe_monitor.mindspore_monitor import MindSporeRun

        return MindSporeRun(config, request)
    return TorchRun(config, request)


class TorchRun:
    """Finds models and the optimizer of a running PyTorch script and feeds a :class:`TorchMonitor`."""

    def __init__(self, config: Any, request: RunRequest) -> None:
        from torch.nn.modules import module as nn_module
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        from probe_monitor.torch_monitor import TorchBackend, TorchMonitor, current_rank

        self.engine = MonitorEngine(config, TorchBackend(), rank=current_rank(), output=output_root(request.output),
                                    registry=request.registry, config_path=request.config)
        self.monitor = TorchMonitor(self.engine, params_have_main_grad=True)
        self._roots: set[int] = set()
        self._ignored: set[int] = set()
        self._hooks = [nn_module.register_module_forward_pre_hook(self._discover),
                       register_optimizer_step_pre_hook(self._before_step),
                       register_optimizer_step_post_hook(self._after_step)]

    def _discover(self, module: Any, args: Any) -> None:
        monitor = self.monitor
        if monitor.depth or id(module) in self._roots:
            return
        if next(module.parameters(), None) is None:
            return
        self._roots.add(id(module))
        monitor.add_model(module, prefix="" if not monitor.roots else f"model{len(monitor.roots)}.")
        monitor._root_enter(len(monitor.roots) == 1, module, args)  # its own pre-hook missed this call

    def _before_step(self, optimizer: Any, args: Any, kwargs: Any) -> Any:
        if self.monitor.optimizer is None:
            self.monitor.bind_optimizer(optimizer, hooks=False)
        elif optimizer is not self.monitor.optimizer:
            if id(optimizer) not in self._ignored:
                self._ignored.add(id(optimizer))
                warnings.warn(f"probe monitor: a second optimizer ({type(optimizer).__name__}) steps; only the first "
                              "one is monitored and ends steps", ProbeWarning, stacklevel=2)
            return None
        return self.monitor.before_step(optimizer, args, kwargs)

    def _after_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if optimizer is self.monitor.optimizer:
            self.monitor.after_step(optimizer, args, kwargs)

    def close(self, exit_code: int = 0) -> None:
        for hook in self._hooks:
            hook.remove()
        self.monitor.close()
        report(self.engine, self.monitor.optimizer is not None, "optimizer.step()", exit_code)


def report(engine: MonitorEngine, stepped: bool, step_call: str, exit_code: int) -> None:
    """The end-of-run lines; a script that ran to its end without an optimizer step is an error (nothing was
    recorded); one that failed before its first step has said why already."""
    if not stepped and exit_code == 0:
        raise MonitorError(f"probe run --task monitor: the script never called {step_call}, so no step was "
                           "monitored; monitor a training script (steps end at the optimizer step)")
    steps = engine.steps_recorded
    where = engine.folder if engine.folder is not None else f"{engine.root} (rank {engine.rank} does not record)"
    span = f"{steps[0]}-{steps[-1]}" if steps else "none"
    print(f"probe monitor: {len(steps)} steps recorded ({span}), rank {engine.rank}, output {where}",
          file=sys.stderr)
