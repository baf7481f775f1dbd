"""What config.json's per-tensor options do before the data mode sees a tensor: ``slice``, ``request_id``
and ``tensor_list`` (framework-neutral: only Python indexing and the data mode's own calls).

* ``slice`` — ``[{"dim": d, "begin": b, "end": e, "size": s}, ...]``: each tensor
  is cut to ``[b:e]`` along ``d`` (``size`` given: only tensors that long
  there) before its statistics are computed and its file is saved; the record
  shows the cut shape, as msprobe's does;
* ``request_id`` with ``start(scheduled_tokens={request: tokens, ...})`` — one
  more cut along dim 0 to that request's tokens (inference batches);
* ``tensor_list`` — in a statistics dump, the entries whose names contain one
  of its items also get their tensors saved whole (``data_name``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from probe_core.modes import DataMode


def cut(tensor: Any, items: Sequence[Mapping[str, int]]) -> Any:
    """``tensor`` cut by msprobe's ``slice`` items (an item for a dim it lacks, or a ``size`` it does not
    have there, is skipped); the tensor itself when nothing applies."""
    if not items:
        return tensor
    shape = tuple(tensor.shape)
    index: list[Any] = [slice(None)] * len(shape)
    applied = False
    for item in items:
        dim = item.get("dim", 0)
        if not item or dim >= len(shape):
            continue
        if item.get("size") is not None and shape[dim] != item["size"]:
            continue
        index[dim] = slice(item.get("begin", 0), item.get("end"))
        applied = True
    return tensor[tuple(index)] if applied else tensor


class TensorOptions:
    """Stands in for the data mode inside the value encoder when a per-tensor option is set."""

    def __init__(self, mode: DataMode, slices: Sequence[Mapping[str, int]], tensor_list: Sequence[str]) -> None:
        self.mode = mode
        self.slices = list(slices)
        self.tensor_list = tuple(tensor_list)
        self.request_slice: dict[str, int] | None = None

    @staticmethod
    def wanted(config: Any) -> bool:
        return bool(config.slice or config.tensor_list or config.request_id)

    def request_tokens(self, request_id: str, scheduled_tokens: Mapping[str, int]) -> bool:
        """Cut dim 0 to ``request_id``'s tokens of the batch ``scheduled_tokens`` describes (in its order);
        False when the request is not in the batch (the step is then not dumped)."""
        if request_id not in scheduled_tokens:
            self.request_slice = None
            return False
        begin = total = 0
        for request, tokens in scheduled_tokens.items():
            if request == request_id:
                begin = total
            total += int(tokens)
        self.request_slice = {"dim": 0, "size": total, "begin": begin,
                              "end": begin + int(scheduled_tokens[request_id])}
        return True

    def encode(self, tensor: Any, ops: Any, sink: Any, label: str) -> dict[str, Any]:
        items = self.slices + [self.request_slice] if self.request_slice else self.slices
        tensor = cut(tensor, items)
        record = self.mode.encode(tensor, ops, sink, label)
        if self.tensor_list and "data_name" not in record and any(item in sink.current for item in self.tensor_list):
            record["data_name"] = sink.save_tensor(tensor, label)
        return record
