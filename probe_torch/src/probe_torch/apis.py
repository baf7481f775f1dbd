"""msprobe's names for PyTorch APIs: ``Functional.*``, ``Torch.*``, ``Tensor.*``, ``Distributed.*``.

A :class:`torch.overrides.TorchFunctionMode` hands us the function object;
:func:`api_name` maps it to msprobe's name (``None`` for calls that only read
metadata and are never entries). Python operators reach the mode under their
method names (``x + y`` arrives as ``Tensor.add``), so the collector wraps the
dunder methods listed in :data:`DUNDERS` to keep msprobe's ``Tensor.__add__``.

APIs written in Python (``F.layer_norm``, ``F.cross_entropy``, ``torch.split``)
re-pass their arguments to the mode through ``handle_torch_function``: keywords
where the user passed positions, every default filled in. The collector wraps
those listed by :func:`python_level_apis` so that entries show the arguments
as the user passed them, and the stack starts at the user's line.
"""

from __future__ import annotations

import inspect

from typing import Any

import torch
import torch.nn.functional as F

#: Operators wrapped on ``torch.Tensor`` so that entries carry msprobe's dunder names.
DUNDERS = (
    "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__", "__mul__", "__rmul__", "__imul__",
    "__truediv__", "__rtruediv__", "__itruediv__", "__floordiv__", "__rfloordiv__", "__ifloordiv__",
    "__mod__", "__rmod__", "__imod__", "__pow__", "__rpow__", "__ipow__", "__matmul__", "__rmatmul__",
    "__and__", "__rand__", "__iand__", "__or__", "__ror__", "__ior__", "__xor__", "__rxor__", "__ixor__",
    "__lshift__", "__rlshift__", "__ilshift__", "__rshift__", "__rrshift__", "__irshift__",
    "__neg__", "__pos__", "__abs__", "__invert__",
    "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__setitem__",
)

#: Calls that read metadata, convert to Python, or drive autograd: never entries.
METADATA = frozenset({
    "size", "dim", "stride", "numel", "nelement", "ndimension", "element_size", "data_ptr", "storage_offset",
    "get_device", "__len__", "__repr__", "__str__", "__format__", "__hash__", "__bool__", "__index__",
    "__int__", "__float__", "__complex__", "__iter__", "__reversed__", "__contains__", "item", "tolist",
    "numpy", "__array__", "__array_wrap__", "__dlpack__", "__dlpack_device__", "__reduce_ex__", "__reduce__",
    "__deepcopy__", "__copy__", "__setstate__", "__getstate__", "__sizeof__", "__dir__", "backward",
    "register_hook", "register_post_accumulate_grad_hook", "retain_grad", "requires_grad_", "untyped_storage",
    "storage", "_typed_storage", "has_names", "__get__", "__set__", "__delete__", "__torch_function__",
    "__torch_dispatch__", "_make_subclass", "as_subclass", "is_grad_enabled", "get_default_dtype",
    "result_type", "can_cast", "promote_types", "typename", "__instancecheck__", "_version", "__init__",
    "__new__", "type", "get_rng_state", "set_rng_state", "manual_seed", "seed", "initial_seed",
    "dim_order", "storage_type", "module_load", "share_memory_",
})

#: Names of torch.distributed collectives recorded as ``Distributed.{name}`` (``all_gather_single`` and
#: ``reduce_scatter_single``: torch 2.13's names of the tensor-to-tensor collectives, which FSDP2 calls).
DISTRIBUTED = (
    "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce", "reduce_scatter",
    "reduce_scatter_tensor", "broadcast", "scatter", "gather", "all_to_all", "all_to_all_single", "send",
    "recv", "isend", "irecv", "batch_isend_irecv", "barrier", "all_gather_single", "reduce_scatter_single",
)


#: Private names that are operators all the same, recorded as msprobe records them: torch's list operations
#: (``Torch._foreach_norm``, ``Torch._foreach_mul_``: gradient clipping and the foreach optimizers on GPUs).
RECORDED_PRIVATE = ("_foreach_",)


def _skipped(name: str) -> bool:
    """Metadata reads and private helpers (profiler records, ...) are never entries."""
    return name in METADATA or name.startswith("is_") or \
        (name.startswith("_") and not name.startswith(("__", *RECORDED_PRIVATE)))


