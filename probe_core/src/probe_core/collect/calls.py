"""Framework-neutral plumbing around one intercepted call: where its tensors sit, and its gradients.

A collector finds the tensors among a call's arguments (:func:`tensor_positions`),
swaps them for identity copies whose gradient hook reports the gradients
w.r.t. the inputs (:func:`replace_at`), and hooks the outputs for the
gradients w.r.t. the outputs; a :class:`GradCatch` pairs both halves and hands
them to the collection as one backward entry. ``is_tensor`` is the framework's
tensor predicate, so nothing here imports a framework.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: Operators that collectors wrap on the tensor class so entries carry msprobe's dunder names.
OPERATOR_DUNDERS = tuple(f"__{op}__" for op in (
    "add", "radd", "iadd", "sub", "rsub", "isub", "mul", "rmul", "imul", "truediv", "rtruediv", "itruediv",
    "floordiv", "rfloordiv", "ifloordiv", "mod", "rmod", "imod", "pow", "rpow", "ipow", "matmul", "rmatmul",
    "and", "rand", "iand", "or", "ror", "ior", "xor", "rxor", "ixor", "lshift", "rlshift", "ilshift",
    "rshift", "rrshift", "irshift", "neg", "pos", "abs", "invert", "eq", "ne", "lt", "le", "gt", "ge",
    "getitem", "setitem"))

Position = tuple[Any, Any]  # (argument index or keyword, index inside a list/tuple argument or None)


def tensor_positions(args: tuple, kwargs: dict[str, Any] | None, is_tensor: Callable[[Any], bool]) -> list[Position]:
    """Where the call's tensors are: positional (one level into lists/tuples), then keyword."""
    found: list[Position] = []
    for i, arg in enumerate(args):
        if is_tensor(arg):
            found.append((i, None))
        elif type(arg) in (list, tuple):
            found.extend((i, j) for j, item in enumerate(arg) if is_tensor(item))
    if kwargs:
        found.extend((key, None) for key, value in kwargs.items() if is_tensor(value))
    return found


def pick_at(args: tuple, kwargs: dict[str, Any] | None, where: Position) -> Any:
    i, j = where
    value = kwargs[i] if isinstance(i, str) else args[i]
    return value if j is None else value[j]


def replace_at(args: tuple, kwargs: dict[str, Any] | None, positions: list[Position],
               values: Any) -> tuple[tuple, dict[str, Any] | None]:
    """``args``/``kwargs`` with the tensors at ``positions`` replaced by ``values`` (inputs untouched)."""
    out = list(args)
    new_kwargs = dict(kwargs) if kwargs else kwargs
    for (i, j), value in zip(positions, values, strict=True):
        if isinstance(i, str):
            new_kwargs[i] = value
        elif j is None:
            out[i] = value
        else:
            inner = list(out[i])
            inner[j] = value
            out[i] = type(args[i])(inner)
    return tuple(out), new_kwargs


def output_tensors(output: Any, is_tensor: Callable[[Any], bool]) -> list[Any]:
    """The tensors a call returned (the value itself, or the tensors of a returned list/tuple)."""
    if is_tensor(output):
        return [output]
    if isinstance(output, (list, tuple)):
        return [t for t in output if is_tensor(t)]
    return []


def first_tensor(output: Any, is_tensor: Callable[[Any], bool]) -> Any:
    """The tensor whose gradient node stands for a call's backward (msprobe's choice): the output itself, the
    first item of a returned list/tuple (looked into), the first tensor of a returned dict; else ``None``."""
    while not is_tensor(output):
        if isinstance(output, dict):
            output = next((value for value in output.values() if is_tensor(value)), None)
        elif isinstance(output, (list, tuple)) and output:
            output = output[0]
        else:
            return None
    return output


_INPLACE_NAMES: dict[str, bool] = {}


#: the in-place operator dunders (``x += y``); the other dunders (``__invert__``, ``__getitem__``) return a new value
IN_PLACE_DUNDERS = frozenset(f"__i{op}__" for op in (
    "add", "sub", "mul", "div", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift",
    "rshift"))


def writes_in_place(op: str) -> bool:
    """An operator (its own name: ``add_``, ``__iadd__``, ``__setitem__``) that changes its first argument:
    the one in-place rule of collection, the compare's judge and the pre-check."""
    return op in IN_PLACE_DUNDERS or op == "__setitem__" or (op.endswith("_") and not op.endswith("__"))


#: the last part of the APIs that return a tensor's shape or size (``Tensor.size``, ``Functional.shape``,
#: ``Primitive.shape_op.Shape``): numbers, never a tensor, so no gradient ever flows back through them
SHAPE_QUERIES = frozenset(("shape", "size", "dim", "ndim", "ndimension", "numel", "rank", "dynamicshape",
                           "tensorshape"))
_SHAPE_NAMES: dict[str, bool] = {}


