"""The PyTorch collector: torch's hooks feeding the framework-neutral :class:`~probe_core.collect.driver.CollectorBase`.

How calls are seen (chosen by measurement, see ``benchmarks/dump_overhead.py``):

* modules (L0, mix): ``torch.nn.modules.module`` global forward-pre/forward
  hooks — no per-module registration, any model is seen;
* APIs (L1, mix): one :class:`torch.overrides.TorchFunctionMode` sees every
  Python-level ``torch.*``, ``torch.nn.functional.*`` and ``Tensor`` call; the
  mode is off while its handler runs, so only the outermost API of a nested
  call is recorded. Operators are wrapped on ``torch.Tensor`` to keep msprobe's
  ``Tensor.__add__`` names, APIs written in Python (``F.layer_norm``) are
  wrapped so that entries show the arguments as the user passed them (not as
  ``handle_torch_function`` re-passes them), and ``torch.distributed``
  collectives are wrapped as ``Distributed.*``; buffers a call writes without
  reading them (a collective's output tensor, ``out=``) are recorded as null
  inputs, as msprobe records them (:mod:`probe_torch.buffers`);
* API backward (``api_backward: grad_fn``, the default, msprobe's layout): a
  hook on the gradient node of the call's first output sees the gradients
  w.r.t. that node's outputs and those it computes for its inputs (``linear``:
  ``[bias, x, weight.T]``, as ``addmm`` takes them);
* module backward, and API backward under ``api_backward: inputs``: the call's
  tensor inputs pass through an identity autograd node
  (:class:`_Identity`) whose pre-hook sees the gradients w.r.t. each input
  (each shaped like its input); hooks on the outputs see the gradients w.r.t.
  the outputs. The identity's outputs share their inputs' memory without being
  autograd views of them, so a call may change them in place (``add_``,
  ``+=``, ``F.relu(x, inplace=True)``, a module whose first op is
  ``nn.ReLU(inplace=True)``); the caller's tensor then gets the change's
  autograd history (:meth:`TorchCollector.inputs_returned`), so training runs
  as without probe and in-place calls have backward entries. In-place calls
  that change shape or storage (``unsqueeze_``, ``set_``), ``x[i] = v``,
  ``out=`` and collectives get no identity and no backward entry;
* parameter gradients: ``register_post_accumulate_grad_hook`` per parameter;
* backward passes: torch's entry into the autograd engine is wrapped so that
  the calls made inside ``loss.backward()`` (gradient hooks, a custom
  ``autograd.Function``'s Python backward) are entries, as msprobe's, under the
  backward of the module in progress; torch's own calls there (FSDP2's hooks,
  DTensor's sharding propagation) are not;
* optimizer steps: global optimizer hooks put the optimizer's own tensor
  calls under construct.json's ``optimizer`` node (as msprobe); under
  ``probe run`` the step ends when the outermost update returns;
* ``custom_op_namespaces``: the operators of ``torch.ops.<ns>`` are patched;
* ``torch.compile``: a compiled graph runs no Python hooks; the hooks stand
  aside while Dynamo traces, and the backend ``torch.compile`` builds is wrapped
  so that the graph's calls are recorded from its compiled values
  (:mod:`probe_torch.compiled`).

Naming, filters, frames, backward pairing and saves live in the shared driver.
"""

from __future__ import annotations

import inspect
import os
import sys
import warnings
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.modules import module as nn_module
from torch.overrides import TorchFunctionMode

from probe_core.api import CollectorBase, ConfigError, is_inplace, launcher_rank
from probe_torch.apis import (DISTRIBUTED, DUNDERS, SAME_VALUES, ApiNames, custom_ops, keep_overloads,
                             python_level_apis)
from probe_torch import buffers
from probe_torch.compiled import backend_call
from probe_torch.ops import TorchTensorOps
from probe_torch.plugin import communicator_rank
from probe_torch.risk import api_risk

_SKIP_FILES = (os.path.join("torch", "overrides.py"), os.path.join("torch", "_tensor.py"),
               os.path.join("torch", "distributed", "c10d_logger.py"))


