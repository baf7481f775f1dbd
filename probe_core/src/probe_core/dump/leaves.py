"""Flatten one dump entry into its leaves: one :class:`TensorMeta` per tensor or scalar.

Leaf names follow msprobe's compare rows: ``{entry}.input.{i}`` for
``input_args`` (nested: ``.input.{i}.{j}``), ``{entry}.input.{key}`` for
``input_kwargs``, ``{entry}.input.{i}`` / ``.output.{i}`` for backward
entries, ``{entry}.parameters.{name}`` for a module's parameters and
``{entry}.{name}`` for a ``parameters_grad`` entry (no list index there).
A ``null`` in a list is a leaf with every field ``None``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

#: dump.json key -> (row role, row name part). Order is the row order msprobe writes.
SECTIONS: tuple[tuple[str, str, str], ...] = (
    ("input_args", "input", ".input"),
    ("input_kwargs", "input", ".input"),
    ("input", "input", ".input"),
    ("output", "output", ".output"),
    ("parameters", "parameters", ".parameters"),
)
MAX_DEPTH = 64


class TensorMeta(NamedTuple):
    """One leaf of an entry: a tensor's metadata, or a non-tensor value.

    ``role`` is ``"input"``, ``"output"``, ``"parameters"`` or
    ``"parameters_grad"``; ``is_tensor`` is False for scalars, strings, dtypes,
    ... (then ``value`` holds the value and the statistics mirror it when it
    is a number, as msprobe does). ``raw`` is the leaf's dump.json object
    as written, where data modes find their own keys (``md5``, ...).
    ``data_name`` names the tensor file in ``dump_tensor_data/``. A named
    tuple: cheap to build by the hundred thousand, immutable.
    """

    name: str
    role: str
    type: str | None = None
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    max: Any = None
    min: Any = None
    mean: Any = None
    norm: Any = None
    requires_grad: bool | None = None
    raw: Mapping[str, Any] | None = None
    data_name: str | None = None
    value: Any = None
    is_tensor: bool = False
    problem: str | None = None  # what is malformed in this leaf's record (a statistic that is no number, ...)

    @property
    def stats(self) -> tuple[Any, Any, Any, Any]:
        """(Max, Min, Mean, Norm)."""
        return (self.max, self.min, self.mean, self.norm)


STAT_KEYS = ("Max", "Min", "Mean", "Norm")
_STAT_TYPES = (int, float, bool, type(None))  # msprobe writes bools for bool tensors, null when not computed


def _problem(data: dict, shape: Any) -> str | None:
    """What makes a tensor record unusable for compare (``None`` when it is sound)."""
    for key in STAT_KEYS:
        value = data.get(key)
        if not isinstance(value, _STAT_TYPES):
            return f'"{key}" is {_short(value)}, not a number'
    dtype = data.get("dtype")
    if dtype is not None and not isinstance(dtype, str):
        return f'"dtype" is {_short(dtype)}, not a type name'
    data_name = data.get("data_name")
    if data_name is not None and not isinstance(data_name, str):
        return f'"data_name" is {_short(data_name)}, not a file name'
    if isinstance(data_name, str) and (data_name.startswith(("/", "\\")) or "\x00" in data_name
                                       or ".." in data_name.replace("\\", "/").split("/")):
        return f'"data_name" {data_name!r} is not a file name inside dump_tensor_data/'
    if shape is not None and (not isinstance(shape, list) or not all(
            type(n) is int and n >= 0 for n in shape)):
        return f'"shape" is {_short(shape)}, not a list of sizes'
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


short_text = _short  # the public name (probe_core.api): a value's repr, cut to 60 characters


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _leaf(data: dict, name: str, role: str) -> TensorMeta:
    kind = _text(data.get("type"))
    shape = data.get("shape")
    is_tensor = isinstance(kind, str) and "Tensor" in kind or ("dtype" in data and "shape" in data and "value" not in data)
    if is_tensor:
        problem = _problem(data, shape)
        data_name = data.get("data_name") or None
        return TensorMeta(
            name, role, kind, _text(data.get("dtype")), tuple(shape) if isinstance(shape, list) else None,
            data.get("Max"), data.get("Min"), data.get("Mean"), data.get("Norm"),
            data.get("requires_grad"), data, data_name if problem is None else None, None, True, problem,
        )
    value = data.get("value")
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    data_name = data.get("data_name") or None
    return TensorMeta(
        name, role, kind, kind, (), number, number, number, number, data.get("requires_grad"),
        data, data_name if isinstance(data_name, str) else None, value, False,
    )


def _walk(node: Any, name: str, role: str, index_lists: bool, depth: int, out: list[TensorMeta]) -> None:
    if depth > MAX_DEPTH:
        raise ValueError(f"{name}: nesting deeper than {MAX_DEPTH} levels")
    if node is None:
        out.append(TensorMeta(name, role))
    elif type(node) is list:
        for i, item in enumerate(node):
            child = f"{name}.{i}" if index_lists else name
            if type(item) is dict and type(item.get("type")) is str:  # the common case, without recursion
                out.append(_leaf(item, child, role))
            else:
                _walk(item, child, role, index_lists, depth + 1, out)
    elif isinstance(node, dict):
        if isinstance(node.get("type"), str):
            out.append(_leaf(node, name, role))
        else:
            for key, item in node.items():
                _walk(item, f"{name}.{key}", role, index_lists, depth + 1, out)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            _walk(item, f"{name}.{i}" if index_lists else name, role, index_lists, depth + 1, out)


def leaves_of(entry_name: str, data: Any) -> list[TensorMeta]:
    """The leaves of one entry, in msprobe's row order (inputs, outputs, parameters)."""
    out: list[TensorMeta] = []
    if entry_name.endswith(".debug"):
        _walk(data, entry_name, "debug", True, 0, out)
    elif not isinstance(data, dict):
        pass
    elif ".parameters_grad" in entry_name and not any(key in data for key, _, _ in SECTIONS):
        _walk(data, entry_name, "parameters_grad", False, 0, out)
    else:
        for key, role, suffix in SECTIONS:
            if key in data:
                _walk(data[key], entry_name + suffix, role, True, 0, out)
    return out


def iter_leaves(entry_name: str, data: Any) -> Iterator[TensorMeta]:
    """Like :func:`leaves_of`, as an iterator."""
    return iter(leaves_of(entry_name, data))
