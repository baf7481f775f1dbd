"""Max/min/mean/norm of framework tensors, computed in float64.

Nothing here imports a framework at module load: torch is touched only when
the value is a torch tensor (torch is then already imported by the caller's
script), MindSpore tensors go through ``asnumpy()``.
"""

from __future__ import annotations

import math
import sys
from typing import Any


def is_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return True
    return hasattr(value, "asnumpy") and hasattr(value, "shape")


def tensor_stats(value: Any) -> dict[str, Any]:
    """{"shape", "dtype", "max", "min", "mean", "norm"} of one tensor (empty tensors: stats None)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        data = value.detach()
        shape, dtype = list(data.shape), str(data.dtype).replace("torch.", "")
        if data.numel() == 0:
            return {"shape": shape, "dtype": dtype, "max": None, "min": None, "mean": None, "norm": None}
        try:
            wide = data.to(torch.float64)
        except (RuntimeError, TypeError):  # devices without float64: widen on the host
            wide = data.cpu().to(torch.float64)
        values = (wide.max(), wide.min(), wide.mean(), wide.norm())
        return {"shape": shape, "dtype": dtype, **dict(zip(("max", "min", "mean", "norm"),
                                                            (_number(v.item()) for v in values), strict=True))}
    import numpy as np

    array = np.asarray(value.asnumpy() if hasattr(value, "asnumpy") else value)
    shape, dtype = list(array.shape), str(getattr(value, "dtype", array.dtype)).lower()
    if array.size == 0:
        return {"shape": shape, "dtype": dtype, "max": None, "min": None, "mean": None, "norm": None}
    wide = array.astype(np.float64)
    return {"shape": shape, "dtype": dtype, "max": _number(wide.max()), "min": _number(wide.min()),
            "mean": _number(wide.mean()), "norm": _number(np.linalg.norm(wide.reshape(-1)))}


def _number(value: Any) -> float | str:
    value = float(value)
    return value if math.isfinite(value) else str(value)


def named_parameters(model: Any) -> list[tuple[str, Any]]:
    """(name, parameter) of a torch module, a MindSpore cell, or a list of them (Megatron model chunks)."""
    if isinstance(model, (list, tuple)):
        if len(model) == 1:
            return named_parameters(model[0])
        return [(f"model{i}.{name}", p) for i, chunk in enumerate(model) for name, p in named_parameters(chunk)]
    if hasattr(model, "named_parameters"):
        return list(model.named_parameters())
    if hasattr(model, "parameters_and_names"):
        return [(name, p) for name, p in model.parameters_and_names()]
    raise TypeError(f"cannot list the parameters of a {type(model).__name__}; pass a torch.nn.Module or a "
                    "mindspore.nn.Cell")
