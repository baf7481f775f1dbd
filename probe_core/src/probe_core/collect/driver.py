"""The framework-neutral half of a collector: lifecycle, call/module bookkeeping, patching, saves.

A framework collector subclasses :class:`CollectorBase` and supplies only
framework calls:

* ``install_hooks()`` / ``remove_hooks()`` — intercept modules/cells and APIs
  (calling :meth:`CollectorBase.call_api`, :meth:`module_enter`,
  :meth:`module_exit`);
* ``named_submodules(root)``, ``direct_parameters(module)``,
  ``hook_parameter(param, fn)`` — walk a model and hook parameter gradients;
* ``grad_enabled()``, ``identity_with_grad_hook(tensors, fn)``,
  ``hook_output_grads(tensors, fn)`` — the backward plumbing; optionally
  ``hook_grad_node(tensor, fn)`` for msprobe's API backward layout;
* ``is_model(obj)`` and ``module_class_name(module)``;
* its tensor operations: an instance of a
  :class:`~probe_core.collect.tensors.TensorOps` subclass, passed to ``__init__``.

Everything else — naming, counting, the busy flag that keeps nested calls out,
frames of open module calls, the root-model discovery of ``probe run``,
start/stop/step/close and ``save`` — is here, shared by every collector.
"""

from __future__ import annotations

import sys
import warnings
import weakref
from collections.abc import Callable
from typing import Any, ClassVar

from probe_core.collect.calls import (GradCatch, ParamGradGather, SavedGrads, first_tensor, is_inplace,
                                      is_shape_query, output_tensors, pick_at, replace_at, tensor_positions)
from probe_core.collect.loading import InputLoader
from probe_core.collect.naming import backward_name
from probe_core.collect.session import Collection
from probe_core.collect.tensors import TensorOps
from probe_core.plugins import ProbeWarning

_INHERITED = object()  # a class attribute that came from a base class: removing the patch deletes it