class ApiNames:
    """Function object → msprobe entry prefix (``Functional.linear``), built once, cached per call site."""

    def __init__(self) -> None:
        self._names: dict[Any, str | None] = {}
        for name in dir(torch):
            self._add(getattr(torch, name, None), "Torch", name)
        for name in dir(torch.Tensor):
            self._add(getattr(torch.Tensor, name, None), "Tensor", name)
        for name in dir(F):
            self._add(getattr(F, name, None), "Functional", name)

    def _add(self, obj: Any, prefix: str, name: str) -> None:
        if obj is None or isinstance(obj, type) or not callable(obj) or name.startswith("__") and prefix != "Tensor":
            return
        try:
            self._names[obj] = None if _skipped(name) else f"{prefix}.{name}"
        except TypeError:
            pass

    def __call__(self, func: Any) -> str | None:
        try:
            return self._names[func]
        except KeyError:
            pass
        except TypeError:
            return None
        name = getattr(func, "__name__", None) or "unknown"
        owner = getattr(func, "__objclass__", None)
        if owner is not None and issubclass(owner, torch._C.TensorBase):
            prefix = "Tensor"
        elif (getattr(func, "__module__", "") or "").startswith("torch.nn.functional"):
            prefix = "Functional"
        else:
            prefix = "Torch"
        result = None if _skipped(name) else f"{prefix}.{name}"
        try:
            self._names[func] = result
        except TypeError:
            pass
        return result


#: APIs whose (first) output holds exactly their first input's values, in another shape or layout; their
#: statistics are computed once (forward: output = input; backward: grad w.r.t. input = grad w.r.t. output).
SAME_VALUES = frozenset(
    f"{prefix}.{name}" for prefix in ("Tensor", "Torch") for name in (
        "reshape", "view", "view_as", "reshape_as", "transpose", "permute", "t", "contiguous", "flatten",
        "unflatten", "squeeze", "unsqueeze", "clone", "detach", "movedim", "moveaxis", "swapaxes", "swapdims",
    )
)


def _reroutes(fn: Any) -> bool:
    """A Python function that hands its arguments to ``handle_torch_function`` (or a ``boolean_dispatch``
    choosing between two such functions, as ``F.max_pool2d``)."""
    code = getattr(fn, "__code__", None)
    return code is not None and ("handle_torch_function" in code.co_names or "if_true" in code.co_freevars)


def python_level_apis(names: ApiNames) -> list[tuple[Any, str, str]]:
    """``(owner, attribute, api)`` for each public Python-level API of ``torch.nn.functional``, ``torch``
    and ``torch.Tensor`` that re-passes its arguments (operators are :data:`DUNDERS`' business)."""
    found = []
    for owner in (F, torch, torch.Tensor):
        for attr, fn in vars(owner).items():
            if attr.startswith("_") or attr.startswith("sym_") or not inspect.isfunction(fn) or not _reroutes(fn):
                continue
            api = names(fn)
            if api is not None and api.endswith("." + attr):
                found.append((owner, attr, api))
    return found


def custom_ops(namespaces: tuple[str, ...]) -> list[tuple[Any, str, str]]:
    """``(torch.ops.<ns>, op, "<ns>.<op>")`` for each operator registered under the config's
    ``custom_op_namespaces`` (``torch.library``, C++ extensions, torch_npu's ``_C_ascend``), named as msprobe
    names them (``<ns>.<op>.<n>.forward``). A namespace nothing is registered under is skipped."""
    if not namespaces:  # the default: the scan of every schema below costs ~13 ms
        return []
    wanted = set(namespaces)
    ops: dict[str, set[str]] = {}
    for schema in torch._C._jit_get_all_schemas():
        namespace, sep, rest = schema.name.partition("::")
        if sep and namespace in wanted:
            ops.setdefault(namespace, set()).add(rest)
    found = []
    for namespace in namespaces:
        owner = getattr(torch.ops, namespace)
        for op in sorted(ops.get(namespace, ())):
            if hasattr(owner, op):
                found.append((owner, op, f"{namespace}.{op}"))
    return found


def keep_overloads(wrapper: Any, packet: Any) -> Any:
    """``torch.ops.ns.op.default`` (and every other overload) still reachable on ``wrapper``: the overloads
    themselves are not recorded, as with msprobe, but calls through them keep working."""
    for overload in getattr(packet, "overloads", lambda: [])():
        setattr(wrapper, overload, getattr(packet, overload))
    return wrapper


