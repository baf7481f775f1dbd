"""``TrainerMon``: msprobe's monitor API, shared by PyTorch and MindSpore (only the adapter differs).

    mon = TrainerMon("monitor_config.json", params_have_main_grad=False)
    mon.set_monitor(model, optimizer, grad_acc_steps=1)     # then train as usual

Every optimizer step ends a monitored step; files are finished at exit (or ``mon.close()``).
"""

from __future__ import annotations

import atexit
import os
from typing import Any

from probe_monitor.config import load_monitor_config
from probe_monitor.engine import MonitorEngine, output_root
from probe_monitor.errors import MonitorError


class TrainerMonBase:
    """``TrainerMon(config_file_path, process_group=None, params_have_main_grad=True, opt_ty=None)``.

    ``output_dir`` (probe's addition) overrides ``$MONITOR_OUTPUT_DIR`` (default ``./monitor_output``);
    ``registry`` (probe's addition, for tests) is the plugin registry writers come from (default: the installed);
    ``process_group`` and ``opt_ty`` are accepted for msprobe compatibility (optimizer states are found
    from the optimizer itself).
    """

    def __init__(self, config_file_path: str | os.PathLike[str], process_group: Any = None,
                 params_have_main_grad: bool = True, opt_ty: str | None = None, *,
                 output_dir: str | os.PathLike[str] | None = None, registry: Any = None) -> None:
        self.config_path = str(config_file_path)
        self.config = load_monitor_config(config_file_path, registry=registry)
        self.params_have_main_grad = params_have_main_grad
        self.process_group, self.opt_ty, self.output_dir = process_group, opt_ty, output_dir
        self.registry = registry
        self.monitor: Any = None

    # a framework's TrainerMon names its parts
    backend: type  # TensorBackend
    monitor_class: type  # ModelMonitor subclass
    rank: staticmethod  # () -> this process' rank

    def set_monitor(self, model: Any, optimizer: Any = None, grad_acc_steps: int = 1, tp_group: Any = None,
                    dp_group: Any = None, start_iteration: int = 0) -> None:
        """Start monitoring ``model`` (a model or a list of virtual-pipeline chunks) trained by ``optimizer``."""
        if model is None:
            raise MonitorError("set_monitor: model is None; pass the model (or the list of its chunks)")
        if optimizer is None:
            raise MonitorError("set_monitor: optimizer is None; pass the optimizer whose step() ends a training "
                               "step: mon.set_monitor(model, optimizer)")
        if self.monitor is not None:
            raise MonitorError("set_monitor: this TrainerMon already monitors a model; create one TrainerMon per model")
        engine = MonitorEngine(self.config, self.backend(), rank=self.rank(), output=output_root(self.output_dir),
                               registry=self.registry, start_iteration=start_iteration, config_path=self.config_path)
        self.monitor = self.monitor_class(engine, params_have_main_grad=self.params_have_main_grad)
        for vpp_stage, chunk in enumerate(model if isinstance(model, (list, tuple)) else [model]):
            self.monitor.add_model(chunk, vpp_stage=vpp_stage)
        self.monitor.bind_optimizer(optimizer)
        atexit.register(self.close)

    @property
    def output(self) -> Any:
        """This rank's output folder (``None`` before ``set_monitor`` or on a rank that does not record)."""
        return self.monitor.engine.folder if self.monitor is not None else None

    def close(self) -> None:
        """Finish the files (idempotent; also runs at exit)."""
        if self.monitor is not None:
            self.monitor.close()