class CollectorBase:
    """Shared collector logic; see the module docstring for what a subclass provides."""

    framework: ClassVar[str] = ""
    module_prefix: ClassVar[str] = "Module"  # "Cell" for MindSpore
    param_grads_sorted: ClassVar[bool] = False  # parameters_grad keys by name (msprobe's MindSpore order)
    #: A call whose inputs get no gradient: its backward entry shows ``[null, ...]`` as input gradients and is
    #: written when the backward pass is over (msprobe's MindSpore layout), instead of ``[]`` at once.
    null_grads_for_inputs: ClassVar[bool] = False

    def __init__(self, config: Any, registry: Any, mode: Any, ops: TensorOps, *, auto_step: bool = False,
                 rank_fn: Callable[[], int] = lambda: 0, stack_skip_dirs: tuple[str, ...] = (),
                 stack_skip_files: tuple[str, ...] = ()) -> None:
        self.ops = ops
        self.session = Collection(config, registry, ops, mode, rank_fn=rank_fn,
                                  stack_skip_dirs=stack_skip_dirs, stack_skip_files=stack_skip_files)
        # an API's backward entry in msprobe's layout (its first output's gradient node), where the framework can
        self.api_backward_by_node = self.hooks_grad_nodes and config.top.get("api_backward", "grad_fn") == "grad_fn"
        self.auto_step = auto_step
        self.busy = False
        self.recording = False
        self._installed = False
        self._saved_attrs: list[tuple[Any, str, Any]] = []
        self._param_handles: list[Any] = []
        self._module_names: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._roots_fixed = False
        self._frames: list[tuple[Any, Any]] = []  # (module, frame or None) per open module call
        self._open_catches: list[GradCatch] = []  # calls whose input gradients have not come yet
        self._open_saves: dict[int, Callable[[], None]] = {}  # saved variables whose gradients have not all come
        self._backward_seen = False
        self._await_forward = False
        self._watch_forward = False  # auto_step: each step starts recording at its first forward
        self._optimizer_depth = 0  # optimizer.step calls in progress (an optimizer may wrap another)
        self.backward_depth = 0  # backward passes in progress: the calls their hooks make are entries
        #: config.json's ``load``: listed module calls take the inputs of an earlier tensor dump
        self.loader = self._input_loader(config)
        self.modules_seen = False  # a module call started recording: only module calls start a step from now on
        self.forward_seen = False  # recording ever started (probe run: a forward was seen)

    def read_saved_tensor(self, path: str, like: Any) -> Any:
        """A tensor file of an earlier dump, on ``like``'s device (``load``); None where the framework has none."""
        raise NotImplementedError

    def _input_loader(self, config: Any) -> InputLoader | None:
        if not config.load:
            return None
        if type(self).read_saved_tensor is CollectorBase.read_saved_tensor or not self.session.with_modules:
            why = "module calls are recorded only at level L0 or mix" if self.session.with_modules is False \
                else f"{self.framework} reads no tensor files"
            warnings.warn(f"load: module inputs are not replaced ({why}); the run uses its own inputs",
                          ProbeWarning, stacklevel=3)
            return None
        loader = InputLoader(config.load, self.read_saved_tensor, self.ops.is_tensor)
        if not loader.dump_after_load:
            self.session.dump_nothing()  # msprobe's load-only mode: the inputs are replaced, nothing is dumped
        return loader

    #: Whether the collector sees model forwards at L1 too (a module pre-hook watches for them), so that
    #: ``probe run`` starts recording at the first forward at every level, not only where modules are recorded.
    sees_forward_at_l1: ClassVar[bool] = False

    # -- what a framework supplies -------------------------------------------------------

    def unrecorded(self) -> list[str]:
        """What this run executed but could not record (a framework's compiled regions, say): each line is
        printed as a warning after the run, and given as a reason when the dump is empty."""
        return []

    def install_hooks(self) -> None:
        raise NotImplementedError

    def remove_hooks(self) -> None:
        """Remove what :meth:`install_hooks` added beyond :meth:`patch` (patches are undone here)."""

    def is_model(self, obj: Any) -> bool:
        raise NotImplementedError

    def named_submodules(self, root: Any) -> Any:
        """``(path, module)`` pairs of ``root``'s tree, the root first with path ``""``."""
        raise NotImplementedError

    def module_class_name(self, module: Any) -> str:
        return type(module).__name__

    def direct_parameters(self, module: Any) -> dict[str, Any]:
        """The module's own parameters (not its children's), by attribute name."""
        raise NotImplementedError

    def trainable_parameters(self, module: Any) -> dict[str, Any]:
        """The direct parameters whose gradients are recorded (``parameters_grad``)."""
        return self.direct_parameters(module)

    def hook_parameter(self, param: Any, on_grad: Callable[[Any], None]) -> Any:
        """Call ``on_grad(grad)`` when ``param``'s gradient is ready; returns a handle with ``remove()``."""
        raise NotImplementedError

    def grad_enabled(self) -> bool:
        raise NotImplementedError

    def identity_with_grad_hook(self, tensors: list[Any], on_grads: Callable[[Any], None]) -> list[Any]:
        """Identity copies of ``tensors`` whose backward calls ``on_grads(grads w.r.t. them)``."""
        raise NotImplementedError

    def hook_output_grads(self, tensors: list[Any], on_grads: Callable[[list[Any]], None]) -> None:
        """Call ``on_grads([grad per tensor])`` once the gradients w.r.t. ``tensors`` are known."""
        raise NotImplementedError

    #: Whether :meth:`hook_grad_node` is implemented (then ``api_backward: grad_fn`` is the default layout).
    hooks_grad_nodes: ClassVar[bool] = False

    def hook_grad_node(self, tensor: Any, on_node: Callable[[list[Any], list[Any]], None]) -> None:
        """Call ``on_node(grads w.r.t. the node's outputs, grads it computes for its inputs)`` when the
        autograd node that made ``tensor`` runs (nothing when ``tensor`` has none)."""
        raise NotImplementedError

    def recorded_inputs(self, api: str, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
        """What the entry shows as the call's inputs (a framework shows a buffer the call writes without reading
        it, such as a collective's output tensor, as None: its memory holds whatever it held before)."""
        return args, kwargs

    def recorded_output(self, api: str, args: tuple, kwargs: dict[str, Any], output: Any) -> Any:
        """What the entry shows as the call's output (collectives, as msprobe: their arguments, positional then
        keyword, as they are after the communication)."""
        if api.startswith("Distributed."):
            return [*args, *kwargs.values()]
        return output

    def finish_when_done(self, api: str, output: Any, finish: Callable[[], None]) -> bool:
        """An asynchronous call (a collective with ``async_op=True``) returns before its output is there: a
        framework that can tell when it is done takes ``finish`` (which records the output) and returns True."""
        return False

    # -- models ---------------------------------------------------------------------

    def add_model(self, model: Any) -> None:
        """Name every submodule of ``model`` (or of each model in a list) msprobe's way; the root is no entry."""
        models = model if isinstance(model, (list, tuple)) else [model]
        for root in models:
            if not self.is_model(root):
                continue
            self._roots_fixed = True
            for path, sub in self.named_submodules(root):
                if sub in self._module_names:
                    continue
                if not path:
                    self._module_names[sub] = ""
                    continue
                prefix = f"{self.module_prefix}.{path}.{self.module_class_name(sub)}"
                self._module_names[sub] = prefix
                if self.session.with_modules and self._installed:
                    self._hook_params(sub, prefix)
                self.on_named(sub, path, prefix)

    def on_named(self, module: Any, path: str, prefix: str) -> None:
        """Called once per named submodule (a collector may hook more there)."""

    def _hook_params(self, module: Any, prefix: str) -> None:
        params = self.trainable_parameters(module)
        if not params:
            return
        def on_full(grads: dict[str, Any]) -> None:
            if self.param_grads_sorted:
                grads = dict(sorted(grads.items()))
            self._guarded(self.session.record_params_grad, prefix, grads)

        gather = ParamGradGather(list(params), on_full)
        for pname, param in params.items():
            def on_grad(grad: Any, pname: str = pname) -> None:
                if self.recording:
                    gather.arrive(pname, grad)
            self._param_handles.append(self.hook_parameter(param, on_grad))

    def module_prefix_of(self, module: Any) -> str | None:
        prefix = self._module_names.get(module)
        if prefix is None and not self._roots_fixed and not self._frames:
            # ``probe run``: a module called at top level is a root model
            self.add_model(module)
            self._roots_fixed = False
            prefix = self._module_names.get(module)
        return prefix or None

    # -- lifecycle ------------------------------------------------------------------

    def start(self, model: Any = None, *, from_first_forward: bool = False) -> None:
        """Install the hooks and record. ``from_first_forward`` (``probe run``): stay silent until the
        model's first forward (a module call; at L1 also a call on a tensor that requires a gradient),
        so model construction and weight initialisation (whose ``empty`` tensors hold uninitialised
        memory) are no entries, as with a ``start()`` after them. Under ``auto_step`` every later step
        starts the same way, at its first forward: what runs between an optimizer update and the next
        forward (data preparation, loss logging, a scheduler) is no entry, and logging-only calls after
        the last update make no step."""
        if model is not None:
            self.add_model(model)
        self.session.poll_switch()
        if self.session.all_steps_done:
            return
        watch = self.session.with_modules or self.sees_forward_at_l1
        self._await_forward = from_first_forward and model is None and watch
        self._watch_forward = self._await_forward and self.auto_step
        self.recording = not self._await_forward
        self.forward_seen = self.forward_seen or self.recording
        if not self._installed:
            self.install_hooks()
            self._installed = True
            if self.session.with_modules:  # parameter hooks live only while collecting (no idle cost)
                for module, prefix in list(self._module_names.items()):
                    if prefix:
                        self._hook_params(module, prefix)

    def api_starts_forward(self, api: str | None, args: tuple, kwargs: dict[str, Any]) -> bool:
        """While waiting for the first forward of a script that never called a module: whether this API
        call is one (the framework decides; by default none is)."""
        return False

    def begin_forward(self, module_call: bool = True) -> None:
        """The first forward (of the run, or of a step under ``probe run``): recording starts here.
        ``module_call`` False: a computation on a tensor that requires a gradient, which counts as a
        forward only as long as no module was ever called (a script without modules)."""
        self._await_forward = False
        self.recording = self.forward_seen = True
        self.modules_seen = self.modules_seen or module_call

    @property
    def active(self) -> bool:
        """Recording, or waiting for the first module call to start recording (``probe run``)."""
        return self.recording or self._await_forward

    def stop(self) -> None:
        self.settle_backward()
        self.recording = self._await_forward = False
        self._uninstall()
        self.session.flush()
        self.ops.values_changed()  # the code until the next start may change tensors unseen (``p.data``)

    def step(self) -> None:
        self.settle_backward(drop_rest=True)
        self._write_open_saves()
        self.session.end_step()
        self.ops.values_changed()
        if self.session.all_steps_done:
            self.recording = self._await_forward = False
            self._uninstall()
            if self.auto_step and self.session.config.top.get("exit_after_last_step"):
                print(f"probe: exit_after_last_step: the script ends after step {self.session.step - 1}, the last "
                      "one the step filter selects", file=sys.stderr)
                raise SystemExit(0)  # every rank ends at the same step: none waits in a collective for another
        elif self._watch_forward and self.recording:
            self.recording, self._await_forward = False, True  # the next step starts at its first forward

    def close(self) -> Any:
        self.settle_backward(drop_rest=True)
        self._write_open_saves()
        self.recording = self._await_forward = False
        self._uninstall()
        for handle in self._param_handles:
            handle.remove()
        self._param_handles.clear()
        return self.session.close()

    def _uninstall(self) -> None:
        if not self._installed:
            return
        self.remove_hooks()
        for handle in self._param_handles:
            handle.remove()
        self._param_handles.clear()
        for owner, name, original in reversed(self._saved_attrs):
            if original is _INHERITED:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        self._saved_attrs.clear()
        self._frames.clear()
        self._optimizer_depth = 0
        self.session.optimizer_update(False)
        self._installed = False

    # -- patching -------------------------------------------------------------------

    def patch(self, owner: Any, name: str, value: Any) -> None:
        """``setattr(owner, name, value)``, undone when the hooks are removed."""
        original = owner.__dict__.get(name, _INHERITED) if isinstance(owner, type) else getattr(owner, name)
        self._saved_attrs.append((owner, name, original))
        setattr(owner, name, value)

    def wrap_api(self, api: str, original: Any) -> Any:
        """A stand-in for ``original`` that records each outermost call as ``{api}.{n}.forward``."""
        collector = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if collector.busy:  # a call made by a recorded call, or by probe itself
                return original(*args, **kwargs)
            if not collector.recording:
                if not collector.api_starts_forward(api, args, kwargs):
                    return original(*args, **kwargs)
                collector.begin_forward(module_call=False)
            return collector.call_api(api, original, args, kwargs)

        wrapper.__name__ = getattr(original, "__name__", api)
        wrapper.__qualname__ = getattr(original, "__qualname__", api)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        wrapper.__wrapped__ = original
        return wrapper

    def _guarded(self, fn: Callable[..., Any], *args: Any) -> Any:
        was, self.busy = self.busy, True
        try:
            return fn(*args)
        finally:
            self.busy = was

    # -- APIs -----------------------------------------------------------------------------

    def call_api(self, api: str, func: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
        """Run one outermost API call and record it (inputs before, outputs after, backward hooked)."""
        if self._backward_seen and not self.backward_depth:
            self.settle_backward()
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
            if parent is None and self.backward_depth:
                parent = self._backward_parent()
            sid = session.capture_stack(2)
            entry = session.encode_inputs(name, *self.recorded_inputs(api, args, kwargs))
            catch = caught = None
            inplace = is_inplace(api, kwargs)
            if inplace:
                self.ops.values_changed()  # cached statistics of the tensors it changes would go stale
            backward = session.wants_backward(name) and self.grad_enabled() and not is_shape_query(api)
            if backward and not self.api_backward_by_node and (not inplace or self.backward_in_place(api, kwargs)):
                args, kwargs, catch, caught = self._catch_inputs(name, args, kwargs)
            output = func(*args, **kwargs)
            if backward and self.api_backward_by_node:
                self._catch_node(name, args, kwargs, output, inplace)
            if caught is not None:
                self.inputs_returned(caught)  # an input changed in place: the caller's tensor gets its history
                if any(id(t) in caught.ids for t in output_tensors(output, self.ops.is_tensor)):
                    # the call returned its (wrapped) input: hand back the caller's own tensor (a later in-place
                    # change must reach it). In place, its gradient is the gradient w.r.t. the output; else
                    # (x.contiguous()) the call has no backward of its own
                    catch = catch if inplace else None
                    output = _unwrap(output, caught, self.ops.is_tensor)
            def finish(args: tuple = args, kwargs: dict[str, Any] = kwargs, output: Any = output) -> None:
                session.finish_forward(name, entry, self.recorded_output(api, args, kwargs, output), parent, sid)

            if not self.finish_when_done(api, output, finish):
                finish()
            if catch is not None:
                self._catch_outputs(catch, output)
            return output
        finally:
            self.busy = False

    # -- modules ----------------------------------------------------------------------------

    def module_enter(self, module: Any, args: tuple) -> tuple | None:
        """Before a module call: name, filter, inputs, backward catch; returns replacement args or None."""
        if self._await_forward and not self.busy:
            self.begin_forward()
        if self.busy or not self.recording:
            self._frames.append((module, None))
            return None
        prefix = self.module_prefix_of(module)
        if prefix is None:
            self._frames.append((module, None))
            return None
        if self._backward_seen and not self.backward_depth:
            self.settle_backward()
        session = self.session
        name = session.module_forward_name(prefix)
        self.busy = True
        try:
            given = args
            if self.loader is not None:
                args = self._guarded(self.loader.replace, name, args, session.step, session.rank)
            recorded = session.start_forward(name)
            parent = session.current_module()
            sid = session.capture_stack(3) if recorded else None
            entry = session.encode_inputs(name, args, None) if recorded else None
            catch = new_args = caught = None
            if recorded and session.wants_backward(name) and self.grad_enabled():
                new_args, _, catch, caught = self._catch_inputs(name, args, {})
            session.enter_module(name)
            self._frames.append((module, (name, recorded, entry, parent, sid, catch, caught)))
            args = args if new_args is None else new_args
            return args if args is not given else None
        finally:
            self.busy = False

    def module_exit(self, module: Any, kwargs: dict[str, Any] | None, output: Any, failed: bool = False) -> None:
        """After a module call; ``failed`` (it raised) closes its frame without recording it: no entry, and
        the calls after it are not its children. The calls it made before raising keep it as their parent."""
        frames = self._frames
        if not frames:
            return
        if frames[-1][0] is not module and not self._unwind_to(module):
            return  # its call started before the hooks were installed: nothing of it is open
        frame = frames.pop()[1]
        if frame is None:
            return
        name, recorded, entry, parent, sid, catch, caught = frame
        if caught is not None:  # the module changed its input in place (nn.ReLU(inplace=True), x += ...)
            self._guarded(self.inputs_returned, caught)
        session = self.session
        session.exit_module()
        if not recorded or failed:
            session.end_forward_unrecorded(name)
            return
        self.busy = True
        try:
            if entry is not None and "input_kwargs" in entry and kwargs:
                entry["input_kwargs"] = session.encoder.encode_kwargs(kwargs)
            session.finish_forward(name, entry, output, parent, sid, parameters=self.direct_parameters(module))
            if catch is not None:
                self._catch_outputs(catch, output)
        finally:
            self.busy = False

    def _unwind_to(self, module: Any) -> bool:
        """Close the frames opened after ``module``'s own (calls whose exit was never seen, e.g. a module that
        raised under a framework that does not report it); False when ``module`` has no open frame."""
        frames = self._frames
        for depth in range(len(frames) - 1, -1, -1):
            if frames[depth][0] is module:
                break
        else:
            return False
        while len(frames) > depth + 1:
            frame = frames.pop()[1]
            if frame is not None:
                self.session.exit_module()
                self.session.end_forward_unrecorded(frame[0])
        return True

    # -- optimizer updates -------------------------------------------------------------------------

    def optimizer_enter(self) -> None:
        """An optimizer update starts: its own tensor calls are entries under msprobe's ``optimizer`` node,
        between start() and stop() as under ``probe run`` (an optimizer may wrap another: the outermost
        update counts)."""
        self._optimizer_depth += 1
        if self._optimizer_depth == 1:
            self.session.optimizer_update(True)

    def optimizer_exit(self) -> None:
        """The outermost update is over: under ``probe run`` the step ends here."""
        if self._optimizer_depth > 0:
            self._optimizer_depth -= 1
        if self._optimizer_depth:
            return
        self.session.optimizer_update(False)
        if self.auto_step and self.recording:
            self._guarded(self.step)  # busy: the step's last statistics transfer is no entry

    def in_closure(self, closure: Callable[..., Any]) -> Callable[..., Any]:
        """``optimizer.step(closure)`` (LBFGS, Lightning's automatic optimisation): the closure's forward and
        backward are the step's calls, so they are recorded although an update is in progress, with their
        modules as parents."""
        collector = self

        def closure_recorded(*args: Any, **kwargs: Any) -> Any:
            was, node = collector.busy, collector.session.naming.update_node
            collector.busy, collector.session.naming.update_node = False, None
            try:
                return closure(*args, **kwargs)
            finally:
                collector.busy, collector.session.naming.update_node = was, node

        closure_recorded.__wrapped__ = closure
        return closure_recorded

    # -- backward plumbing ----------------------------------------------------------------------

    def _record_backward(self, name: str, grad_outputs: list[Any], grad_inputs: list[Any]) -> None:
        if self.recording:
            self._guarded(self.session.record_backward, name, grad_outputs, grad_inputs)

    def backward_in_place(self, api: str, kwargs: dict[str, Any] | None) -> bool:
        """Whether an in-place call (``add_``, ``+=``, ``inplace=True``) gets a backward entry: the collector
        can give the caller's tensor the history of the change (:meth:`inputs_returned`). Default: no."""
        return False

    def input_versions(self, tensors: list[Any]) -> Any:
        """A token that lets :meth:`inputs_returned` tell which identity copies a call changed in place."""
        return None

    def inputs_returned(self, caught: CaughtInputs) -> None:
        """After a caught call (API or module) returns: repair what its in-place changes to the identity
        copies of its inputs did to the caller's tensors (which share their memory). Default: nothing."""

    def needs_grad(self, tensor: Any) -> bool | None:
        """Whether autograd will compute a gradient w.r.t. ``tensor`` (``None``: cannot tell)."""
        return self.ops.requires_grad(tensor)

    def _catch_inputs(self, name: str, args: tuple, kwargs: dict[str, Any]
                      ) -> tuple[Any, Any, GradCatch, CaughtInputs | None]:
        positions = tensor_positions(args, kwargs, self.ops.is_tensor)
        tensors = [pick_at(args, kwargs, where) for where in positions]
        needs = [self.needs_grad(t) for t in tensors]
        catch = GradCatch(self._record_backward, name, len(tensors))
        if not any(need is None or need for need in needs):
            if self.null_grads_for_inputs and tensors:  # written as [null, ...] once the backward pass is over
                self._open_catches.append(catch)
            else:
                catch.n_inputs = 0
            return args, kwargs, catch, None
        self._open_catches.append(catch)

        def on_inputs(grads: Any) -> None:  # no gradient for inputs autograd does not differentiate
            catch.on_inputs([None if need is False else grad for grad, need in zip(grads, needs)])

        new = self.identity_with_grad_hook(tensors, on_inputs)
        args, kwargs = replace_at(args, kwargs, positions, new)
        return args, kwargs, catch, CaughtInputs(new, tensors, self.input_versions(new))

    def _catch_node(self, name: str, args: tuple, kwargs: dict[str, Any], output: Any, inplace: bool) -> None:
        """msprobe's API backward: the gradient node of the first output; a call that returned one of its
        inputs unchanged (``x.contiguous()``) has no node of its own and no backward entry."""
        tensor = first_tensor(output, self.ops.is_tensor)
        if tensor is None or self.needs_grad(tensor) is False:
            return
        if not inplace and any(tensor is pick_at(args, kwargs, where)
                               for where in tensor_positions(args, kwargs, self.ops.is_tensor)):
            return

        def on_node(grad_outputs: list[Any], grad_inputs: list[Any]) -> None:
            self._record_backward(name, grad_outputs, grad_inputs)

        self.hook_grad_node(tensor, on_node)

    def _catch_outputs(self, catch: GradCatch, output: Any) -> None:
        outs = [t for t in output_tensors(output, self.ops.is_tensor) if self.needs_grad(t) is not False]
        if outs:
            def on_outputs(grads: list[Any]) -> None:
                self._backward_seen = True
                catch.on_outputs(grads)

            self.hook_output_grads(outs, on_outputs)

    def _backward_parent(self) -> str | None:
        """The parent of a call made inside the backward pass, as msprobe's: the backward of the innermost module
        whose output gradients came and whose input gradients did not yet (a hook on its weight's gradient)."""
        for catch in reversed(self._open_catches):
            if catch.grad_outputs is not None and not catch.done and catch.name.startswith(self.module_prefix + "."):
                return backward_name(catch.name)
        return None

    def settle_backward(self, drop_rest: bool = False) -> None:
        """Write the backward entries whose output gradients came but whose input gradients never will.

        When the gradient is taken w.r.t. some tensors only, the identity
        before a call may never see a gradient; once that backward pass is
        over (the next forward call, step end, stop, close) such calls are
        written with ``null`` input gradients. ``drop_rest`` (step end) also
        forgets calls whose backward never ran.
        """
        self._backward_seen = False
        still_open = []
        for catch in self._open_catches:
            if catch.done:
                continue
            if catch.grad_outputs is not None:
                catch.on_inputs([None] * catch.n_inputs)
            elif not drop_rest:
                still_open.append(catch)
        self._open_catches = still_open

    # -- saves -------------------------------------------------------------------------------------

    def save(self, variable: Any, name: str, save_backward: bool = True) -> None:
        """``PrecisionDebugger.save``: the variable now (``{name}.{n}.debug``) and, as msprobe, its gradients
        in the variable's own nesting (``{name}_grad.{n}.debug``, ``null`` where none came), written once every
        gradient has come or at the step's end."""
        was, self.busy = self.busy, True
        try:
            if self.session.save_variable(name, variable) is None or not save_backward:
                return
            grad_name = self.session.naming.debug_name(name + "_grad")  # numbered now: in save order
            grads = SavedGrads(variable, self.ops.is_tensor)
            waiting = {i for i, tensor in enumerate(grads.tensors) if self.needs_grad(tensor) is not False}

            def write() -> None:
                if self._open_saves.pop(id(grads), None) is not None:
                    self._guarded(self.session.save_variable, name, grads.value(), grad_name)

            def arrive(i: int, grad: Any) -> None:
                grads.arrive(i, grad)
                waiting.discard(i)
                if not waiting:
                    write()

            self._open_saves[id(grads)] = write
            if not waiting:
                write()
            for i in sorted(waiting):
                self.hook_output_grads([grads.tensors[i]], lambda got, i=i: arrive(i, got[0]))
        finally:
            self.busy = was

    def _write_open_saves(self) -> None:
        """Step end: the saved variables whose gradients did not all come are written with what came."""
        for write in list(self._open_saves.values()):
            write()


class CaughtInputs:
    """A caught call's input tensors and the identity copies it received instead (``versions``: the
    framework's token from :meth:`CollectorBase.input_versions`)."""

    __slots__ = ("new", "old", "versions", "ids")

    def __init__(self, new: list[Any], old: list[Any], versions: Any) -> None:
        self.new, self.old, self.versions = new, old, versions
        self.ids = {id(t) for t in new}


def _unwrap(output: Any, caught: CaughtInputs, is_tensor: Callable[[Any], bool]) -> Any:
    originals = {id(n): o for n, o in zip(caught.new, caught.old)}
    if is_tensor(output):
        return originals.get(id(output), output)
    return type(output)(originals.get(id(t), t) for t in output)