def current_rank() -> int:
    """This process' rank (:func:`probe_core.api.process_rank`: torch.distributed's, else the launcher's)."""
    return (communicator_rank() or launcher_rank())[0]


_is_compiling = torch.compiler.is_compiling
_stack_len, _stack_at = torch._C._len_torch_function_stack, torch._C._get_function_stack_at
_pop_mode, _push_mode = torch._C._pop_torch_function_stack, torch._C._push_on_torch_function_stack
#: In-place calls that change a tensor's shape, strides or storage rather than its values: an identity copy
#: cannot stand in for the caller's tensor there (the caller's tensor must change), so they get no backward.
_METADATA_IN_PLACE = frozenset({"squeeze_", "unsqueeze_", "transpose_", "t_", "swapdims_", "swapaxes_",
                                "as_strided_", "resize_", "resize_as_", "set_", "detach_", "share_memory_",
                                "rename_", "requires_grad_", "__setitem__"})
_RAISED = object()  # torch calls an always_call forward hook as hook(module, args, result) when forward raised
#: The calls that run a backward pass: no entries themselves; the calls made inside (gradient hooks, a custom
#: ``autograd.Function``'s Python backward, a checkpoint's recomputed forward) are, as msprobe records them.
_BACKWARD_PASSES = frozenset({torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad})


_WORK = getattr(dist, "Work", None) if dist.is_available() else None


class _Waiting:
    """An asynchronous collective waiting for ``wait()`` on each of its ``Work`` objects before it is recorded."""

    __slots__ = ("left", "finish")

    def __init__(self, works: int, finish: Any) -> None:
        self.left, self.finish = works, finish

    def done_one(self) -> bool:
        self.left -= 1
        return self.left == 0


class _Identity(torch.autograd.Function):
    """Identity whose backward node reports the gradients w.r.t. a call's inputs.

    Its outputs are ``detach()``-ed aliases: same memory and version counter as
    the inputs, but not autograd views of them (``BackwardHookFunction``'s are,
    and torch forbids changing those in place).
    """

    @staticmethod
    def forward(ctx: Any, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = tuple(t.detach() for t in tensors)
        ctx.mark_non_differentiable(*[o for o, t in zip(out, tensors) if not t.requires_grad])
        return out

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        return grads


_OPERATORS = (torch._ops.OpOverloadPacket, torch._ops.OpOverload)
_FUNCTIONAL_COLLECTIVES = "_c10d_functional."
_WAIT_TENSOR = getattr(getattr(torch.ops, "_c10d_functional", None), "wait_tensor", None)


def _waited(collective: Any) -> Any:
    """A functional collective (DTensor's redistributions: ``torch.ops._c10d_functional.all_reduce``, ...) whose
    outputs are waited for before they are recorded: it returns at once and fills them later, at a
    ``wait_tensor`` that a later waits again for nothing. The values are the same; the wait comes earlier."""
    def run(*args: Any, **kwargs: Any) -> Any:
        output = collective(*args, **kwargs)
        for tensor in output if isinstance(output, (list, tuple)) else (output,):
            if isinstance(tensor, torch.Tensor):
                _WAIT_TENSOR(tensor)
        return output

    return run


def _closure_at(args: tuple, kwargs: dict[str, Any]) -> tuple[Any, Any] | None:
    """Where ``optimizer.step(closure)`` got its closure: ``("closure", fn)`` (keyword), ``(1, fn)`` or None."""
    if kwargs and callable(kwargs.get("closure")):
        return "closure", kwargs["closure"]
    if len(args) > 1 and callable(args[1]):
        return 1, args[1]
    return None


#: Files whose frames stand between the code that made a torch call and probe's hooks.
_PLUMBING_DIRS = tuple(os.path.dirname(path) + os.sep for path in (__file__, inspect.getfile(CollectorBase)))
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_DYNAMO_DIR = _TORCH_DIR + "_dynamo"  # the frames that run compiled code: never the user's


def _called_by_torch() -> bool:
    """Whether the code that made the current torch call is torch's own (``fully_shard`` chunking the
    parameters, ``parallelize_module`` distributing them, ``nn.init``): a library setting a model up, not
    the user's forward."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not (filename.startswith(_PLUMBING_DIRS) or filename.endswith(_SKIP_FILES)):
            return filename.startswith(_TORCH_DIR)
        frame = frame.f_back
    return False


def _starts_forward(api: str | None, args: tuple, kwargs: dict[str, Any]) -> bool:
    """A computation with grad enabled on a tensor that requires a gradient, made by the user's code: a
    model's forward (for a script without ``nn.Module``). Weight initialisation (``kaiming_uniform_(weight)``:
    in place) and torch's own calls on parameters (FSDP2 sharding them) are none."""
    if api is None or not torch.is_grad_enabled() or is_inplace(api, kwargs):
        return False
    return _requires_grad(args, kwargs) and not _called_by_torch()


