"""Turning call arguments and results into dump.json values (framework-neutral).

Tensors go to the active data mode; Python values become ``{"type", "value"}``;
lists, tuples and dicts keep their structure. ``label`` tracks where a tensor
sits (``input.0``, ``kwargs.dim``, ``output.1.0``), which tensor mode uses for
file names.
"""

from __future__ import annotations

from typing import Any

from probe_core.collect.tensors import TensorOps, TensorSink
from probe_core.modes import DataMode

_SCALARS = (bool, int, float, str)


class ValueEncoder:
    """Encodes arbitrary call values with one data mode and one framework's tensor ops."""

    def __init__(self, ops: TensorOps, mode: DataMode, sink: TensorSink) -> None:
        self.ops = ops
        self.mode = mode
        self.sink = sink
        self._is_tensor = ops.is_tensor

    def encode(self, value: Any, label: str) -> Any:
        if self._is_tensor(value):
            return self.mode.encode(value, self.ops, self.sink, label)
        kind = type(value)
        if kind in _SCALARS:
            return {"type": kind.__name__, "value": value}
        if value is None:
            return None
        if kind is list or kind is tuple:
            return [self.encode(item, f"{label}.{i}") for i, item in enumerate(value)]
        if isinstance(value, dict):
            return {str(key): self.encode(item, f"{label}.{key}") for key, item in value.items()}
        if kind is slice:
            return {"type": "slice", "value": [_plain(value.start), _plain(value.stop), _plain(value.step)]}
        if value is Ellipsis:
            return {"type": "ellipsis", "value": "..."}
        other = self.ops.encode_other(value)
        if other is not None:
            return other
        if isinstance(value, (list, tuple)):  # named tuples, torch.return_types
            return [self.encode(item, f"{label}.{i}") for i, item in enumerate(value)]
        if isinstance(value, _SCALARS):  # numpy scalars, int/float subclasses
            return {"type": kind.__name__, "value": value.item() if hasattr(value, "item") else value}
        return {"type": f"{kind.__module__}.{kind.__qualname__}" if kind.__module__ != "builtins" else kind.__name__}

    def encode_args(self, args: Any, prefix: str) -> list[Any]:
        return [self.encode(item, f"{prefix}.{i}") for i, item in enumerate(args)]

    def encode_kwargs(self, kwargs: dict[str, Any] | None) -> dict[str, Any]:
        if not kwargs:
            return {}
        return {key: self.encode(item, f"kwargs.{key}") for key, item in kwargs.items()}

    def encode_output(self, output: Any) -> list[Any]:
        if isinstance(output, (list, tuple)) and not self._is_tensor(output):
            return self.encode_args(output, "output")
        return [self.encode(output, "output.0")]


def _plain(value: Any) -> Any:
    return value if value is None or isinstance(value, _SCALARS) else str(value)
