"""The tensor operations the framework-neutral engine and data modes need, for PyTorch."""

from __future__ import annotations

import math
from typing import Any

import torch

from probe_core.collect.tensors import TensorOps

_LOW_PRECISION = (torch.float16, torch.bfloat16)


class TorchTensorOps(TensorOps):
    """:class:`probe_core.collect.TensorOps` for ``torch.Tensor``.

    Statistics are launched on the tensor's device as 0-d tensors and fetched
    by :meth:`fetch_stats` with one ``torch.stack(...).tolist()`` per device.
    A tensor seen twice in one batch (an API's output that is the next API's
    input, a module output equal to its last API's output) is computed once,
    unless it was modified in place in between (``_version``).
    """

    framework = "pytorch"
    tensor_suffix = ".pt"
    capabilities = frozenset({"new_batch", "cached_checksum", "alias"})

    def __init__(self) -> None:
        self._seen: dict[int, tuple[torch.Tensor, int, Any]] = {}
        self._aliases: dict[int, tuple[torch.Tensor, int, torch.Tensor, int]] = {}
        self._checksums: dict[int, tuple[torch.Tensor, int, str]] = {}

    def is_tensor(self, value: Any) -> bool:
        return isinstance(value, torch.Tensor)

    def describe(self, tensor: torch.Tensor) -> dict[str, Any]:
        return {"type": "torch.Tensor", "dtype": str(tensor.dtype), "shape": list(tensor.shape)}

    def requires_grad(self, tensor: torch.Tensor) -> bool:
        return tensor.requires_grad

    def new_batch(self) -> None:
        self._seen = {}
        self._aliases = {}
        self._checksums = {}

    def cached_checksum(self, tensor: torch.Tensor, compute: Any) -> str:
        """``compute()`` once per tensor and version within a batch (md5 mode)."""
        key = id(tensor)
        hit = self._checksums.get(key)
        version = tensor._version
        if hit is not None and hit[0] is tensor and hit[1] == version:
            return hit[2]
        value = compute()
        self._checksums[key] = (tensor, version, value)
        return value

    def alias(self, view: Any, source: Any) -> None:
        """``view`` holds exactly ``source``'s values (reshape, transpose, ...): its statistics are ``source``'s."""
        if isinstance(view, torch.Tensor) and isinstance(source, torch.Tensor) and view is not source and \
                view.dtype == source.dtype and view.numel() == source.numel():
            self._aliases[id(view)] = (view, view._version, source, source._version)

    def stats(self, tensor: torch.Tensor) -> Any:
        key = id(tensor)
        hit = self._seen.get(key)
        version = tensor._version
        if hit is not None and hit[0] is tensor and hit[1] == version:
            return hit[2]
        same = self._aliases.get(key)
        if same is not None and same[0] is tensor and same[1] == version and same[2]._version == same[3]:
            handle = self.stats(same[2])
        else:
            handle = _launch_stats(tensor)
        self._seen[key] = (tensor, version, handle)
        return handle

    def fetch_stats(self, handles: list[Any]) -> list[tuple[Any, Any, Any, Any] | None]:
        by_device: dict[torch.device, list[torch.Tensor]] = {}
        for handle in handles:
            if handle is not None:
                by_device.setdefault(handle[1], []).extend(handle[2])
        values: dict[torch.device, list[float]] = {}
        for device, scalars in by_device.items():  # the scalars come from detached tensors: no graph
            values[device] = torch.stack(scalars).tolist()
        positions = dict.fromkeys(values, 0)
        out: list[tuple[Any, Any, Any, Any] | None] = []
        for handle in handles:
            if handle is None:
                out.append(None)
                continue
            kind, device, scalars, count = handle
            start = positions[device]
            got = values[device][start:start + len(scalars)]
            positions[device] = start + len(scalars)
            if kind == "q":  # sum of squares
                out.append((got[0], got[1], got[2] / count, math.sqrt(got[3]) if got[3] >= 0 else got[3]))
            elif kind == "n":  # norm
                out.append((got[0], got[1], got[2] / count, got[3]))
            elif kind == "i":
                out.append((int(got[0]), int(got[1]), None, None))
            else:
                out.append((bool(got[0]), bool(got[1]), None, None))
        return out

    def raw_bytes(self, tensor: torch.Tensor) -> Any:
        flat = tensor.detach().reshape(-1)
        if flat.device.type != "cpu":
            flat = flat.cpu()
        flat = flat.contiguous()
        if flat.numel() == 0:
            return b""
        return flat.view(torch.uint8).numpy()

    def snapshot(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.detach().clone()

    def save(self, tensor: torch.Tensor, path: str) -> None:
        torch.save(tensor, path)

    def encode_other(self, value: Any) -> dict[str, Any] | None:
        if isinstance(value, torch.dtype):
            return {"type": "torch.dtype", "value": str(value)}
        if isinstance(value, torch.device):
            return {"type": "torch.device", "value": str(value)}
        if isinstance(value, torch.Size):
            return {"type": "torch.Size", "value": list(value)}
        if isinstance(value, torch.memory_format):
            return {"type": "torch.memory_format", "value": str(value)}
        return None


def _launch_stats(tensor: torch.Tensor) -> Any:
    """(kind, device, [0-d tensors]) — no host synchronisation."""
    if tensor.numel() == 0 or tensor.is_complex() or tensor.is_meta or tensor.layout != torch.strided:
        return None
    t = tensor.detach()  # detached: no autograd graph (cheaper than a no_grad context per tensor)
    if t.is_floating_point() and t.element_size() == 1:  # float8: most reductions have no kernel for it
        t = t.float()
    if t.is_floating_point():
        # amax + amin + sum + sum of squares (measured on CPU: less than aminmax + mean + vector_norm);
        # mean and norm are finished on the host after the fetch
        high, low = t.amax(), t.amin()
        if t.dtype in _LOW_PRECISION:
            total = torch.sum(t, dtype=torch.float32)
            squares = torch.linalg.vector_norm(t, dtype=torch.float32)
            return ("n", t.device, (high, low, total, squares), t.numel())
        total = t.sum()
        if t.device.type == "cpu" and t.dtype != torch.float64:
            # CPU sums cascade (error ~log n ulp) but dot and vector_norm accumulate in one line: a float32
            # Norm of a million -1e4s is 1.6e-4 off, far above the float64 bench it is compared with
            return ("q", t.device, (high, low, total, torch.sum(t * t)), t.numel())
        return ("n", t.device, (high, low, total, torch.linalg.vector_norm(t)), t.numel())
    if t.dtype == torch.bool:
        return ("b", t.device, (t.any(), t.all()), 0)
    return ("i", t.device, (t.amax(), t.amin()), 0)
