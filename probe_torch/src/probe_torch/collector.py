"""The PyTorch collector: torch's hooks feeding the framework-neutral :class:`~probe_core.collect.driver.CollectorBase`.

How calls are seen (chosen by measurement, see ``benchmarks/dump_overhead.py``):

* modules (L0, mix): ``torch.nn.modules.module`` global forward-pre/forward
  hooks — no per-module registration, any model is seen;
* APIs (L1, mix): one :class:`torch.overrides.TorchFunctionMode` sees every
  Python-level ``torch.*``, ``torch.nn.functional.*`` and ``Tensor`` call; the
  mode is off while its handler runs, so only the outermost API of a nested
  call is recorded. Operators are wrapped on ``torch.Tensor`` to keep msprobe's
  ``Tensor.__add__`` names, and ``torch.distributed`` collectives are wrapped as
  ``Distributed.*``;
* backward: the call's tensor inputs pass through an identity autograd node
  (``BackwardHookFunction``) whose pre-hook sees the gradients w.r.t. each
  input (each shaped like its input); hooks on the outputs see the gradients
  w.r.t. the outputs;
* parameter gradients: ``register_post_accumulate_grad_hook`` per parameter;
* optimizer steps: global optimizer hooks keep the optimizer's own tensor
  calls out of the dump and, under ``probe run``, end the step.

Naming, filters, frames, backward pairing and saves live in the shared driver.
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.modules import module as nn_module
from torch.nn.modules._functions import BackwardHookFunction
from torch.overrides import TorchFunctionMode

from probe_core.collect.driver import CollectorBase
from probe_torch.apis import DISTRIBUTED, DUNDERS, SAME_VALUES, ApiNames
from probe_torch.ops import TorchTensorOps

_SKIP_FILES = (os.path.join("torch", "overrides.py"), os.path.join("torch", "_tensor.py"),
               os.path.join("torch", "distributed", "c10d_logger.py"))


def current_rank() -> int:
    """torch.distributed's rank once initialised, else torchrun's ``RANK``, else 0."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", "0") or 0)


class _ApiMode(TorchFunctionMode):
    """Routes every torch function call to :meth:`CollectorBase.call_api`."""

    def __init__(self, collector: TorchCollector) -> None:
        super().__init__()
        self.collector = collector
        self.names = collector.names

    def __torch_function__(self, func, types, args=(), kwargs=None):
        collector = self.collector
        if kwargs is None:
            kwargs = {}
        if collector.busy or not collector.recording:
            return func(*args, **kwargs)
        api = self.names(func)
        if api is None:  # metadata read, repr, backward(): nothing inside is an entry either
            collector.busy = True
            try:
                return func(*args, **kwargs)
            finally:
                collector.busy = False
        return collector.call_api(api, func, args, kwargs)


