"""The MindSpore collector (PyNative): framework calls for the shared :class:`~probe_core.collect.driver.CollectorBase`.

How calls are seen (MindSpore has no global cell hooks and no function mode):

* cells (L0, mix): ``nn.Cell.__call__`` is replaced, so every cell call of any
  network is seen; an ``nn.Optimizer`` call is never recorded and ends the step
  under ``probe run``;
* APIs (L1, mix): the public functions of ``mint``, ``mint.nn.functional``,
  ``ops`` and ``communication.comm_func`` and the methods/operators of
  ``Tensor`` are replaced by recording wrappers (see :mod:`probe_mindspore.apis`);
  ``Primitive`` attributes of named cells (``self.matmul = P.MatMul()``) are
  recorded as ``Primitive.{attribute}.{Name}``;
* backward: each tensor input that needs a gradient is passed as a same-shape
  view (a new autograd node) whose ``Tensor.register_hook`` sees the gradient
  w.r.t. this call's use of it, and outputs get ``Tensor.register_hook``;
  parameter gradients come from ``Parameter.register_hook``. A call with a float
  input that needs no gradient of its own takes one ``ops.HookBackward`` over
  all its inputs instead (see :meth:`MindSporeCollector.identity_with_grad_hook`).
  The backward entries take msprobe's MindSpore layout (see :func:`msprobe_backward_layout`):
  a ``mint``/``ops``/``Tensor`` call passes all its tensor inputs through one
  identity (that ``HookBackward``), so a float input that needs no gradient of its own (the network's
  input) gets one when another input does; a primitive hooks each input on its
  own, so its entry lists only the gradients that came, last input first.

Under ``@jit`` or GRAPH_MODE MindSpore compiles the network and ignores every
Python hook, so collection refuses GRAPH_MODE and says so for ``@jit`` calls.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Any

import mindspore as ms
from mindspore import nn, ops
from mindspore.common import api as ms_api
from mindspore.ops.composite.base import _pynative_executor
from probe_core.api import CollectionError, CollectorBase, GradSlots, launcher_rank

from probe_mindspore.apis import namespace_functions, tensor_methods
from probe_mindspore.ops import MindSporeTensorOps, dtype_facts
from probe_mindspore.plugin import communicator_rank

#: ``Tensor.view`` as MindSpore defines it: at L1/mix the class attribute is a recording wrapper, which the
#: identity views of :meth:`MindSporeCollector.identity_with_grad_hook` need not pass through.
_VIEW = ms.Tensor.view

GRAPH_MODE_FIX = ("probe collects MindSpore in PyNative mode only: call mindspore.set_context(mode="
                  "mindspore.PYNATIVE_MODE) (the default) and remove @jit while collecting")


def current_rank() -> int:
    """This process' rank (:func:`probe_core.api.process_rank`: MindSpore communication's, else the launcher's)."""
    return (communicator_rank() or launcher_rank())[0]


def check_pynative() -> None:
    if ms.get_context("mode") == ms.GRAPH_MODE:
        raise CollectionError(f"mindspore context mode is GRAPH_MODE, where every hook is ignored and the dump "
                              f"would be empty; {GRAPH_MODE_FIX}")


def msprobe_backward_layout(name: str, grad_outputs: list[Any], grad_inputs: list[Any]
                            ) -> tuple[list[Any], list[Any]]:
    """A backward entry's gradients as msprobe writes them for MindSpore (``input``: w.r.t. the outputs,
    ``output``: w.r.t. the inputs).

    msprobe gives each tensor input and output of a ``Primitive.*`` call a hook of its own, and appends
    each gradient as it arrives: the entry has no ``null`` and its input gradients come last input first
    (``MatMul(x, w)`` backward: ``[dw, dx]``). Other entries keep one slot per tensor, in argument order.
    """
    if not name.startswith("Primitive."):
        return grad_outputs, grad_inputs
    came = [grad for grad in grad_outputs if grad is not None]
    return came, [grad for grad in reversed(grad_inputs) if grad is not None]


