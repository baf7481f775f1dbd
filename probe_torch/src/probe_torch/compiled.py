"""Recording inside ``torch.compile``: the calls of a compiled graph as entries, with the compiled run's values.

Dynamo hands its backend an FX graph of torch-level calls (``F.linear``, ``F.gelu``, ``x + y``: the functions
the eager collector records, with the eager names), each node tagged with the ``nn_module_stack`` it ran in.
:func:`backend_call` wraps the backend the user chose (inductor by default): before compiling, it makes the
values the entries need extra outputs of the graph, so the compiled code (fused kernels and all) returns them,
and after each run it writes one entry per call (L1, mix) and per module call (L0, mix) in graph order, named
and numbered as eager code names them. What this changes, measured (``benchmarks/compile_overhead.py``):

* each recorded value is written to memory (a fused kernel stores its intermediates as well);
* a float16/bfloat16 value is returned as float32 and rounded to its dtype on the host: a fused kernel keeps
  such intermediates in float32, and returning them in their own dtype would make the kernels after it read
  the rounded copy (a different result); this way the outputs and gradients are bit for bit those of the
  compiled run without probe (float32 is unchanged either way);
* a tensor changed in place inside the graph (``relu_``) is copied before the change, so that the entries
  before it show its earlier value.

The backward inside the graph (``Module.X.Cls.backward.N`` at L0 and mix, gradients w.r.t. the module's outputs
and inputs as eager code's; ``Functional.gelu.0.backward`` at mix) is recorded through gradient taps, zero-valued
extra inputs the compiled backward returns the gradients of (:mod:`probe_torch.compiled_backward`), in
float32/float64 graphs only: in a float16/bfloat16 graph a tap changes which values AOTAutograd saves for the
backward, and a value inductor kept in float32 inside a fused kernel is then stored and read back rounded (the
outputs changed; measured, see there). An API call's backward is recorded where eager code's entry (the gradients
at its output's autograd node, as msprobe records them) lists the gradients w.r.t. its tensor arguments in their
order, found by running the call on fake tensors when the graph is compiled: ``gelu``, ``layer_norm``, ``x + y``
do; ``F.linear``'s ``addmm`` node lists the bias first and the weight transposed, so it gets no entry. What stays
unrecorded: those API calls' backward, the backward of half-precision graphs, and calls Dynamo does not put in the
graph as torch calls. Parameter gradients are recorded by the eager hooks.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx as fx
from torch.utils._pytree import tree_map

from probe_core.api import is_inplace
from probe_torch.compiled_backward import GradientTaps

#: Python operators in a Dynamo graph → the ``Tensor`` dunder the eager collector records them under.
_OPERATORS = {getattr(operator, name): name for name in (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor", "lshift",
    "rshift", "neg", "pos", "abs", "invert", "eq", "ne", "lt", "le", "gt", "ge", "getitem", "iadd", "isub",
    "imul", "itruediv", "ifloordiv", "imod", "ipow", "iand", "ior", "ixor", "ilshift", "irshift")}
_REFLECTED = frozenset({"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
                        "lshift", "rshift"})
_HALF = (torch.float16, torch.bfloat16)


def _example(node: fx.Node) -> Any:
    return node.meta.get("example_value", node.meta.get("val"))


def _is_tensor_node(node: Any) -> bool:
    return isinstance(node, fx.Node) and isinstance(_example(node), torch.Tensor)



class _Slot:
    """A value an entry shows: a graph input (``arg``, its position) or, once bound, an extra graph output
    (``node``; a graph input changed in place later is bound to a copy made before the change)."""

    __slots__ = ("arg", "node", "dtype", "requires_grad")

    def __init__(self, arg: int | None, like: torch.Tensor) -> None:
        self.arg, self.node, self.dtype, self.requires_grad = arg, None, like.dtype, like.requires_grad


class _Call:
    """One entry of a graph: an API call (``api``), or a module call's start (``enter``) or end (``exit``)."""

    __slots__ = ("kind", "api", "args", "kwargs", "module", "output", "tapped")

    def __init__(self, kind: str, *, api: str = "", args: Any = (), kwargs: Any = None, module: Any = None,
                 output: Any = None) -> None:
        self.kind, self.api, self.args, self.kwargs = kind, api, args, kwargs if kwargs is not None else {}
        self.module, self.output = module, output
        self.tapped = False  # an API call whose backward the gradient taps carry (one of ``runs``)


