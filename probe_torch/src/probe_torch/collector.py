"""The PyTorch collector: global hooks that feed a framework-neutral :class:`~probe_core.collect.Collection`.

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
  whose pre-hook sees the gradients w.r.t. each input (each shaped like its
  input), and hooks on the outputs see the gradients w.r.t. the outputs;
* parameter gradients: ``register_post_accumulate_grad_hook`` per parameter.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.modules import module as nn_module
from torch.nn.modules._functions import BackwardHookFunction
from torch.overrides import TorchFunctionMode

from probe_core.collect import Collection
from probe_torch.apis import DISTRIBUTED, DUNDERS, SAME_VALUES, ApiNames
from probe_torch.ops import TorchTensorOps

_TORCH_DIR = os.path.dirname(torch.__file__)
_SKIP_FILES = (os.path.join("torch", "overrides.py"), os.path.join("torch", "_tensor.py"),
               os.path.join("torch", "distributed", "c10d_logger.py"))


def current_rank() -> int:
    """torch.distributed's rank once initialised, else torchrun's ``RANK``, else 0."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", "0") or 0)


def _inplace(api: str, kwargs: dict[str, Any] | None) -> bool:
    short = api.rsplit(".", 1)[-1]
    return (short.endswith("_") and not short.endswith("__")) or short.startswith("__i") or \
        short == "__setitem__" or api.startswith("Distributed.") or bool(kwargs and "out" in kwargs)


def _tensors(args: tuple, kwargs: dict[str, Any]) -> list[tuple[Any, Any]]:
    """Positions of tensors among the call's arguments: positional (one level into lists), then keyword."""
    found: list[tuple[Any, Any]] = []
    for i, arg in enumerate(args):
        if isinstance(arg, torch.Tensor):
            found.append((i, None))
        elif type(arg) in (list, tuple):
            found.extend((i, j) for j, item in enumerate(arg) if isinstance(item, torch.Tensor))
    if kwargs:
        found.extend((key, None) for key, value in kwargs.items() if isinstance(value, torch.Tensor))
    return found


def _pick(args: tuple, kwargs: dict[str, Any], where: tuple[Any, Any]) -> torch.Tensor:
    i, j = where
    value = kwargs[i] if isinstance(i, str) else args[i]
    return value if j is None else value[j]


def _replace(args: tuple, kwargs: dict[str, Any], positions: list[tuple[Any, Any]],
             values: tuple) -> tuple[tuple, dict[str, Any]]:
    out = list(args)
    new_kwargs = dict(kwargs) if kwargs else kwargs
    for (i, j), value in zip(positions, values):
        if isinstance(i, str):
            new_kwargs[i] = value
        elif j is None:
            out[i] = value
        else:
            inner = list(out[i])
            inner[j] = value
            out[i] = type(args[i])(inner)
    return tuple(out), new_kwargs


def _output_tensors(output: Any) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, (list, tuple)):
        return [t for t in output if isinstance(t, torch.Tensor)]
    return []


class _GradCatch:
    """Gradients of one recorded call: w.r.t. its outputs (first) and its inputs (then the entry is written)."""

    __slots__ = ("collector", "name", "grad_outputs", "n_inputs", "done", "same_values")

    def __init__(self, collector: TorchCollector, name: str, n_inputs: int) -> None:
        self.collector = collector
        self.name = name
        self.grad_outputs: list[Any] | None = None
        self.n_inputs = n_inputs
        self.done = False
        self.same_values = False

    def on_outputs(self, grads: Any) -> None:
        self.grad_outputs = list(grads)
        if self.n_inputs == 0:
            self._record([])

    def on_inputs(self, grads: Any) -> None:
        self._record(list(grads))

    def _record(self, grad_inputs: list[Any]) -> None:
        if self.done:
            return
        self.done = True
        if self.same_values and grad_inputs and self.grad_outputs:
            self.collector.ops.alias(grad_inputs[0], self.grad_outputs[0])
        self.collector.record_backward(self.name, self.grad_outputs or [], grad_inputs)


class _ApiMode(TorchFunctionMode):
    """Routes every torch function call to :meth:`TorchCollector.call_api`."""

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