class TorchCollector(CollectorBase):
    """Installs and removes PyTorch hooks; one per :class:`PrecisionDebugger` / ``probe run``."""

    framework = "pytorch"
    module_prefix = "Module"

    def __init__(self, config: Any, registry: Any, mode: Any, *, auto_step: bool = False) -> None:
        super().__init__(config, registry, mode, TorchTensorOps(), auto_step=auto_step, rank_fn=current_rank,
                         stack_skip_dirs=(os.path.dirname(__file__),), stack_skip_files=_SKIP_FILES)
        self.names = ApiNames()
        self._handles: list[Any] = []
        self._mode: _ApiMode | None = None
        self._optimizer_hooks: list[Any] = []
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        """A forked child (DataLoader worker) inherits the hooks but must not write into the parent's dump."""
        self.recording = False
        self.session.active = False
        self.session.stopped = True

    # -- models -----------------------------------------------------------------------------

    def is_model(self, obj: Any) -> bool:
        return isinstance(obj, torch.nn.Module)

    def named_submodules(self, root: torch.nn.Module) -> Any:
        return root.named_modules()

    def direct_parameters(self, module: torch.nn.Module) -> dict[str, Any]:
        return {name: p for name, p in module._parameters.items() if p is not None}

    def trainable_parameters(self, module: torch.nn.Module) -> dict[str, Any]:
        return {name: p for name, p in self.direct_parameters(module).items() if p.requires_grad}

    def hook_parameter(self, param: torch.Tensor, on_grad: Any) -> Any:
        return param.register_post_accumulate_grad_hook(lambda p: on_grad(p.grad))

    # -- backward plumbing ------------------------------------------------------------------------

    def grad_enabled(self) -> bool:
        return torch.is_grad_enabled()

    def identity_with_grad_hook(self, tensors: list[Any], on_grads: Any) -> list[Any]:
        new = BackwardHookFunction.apply(*tensors)
        node = next(t.grad_fn for t in new if t.grad_fn is not None)
        def deliver(grads: Any) -> None:
            self._guarded(on_grads, grads)

        node.register_prehook(deliver)
        for copy, original in zip(new, tensors):
            self.ops.alias(copy, original)  # same values: statistics computed once
        return list(new)

    def hook_output_grads(self, tensors: list[Any], on_grads: Any) -> None:
        def deliver(grads: Any) -> None:  # a tensor hook must return None (or a replacement gradient)
            self._guarded(on_grads, list(grads))

        if len(tensors) == 1:
            tensors[0].register_hook(lambda grad: deliver((grad,)))
        else:
            torch.autograd.graph.register_multi_grad_hook(tensors, deliver)

    def recorded_output(self, api: str, args: tuple, kwargs: dict[str, Any], output: Any) -> Any:
        if api in SAME_VALUES and args:
            self.ops.alias(output, args[0])  # a view op's output holds its input's values
        return super().recorded_output(api, args, kwargs, output)

    def _record_backward(self, name: str, grad_outputs: list[Any], grad_inputs: list[Any]) -> None:
        if grad_inputs and grad_outputs and name.rsplit(".", 2)[0] in SAME_VALUES:
            self.ops.alias(grad_inputs[0], grad_outputs[0])
        super()._record_backward(name, grad_outputs, grad_inputs)

    # -- install / remove ---------------------------------------------------------------------------

    def install_hooks(self) -> None:
        session = self.session
        if session.with_modules:
            self._handles.append(nn_module.register_module_forward_pre_hook(self._module_pre))
            self._handles.append(nn_module.register_module_forward_hook(self._module_post, with_kwargs=True,
                                                                        always_call=True))
        if session.with_apis:
            for name in DUNDERS:
                original = getattr(torch.Tensor, name, None)
                if original is not None:
                    self.patch(torch.Tensor, name, self.wrap_api(f"Tensor.{name}", original))
            if dist.is_available():
                for name in DISTRIBUTED:
                    original = getattr(dist, name, None)
                    if original is not None:
                        wrapper = self.wrap_api(f"Distributed.{name}", original)
                        self.patch(dist, name, wrapper)
                        if getattr(dist.distributed_c10d, name, None) is original:
                            self.patch(dist.distributed_c10d, name, wrapper)
            self._mode = _ApiMode(self)
            self._mode.__enter__()
        if not self._optimizer_hooks:  # kept until close(): removing them inside an optimizer hook is unsafe
            from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

            self._optimizer_hooks = [register_optimizer_step_pre_hook(self._optimizer_pre),
                                     register_optimizer_step_post_hook(self._optimizer_post)]

    def remove_hooks(self) -> None:
        if self._mode is not None:
            try:
                self._mode.__exit__(None, None, None)
            except Exception:  # the mode stack was changed under us; leave it to torch
                pass
            self._mode = None
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def close(self) -> Any:
        for handle in self._optimizer_hooks:
            handle.remove()
        self._optimizer_hooks.clear()
        return super().close()

    def _module_pre(self, module: torch.nn.Module, args: tuple) -> Any:
        return self.module_enter(module, args)

    def _module_post(self, module: torch.nn.Module, args: tuple, kwargs: dict[str, Any], output: Any) -> None:
        self.module_exit(module, kwargs, output)

    # -- optimizer: its tensor calls are no entries; under probe run a step ends here ----------------------

    def _optimizer_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.busy = True

    def _optimizer_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.busy = False
        if self.auto_step and self.recording:
            self.step()