class GraphRecording:
    """The entries of one Dynamo graph and the extra graph outputs their values come from.

    ``modules``: the named modules by ``id`` (Dynamo's ``nn_module_stack`` keys); ``apis``/``with_modules``:
    which entries the level records."""

    def __init__(self, gm: fx.GraphModule, names: Any, modules: dict[int, Any], *, apis: bool,
                 with_modules: bool) -> None:
        self.gm, self.names = gm, names
        nodes = list(gm.graph.nodes)
        self.output_node = nodes[-1]
        self.original_args = self.output_node.args
        self.n_outputs = 0
        self.calls: list[_Call] = []
        #: per module call (and API call with one tensor output), in the order they start: its inputs, outputs,
        #: calls and depth (for its gradient taps)
        self.module_runs: list[tuple[list[fx.Node], list[fx.Node], set[fx.Node], int]] = []
        self.backward_names: list[str | None] = []  # per module call of the last run: its forward name, if its
        # backward is recorded
        self._added: list[fx.Node] = []  # nodes this recording put into the graph, in order
        self._placeholders = {n: i for i, n in enumerate(n for n in nodes if n.op == "placeholder")}
        self._pending: dict[fx.Node, list[_Slot]] = {}  # node -> slots showing its value as it is now
        self._extra: dict[fx.Node, int] = {}  # node -> its position among the extra outputs
        self._plan(nodes, modules, apis, with_modules)

    # -- compile time --------------------------------------------------------------------------------

    def api_of(self, node: fx.Node) -> str | None:
        """The eager collector's name for the call ``node`` makes (None: no entry)."""
        if node.op == "call_method":
            method = getattr(torch.Tensor, node.target, None)
            return self.names(method) if method is not None else None
        if node.op != "call_function":
            return None
        name = _OPERATORS.get(node.target)
        if name is None:
            return self.names(node.target)
        name = name.rstrip("_")  # operator.and_ -> __and__
        if not _is_tensor_node(node.args[0] if node.args else None):
            if name not in _REFLECTED or len(node.args) != 2 or not _is_tensor_node(node.args[1]):
                return None  # a tuple's item, arithmetic on sizes
            name = "r" + name  # 2 * x: the tensor's reflected operator, as eager Python calls it
        return f"Tensor.__{name}__"

    def _plan(self, nodes: list[fx.Node], modules: dict[int, Any], apis: bool, with_modules: bool) -> None:
        runs = self._module_runs(nodes) if with_modules else {}
        open_modules: list[str] = []
        for node in nodes:
            if node.op not in ("call_function", "call_method"):
                continue
            if with_modules:
                stack = [key for key in node.meta.get("nn_module_stack") or {} if _module(modules, key) is not None]
                while open_modules and open_modules[-1] not in stack:
                    self._exit(open_modules.pop(), runs, modules)
                for key in stack[len(open_modules):]:
                    self.module_runs.append((*runs[key], len(open_modules)))
                    open_modules.append(key)
                    self.calls.append(_Call("enter", module=_module(modules, key),
                                            args=tuple(self._slot(n) for n in runs[key][0])))
            api = self.api_of(node)
            if api is None:
                continue
            call = None
            if apis and _holds_tensors(_example(node)):  # its inputs first: an in-place call shows them before
                call = _Call("api", api=api, args=fx.node.map_arg(node.args, self._slot),
                             kwargs=dict(fx.node.map_arg(node.kwargs, self._slot)))
            if is_inplace(api, node.kwargs) and node.args and isinstance(node.args[0], fx.Node):
                self._before_change(node, node.args[0])
            if call is not None:
                call.output = self._slot(node)
                self.calls.append(call)
                inputs: list[fx.Node] = []  # its tensor arguments, in order
                fx.node.map_arg((node.args, node.kwargs), lambda n: inputs.append(n) if _is_tensor_node(n) else n)
                # its backward: taps on them and its output; at mix only (a tap may change the order a gradient is
                # summed in, and L1 computes bit for bit what the script computes alone)
                if with_modules and _grads_follow_arguments(node, inputs):
                    self.module_runs.append((inputs, [node], {node}, len(open_modules)))
                    call.tapped = True
        while open_modules:
            self._exit(open_modules.pop(), runs, modules)

    def _exit(self, key: str, runs: dict[str, Any], modules: dict[int, Any]) -> None:
        outputs = [self._slot(n) for n in runs[key][1]]
        self.calls.append(_Call("exit", module=_module(modules, key),
                                output=outputs[0] if len(outputs) == 1 else tuple(outputs)))

    @staticmethod
    def _module_runs(nodes: list[fx.Node]) -> dict[str, tuple[list[fx.Node], list[fx.Node], set[fx.Node]]]:
        """Per ``nn_module_stack`` key, the module call's inputs (the tensors its calls read from outside it,
        its parameters and buffers aside, in the order first read), outputs (its tensors read after it) and
        calls."""
        members: dict[str, list[fx.Node]] = {}
        for node in nodes:
            if node.op in ("call_function", "call_method"):
                for key in node.meta.get("nn_module_stack") or {}:
                    members.setdefault(key, []).append(node)
        runs = {}
        for key, inside in members.items():
            within = set(inside)
            inputs: list[fx.Node] = []
            for node in inside:
                inputs += [used for used in node.all_input_nodes
                           if used not in within and used not in inputs and _is_tensor_node(used)
                           and not _is_state(used)]
            outputs = [node for node in inside if _is_tensor_node(node) and any(u not in within for u in node.users)]
            runs[key] = (inputs, outputs, within)
        return runs

    def _base(self, node: fx.Node) -> fx.Node:
        """The node whose value an in-place call's result is (``relu_(x)``'s is ``x``'s)."""
        while node.op in ("call_function", "call_method") and node.args and isinstance(node.args[0], fx.Node):
            api = self.api_of(node)
            if api is None or not is_inplace(api, node.kwargs):
                break
            node = node.args[0]
        return node

    def _slot(self, node: fx.Node) -> Any:
        value = _example(node)
        if isinstance(value, (tuple, list)) and node not in self._placeholders:  # a call with several outputs
            return tuple(self._slot(self._item(node, i)) if isinstance(v, torch.Tensor) else _constant(v)
                         for i, v in enumerate(value))
        if not isinstance(value, torch.Tensor):
            return _constant(value)
        slot = _Slot(self._placeholders.get(node), value)
        self._pending.setdefault(self._base(node), []).append(slot)
        return slot

    def _item(self, node: fx.Node, index: int) -> fx.Node:
        for user in node.users:
            if user.target is operator.getitem and user.args[1] == index:
                return user
        with self.gm.graph.inserting_after(node):
            item = self._add("call_function", operator.getitem, node, index)
        item.meta["example_value"] = _example(node)[index]
        return item

    @property
    def added(self) -> list[fx.Node]:
        return self._added

    def changes_in_place(self, node: fx.Node) -> bool:
        """Whether ``node`` changes its first argument in place (``relu_``, ``+=``)."""
        api = self.api_of(node)
        return api is not None and is_inplace(api, node.kwargs)

    def _add(self, op: str, target: Any, *args: Any) -> fx.Node:
        node = self.gm.graph.create_node(op, target, args)
        self._added.append(node)
        return node

    def _before_change(self, node: fx.Node, changed: fx.Node) -> None:
        """``node`` changes ``changed`` in place: the entries so far show a copy made before the change."""
        waiting = self._pending.pop(self._base(changed), [])
        if waiting:
            with self.gm.graph.inserting_before(node):
                copy = self._readable(changed, copy=True)
            for slot in waiting:
                slot.node = copy

    def _readable(self, node: fx.Node, copy: bool = False) -> fx.Node:
        """``node``'s value as an extra output: detached; float16/bfloat16 as float32 (module docstring)."""
        value = self._add("call_method", "detach", node)
        if _example(node).dtype in _HALF:
            return self._add("call_method", "float", value)
        return self._add("call_function", torch.clone, value) if copy else value

    def install(self) -> bool:
        """Make the recorded values extra outputs of the graph; False when it has no entry to record."""
        outputs = self.original_args[0] if self.original_args else None
        if not self.calls or not isinstance(outputs, (tuple, list)):
            return False
        for base, slots in self._pending.items():
            unbound = [slot for slot in slots if slot.node is None and slot.arg is None]
            if unbound:
                with self.gm.graph.inserting_before(self.output_node):
                    final = self._readable(base)
                for slot in unbound:
                    slot.node = final
        extras: list[fx.Node] = []
        for call in self.calls:
            for slot in _slots_in((call.args, call.kwargs, call.output)):
                if slot.node is not None and slot.node not in self._extra:
                    self._extra[slot.node] = len(extras)
                    extras.append(slot.node)
        self.n_outputs = len(outputs)
        self.output_node.args = ((*outputs, *extras),)
        self.gm.recompile()
        return True

    def uninstall(self) -> None:
        """The graph as Dynamo gave it (for a backend that could not compile the recording one)."""
        self.output_node.args = self.original_args
        for node in reversed(self._added):
            self.gm.graph.erase_node(node)
        self.gm.recompile()

    # -- run time --------------------------------------------------------------------------------------

    def record(self, collector: Any, args: tuple, extras: Any) -> None:
        """Write the entries of one run of the compiled graph (``extras``: its extra outputs)."""
        session = collector.session
        cache: dict[int, Any] = {}

        def value(slot: Any) -> Any:
            if not isinstance(slot, _Slot):
                return slot
            if slot.node is None:
                return args[slot.arg]
            position = self._extra[slot.node]
            got = cache.get(position)
            if got is None:  # half precision is rounded here; requires_grad as the graph's value has it
                got = cache[position] = extras[position].to(slot.dtype).requires_grad_(slot.requires_grad)
            return got

        def values(tree: Any) -> Any:
            return tree_map(value, tree)

        sid = session.capture_stack(3)
        frames: list[tuple[str | None, bool, Any, Any]] = []
        self.backward_names = backward_names = []
        grad = torch.is_grad_enabled()
        for call in self.calls:
            if call.kind == "api":
                name = session.api_forward_name(call.api)
                if not session.start_forward(name):
                    session.end_forward_unrecorded(name)
                    if call.tapped:
                        backward_names.append(None)
                    continue
                parent = session.current_module()
                entry = session.encode_inputs(name, values(call.args), values(call.kwargs))
                session.finish_forward(name, entry, values(call.output), parent, sid)
                if call.tapped:
                    backward_names.append(name if grad and session.wants_backward(name) else None)
            elif call.kind == "enter":
                prefix = collector.module_prefix_of(call.module)
                name = session.module_forward_name(prefix) if prefix else None
                recorded = name is not None and session.start_forward(name)
                parent = session.current_module()
                entry = session.encode_inputs(name, values(call.args), None) if recorded else None
                if name is not None:
                    session.enter_module(name)
                frames.append((name, recorded, entry, parent))
                backward_names.append(name if recorded and grad and session.wants_backward(name) else None)
            else:
                name, recorded, entry, parent = frames.pop()
                if name is None:
                    continue
                session.exit_module()
                if not recorded:
                    session.end_forward_unrecorded(name)
                    continue
                session.finish_forward(name, entry, values(call.output), parent, sid,
                                       parameters=collector.direct_parameters(call.module))