class TorchCollector:
    """Installs and removes PyTorch hooks; one per :class:`PrecisionDebugger` / ``probe run``."""

    framework = "pytorch"

    def __init__(self, config: Any, registry: Any, mode: Any, *, auto_step: bool = False) -> None:
        self.ops = TorchTensorOps()
        self.session = Collection(config, registry, self.ops, mode, rank_fn=current_rank,
                                  stack_skip_dirs=(os.path.dirname(__file__),), stack_skip_files=_SKIP_FILES)
        self.names = ApiNames()
        self.auto_step = auto_step
        self.busy = False
        self.recording = False
        self._installed = False
        self._handles: list[Any] = []
        self._param_handles: list[Any] = []
        self._mode: _ApiMode | None = None
        self._saved_attrs: list[tuple[Any, str, Any]] = []
        self._module_names: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._roots_fixed = False
        self._frames: list[Any] = []
        self._optimizer_hooks: list[Any] = []
        os.register_at_fork(after_in_child=self._forked)

    def _forked(self) -> None:
        """A forked child (DataLoader worker) inherits the hooks but must not write into the parent's dump."""
        self.recording = False
        self.session.active = False
        self.session.stopped = True

    # -- models ---------------------------------------------------------------------

    def add_model(self, model: Any) -> None:
        """Name every submodule of ``model`` (or of each model in a list) msprobe's way; the root is no entry."""
        models = model if isinstance(model, (list, tuple)) else [model]
        for root in models:
            if not isinstance(root, torch.nn.Module):
                continue
            self._roots_fixed = True
            for path, sub in root.named_modules():
                if sub in self._module_names:
                    continue
                if not path:
                    self._module_names[sub] = ""
                    continue
                prefix = f"Module.{path}.{type(sub).__name__}"
                self._module_names[sub] = prefix
                if self._installed and self.session.with_modules:
                    self._hook_params(sub, prefix)

    def _hook_params(self, module: torch.nn.Module, prefix: str) -> None:
        params = {name: p for name, p in module.named_parameters(recurse=False) if p.requires_grad}
        if not params:
            return
        arrived: dict[str, Any] = {}

        def on_grad(param: torch.Tensor, pname: str) -> None:
            if not self.recording:
                return
            arrived[pname] = param.grad
            if len(arrived) == len(params):
                grads = {name: arrived[name] for name in params if name in arrived}
                arrived.clear()
                self._record_params_grad(prefix, grads)

        for pname, param in params.items():
            self._param_handles.append(param.register_post_accumulate_grad_hook(
                lambda p, pname=pname: on_grad(p, pname)))

    def _record_params_grad(self, prefix: str, grads: dict[str, Any]) -> None:
        was, self.busy = self.busy, True
        try:
            self.session.record_params_grad(prefix, grads)
        finally:
            self.busy = was

    # -- install / remove -------------------------------------------------------------

    def start(self, model: Any = None) -> None:
        if self.session.all_steps_done:
            return
        if model is not None and not self._installed:
            self.add_model(model)  # names only; _install hooks their parameters
        if not self._installed:
            self._install()
        elif model is not None:
            self.add_model(model)
        self.recording = True

    def stop(self) -> None:
        self.recording = False
        self._uninstall()
        self.session.flush()

    def step(self) -> None:
        self.session.end_step()
        if self.session.all_steps_done:
            self.recording = False
            self._uninstall()

    def close(self) -> Any:
        self.recording = False
        self._uninstall()
        for handle in self._optimizer_hooks:
            handle.remove()
        self._optimizer_hooks.clear()
        return self.session.close()

    def save(self, variable: Any, name: str, save_backward: bool = True) -> None:
        was, self.busy = self.busy, True
        try:
            self.session.save_variable(name, variable)
            if save_backward:
                for i, tensor in enumerate(_output_tensors(variable)):
                    if tensor.requires_grad:
                        grad_name = name + "_grad" + (f".{i}" if not isinstance(variable, torch.Tensor) else "")
                        tensor.register_hook(lambda grad, n=grad_name: self._save_grad(n, grad))
        finally:
            self.busy = was

    def _save_grad(self, name: str, grad: Any) -> None:
        was, self.busy = self.busy, True
        try:
            self.session.save_variable(name, grad)
        finally:
            self.busy = was

    def _install(self) -> None:
        session = self.session
        if session.with_modules:
            self._handles.append(nn_module.register_module_forward_pre_hook(self._module_pre))
            self._handles.append(nn_module.register_module_forward_hook(self._module_post, with_kwargs=True,
                                                                        always_call=True))
        if session.with_apis:
            for name in DUNDERS:
                original = getattr(torch.Tensor, name, None)
                if original is not None:
                    self._patch(torch.Tensor, name, self._wrap(f"Tensor.{name}", original))
            if dist.is_available():
                for name in DISTRIBUTED:
                    original = getattr(dist, name, None)
                    if original is not None:
                        wrapper = self._wrap(f"Distributed.{name}", original)
                        self._patch(dist, name, wrapper)
                        if getattr(dist.distributed_c10d, name, None) is original:
                            self._patch(dist.distributed_c10d, name, wrapper)
            self._mode = _ApiMode(self)
            self._mode.__enter__()
        if session.with_modules:
            for module, prefix in list(self._module_names.items()):
                if prefix:
                    self._hook_params(module, prefix)
        if not self._optimizer_hooks:
            from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

            self._optimizer_hooks = [register_optimizer_step_pre_hook(self._optimizer_pre),
                                     register_optimizer_step_post_hook(self._optimizer_post)]
        self._installed = True

    def _uninstall(self) -> None:
        if not self._installed:
            return
        if self._mode is not None:
            try:
                self._mode.__exit__(None, None, None)
            except Exception:  # the mode stack was changed under us; leave it to torch
                pass
            self._mode = None
        for owner, name, original in reversed(self._saved_attrs):
            setattr(owner, name, original)
        self._saved_attrs.clear()
        for handle in self._handles + self._param_handles:
            handle.remove()
        self._handles.clear()
        self._param_handles.clear()
        self._frames.clear()
        self._installed = False

    def _patch(self, owner: Any, name: str, value: Any) -> None:
        self._saved_attrs.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    def _wrap(self, api: str, original: Any) -> Any:
        collector = self

        def wrapper(*args, **kwargs):
            if collector.busy or not collector.recording:
                return original(*args, **kwargs)
            return collector.call_api(api, original, args, kwargs)

        wrapper.__name__ = getattr(original, "__name__", api)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        wrapper.__wrapped__ = original
        return wrapper

    # -- optimizer: steps end here under probe run -------------------------------------------

    def _optimizer_pre(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.busy = True

    def _optimizer_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.busy = False
        if self.auto_step and self.recording:
            self.step()

    # -- APIs -----------------------------------------------------------------------------

    def call_api(self, api: str, func: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
        session = self.session
        name = session.api_forward_name(api)
        self.busy = True
        try:
            if not session.start_forward(name):
                try:
                    return func(*args, **kwargs)
                finally:
                    session.end_forward_unrecorded(name)
            parent = session.current_module()
            sid = session.capture_stack(2)
            entry = session.encode_inputs(name, args, kwargs)
            catch = wrapped = None
            if session.wants_backward(name) and torch.is_grad_enabled() and not _inplace(api, kwargs):
                args, kwargs, catch, wrapped = self._catch_inputs(name, args, kwargs)
            output = func(*args, **kwargs)
            if wrapped and any(t is w for t in _output_tensors(output) for w in wrapped):
                catch = None  # the call returned its (wrapped) input: hand back the caller's own tensor
                output = self._unwrap(output, wrapped)
            recorded_output = output
            same = api in SAME_VALUES and args
            if same:
                self.ops.alias(output, args[0])
            if api.startswith("Distributed."):
                self.ops.new_batch()  # collectives write without bumping _version: forget cached statistics
                if not _output_tensors(output):
                    # in-place collectives return None or a Work handle: their result is the tensors they changed
                    recorded_output = [_pick(args, kwargs, where) for where in _tensors(args, kwargs)]
            session.finish_forward(name, entry, recorded_output, parent, sid)
            if catch is not None:
                catch.same_values = bool(same)
                self._catch_outputs(catch, output)
            return output
        finally:
            self.busy = False

    def _unwrap(self, output: Any, wrapped: dict[int, tuple[torch.Tensor, torch.Tensor]]) -> Any:
        by_id = {id(new): old for new, old in wrapped.values()}
        if isinstance(output, torch.Tensor):
            return by_id.get(id(output), output)
        return type(output)(by_id.get(id(t), t) for t in output)

    # -- backward plumbing ----------------------------------------------------------------------

    def _catch_inputs(self, name: str, args: tuple, kwargs: dict[str, Any]) -> tuple[Any, Any, _GradCatch, Any]:
        positions = _tensors(args, kwargs)
        tensors = [_pick(args, kwargs, where) for where in positions]
        catch = _GradCatch(self, name, len(tensors))
        if not any(t.requires_grad for t in tensors):
            catch.n_inputs = 0
            return args, kwargs, catch, None
        new = BackwardHookFunction.apply(*tensors)
        node = next(t.grad_fn for t in new if t.grad_fn is not None)
        node.register_prehook(lambda grads: self._in_hook(catch.on_inputs, grads))
        wrapped = {i: (n, o) for i, (n, o) in enumerate(zip(new, tensors))}
        args, kwargs = _replace(args, kwargs, positions, new)
        return args, kwargs, catch, wrapped

    def _catch_outputs(self, catch: _GradCatch, output: Any) -> None:
        outs = [t for t in _output_tensors(output) if t.requires_grad]
        if not outs:
            return
        if len(outs) == 1:
            outs[0].register_hook(lambda grad: self._in_hook(catch.on_outputs, (grad,)))
        else:
            torch.autograd.graph.register_multi_grad_hook(
                outs, lambda grads: self._in_hook(catch.on_outputs, grads))

    def _in_hook(self, fn: Any, grads: Any) -> None:
        was, self.busy = self.busy, True
        try:
            fn(grads)
        finally:
            self.busy = was

    def record_backward(self, name: str, grad_outputs: list[Any], grad_inputs: list[Any]) -> None:
        if self.recording:
            self.session.record_backward(name, grad_outputs, grad_inputs)

    # -- modules -----------------------------------------------------------------------------------

    def _prefix(self, module: torch.nn.Module) -> str | None:
        prefix = self._module_names.get(module)
        if prefix is None and not self._roots_fixed and not self._frames:
            # ``probe run``: a module called at top level is a root model
            self.add_model(module)
            self._roots_fixed = False
            prefix = self._module_names.get(module)
        return prefix or None

    def _module_pre(self, module: torch.nn.Module, args: tuple) -> Any:
        if self.busy or not self.recording:
            self._frames.append(None)
            return None
        prefix = self._prefix(module)
        if prefix is None:
            self._frames.append(None)
            return None
        session = self.session
        name = session.module_forward_name(prefix)
        self.busy = True
        try:
            recorded = session.start_forward(name)
            parent = session.current_module()
            sid = session.capture_stack(3) if recorded else None
            entry = session.encode_inputs(name, args, None) if recorded else None
            catch = None
            new_args = None
            if recorded and session.wants_backward(name) and torch.is_grad_enabled() and \
                    not getattr(module, "inplace", False):
                new_args, _, catch, _ = self._catch_inputs(name, args, {})
            session.enter_module(name)
            self._frames.append((name, recorded, entry, parent, sid, catch))
            return new_args if new_args is not args else None
        finally:
            self.busy = False

    def _module_post(self, module: torch.nn.Module, args: tuple, kwargs: dict[str, Any], output: Any) -> None:
        if not self._frames:
            return None
        frame = self._frames.pop()
        if frame is None:
            return None
        name, recorded, entry, parent, sid, catch = frame
        session = self.session
        session.exit_module()
        if not recorded:
            session.end_forward_unrecorded(name)
            return None
        self.busy = True
        try:
            if entry is not None and "input_kwargs" in entry and kwargs:
                entry["input_kwargs"] = session.encoder.encode_kwargs(kwargs)
            params = {key: p for key, p in module._parameters.items() if p is not None}
            session.finish_forward(name, entry, output, parent, sid, parameters=params)
            if catch is not None:
                self._catch_outputs(catch, output)
        finally:
            self.busy = False
        return None
