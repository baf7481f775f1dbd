"""The tensor operations the framework-neutral engine and data modes need, for PyTorch."""

from __future__ import annotations

from typing import Any

import torch

_LOW_PRECISION = (torch.float16, torch.bfloat16)


class TorchTensorOps:
    """:class:`probe_core.collect.TensorOps` for ``torch.Tensor``.

    Statistics are launched on the tensor's device as 0-d tensors and fetched
    by :meth:`fetch_stats` with one ``torch.stack(...).tolist()`` per device.
    A tensor seen twice in one batch (an API's output that is the next API's
    input, a module output equal to its last API's output) is computed once,
    unless it was modified in place in between (``_version``).
    """

    framework = "pytorch"
    tensor_suffix = ".pt"

    def __init__(self) -> None:
        self._seen: dict[int, tuple[torch.Tensor, int, Any]] = {}

    def is_tensor(self, value: Any) -> bool:
        return isinstance(value, torch.Tensor)

    def describe(self, tensor: torch.Tensor) -> dict[str, Any]:
        return {"type": "torch.Tensor", "dtype": str(tensor.dtype), "shape": list(tensor.shape)}

    def requires_grad(self, tensor: torch.Tensor) -> bool:
        return tensor.requires_grad

    def new_batch(self) -> None:
        self._seen = {}

    def stats(self, tensor: torch.Tensor) -> Any:
        key = id(tensor)
        hit = self._seen.get(key)
        version = tensor._version
        if hit is not None and hit[0] is tensor and hit[1] == version:
            return hit[2]
        handle = _launch_stats(tensor)
        self._seen[key] = (tensor, version, handle)
        return handle

    def fetch_stats(self, handles: list[Any]) -> list[tuple[Any, Any, Any, Any] | None]:
        by_device: dict[torch.device, list[torch.Tensor]] = {}
        for handle in handles:
            if handle is not None:
                by_device.setdefault(handle[1], []).extend(handle[2])
        values: dict[torch.device, list[float]] = {}
        with torch.no_grad():
            for device, scalars in by_device.items():
                values[device] = torch.stack(scalars).tolist()
        positions = dict.fromkeys(values, 0)
        out: list[tuple[Any, Any, Any, Any] | None] = []
        for handle in handles:
            if handle is None:
                out.append(None)
                continue
            kind, device, scalars = handle
            start = positions[device]
            got = values[device][start:start + len(scalars)]
            positions[device] = start + len(scalars)
            if kind == "f":
                out.append((got[0], got[1], got[2], got[3]))
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
    with torch.no_grad():
        t = tensor.detach()
        if t.is_floating_point():
            low, high = torch.aminmax(t)
            if t.dtype in _LOW_PRECISION:
                mean = torch.mean(t, dtype=torch.float32)
                norm = torch.linalg.vector_norm(t, dtype=torch.float32)
            else:
                mean = torch.mean(t)
                norm = torch.linalg.vector_norm(t)
            return ("f", t.device, (high, low, mean, norm))
        if t.dtype == torch.bool:
            return ("b", t.device, (t.any(), t.all()))
        low, high = torch.aminmax(t)
        return ("i", t.device, (high, low))