def backend_call(original: Any, collector: Any) -> Any:
    """``__call__`` of the backends ``torch.compile`` builds (``torch._TorchCompileInductorWrapper``, and
    ``torch._TorchCompileWrapper`` around any other backend) while probe records: each graph Dynamo hands
    over is compiled with its recorded values as extra outputs, which each run records
    (:class:`GraphRecording`). A graph the backend cannot compile that way is compiled as given."""
    def __call__(backend: Any, gm: fx.GraphModule, example_inputs: Any, **kwargs: Any) -> Any:
        session = collector.session
        recording = GraphRecording(gm, collector.names, collector.modules_by_id(), apis=session.with_apis,
                                   with_modules=session.with_modules)
        if not recording.install():
            return original(backend, gm, example_inputs, **kwargs)
        taps = GradientTaps(gm, recording.module_runs, set(recording.added), recording.changes_in_place)
        tapped = torch.is_grad_enabled() and taps.install()
        try:
            compiled = original(backend, gm, [*example_inputs, *taps.zeros()] if tapped else example_inputs,
                                **kwargs)
        except Exception as error:
            if tapped:
                taps.uninstall()
            recording.uninstall()
            collector.compile_unrecorded(f"{type(error).__name__}: {error}")
            return original(backend, gm, example_inputs, **kwargs)
        if tapped:
            taps.uninstall()  # the compiled code keeps them; Dynamo reads the graph's placeholders afterwards
        collector.recorded_graphs += 1
        count = recording.n_outputs

        def run(*args: Any) -> Any:
            zeros = taps.zeros() if tapped else []
            outputs = compiled(*args, *zeros)
            if collector.records_compiled():
                collector.record_compiled(recording, args, outputs[count:])
                if zeros and torch.is_grad_enabled():
                    taps.hook(zeros, recording.backward_names, collector._record_backward)
            return outputs[:count]

        return run

    __call__.__wrapped__ = original
    return __call__


