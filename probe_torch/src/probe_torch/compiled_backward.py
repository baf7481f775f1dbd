"""The backward of the module and API calls inside a ``torch.compile`` graph: gradient taps.

A compiled graph's backward (AOTAutograd's, compiled by the same backend) runs no Python hook, and the gradient
w.r.t. a value inside the graph is never one of its outputs. A tap makes it one: a zero tensor, an extra input of
the graph that requires grad, added where the gradient passes (``y = x + tap``). Adding zero changes no value
(``-0.0`` aside, which reads ``+0.0``), and the gradient w.r.t. the tap *is* the gradient w.r.t. ``x`` along the
uses it stands in for; AOTAutograd makes it an output of the compiled backward, and a multi-gradient hook on the
taps hands them over when that backward has run. Per module call (:class:`~probe_torch.compiled.GraphRecording`):

* grad_output: one tap per output (the module's tensors read after it), read by the uses outside the module;
* grad_input: one tap per input (the tensors it reads from outside it, its parameters aside), read by its uses
  inside the module, so that it gets the gradient through the module only, as eager code's identity does.

An API call (:func:`~probe_torch.compiled._grads_follow_arguments`) is tapped as a module call of one call, nested
in its module, its inputs being all its tensor arguments (parameters too). Nested calls chain their taps (an inner
call's output tap, then the outer one's), so each gets the gradient of its own uses. The sum of two gradients of
one value (read inside a module and outside it: a residual) may be taken in another order, as at L0 in eager code.

A graph that computes in float16/bfloat16 gets no taps: there a tap changed what AOTAutograd's partitioner saves
for the backward, and so the forward's numerics (measured on a bfloat16 ``x + down(...)`` residual read by a
LayerNorm, with taps as float32 inputs or bfloat16 ones alike): without taps the partitioner saves the two addends
and inductor fuses their sum into the LayerNorm kernel in float32; with a tap on an addend it saves the sum, which
inductor then stores as bfloat16 and the LayerNorm reads rounded, so the output and every gradient changed.

Not tapped (their gradient shows ``null``): values without grad, values with symbolic sizes (a
tap's shape must be known when the graph runs), and values changed in place by a call that reads them (a tap
would take the change away from the original). Chosen over AOTAutograd's joint graph (its backward nodes
carry ``fwd_nn_module_stack``, but the gradient w.r.t. a forward value is no node of it to name) and over a
backend of probe's own (the user's backend must compile the graph). Cost: one zero tensor per tap, allocated at the
graph's first run and shared by its later runs (each gets a new leaf over it, which its gradient goes to), and one
more output of the compiled backward per tap.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx as fx

_HALF = (torch.float16, torch.bfloat16)


class ModuleCall:
    """The taps of one module call: per input its tap's index (None: untapped), per output the same."""

    __slots__ = ("inputs", "outputs")

    def __init__(self, inputs: list[int | None], outputs: list[int | None]) -> None:
        self.inputs, self.outputs = inputs, outputs