def _requires_grad(args: tuple, kwargs: dict[str, Any]) -> bool:
    for value in args:
        if isinstance(value, torch.Tensor) and value.requires_grad:
            return True
        if type(value) in (list, tuple) and any(isinstance(v, torch.Tensor) and v.requires_grad for v in value):
            return True
    return any(isinstance(v, torch.Tensor) and v.requires_grad for v in kwargs.values())


def _full_dtensor(config: Any) -> bool:
    """config.json's ``"dtensor": "full"``: every rank gathers each recorded DTensor, so every rank must record."""
    if config.top.get("dtensor") != "full":
        return False
    if config.rank:
        raise ConfigError(f'{config.source}: key "dtensor": "full" gathers each DTensor with a collective that '
                          f'every rank joins, so it needs every rank recorded; remove "rank": {config.rank} '
                          'or use "dtensor": "local"')
    return True


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
            if collector.busy or not collector._await_forward or collector.modules_seen or \
                    not collector.api_starts_forward(self.names(func), args, kwargs):
                return func(*args, **kwargs)
            collector.begin_forward(module_call=False)
        if collector.generated_code and sys._getframe(1).f_code.co_filename.startswith(collector.generated_code):
            return func(*args, **kwargs)  # compiled code's own calls (inductor's extern kernels, out= buffers)
        if _is_compiling() or func in _BACKWARD_PASSES:  # the engine puts the mode back on (_backward_pass)
            return func(*args, **kwargs)
        api = self.names(func)
        if api is None:  # metadata read, repr: nothing inside is an entry either
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
    sees_forward_at_l1 = True

    def __init__(self, config: Any, registry: Any, mode: Any, *, auto_step: bool = False) -> None:
        super().__init__(config, registry, mode, TorchTensorOps(full_dtensor=_full_dtensor(config)),
                         auto_step=auto_step, rank_fn=current_rank,
                         stack_skip_dirs=(os.path.dirname(__file__), _DYNAMO_DIR), stack_skip_files=_SKIP_FILES)
        self.names = ApiNames()
        self.session.filter.use_risk_level(config.risk_level, api_risk)
        self._handles: list[Any] = []
        self._mode: _ApiMode | None = None
        self._optimizer_hooks: list[Any] = []
        #: the Python-level APIs and custom operators to wrap, found at the first start() (a scan of torch's
        #: namespaces: not repeated at every step's start)
        self._wrapped_apis: list[tuple[Any, str, str]] | None = None
        self._wrapped_ops: list[tuple[Any, str, str]] | None = None
        self._waiting: dict[Any, _Waiting] = {}  # Work -> the asynchronous collective recorded when it is waited
        self.compiled_frames = 0  # frames torch.compile compiled
        self.recorded_graphs = 0  # graphs compiled with their calls recorded (probe_torch.compiled)
        self._compile_failures: list[str] = []  # why a graph was compiled without recording
        #: where compiled code's files start (inductor's cache, FX's generated modules), once anything compiled
        self.generated_code: tuple[str, ...] = ()
        self._compile_callbacks: tuple[Any, Any] | None = None
        self._busy_before_compile: list[bool] = []
        self._lasting: list[Any] | None = None  # the hooks and backends kept from the first start() (_install_lasting)
        os.register_at_fork(after_in_child=self._forked)

    def unrecorded(self) -> list[str]:
        if not self.compiled_frames:
            return []
        if self.recorded_graphs and not self._compile_failures:
            return [f"torch.compile compiled {self.compiled_frames} frame(s): their forward calls are recorded "
                    "with the compiled values, and in float32 graphs their modules' backward (L0, mix) and their API "
                    "calls' backward where eager code's entry lists the gradients in argument order (mix); otherwise "
                    "the backward of their API calls is not (F.linear's; parameter gradients are)."]
        if self._compile_failures:
            return [f"torch.compile: {len(self._compile_failures)} graph(s) could not be compiled with their "
                    f"values recorded and run unrecorded ({self._compile_failures[0]}). To record everything, "
                    "run with TORCH_COMPILE_DISABLE=1."]
        return [f"torch.compile compiled {self.compiled_frames} frame(s); the module and API calls inside "
                "compiled code are NOT recorded (a compiled graph runs no Python hooks). Recorded: the calls "
                "outside it, parameter gradients, and modules around it. To record everything, run with "
                "TORCH_COMPILE_DISABLE=1."]

    def _forked(self) -> None:
        """A forked child (DataLoader worker) inherits the hooks but must not write into the parent's dump."""
        self.recording = False
        self.session.active = False
        self.session.stopped = True

    # -- probe's own work runs with its function mode off the stack ----------------------------------

    def _off_mode(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` with probe's function mode popped while it is on top of the stack (in module hooks,
        wrapped operators and backward hooks). The mode would only pass probe's own torch calls through
        (statistics, shapes, dtypes), at a Python call each; torch pops it in the mode's handler the same way."""
        mode = self._mode
        depth = _stack_len()
        if mode is None or not depth or _stack_at(depth - 1) is not mode:
            return fn(*args)
        _pop_mode()
        try:
            return fn(*args)
        finally:
            _push_mode(mode)

    def call_api(self, api: str, func: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
        if self.backward_depth and _called_by_torch():
            # torch's own machinery inside the backward pass (FSDP2's gradient hooks, DTensor's sharding
            # propagation on fake tensors): no entries; the user's hooks and custom backward functions are
            return self._off_mode(self._unrecorded, func, args, kwargs)
        if type(func) in _OPERATORS and str(func).startswith(_FUNCTIONAL_COLLECTIVES) and func is not _WAIT_TENSOR:
            func = _waited(func)
        return self._off_mode(super().call_api, api, func, args, kwargs)

    def _unrecorded(self, func: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
        was, self.busy = self.busy, True
        try:
            return func(*args, **kwargs)
        finally:
            self.busy = was

    def _guarded(self, fn: Any, *args: Any) -> Any:
        return self._off_mode(super()._guarded, fn, *args)

    # -- models -----------------------------------------------------------------------------

    def is_model(self, obj: Any) -> bool:
        return isinstance(obj, torch.nn.Module)

    def named_submodules(self, root: torch.nn.Module) -> Any:
        original = getattr(root, "_orig_mod", None)  # torch.compile(model): named as the model itself
        if isinstance(original, torch.nn.Module) and type(root).__name__ == "OptimizedModule":
            self._compiled_without_mode(root)
            return [("", root), *original.named_modules()]
        return root.named_modules()

    def module_class_name(self, module: torch.nn.Module) -> str:
        """The class a module entry is named by. torch.distributed's composable wrappers give a module a class
        made at run time, ``FSDP<Cls>`` (``fully_shard``), ``Replicate<Cls>``, ``DDP<Cls>``, with bases
        ``(wrapper, Cls)``: such a module is named by the user's ``Cls``, as a single-device run of the model
        names it, so that ``probe compare`` pairs the two runs' modules."""
        cls = type(module)
        wrapper, *wrapped = cls.__bases__
        if len(wrapped) == 1 and wrapper.__module__.startswith("torch.distributed.") \
                and cls.__name__.endswith(wrapped[0].__name__):
            return wrapped[0].__name__
        return cls.__name__

    def direct_parameters(self, module: torch.nn.Module) -> dict[str, Any]:
        return {name: p for name, p in module._parameters.items() if p is not None}

    def trainable_parameters(self, module: torch.nn.Module) -> dict[str, Any]:
        return {name: p for name, p in self.direct_parameters(module).items() if p.requires_grad}

    def api_starts_forward(self, api: str | None, args: tuple, kwargs: dict[str, Any]) -> bool:
        return self._await_forward and not self.busy and not self.modules_seen and _starts_forward(api, args, kwargs)

    def hook_parameter(self, param: torch.Tensor, on_grad: Any) -> Any:
        return param.register_post_accumulate_grad_hook(lambda p: on_grad(p.grad))

    # -- backward plumbing ------------------------------------------------------------------------

    def grad_enabled(self) -> bool:
        return torch.is_grad_enabled()

    def identity_with_grad_hook(self, tensors: list[Any], on_grads: Any) -> list[Any]:
        new = _Identity.apply(*tensors)
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

    hooks_grad_nodes = True

    def hook_grad_node(self, tensor: torch.Tensor, on_node: Any) -> None:
        node = tensor.grad_fn
        if node is None:
            return

        def deliver(grad_inputs: Any, grad_outputs: Any) -> None:  # torch's names: w.r.t. the node's inputs/outputs
            self._guarded(on_node, list(grad_outputs), list(grad_inputs))

        node.register_hook(deliver)

    def backward_in_place(self, api: str, kwargs: dict[str, Any] | None) -> bool:
        # __setitem__ returns nothing to hook, shape and storage changes must reach the caller's tensor itself,
        # collectives have their own autograd story, and out= is not differentiable at all
        return not (api.rsplit(".", 1)[-1] in _METADATA_IN_PLACE or api.startswith("Distributed.")
                    or (kwargs and kwargs.get("out") is not None))

    def input_versions(self, tensors: list[Any]) -> Any:
        try:
            return [t._version for t in tensors]
        except RuntimeError:  # an inference tensor has no version counter
            return [t._version if not t.is_inference() else None for t in tensors]

    def inputs_returned(self, caught: Any) -> None:
        """An identity copy changed in place shares its input's memory and version counter but not its
        history: the input gets it through an in-place copy from the copy (a no-op on the data, since both
        are the same memory), after which the version counter is put back, as the change alone left it."""
        for new, old, version in zip(caught.new, caught.old, caught.versions):
            if version is not None and new._version != version and new.requires_grad:
                changed = new._version
                old.copy_(new)
                torch._C._autograd._unsafe_set_version_counter((old,), (changed,))

    def finish_when_done(self, api: str, output: Any, finish: Any) -> bool:
        """A collective that returned a ``Work`` (``async_op=True``, ``isend``, ``batch_isend_irecv``) is recorded
        when its last ``Work.wait()`` returns, with the tensors as the communication left them (as msprobe)."""
        if not api.startswith("Distributed.") or _WORK is None:
            return False
        works = output if isinstance(output, list) else [output]
        if not works or not all(isinstance(work, _WORK) for work in works):
            return False
        waiting = _Waiting(len(works), finish)
        for work in works:
            self._waiting[work] = waiting
        return True

    def _work_waited(self, work: Any) -> None:
        waiting = self._waiting.pop(work, None)
        if waiting is not None and waiting.done_one() and self.recording:
            self.ops.values_changed()  # the communication changed the tensors without a version bump: no cached statistic
            self._guarded(waiting.finish)

    def recorded_output(self, api: str, args: tuple, kwargs: dict[str, Any], output: Any) -> Any:
        if api in SAME_VALUES and args:
            self.ops.alias(output, args[0])  # a view op's output holds its input's values
        return buffers.recorded_output(api, kwargs, super().recorded_output(api, args, kwargs, output))

    def recorded_inputs(self, api: str, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
        return buffers.recorded_inputs(api, args, kwargs)  # collective and out= buffers: null, as msprobe

    def _record_backward(self, name: str, grad_outputs: list[Any], grad_inputs: list[Any]) -> None:
        if grad_inputs and grad_outputs and name.rsplit(".", 2)[0] in SAME_VALUES:
            self.ops.alias(grad_inputs[0], grad_outputs[0])
        super()._record_backward(name, grad_outputs, grad_inputs)

    def read_saved_tensor(self, path: str, like: torch.Tensor) -> torch.Tensor:
        loaded = torch.load(path, map_location=like.device, weights_only=True)
        if like.requires_grad and not loaded.requires_grad and loaded.is_floating_point():
            loaded.requires_grad_(True)  # the module's backward still reaches its parameters
        return loaded

    # -- install / remove ---------------------------------------------------------------------------

    def wrap_api(self, api: str, original: Any) -> Any:
        """The core's recording stand-in, which ``torch.compile`` sees through: Dynamo traces ``original`` where
        the model calls the stand-in (as it does for its own wrappers), so the compiled graph is the one
        compiled without probe and holds no guard on probe's state (a guard on the collector's ``busy`` flag
        recompiled the model on every change, up to Dynamo's limit, after which it ran eagerly)."""
        wrapper = super().wrap_api(api, original)
        wrapper._torchdynamo_inline = original
        return wrapper

    def install_hooks(self) -> None:
        session = self.session
        self._install_lasting()  # the module hooks among them
        if not session.with_modules and self._watch_forward:  # L1 under probe run: a step starts at a module call
            self._handles.append(nn_module.register_module_forward_pre_hook(self._forward_watch))
        if session.with_apis:
            for name in DUNDERS:
                original = getattr(torch.Tensor, name, None)
                if original is not None:
                    self.patch(torch.Tensor, name, self.wrap_api(f"Tensor.{name}", original))
            if self._wrapped_apis is None:
                self._wrapped_apis = python_level_apis(self.names)
                self._wrapped_ops = custom_ops(self.session.config.custom_op_namespaces)
            for owner, attr, api in self._wrapped_apis:  # arguments as the user passed them
                self.patch(owner, attr, self.wrap_api(api, getattr(owner, attr)))
            for owner, op, api in self._wrapped_ops:
                packet = getattr(owner, op)
                self.patch(owner, op, keep_overloads(self.wrap_api(api, packet), packet))
            if dist.is_available():
                if _WORK is not None:
                    self.patch(_WORK, "wait", self._wait_wrapper(_WORK.wait))
                for name in DISTRIBUTED:
                    original = getattr(dist, name, None)
                    if original is not None:
                        wrapper = self.wrap_api(f"Distributed.{name}", original)
                        self.patch(dist, name, wrapper)
                        if getattr(dist.distributed_c10d, name, None) is original:
                            self.patch(dist.distributed_c10d, name, wrapper)
            self._mode = _ApiMode(self)
            self._mode.__enter__()
        if "torch._dynamo" in sys.modules:
            self._watch_compiler()
        self.patch(torch, "compile", self._compile_wrapper(torch.compile))
        backward_pass = self._backward_pass(torch.autograd.graph._engine_run_backward)
        for owner in (torch.autograd, torch.autograd.graph):  # torch.autograd holds its own reference
            self.patch(owner, "_engine_run_backward", backward_pass)
        if not self._optimizer_hooks:  # kept until close(): removing them inside an optimizer hook is unsafe
            from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

            self._optimizer_hooks = [register_optimizer_step_pre_hook(self._optimizer_pre),
                                     register_optimizer_step_post_hook(self._optimizer_post)]

    def _install_lasting(self) -> None:
        """What compiled code guards on or is compiled with, installed at the first start() and kept until the
        last step or close(), so that starting and stopping probe at every step recompiles nothing: the global
        module hooks (Dynamo guards on their keys: hooks registered anew at each start() recompiled the model
        at every step, up to Dynamo's limit, after which it ran uncompiled) and the wrapped compile backends (a
        graph compiled while probe is stopped is recorded once it starts again). Compiled code from before
        (it guards on nothing of probe's, and was compiled unrecorded) is dropped once, to be compiled again
        with its calls recorded (once: ``torch._dynamo.reset_code_caches``)."""
        if self._lasting is not None:
            return
        self._lasting = []
        if self.session.with_modules:  # the hooks do nothing while probe is stopped (_module_pre)
            self._lasting.append(nn_module.register_module_forward_pre_hook(self._module_pre))
            self._lasting.append(nn_module.register_module_forward_hook(self._module_post, with_kwargs=True,
                                                                        always_call=True))
        for backend in (torch._TorchCompileInductorWrapper, torch._TorchCompileWrapper):  # compiles from now on
            self._lasting.append((backend, backend.__call__))
            backend.__call__ = backend_call(backend.__call__, self)
        if "torch._dynamo" in sys.modules:
            torch._dynamo.reset_code_caches()

    def _remove_lasting(self) -> None:
        """After the last step: the hooks and backends go, and so do the graphs compiled with recorded values
        (the training goes on with graphs compiled without them)."""
        if self._lasting is None:
            return
        for kept in reversed(self._lasting):
            if isinstance(kept, tuple):
                setattr(kept[0], "__call__", kept[1])
            else:
                kept.remove()
        self._lasting = None
        if self.recorded_graphs:
            torch._dynamo.reset_code_caches()

    def _wait_wrapper(self, original: Any) -> Any:
        collector = self

        def wait(work: Any, *args: Any, **kwargs: Any) -> Any:
            result = original(work, *args, **kwargs)
            if collector._waiting:
                collector._work_waited(work)
            return result

        wait.__wrapped__ = original
        return wait

    def _backward_pass(self, original: Any) -> Any:
        """torch's entry into the autograd engine, run with probe's function mode on the stack (the mode's
        handler of ``loss.backward()`` took it off) and counted in ``backward_depth``: the calls made inside
        the pass are entries of the step, and the backward entries still waiting for their input
        gradients are not settled by them."""
        collector = self

        def run_backward(*args: Any, **kwargs: Any) -> Any:
            mode = collector._mode
            depth = _stack_len()
            push = mode is not None and not (depth and _stack_at(depth - 1) is mode)
            if push:
                _push_mode(mode)
            collector.backward_depth += 1
            try:
                return original(*args, **kwargs)
            finally:
                collector.backward_depth -= 1
                depth = _stack_len()
                if push and depth and _stack_at(depth - 1) is mode:
                    _pop_mode()

        run_backward.__wrapped__ = original
        return run_backward

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
        if self.session.all_steps_done:
            self._remove_lasting()

    def close(self) -> Any:
        self._remove_lasting()
        for handle in self._optimizer_hooks:
            handle.remove()
        self._optimizer_hooks.clear()
        if self._compile_callbacks is not None:
            from torch._dynamo.callback import callback_handler

            try:
                callback_handler.remove_start_callback(self._compile_callbacks[0])
                callback_handler.remove_end_callback(self._compile_callbacks[1])
            except ValueError:  # torch._dynamo.reset() cleared them
                pass
            self._compile_callbacks = None
        return super().close()

    # -- torch.compile: what Dynamo, AOTAutograd and Inductor trace while compiling is no entry ----------------

    def _compile_wrapper(self, original: Any) -> Any:
        """``torch.compile`` whose result runs without probe's function mode (Dynamo would trace the mode)."""
        collector = self

        def compile(*args: Any, **kwargs: Any) -> Any:
            collector._watch_compiler()
            if not args and kwargs.get("model") is None:  # @torch.compile(mode=...): a decorator
                return lambda model: compile(model, **kwargs)
            result = original(*args, **kwargs)
            if isinstance(result, torch.nn.Module):  # an OptimizedModule: its forward is the compiled call
                return collector._compiled_without_mode(result)
            return collector._without_mode(result) if callable(result) else result

        compile.__wrapped__ = original
        compile.__doc__ = original.__doc__
        return compile

    def _compiled_without_mode(self, optimized: torch.nn.Module) -> torch.nn.Module:
        """An OptimizedModule whose compiled forward runs without probe's function mode (also one compiled
        before the hooks were installed: Dynamo would trace the mode, ``x * y`` as ``x.mul(y)``)."""
        for attr in ("forward", "_forward"):
            forward = optimized.__dict__.get(attr)
            if callable(forward) and getattr(forward, "__name__", "") != "run_compiled":
                optimized.__dict__[attr] = self._without_mode(forward)
        return optimized

    def _without_mode(self, compiled: Any) -> Any:
        collector = self

        def run_compiled(*args: Any, **kwargs: Any) -> Any:
            mode = collector._mode
            stack = torch.overrides._get_current_function_mode_stack() if mode is not None else None
            if not stack or stack[-1] is not mode:
                return compiled(*args, **kwargs)
            mode.__exit__(None, None, None)
            try:
                return compiled(*args, **kwargs)
            finally:
                if collector._mode is mode:
                    mode.__enter__()

        run_compiled.__wrapped__ = compiled
        return run_compiled

    def modules_by_id(self) -> dict[int, torch.nn.Module]:
        """The named modules by ``id`` (how Dynamo's ``nn_module_stack`` names them)."""
        return {id(module): module for module, prefix in list(self._module_names.items()) if prefix}

    def records_compiled(self) -> bool:
        return self.recording and not self.busy

    def record_compiled(self, recording: Any, args: tuple, extras: Any) -> None:
        """The entries of one run of a compiled graph (:mod:`probe_torch.compiled`)."""
        if self._backward_seen:
            self.settle_backward()
        self._off_mode(self._guarded, recording.record, self, args, extras)

    def compile_unrecorded(self, reason: str) -> None:
        self._compile_failures.append(reason)

    def _watch_compiler(self) -> None:
        """Be busy while a compilation runs (its tracers call torch functions on fake tensors), and count
        the compiled frames. Registered once torch._dynamo is imported (importing it costs seconds)."""
        if self._compile_callbacks is not None:
            return
        from torch._dynamo.callback import CallbackTrigger, callback_handler

        def started(args: Any) -> None:
            self._busy_before_compile.append(self.busy)
            self.busy = True
            if args.callback_trigger == CallbackTrigger.DYNAMO:
                self.compiled_frames += 1

        def ended(args: Any) -> None:
            self.busy = self._busy_before_compile.pop() if self._busy_before_compile else False

        from torch._inductor.runtime.cache_dir_utils import cache_dir

        self.generated_code = (cache_dir(), "<eval_with_key>")
        callback_handler.register_start_callback(started)
        callback_handler.register_end_callback(ended)
        self._compile_callbacks = (started, ended)
        # probe's global module hooks make torch warn that they fire for the OptimizedModule too: probe
        # names the OptimizedModule as the model it wraps, so the extra call is no entry
        warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there are global hooks")

    def _module_pre(self, module: torch.nn.Module, args: tuple) -> Any:
        if _is_compiling() or not self._installed:
            return None
        return self._off_mode(self.module_enter, module, args)

    def _module_post(self, module: torch.nn.Module, args: tuple, kwargs: Any, output: Any = _RAISED) -> None:
        if _is_compiling() or not self._installed:
            return
        if output is _RAISED:  # forward raised: torch passes (module, args, result) to always_call hooks
            self.module_exit(module, None, None, failed=True)
        else:
            self._off_mode(self.module_exit, module, kwargs, output)

    def _forward_watch(self, module: torch.nn.Module, args: tuple) -> None:
        if self._await_forward and not self.busy and not _is_compiling():
            self.begin_forward()

    # -- optimizer: its tensor calls are entries under the ``optimizer`` node; under probe run a step ends here --

    def _optimizer_pre(self, optimizer: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
        self.optimizer_enter()
        found = _closure_at(args, kwargs)
        if found is None:
            return None
        where, closure = found
        wrapped = self.in_closure(closure)
        if where == "closure":
            return args, {**kwargs, "closure": wrapped}
        return (args[0], wrapped, *args[2:]), kwargs

    def _optimizer_post(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.optimizer_exit()
