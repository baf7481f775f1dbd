"""Turn one dump.json entry into the node's input and output tables.

Nested arguments become dotted keys the way the viewer shows them:
``{entry}.input.0``, ``{entry}.input.1.0`` (a list argument), ``{entry}.input.dim``
(a keyword), ``{entry}.parameters.weight``, ``{entry}.output.0``; a
``parameters_grad`` entry gives ``{entry}.weight`` inputs and no outputs.
"""

from __future__ import annotations

from typing import Any

from probe_core.api import is_params_grad, native_flatten_entry
from probe_graph.model import TensorTable

INPUT_KEYS = (("input_args", "input"), ("input", "input"), ("input_kwargs", "input"), ("parameters", "parameters"))


def _flatten(value: Any, key: str, into: TensorTable) -> None:
    if isinstance(value, dict):
        if "type" in value:
            into[key] = value
            return
        items: Any = value.items()
    elif value is None:
        into[key] = {"value": None}  # a None argument keeps its slot
        return
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return
    for sub, item in items:
        if item.__class__ is dict and "type" in item:  # a tensor or scalar: most items, without a call
            into[f"{key}.{sub}"] = item
        else:
            _flatten(item, f"{key}.{sub}", into)


def python_flatten_entry(name: str, entry: dict[str, Any]) -> tuple[TensorTable, TensorTable]:
    """(inputs, outputs) of one entry, keyed by dotted argument names (:func:`flatten_entry`: the same in C,
    ``probe_core._reprs.flatten_entry``, where the extension is built)."""
    inputs: TensorTable = {}
    outputs: TensorTable = {}
    if not isinstance(entry, dict):
        return inputs, outputs
    if is_params_grad(name):
        for param, grads in entry.items():
            if isinstance(grads, list) and len(grads) == 1:
                _flatten(grads[0], f"{name}.{param}", inputs)
            else:
                _flatten(grads, f"{name}.{param}", inputs)
        return inputs, outputs
    for field, label in INPUT_KEYS:
        if field in entry:
            _flatten(entry[field], f"{name}.{label}", inputs)
    if "output" in entry:
        _flatten(entry["output"], f"{name}.output", outputs)
    return inputs, outputs


flatten_entry = native_flatten_entry or python_flatten_entry  # the C one is optional (probe-core's setup.py)
