"""The tensor operations the framework-neutral engine and data modes need, for MindSpore.

Statistics are computed on the host with numpy — never with ``mint`` ops, some
of which (``mint.norm``, ``mint.linalg.vector_norm``, ...) have no CPU kernel —
as soon as a tensor is encoded, so later in-place changes cannot touch them; a
tensor seen again in the same batch reuses them (the cache is dropped at each
flush and before each in-place call).
bfloat16 has no numpy type: its statistics go through float32 (exact), and its
raw bytes (md5 mode) are the upper halves of the float32 words, i.e. the very
bytes the tensor holds, as the PyTorch side hashes them.
"""

from __future__ import annotations

from typing import Any

import mindspore as ms
import numpy as np
from mindspore.common import dtype as mstype
from probe_core.api import KINDS, TensorOps
from probe_core.api import host_stats as fused_stats

_WIDEN = (mstype.bfloat16,)


def to_numpy(tensor: ms.Tensor) -> np.ndarray:
    """The tensor's values as a numpy array (bfloat16 as float32)."""
    if tensor.dtype in _WIDEN:
        tensor = tensor.astype(mstype.float32)
    return tensor.asnumpy()


def host_stats(array: np.ndarray) -> tuple[Any, Any, Any, Any] | None:
    """(Max, Min, Mean, Norm) of an array, accumulated in float64; booleans give Max/Min only.

    A dense float array takes one pass (:func:`probe_core.api.host_stats`); the rest, and data
    with NaN or infinity, numpy's reductions.

    Integer tensors get all four, as floats — msprobe's MindSpore records (its PyTorch ones differ).
    """
    if array.size == 0 or np.iscomplexobj(array):
        return None
    if array.dtype == np.bool_:
        return bool(array.any()), bool(array.all()), None, None
    kind = KINDS.get(array.dtype.name)
    if kind is not None and (array.flags.c_contiguous or array.flags.f_contiguous):
        values = fused_stats(array.ctypes.data, array.size, kind)  # one pass, no float64 copy
        if values is not None:
            return values
    wide = array.astype(np.float64, copy=False)
    norm = float(np.sqrt(np.dot(wide.ravel(), wide.ravel()))) if np.isfinite(wide).all() \
        else float(np.linalg.norm(wide.ravel()))
    return float(array.max()), float(array.min()), float(wide.mean()), norm


class MindSporeTensorOps(TensorOps):
    """:class:`probe_core.collect.TensorOps` for ``mindspore.Tensor`` (and ``Parameter``).

    Statistics are cached per batch (``new_batch`` forgets them);
    ``once_per_batch`` and ``alias`` keep the base class's neutral defaults
    (a CRC and a file per tensor record; aliases are not tracked).
    """

    framework = "mindspore"
    tensor_suffix = ".npy"
    capabilities = frozenset({"new_batch", "nbytes"})

    def is_tensor(self, value: Any) -> bool:
        return isinstance(value, ms.Tensor)

    def describe(self, tensor: ms.Tensor) -> dict[str, Any]:
        return {"type": "mindspore.Tensor", "dtype": str(tensor.dtype), "shape": list(tensor.shape)}

    def requires_grad(self, tensor: ms.Tensor) -> None:
        """MindSpore tensors carry no such flag (PyNative decides at the grad call): unknown."""
        return None

    def __init__(self) -> None:
        self._seen: dict[int, tuple[ms.Tensor, Any]] = {}

    def new_batch(self) -> None:
        """Forget cached statistics (each flush, and before every in-place call)."""
        self._seen = {}

    def stats(self, tensor: ms.Tensor) -> Any:
        """Host statistics, computed once per tensor object and batch (a call's output is the next one's input)."""
        hit = self._seen.get(id(tensor))
        if hit is not None and hit[0] is tensor:
            return hit[1]
        result = None
        if tensor.dtype not in (mstype.complex64, mstype.complex128):
            result = host_stats(to_numpy(tensor))
        self._seen[id(tensor)] = (tensor, result)
        return result

    def fetch_stats(self, handles: list[Any]) -> list[tuple[Any, Any, Any, Any] | None]:
        return list(handles)  # computed at encode time already

    def raw_bytes(self, tensor: ms.Tensor) -> Any:
        if tensor.dtype in _WIDEN:
            words = np.ascontiguousarray(to_numpy(tensor)).view(np.uint32)
            return (words >> 16).astype("<u2").tobytes()
        return np.ascontiguousarray(tensor.asnumpy()).tobytes()

    def nbytes(self, tensor: ms.Tensor) -> int:
        return int(tensor.nbytes)

    def snapshot(self, tensor: ms.Tensor) -> np.ndarray:
        return np.array(to_numpy(tensor), copy=True)

    def save(self, array: np.ndarray, path: str) -> None:
        np.save(path, array, allow_pickle=False)

    def encode_other(self, value: Any) -> dict[str, Any] | None:
        if isinstance(value, mstype.Type):
            return {"type": "mindspore.dtype", "value": str(value)}
        return None

