"""The monitor on MindSpore PyNative: the same engine and writers as PyTorch, only the framework calls differ.

* unreduced weight gradients: ``Parameter.register_hook`` (the gradient as backward produces it);
* ``param_origin``, reduced gradients and the moments the step starts from (``moment1``/``moment2`` of
  ``nn.Adam``, ``AdamWeightDecay``, ...; ``moments1``/``moments2`` of ``nn.Lamb``): the optimizer cell's
  forward pre-hook, whose input is the gradients the optimizer applies (after a data-parallel grad reducer);
* ``param_updated``: the optimizer cell's forward hook, which ends the step;
* activations: forward and backward hooks of the targeted cells.
"""

from __future__ import annotations

import math
from typing import Any

import mindspore as ms
from mindspore import nn, ops

from probe_core.api import process_rank

from probe_monitor.adapter import ModelMonitor
from probe_monitor.engine import MonitorEngine, output_root
from probe_monitor.errors import MonitorError
from probe_monitor.trainer import TrainerMonBase

MOMENTS = {"exp_avg": ("moment1", "moments1"), "exp_avg_sq": ("moment2", "moments2")}


def current_rank() -> int:
    return process_rank("mindspore")[0]


class MindSporeBackend:
    """Statistics as one float32 vector on the tensor's device; one ``asnumpy`` per step."""

    framework = "mindspore"
    extra: dict[str, Any] = {}  # statistics plugins add: name -> fn(tensor, eps) (set by the engine)

    def stats(self, tensor: Any, names: tuple[str, ...], eps: float) -> Any:
        if tensor.size == 0:
            return ops.full((len(names),), math.nan, dtype=ms.float32)
        x = tensor.astype(ms.float32)
        values = {"min": lambda: x.min(), "max": lambda: x.max(), "mean": lambda: x.mean(),
                  "norm": lambda: ops.norm(x), "zeros": lambda: (ops.abs(x) < eps).astype(ms.float32).mean(),
                  "nans": lambda: ops.isnan(x).astype(ms.float32).sum()}
        values.update({name: (lambda fn=fn: fn(x, eps)) for name, fn in self.extra.items()})
        return ops.stack([values[name]().reshape(()).astype(ms.float32) for name in names])

    def fetch(self, vectors: list[Any]) -> list[list[float]]:
        return ops.stack(vectors).asnumpy().tolist() if vectors else []

    def describe(self, tensor: Any) -> tuple[tuple[int, ...], str]:
        return tuple(tensor.shape), str(tensor.dtype)