def _module(modules: dict[int, Any], key: str) -> Any:
    """The named module an ``nn_module_stack`` key (its ``id``, ``@n`` for a repeated call) stands for."""
    try:
        return modules.get(int(key.split("@")[0]))
    except ValueError:
        return None


def _is_state(node: fx.Node) -> bool:
    """A graph input that is a module's parameter or buffer (Dynamo passes them in as inputs)."""
    if node.op != "placeholder":
        return False
    source = getattr(node.meta.get("grapharg"), "source", None)
    name = source.name if isinstance(getattr(source, "name", None), str) else \
        (source.name() if source is not None else "")
    return "_parameters" in name or "_buffers" in name


def _grads_follow_arguments(node: fx.Node, inputs: list[fx.Node]) -> bool:
    """Whether eager code's backward entry of the call ``node`` makes (the gradients at its output's autograd
    node, as msprobe records them) lists the gradients w.r.t. its tensor arguments, in their order: so that taps
    on them give the same entry. Found by running the call on fake tensors (``F.gelu``, ``F.layer_norm``, ``x + y``
    do; ``F.linear``'s ``addmm`` node lists the bias first and the weight transposed: it gets no entry)."""
    value = _example(node)
    mode = getattr(value, "fake_mode", None)
    if mode is None or not inputs or not value.requires_grad:
        return False
    leaves: dict[fx.Node, torch.Tensor] = {}
    try:
        with mode, torch.enable_grad():
            for n in inputs:
                like = _example(n)
                leaves[n] = torch.empty(like.shape, dtype=like.dtype, device=like.device,
                                        requires_grad=like.requires_grad)
            args, kwargs = fx.node.map_arg((node.args, node.kwargs), lambda n: leaves.get(n, _example(n)))
            output = getattr(args[0], node.target)(*args[1:], **kwargs) if node.op == "call_method" \
                else node.target(*args, **kwargs)
    except Exception:  # a call that does not run on fake tensors: no entry
        return False
    if not isinstance(output, torch.Tensor) or output.grad_fn is None or any(output is t for t in leaves.values()):
        return False
    got = [getattr(function, "variable", None) for function, _ in output.grad_fn.next_functions]
    want = [leaves[n] if leaves[n].requires_grad else None for n in inputs]
    return len(got) == len(want) and all(g is w for g, w in zip(got, want))


def _holds_tensors(value: Any) -> bool:
    return isinstance(value, torch.Tensor) or isinstance(value, (tuple, list)) and \
        any(isinstance(v, torch.Tensor) for v in value)


def _constant(value: Any) -> Any:
    """A non-tensor value in the graph as the entry shows it (a symbolic size: null)."""
    return value if isinstance(value, (int, float, bool, str, type(None), torch.dtype, torch.device)) else None


def _slots_in(tree: Any) -> list[_Slot]:
    found: list[_Slot] = []
    tree_map(lambda leaf: found.append(leaf) if isinstance(leaf, _Slot) else leaf, tree)
    return found