class MindSporeCollector(CollectorBase):
    """Installs and removes MindSpore hooks; one per :class:`PrecisionDebugger` / ``probe run``."""

    framework = "mindspore"
    module_prefix = "Cell"
    param_grads_sorted = True
    null_grads_for_inputs = True

    def __init__(self, config: Any, registry: Any, mode: Any, *, auto_step: bool = False) -> None:
        super().__init__(config, registry, mode, MindSporeTensorOps(), auto_step=auto_step, rank_fn=current_rank,
                         stack_skip_dirs=(os.path.dirname(__file__),))
        self.jit_calls: dict[str, int] = {}
        self._primitive_classes: dict[type, type] = {}  # original class -> recording subclass
        self._recording_classes: set[type] = set()
        self._primitive_apis: dict[int, str] = {}  # id(primitive) -> "Primitive.{attr}.{Name}"
        self._primitives: list[tuple[Any, type]] = []
        self._patches: list[tuple[Any, str, Any]] | None = None
        self._api_in_call: str | None = None  # the API whose call is being recorded

    # -- models -------------------------------------------------------------------------

    def is_model(self, obj: Any) -> bool:
        return isinstance(obj, nn.Cell) and not isinstance(obj, nn.Optimizer)

    def named_submodules(self, root: nn.Cell) -> Any:
        return root.cells_and_names()

    def direct_parameters(self, cell: nn.Cell) -> dict[str, Any]:
        return {name: p for name, p in cell._params.items() if p is not None}

    def hook_parameter(self, param: Any, on_grad: Any) -> Any:
        return param.register_hook(on_grad)

    def trainable_parameters(self, cell: nn.Cell) -> dict[str, Any]:
        return {name: p for name, p in self.direct_parameters(cell).items() if p.requires_grad}

    def on_named(self, cell: nn.Cell, path: str, prefix: str) -> None:
        if self.session.with_apis:
            for attr, primitive in getattr(cell, "_primitives", {}).items():
                if isinstance(primitive, ops.Primitive):
                    self._record_primitive(primitive, f"Primitive.{attr}.{primitive.name}")

    # -- backward plumbing ----------------------------------------------------------------

    def needs_grad(self, tensor: Any) -> bool | None:
        """A trainable parameter, or a tensor computed from one while gradients are recorded; ``None`` (it
        gets one if another input of the call does) for any other float input of a non-primitive API."""
        if not dtype_facts(tensor.dtype).is_float:
            return False
        if isinstance(tensor, ms.Parameter):
            return bool(tensor.requires_grad)
        if tensor._has_auto_grad():
            return True
        api = self._api_in_call
        return None if api is not None and not api.startswith("Primitive.") else False

    def call_api(self, api: str, func: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
        was, self._api_in_call = self._api_in_call, api
        try:
            return super().call_api(api, func, args, kwargs)
        finally:
            self._api_in_call = was

    def _record_backward(self, name: str, grad_outputs: list[Any], grad_inputs: list[Any]) -> None:
        super()._record_backward(name, *msprobe_backward_layout(name, grad_outputs, grad_inputs))

    def grad_enabled(self) -> bool:
        return bool(_pynative_executor.grad_flag())

    def identity_with_grad_hook(self, tensors: list[Any], on_grads: Any) -> list[Any]:
        """Each input that needs a gradient becomes a same-shape view (a new autograd node sharing its memory)
        whose ``register_hook`` sees the gradient w.r.t. this call's use of it; the rest pass unchanged, with
        gradient ``None``. A call with a float input that needs no gradient of its own (``needs_grad`` None)
        takes one ``ops.HookBackward`` over all its inputs instead, which gives that input one (msprobe's
        layout): the op costs several times the views (Python shape inference, a Python autograd node)."""
        needs = [self.needs_grad(tensor) for tensor in tensors]
        if None in needs:
            hook = ops.HookBackward(lambda grads: self._guarded(on_grads, grads))
            out = hook(*tensors)
            return list(out) if isinstance(out, (tuple, list)) else [out]
        hooked = [i for i, need in enumerate(needs) if need]
        new = list(tensors)
        if len(hooked) == 1:  # most calls: one hook, no gathering
            i, n = hooked[0], len(tensors)

            def on_grad(grad: Any) -> None:
                full: list[Any] = [None] * n
                full[i] = grad
                self._guarded(on_grads, full)

            view = new[i] = _VIEW(tensors[i], tensors[i].shape)
            view.register_hook(on_grad)
            return new

        def on_full(grads: list[Any]) -> None:
            full: list[Any] = [None] * len(tensors)
            for i, grad in zip(hooked, grads):
                full[i] = grad
            self._guarded(on_grads, full)

        slots = GradSlots(len(hooked), on_full)
        # made last input first: MindSpore's backward then reaches them right after the call's own node, as it
        # reached the one HookBackward node (a cell's parameters_grad entry still comes after its matmul's backward)
        for slot, i in reversed(list(enumerate(hooked))):
            view = new[i] = _VIEW(tensors[i], tensors[i].shape)
            view.register_hook(lambda grad, slot=slot: slots.arrive(slot, grad))
        return new

    def hook_output_grads(self, tensors: list[Any], on_grads: Any) -> None:
        if len(tensors) == 1:  # most calls: one hook, no gathering
            tensors[0].register_hook(lambda grad: self._guarded(on_grads, [grad]))
            return
        slots = GradSlots(len(tensors), lambda grads: self._guarded(on_grads, grads))
        for i, tensor in enumerate(tensors):
            tensor.register_hook(lambda grad, i=i: slots.arrive(i, grad))

    # -- install / remove -------------------------------------------------------------------

    def start(self, model: Any = None, *, from_first_forward: bool = False) -> None:
        check_pynative()
        super().start(model, from_first_forward=from_first_forward)

    def install_hooks(self) -> None:
        if self.session.with_modules:
            self.patch(nn.Cell, "__call__", self._cell_call_wrapper(nn.Cell.__call__))
        else:  # L1: optimizer updates are no entries either (and end the step under probe run)
            self.patch(nn.Optimizer, "__call__", self._optimizer_wrapper(nn.Optimizer.__call__))
        if self.session.with_apis:
            for owner, attr, wrapper in self._api_patches():
                self.patch(owner, attr, wrapper)
            for primitive, original_class in self._primitives:
                primitive.__class__ = self._primitive_classes[original_class]
        self.patch(ms, "set_context", self._set_context_wrapper(ms.set_context))
        self.patch(ms, "jit", self._jit_wrapper(ms.jit))
        self.patch(ms_api, "jit", ms.jit)

    def _api_patches(self) -> list[tuple[Any, str, Any]]:
        """``(owner, attribute, recording wrapper)`` for every API, built once (start/stop per step reuse them).

        Some 1,400 wrappers are created with the garbage collector paused: with MindSpore's large heap,
        the collections their allocation triggers would cost more than half a second.
        """
        if self._patches is None:
            paused = gc.isenabled()
            gc.disable()
            try:
                patches = [(module, attr, self.wrap_api(api, getattr(module, attr)))
                           for module, attr, api in namespace_functions()]
                patches += [(ms.Tensor, attr, self.wrap_api(api, getattr(ms.Tensor, attr)))
                            for attr, api in tensor_methods(ms.Tensor)]
            finally:
                if paused:
                    gc.enable()
            self._patches = patches
        return self._patches

    def remove_hooks(self) -> None:
        for primitive, original_class in self._primitives:
            primitive.__class__ = original_class

    def _cell_call_wrapper(self, original: Any) -> Any:
        collector = self

        def __call__(cell: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(cell, nn.Optimizer):
                return collector._run_optimizer(original, cell, args, kwargs)
            new_args = collector.module_enter(cell, args)
            try:
                output = original(cell, *(args if new_args is None else new_args), **kwargs)
            except BaseException:
                collector.module_exit(cell, kwargs, None, failed=True)
                raise
            collector.module_exit(cell, kwargs, output)
            return output

        return __call__

    def _optimizer_wrapper(self, original: Any) -> Any:
        def __call__(optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            return self._run_optimizer(original, optimizer, args, kwargs)

        return __call__

    def _run_optimizer(self, original: Any, optimizer: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
        """An optimizer update is no entry; under ``probe run`` it ends the step."""
        output = self._guarded(lambda: original(optimizer, *args, **kwargs))
        if self.auto_step and self.recording:
            self.step()
        return output

    # -- primitives ------------------------------------------------------------------------

    def _record_primitive(self, primitive: Any, api: str) -> None:
        """Make one primitive instance record its calls as ``api`` (its class is swapped for a recording subclass)."""
        original_class = type(primitive)
        if original_class in self._recording_classes or id(primitive) in self._primitive_apis:
            return
        subclass = self._primitive_classes.get(original_class)
        if subclass is None:
            subclass = self._primitive_subclass(original_class)
            self._primitive_classes[original_class] = subclass
            self._recording_classes.add(subclass)
        self._primitive_apis[id(primitive)] = api
        self._primitives.append((primitive, original_class))
        if self._installed:
            primitive.__class__ = subclass

    def _primitive_subclass(self, original_class: type) -> type:
        collector = self
        original_call = original_class.__call__

        def __call__(primitive: Any, *args: Any, **kwargs: Any) -> Any:
            if collector.busy or not collector.recording:
                return original_call(primitive, *args, **kwargs)
            api = collector._primitive_apis[id(primitive)]
            return collector.call_api(api, lambda *a, **k: original_call(primitive, *a, **k), args, kwargs)

        return type(original_class.__name__, (original_class,), {"__call__": __call__,
                                                                 "__module__": original_class.__module__})

    # -- graph mode -------------------------------------------------------------------------

    def _set_context_wrapper(self, original: Any) -> Any:
        def set_context(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if self.active and kwargs.get("mode") == ms.GRAPH_MODE:
                raise CollectionError(f"mindspore.set_context(mode=GRAPH_MODE) while probe collects: "
                                      f"hooks would be ignored; {GRAPH_MODE_FIX}")
            return result

        return set_context

    def _jit_wrapper(self, original: Any) -> Any:
        collector = self

        def watch(compiled: Any, label: str) -> Any:
            if not callable(compiled):
                return compiled

            def run(*args: Any, **kwargs: Any) -> Any:
                if collector.active and not collector.busy:
                    collector.note_jit(label)
                return compiled(*args, **kwargs)

            run.__wrapped__ = compiled
            run.__name__ = getattr(compiled, "__name__", label)
            return run

        def jit(function: Any = None, *args: Any, **kwargs: Any) -> Any:
            if function is not None and callable(function):
                return watch(original(function, *args, **kwargs), getattr(function, "__qualname__", "function"))
            decorator = original(function, *args, **kwargs) if function is not None else original(*args, **kwargs)
            return lambda fn: watch(decorator(fn), getattr(fn, "__qualname__", "function"))

        return jit

    def note_jit(self, label: str) -> None:
        """A ``@jit`` function ran while collecting: say once that its insides are not in the dump."""
        first = label not in self.jit_calls
        self.jit_calls[label] = self.jit_calls.get(label, 0) + 1
        if first:
            print(f"probe: {label} runs under @jit (graph compilation); MindSpore ignores hooks there, so its "
                  f"cells and APIs are not in the dump. {GRAPH_MODE_FIX}", file=sys.stderr)