class MindSporeMonitor(ModelMonitor):
    """The MindSpore calls of :class:`~probe_monitor.adapter.ModelMonitor` and the optimizer cell's hooks."""

    tensor_type = ms.Tensor

    def named_parameters(self, model: Any) -> Any:
        return model.parameters_and_names()

    def named_modules(self, model: Any) -> Any:
        return model.cells_and_names()

    def local_parameter_names(self, cell: Any) -> list[str]:
        return [name for name, _ in cell.parameters_and_names(expand=False)]

    def hook_grad(self, param: Any, name: str, vpp: int) -> Any:
        def hook(grad: Any) -> None:
            if self.engine.active:
                self.engine.record("grad_unreduced", name, grad, vpp_stage=vpp)

        return param.register_hook(hook)

    def hook_forward(self, cell: Any, hook: Any, *, pre: bool = False) -> Any:
        return cell.register_forward_pre_hook(hook) if pre else cell.register_forward_hook(hook)

    def hook_backward(self, cell: Any, hook: Any) -> Any:
        return cell.register_backward_hook(hook)

    # -- optimizer ----------------------------------------------------------------------------------

    def bind_optimizer(self, optimizer: Any, *, hooks: bool = True) -> None:
        if not isinstance(optimizer, nn.Optimizer):
            raise MonitorError(f"set_monitor: {type(optimizer).__name__} is not a mindspore.nn.Optimizer; pass the "
                               "optimizer cell whose call applies the gradients")
        self.optimizer = optimizer
        if hooks:
            self._handles.append(optimizer.register_forward_pre_hook(lambda cell, inputs: self.before_step(inputs)))
            self._handles.append(optimizer.register_forward_hook(lambda cell, inputs, output: self.after_step()))

    def _params(self) -> list[tuple[int, Any, str, int]]:
        out = []
        for index, param in enumerate(self.optimizer.parameters):
            name, vpp = self.names.get(id(param), (param.name, 0))
            if self.config.targeted(name):
                out.append((index, param, name, vpp))
        return out

    def before_step(self, inputs: Any) -> None:
        engine, config = self.engine, self.config
        if not engine.active:
            return
        grads = inputs[0] if inputs else ()
        # the moments as the step finds them (msprobe's convention: step N shows the moments step N-1 left)
        moments = {tag: next((getattr(self.optimizer, a) for a in attrs if hasattr(self.optimizer, a)), None)
                   for tag, attrs in MOMENTS.items()} if config.mv_distribution else {}
        for index, param, name, vpp in self._params():
            if config.param_distribution:
                engine.record("param_origin", name, param, vpp_stage=vpp)
            if config.wg_distribution and index < len(grads):
                engine.record("grad_reduced", name, grads[index], vpp_stage=vpp)
            for tag, states in moments.items():
                if states is not None and index < len(states):
                    engine.record(tag, name, states[index], vpp_stage=vpp)

    def after_step(self) -> None:
        engine, config = self.engine, self.config
        if engine.active and config.param_distribution:
            for index, param, name, vpp in self._params():
                engine.record("param_updated", name, param, vpp_stage=vpp)
        self.end_step()


class TrainerMon(TrainerMonBase):
    """msprobe's ``TrainerMon`` for MindSpore PyNative (see :class:`~probe_monitor.trainer.TrainerMonBase`)."""

    backend, monitor_class, rank = MindSporeBackend, MindSporeMonitor, staticmethod(current_rank)


class MindSporeRun:
    """``probe run --task monitor`` on a MindSpore script: ``Cell.__call__`` finds root cells at their first
    call; the first optimizer cell called is bound and each of its calls ends a step."""

    def __init__(self, config: Any, request: Any) -> None:
        from probe_monitor.run_task import report

        self._report = report
        self.engine = MonitorEngine(config, MindSporeBackend(), rank=current_rank(), output=output_root(request.output),
                                    registry=request.registry, config_path=request.config)
        self.monitor = MindSporeMonitor(self.engine)
        self._original = nn.Cell.__call__
        self._roots: set[int] = set()
        run = self

        def __call__(cell: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(cell, nn.Optimizer):
                return run._optimizer_call(cell, args, kwargs)
            if not run.monitor.depth and id(cell) not in run._roots and next(cell.get_parameters(), None) is not None:
                run._roots.add(id(cell))
                # its hooks, registered now, already run for this call
                run.monitor.add_model(cell, prefix="" if not run.monitor.roots else f"model{len(run.monitor.roots)}.")
            return run._original(cell, *args, **kwargs)

        nn.Cell.__call__ = __call__

    def _optimizer_call(self, optimizer: Any, args: tuple, kwargs: dict) -> Any:
        if self.monitor.optimizer is None:
            self.monitor.bind_optimizer(optimizer, hooks=False)
        if optimizer is not self.monitor.optimizer:
            return self._original(optimizer, *args, **kwargs)
        self.monitor.before_step(args)
        output = self._original(optimizer, *args, **kwargs)
        self.monitor.after_step()
        return output

    def close(self, exit_code: int = 0) -> None:
        nn.Cell.__call__ = self._original
        self.monitor.close()
        self._report(self.engine, self.monitor.optimizer is not None, "the optimizer", exit_code)