def is_shape_query(api: str) -> bool:
    """A call that returns only its input's shape or size: it has no backward, so its inputs get no gradient
    catch (on MindSpore, an identity view per input: ~0.1 ms each). The verdict is cached per API."""
    found = _SHAPE_NAMES.get(api)
    if found is None:
        found = _SHAPE_NAMES[api] = api.rsplit(".", 1)[-1].lower() in SHAPE_QUERIES
    return found


def _inplace_name(api: str) -> bool:
    return writes_in_place(api.rsplit(".", 1)[-1]) or api.startswith("Distributed.")


def is_inplace(api: str, kwargs: dict[str, Any] | None) -> bool:
    """Calls that change an argument in place: ``add_``, ``__iadd__``, ``__setitem__``, collectives, and
    calls that write into an argument (``out=`` a tensor, ``inplace=True`` as in ``F.relu(x, inplace=True)``,
    which reaches a collector as a keyword). They get a backward catch only where the collector says it can
    give the caller's tensor the change's history (``CollectorBase.backward_in_place``).

    The verdict on the name is cached per API; the keywords are looked at only when there are any.
    """
    by_name = _INPLACE_NAMES.get(api)
    if by_name is None:
        by_name = _INPLACE_NAMES[api] = _inplace_name(api)
    if by_name:
        return True
    if kwargs:
        return kwargs.get("out") is not None or bool(kwargs.get("inplace", False))
    return False


class GradCatch:
    """Gradients of one recorded call: w.r.t. its outputs first, then w.r.t. its inputs (the entry is written).

    ``record(name, grad_outputs, grad_inputs)`` receives both lists; a call
    whose inputs need no gradient is written as soon as its output gradients
    arrive.
    """

    __slots__ = ("record", "name", "grad_outputs", "n_inputs", "done")

    def __init__(self, record: Callable[[str, list[Any], list[Any]], None], name: str, n_inputs: int) -> None:
        self.record = record
        self.name = name
        self.grad_outputs: list[Any] | None = None
        self.n_inputs = n_inputs
        self.done = False

    def on_outputs(self, grads: Any) -> None:
        self.grad_outputs = list(grads)
        if self.n_inputs == 0:
            self._finish([])

    def on_inputs(self, grads: Any) -> None:
        self._finish(list(grads))

    def _finish(self, grad_inputs: list[Any]) -> None:
        if self.done:
            return
        self.done = True
        self.record(self.name, self.grad_outputs or [], grad_inputs)


class GradSlots:
    """Gathers per-tensor gradient hooks of ``n`` outputs into one ``on_full(grads)`` call, in output order."""

    __slots__ = ("grads", "missing", "on_full")

    def __init__(self, n: int, on_full: Callable[[list[Any]], None]) -> None:
        self.grads: list[Any] = [None] * n
        self.missing = set(range(n))
        self.on_full = on_full

    def arrive(self, index: int, grad: Any) -> None:
        self.grads[index] = grad
        self.missing.discard(index)
        if not self.missing:
            self.missing = set(range(len(self.grads)))  # a second backward through the same graph
            self.on_full(list(self.grads))


class SavedGrads:
    """The gradients of a saved variable (``PrecisionDebugger.save``), laid out as the variable is nested (as
    msprobe writes ``{name}_grad.{n}.debug``): each tensor's place gets its gradient, every other place ``None``.

    ``tensors`` are the variable's tensors in walk order; :meth:`arrive` fills one, :meth:`value` builds the
    structure from what has arrived.
    """

    __slots__ = ("skeleton", "tensors", "grads")

    def __init__(self, variable: Any, is_tensor: Callable[[Any], bool]) -> None:
        self.tensors: list[Any] = []
        self.skeleton = self._walk(variable, is_tensor)
        self.grads: list[Any] = [None] * len(self.tensors)

    def _walk(self, value: Any, is_tensor: Callable[[Any], bool]) -> Any:
        if is_tensor(value):
            self.tensors.append(value)
            return _Slot(len(self.tensors) - 1)
        if isinstance(value, dict):
            return {key: self._walk(item, is_tensor) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._walk(item, is_tensor) for item in value]
        return None

    def arrive(self, index: int, grad: Any) -> None:
        self.grads[index] = grad

    def value(self) -> Any:
        return self._fill(self.skeleton)

    def _fill(self, node: Any) -> Any:
        if isinstance(node, _Slot):
            return self.grads[node.index]
        if isinstance(node, dict):
            return {key: self._fill(item) for key, item in node.items()}
        if isinstance(node, list):
            return [self._fill(item) for item in node]
        return None


class _Slot:
    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


class ParamGradGather:
    """The gradients of one module's parameters, reported together once each has arrived (arrival order)."""

    __slots__ = ("names", "arrived", "on_full")

    def __init__(self, names: list[str], on_full: Callable[[dict[str, Any]], None]) -> None:
        self.names = set(names)
        self.arrived: dict[str, Any] = {}
        self.on_full = on_full

    def arrive(self, name: str, grad: Any) -> None:
        self.arrived[name] = grad
        if len(self.arrived) == len(self.names):
            grads, self.arrived = self.arrived, {}
            self.on_full(grads)