#: Tensor methods that are no operators on values: storage and memory, hooks and autograd driving, and calls
#: that run a Python callable. :class:`Operators` never hands them out.
NOT_OPERATORS = frozenset({
    "apply_", "map_", "map2_", "set_", "share_memory_", "pin_memory", "record_stream", "register_hook",
    "register_post_accumulate_grad_hook", "retain_grad", "backward", "storage", "untyped_storage",
    "module_load", "as_subclass", "new", "reinforce", "compile", "vmap", "cond", "while_loop", "fork", "wait",
    "load", "save", "classproperty", "frombuffer", "asarray", "to_dlpack", "thread_safe_generator",
})
#: How the names of torch functions that set or read process state, touch files or build code begin, and
#: what else they hold: never operators.
_NOT_OPERATOR_STARTS = ("set_", "get_", "from_", "import_", "parse_", "init_", "clear_", "are_", "prepare_",
                        "compiled_", "merge_", "unify_", "profiler_")
_NOT_OPERATOR_PARTS = ("autocast", "file", "thread", "deterministic", "seed", "dlpack", "anomaly", "printoptions",
                       "flush_denormal", "type_comment", "is_acceptable")
#: Where a dotted ``Torch.`` name may lead: the operator namespaces.
_SUBMODULES = ("linalg", "fft", "special", "nn.functional")


def _operator_name(attr: str) -> bool:
    if attr.startswith("__"):
        return attr in DUNDERS or attr == "__getitem__"
    return (not attr.startswith("_") and not _skipped(attr) and attr not in NOT_OPERATORS and not attr.startswith("sym_")
            and not attr.startswith(_NOT_OPERATOR_STARTS) and not any(part in attr for part in _NOT_OPERATOR_PARTS))


def _compiled(fn: Any) -> bool:
    """A function or Tensor method implemented in torch's C++ bindings (an ATen operator's binding)."""
    return inspect.isbuiltin(fn) or type(fn).__name__ in ("method_descriptor", "wrapper_descriptor")


class Operators:
    """msprobe's recorded API names back to the torch callables this collector records under them.

    Only a value operator comes back: a public ``torch``, ``torch.nn.functional``,
    ``torch.linalg``/``fft``/``special`` function or ``Tensor`` method that ``__torch_function__`` sees
    (what the collector's :class:`~torch.overrides.TorchFunctionMode` records: the overridable functions,
    the C++ bindings and the Python functions that hand their arguments to ``handle_torch_function``),
    an operator dunder, or an ATen operator. What else a name may reach by attributes - ``Torch.os.system``,
    ``Torch.load``, ``Torch.hub.load``, ``Torch.set_num_threads``, ``Tensor.apply_`` - is ``None``: the
    pre-check calls nothing a dump could choose beyond the framework's numeric operators.
    """

    def __init__(self) -> None:
        found = set()
        for functions in torch.overrides.get_overridable_functions().values():
            for fn in functions:
                try:
                    found.add(fn)
                except TypeError:
                    pass
        self._overridable = found

    def _recordable(self, fn: Any) -> bool:
        try:
            if fn in self._overridable:
                return True
        except TypeError:  # unhashable
            return False
        return callable(fn) and not isinstance(fn, type) and (_compiled(fn) or _reroutes(fn))

    def __call__(self, api: str) -> Any | None:
        prefix, _, rest = api.partition(".")
        if prefix == "Aten":
            return self._aten(rest)
        path, _, attr = rest.rpartition(".")
        if not _operator_name(attr):
            return None
        if prefix == "Tensor" and not path:
            roots: tuple = (torch.Tensor,)
        elif prefix == "Functional" and not path:
            roots = (F, torch)
        elif prefix == "Torch" and (not path or path in _SUBMODULES):
            roots = (torch, F) if not path else (torch,)
        else:
            return None
        for root in roots:
            owner = root
            for part in filter(None, path.split(".")):
                owner = getattr(owner, part, None)
            fn = getattr(owner, attr, None)
            if fn is not None and self._recordable(fn):
                return fn
        return None

    @staticmethod
    def _aten(rest: str) -> Any | None:
        op, _, overload = rest.partition(".")
        if not op or op.startswith("_") or "." in overload or not _operator_name(op):
            return None
        packet = getattr(torch.ops.aten, op, None)
        if not isinstance(packet, torch._ops.OpOverloadPacket):
            return None
        return getattr(packet, overload, None) if overload else packet


def operators() -> Operators:
    """The collector's operator table (:attr:`probe_core.specs.CollectorSpec.operators`)."""
    return Operators()
