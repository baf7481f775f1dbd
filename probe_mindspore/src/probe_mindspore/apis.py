"""Which MindSpore callables are recorded, and under which msprobe names.

* ``mindspore.mint.X`` → ``Mint.X``; ``mindspore.mint.nn.functional.X`` →
  ``MintFunctional.X``; ``mindspore.ops.X`` → ``Functional.X``;
  ``mindspore.communication.comm_func.X`` → ``Distributed.X``;
* ``Tensor`` methods and operators → ``Tensor.X`` (``x / y`` is
  ``Tensor.__truediv__``).

Only functions (not primitive classes, modules or decorators) are wrapped, and
calls that read metadata or drive autograd/graph compilation are never entries.
An entry is named by the public attribute the user reaches the function by, as msprobe names it:
``mint.flatten`` (a ``@jit_view_unsupported`` wrapper of MindSpore's) is ``Mint.flatten``, and the
implementation it calls, ``flatten_ext``, which ``mindspore.mint`` imports beside it, is no entry.
"""

from __future__ import annotations

import importlib
import inspect
import types
from collections.abc import Iterator
from typing import Any

from probe_core.api import OPERATOR_DUNDERS

#: (entry prefix, module) pairs whose public functions are wrapped.
NAMESPACES = (
    ("Mint", "mindspore.mint"),
    ("MintFunctional", "mindspore.mint.nn.functional"),
    ("Functional", "mindspore.ops"),
    ("Distributed", "mindspore.communication.comm_func"),
)

#: Where wrapped ops functions come from (leaves out grad/vmap/jit helpers, primitives and decorators).
_OP_MODULES = ("mindspore.ops.function", "mindspore.ops.auto_generate.gen_ops_def", "mindspore.ops.functional",
               "mindspore.mint", "mindspore.ops.operations.manually_defined", "mindspore.communication",
               "mindspore.ops.composite.math_ops")
_NOT_OP_MODULES = ("mindspore.ops.function.grad", "mindspore.ops.function.vmap_func",
                   "mindspore.ops.function.debug_func", "mindspore.ops.function.parameter_func",
                   "mindspore.ops.function.reshard_func")

#: Calls that read metadata, convert to Python/numpy, or drive autograd: never entries.
METADATA = frozenset({
    "asnumpy", "numpy", "item", "itemset", "tolist", "register_hook", "init_data", "set_data", "data_sync",
    "has_init", "set_const_arg", "set_init_flag", "storage_offset", "data_ptr", "untyped_storage", "dim",
    "numel", "nelement", "ndimension", "element_size", "stride", "get_bytes", "flush_from_cache", "offload",
    "load", "asnumpy_of_slice_persistent_data", "slice_num_of_persistent_data", "slice_shape_of_persistent_data",
    "typename", "tensor_weakref", "assign_value", "assign_value_cpp", "dtype", "ndim", "stop_gradient",
    "get_rank", "get_group_size", "get_cache_group_rank", "get_cache_group_size",
    "get_group_rank_from_world_rank", "deprecated", "jit_class", "default_handle", "P2POp", "CommHandle",
})


#: Thin Python aliases whose work is another recorded method: the inner call is the entry, as in msprobe
#: (``x.astype(t)`` is ``self.to(t)``, recorded as ``Tensor.to``).
DELEGATING = frozenset({"astype"})


def _skipped(name: str) -> bool:
    return name in METADATA or name.startswith(("_", "is_"))


#: MindSpore's wrappers of some public functions (``@jit_view_unsupported``: mint.flatten, mint.reshape, ...).
_VIEW_WRAPPERS = "mindspore.graph._check_supported"
#: Name endings of the implementation a namespace imports for one of its public functions (``flatten_ext``
#: for ``flatten``, ``hardtanh_op`` for ``hardtanh``, ``cdist_`` for ``cdist``).
_IMPLEMENTATION_ENDINGS = ("_ext", "_op", "_func", "_")


def _implementation(obj: Any) -> Any:
    """``obj``, or the function a MindSpore view wrapper of it calls (whose module says what it is)."""
    if (getattr(obj, "__module__", "") or "").startswith(_VIEW_WRAPPERS):
        inner = inspect.getclosurevars(obj).nonlocals.get("fn")
        if callable(inner):
            return inner
    return obj


def _is_op_function(obj: Any) -> bool:
    obj = _implementation(obj)
    if isinstance(obj, (type, types.ModuleType)) or not callable(obj):
        return False
    module = getattr(obj, "__module__", "") or ""
    return module.startswith(_OP_MODULES) and not module.startswith(_NOT_OP_MODULES)


def _is_implementation_alias(name: str, public: frozenset[str]) -> bool:
    """Whether ``name`` is a namespace's import of the implementation of one of its ``public`` names."""
    return name not in public and any(name.endswith(end) and name[:-len(end)] in public
                                      for end in _IMPLEMENTATION_ENDINGS)


def namespace_functions() -> Iterator[tuple[Any, str, str]]:
    """``(module, attribute, entry prefix)`` for every function to wrap in the API namespaces."""
    for prefix, module_name in NAMESPACES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        public = frozenset(getattr(module, "__all__", ()))
        for name in sorted(vars(module)):
            obj = vars(module)[name]
            if _skipped(name) or _is_implementation_alias(name, public) or not _is_op_function(obj):
                continue
            collective = (getattr(obj, "__module__", "") or "").endswith("comm_func")
            if collective != (prefix == "Distributed"):
                continue  # collectives are recorded as Distributed.* only
            yield module, name, f"{prefix}.{name}"


def tensor_methods(tensor_class: type) -> Iterator[tuple[str, str]]:
    """``(attribute, entry name)`` for every Tensor method and operator to wrap."""
    for name in dir(tensor_class):
        if name.startswith("__"):
            if name in OPERATOR_DUNDERS:
                yield name, f"Tensor.{name}"
            continue
        if _skipped(name) or name in DELEGATING:
            continue
        static = inspect.getattr_static(tensor_class, name, None)
        if isinstance(static, (property, staticmethod, classmethod, type)) or inspect.isdatadescriptor(static):
            continue
        if callable(static):
            yield name, f"Tensor.{name}"


#: Tensor methods that are no operators on values (device memory, offloading, hooks, dtype casts in place).
NOT_OPERATORS = frozenset({"hooks", "offload_file_path", "set_", "set_cast_dtype", "set_device_address",
                           "set_dtype", "register_backward_hook", "register_forward_hook"})


class Operators:
    """msprobe's recorded API names back to the MindSpore callables this collector records under them
    (``Mint.X``, ``MintFunctional.X``, ``Functional.X``, ``Tensor.X``); ``None`` for any other name, so
    that the pre-check calls nothing a dump could choose beyond MindSpore's operators. Collectives are
    not operators here (nothing to compare on one device)."""

    def __init__(self) -> None:
        import mindspore

        self._functions = {api: getattr(module, name) for module, name, api in namespace_functions()
                           if not api.startswith("Distributed.")}
        self._tensor = mindspore.Tensor
        self._methods = {api for name, api in tensor_methods(mindspore.Tensor) if name not in NOT_OPERATORS}

    def __call__(self, api: str) -> Any | None:
        if api in self._methods:
            return getattr(self._tensor, api.partition(".")[2], None)
        return self._functions.get(api)


def operators() -> Operators:
    """The collector's operator table (:attr:`probe_core.specs.CollectorSpec.operators`)."""
    return Operators()
