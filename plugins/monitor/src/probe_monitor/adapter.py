"""What the PyTorch and MindSpore monitors share: naming parameters, hooking gradients and activations of the
targeted modules, counting micro-steps. A framework supplies the few calls marked below."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

from probe_monitor.engine import MonitorEngine


class ModelMonitor:
    """Hooks models (``add_model``, possibly late: ``probe run``) and one optimizer to an engine."""

    tensor_type: type = object  # the framework's tensor class

    def __init__(self, engine: MonitorEngine, *, params_have_main_grad: bool = True) -> None:
        self.engine = engine
        self.main_grad = params_have_main_grad  # read Megatron's main_grad as the reduced gradient (torch)
        self.config = engine.config
        self.names: dict[int, tuple[str, int]] = {}  # id(parameter) -> (name, vpp_stage)
        # the name prefix of each model added; not the models: holding one would keep a DDP wrapper (and its
        # reducer) alive after the script let it go, into the process group's teardown
        self.roots: list[str] = []
        self.optimizer: Any = None
        self.depth = 0  # > 0 while a monitored root model runs
        self._forwards = 0
        self._handles: list[Any] = []

    # -- framework calls ----------------------------------------------------------------------------

    def named_parameters(self, model: Any) -> Iterable[tuple[str, Any]]:
        raise NotImplementedError

    def named_modules(self, model: Any) -> Iterable[tuple[str, Any]]:
        raise NotImplementedError

    def local_parameter_names(self, module: Any) -> list[str]:
        raise NotImplementedError

    def hook_grad(self, param: Any, name: str, vpp: int) -> Any:
        """Register a hook recording ``grad_unreduced`` for ``param``; return its handle."""
        raise NotImplementedError

    def hook_forward(self, module: Any, hook: Any, *, pre: bool = False) -> Any:
        """Register ``hook(module, inputs, output)`` after the forward (``hook(module, inputs)`` before it
        when ``pre``); return the handle."""
        raise NotImplementedError

    def hook_backward(self, module: Any, hook: Any) -> Any:
        """Register ``hook(module, grad_input, grad_output)``; return the handle."""
        raise NotImplementedError

    # -- shared -------------------------------------------------------------------------------------

    def add_model(self, model: Any, vpp_stage: int = 0, prefix: str = "") -> None:
        config, first = self.config, not self.roots
        self.roots.append(prefix)
        for name, param in self.named_parameters(model):
            if id(param) in self.names:
                continue
            self.names[id(param)] = (prefix + name, vpp_stage)
            if config.wg_distribution and param.requires_grad and config.targeted(name):
                self._handles.append(self.hook_grad(param, prefix + name, vpp_stage))
        if config.xy_distribution:
            for name, module in self.named_modules(model):
                if config.all_xy or config.targeted(name):
                    self._hook_activations(module, prefix + name, vpp_stage)
        self._handles += [self.hook_forward(model, functools.partial(self._root_enter, first), pre=True),
                          self.hook_forward(model, self._root_exit)]
        if config.print_struct:
            self.engine.write_struct({prefix + name: [prefix + name + "." + p for p in self.local_parameter_names(m)]
                                      for name, m in self.named_modules(model)})

    def _root_enter(self, counts: bool, module: Any, inputs: Any) -> None:
        self.depth += 1
        if counts:  # the first root's forward calls count micro-steps
            self.engine.micro_step = self._forwards
            self._forwards += 1

    def _root_exit(self, module: Any, inputs: Any, output: Any = None) -> None:
        self.depth -= 1

    def _tensors(self, value: Any) -> list[Any]:
        if value is None or isinstance(value, self.tensor_type):
            return [value]
        if isinstance(value, (list, tuple)):
            return [v for v in value if v is None or isinstance(v, self.tensor_type)]
        return []

    def _hook_activations(self, module: Any, name: str, vpp: int) -> None:
        engine, config = self.engine, self.config

        def record(tag: str, part: str, value: Any) -> None:
            tensors = self._tensors(value)
            for i, tensor in enumerate(tensors):
                label = f"{name}.{part}" if len(tensors) == 1 else f"{name}.{part}.{i}"
                engine.record(tag, label, tensor, micro_step=engine.micro_step, vpp_stage=vpp)

        def forward(module: Any, inputs: Any, output: Any) -> None:
            if engine.active:
                record("actv", "input", inputs[0] if len(inputs) == 1 else inputs)
                record("actv", "output", output)

        def backward(module: Any, grad_input: Any, grad_output: Any) -> None:
            if engine.active:
                record("actv_grad", "input", grad_input)
                record("actv_grad", "output", grad_output)

        if not config.backward_only:
            self._handles.append(self.hook_forward(module, forward))
        if not config.forward_only:
            self._handles.append(self.hook_backward(module, backward))

    def end_step(self) -> None:
        self.engine.end_step()
        self._forwards = 0

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self.engine.close()