class GradientTaps:
    """The zero-valued extra inputs of one graph and the module calls whose gradients they carry.

    ``runs``: per module call, in the order the calls start, ``(inputs, outputs, members, depth)`` as
    :meth:`~probe_torch.compiled.GraphRecording._module_runs` finds them; ``skip``: nodes the forward recording
    added (never rewired); ``in_place``: whether a node changes its first argument in place."""

    def __init__(self, gm: fx.GraphModule, runs: list[tuple[list[fx.Node], list[fx.Node], set, int]],
                 skip: set, in_place: Any) -> None:
        self.gm, self._skip, self._in_place = gm, skip, in_place
        self.likes: list[torch.Tensor] = []  # per tap, the value it stands beside (its shape and dtype)
        self.calls: list[ModuleCall] = [ModuleCall([], []) for _ in runs]
        self._added: list[tuple[fx.Node, fx.Node]] = []  # (placeholder, add) per tap
        self._reads: dict[tuple[fx.Node, fx.Node], fx.Node] = {}  # (user, value) -> the node the user reads it from
        self._runs = runs
        self._zeros: list[torch.Tensor] = []  # per tap, its zeros (allocated at the first run)
        self._users = {node: list(node.users) for node in gm.graph.nodes}  # as Dynamo made them, before any tap

    def install(self) -> bool:
        """Add the taps to the graph; False when there is none (or the graph computes in half precision)."""
        if any(isinstance(value, torch.Tensor) and value.dtype in _HALF
               for value in (node.meta.get("example_value") for node in self.gm.graph.nodes)):
            return False
        order = sorted(range(len(self._runs)), key=lambda i: -self._runs[i][3])  # outputs: innermost first
        for i in order:
            _, outputs, members, _ = self._runs[i]
            self.calls[i].outputs = [self._tap(node, lambda user, m=members: user not in m) for node in outputs]
        for i in reversed(order):  # inputs: outermost first
            inputs, _, members, _ = self._runs[i]
            self.calls[i].inputs = [None if node in inputs[:k] else self._tap(node, lambda user, m=members: user in m)
                                    for k, node in enumerate(inputs)]  # an input read twice (x * x): tapped once
        if not self._added:
            return False
        self.gm.recompile()
        return True

    def uninstall(self) -> None:
        """The graph without the taps (Dynamo reads its placeholders again after the backend returns)."""
        graph = self.gm.graph
        for placeholder, add in reversed(self._added):
            add.replace_all_uses_with(add.args[0])
            graph.erase_node(add)
            graph.erase_node(placeholder)
        self._added.clear()
        self.gm.recompile()

    def _tap(self, node: fx.Node, reads: Any) -> int | None:
        value = node.meta.get("example_value", node.meta.get("val"))
        if not isinstance(value, torch.Tensor) or not value.requires_grad \
                or not all(isinstance(size, int) for size in value.shape):
            return None
        users = [user for user in self._users[node] if user not in self._skip and reads(user)]
        sources = {self._reads.get((user, node), node) for user in users}
        if len(sources) != 1 or any(self._changes(user, node) for user in self._users[node]):
            return None
        source = sources.pop()
        graph = self.gm.graph
        last = [n for n in graph.nodes if n.op == "placeholder"][-1]
        with graph.inserting_after(last):
            placeholder = graph.placeholder(f"probe_grad_tap_{len(self.likes)}")
        placeholder.meta["example_value"] = value
        placeholder._dynamo_source = None  # an input of no user's (AOTAutograd asks each placeholder for one)
        with graph.inserting_after(placeholder if source.op == "placeholder" else source):
            add = graph.call_function(operator.add, (source, placeholder))
        add.meta.update(source.meta)
        for user in users:
            user.replace_input_with(source, add)
            self._reads[(user, node)] = add
        self._added.append((placeholder, add))
        self.likes.append(value)
        return len(self.likes) - 1

    def _changes(self, user: fx.Node, node: fx.Node) -> bool:
        return bool(user.args) and isinstance(user.args[0], fx.Node) and user.args[0] is node and self._in_place(user)

    # -- run time --------------------------------------------------------------------------------------

    def zeros(self) -> list[torch.Tensor]:
        """The taps of one run of the graph: zeros that require grad, each a new leaf (its gradient is that run's)
        over zeros allocated once (the compiled code only reads them)."""
        if len(self._zeros) != len(self.likes):
            self._zeros = [torch.zeros(like.shape, dtype=like.dtype, device=like.device) for like in self.likes]
        return [zero.detach().requires_grad_() for zero in self._zeros]

    def hook(self, taps: list[torch.Tensor], names: list[str | None], write: Any) -> None:
        """When the backward pass has reached the taps: ``write(name, grad_outputs, grad_inputs)`` per module
        call named in ``names`` (its forward name, None: no backward entry), the last call first, as eager
        code's backward finishes them."""
        if not any(names):
            return

        def arrived(grads: Any) -> None:
            for call, name in reversed(list(zip(self.calls, names))):
                outputs = [grads[i] for i in call.outputs if i is not None]
                if name is None or all(grad is None for grad in outputs):
                    continue  # no gradient w.r.t. its outputs: eager code writes no entry either
                inputs = [None if i is None else grads[i] for i in call.inputs]
                write(name, outputs, inputs if any(i is not None for i in call.inputs) else [])

        torch.autograd.graph.register_multi_grad_hook(taps, arrived)
