"""The tensor operations the framework-neutral engine and data modes need, for MindSpore.

Statistics are started when a tensor is encoded, so later in-place changes cannot touch them, and
resolved once per batch by :meth:`MindSporeTensorOps.fetch_stats`, as on the PyTorch side:

* a float tensor in host memory (the CPU target), dense or a view whose rows are evenly spaced, gets
  them at once from one pass over its memory (:func:`probe_core.api.host_stats`, reading
  ``Tensor.data_ptr()``, which waits for the op that writes it): no ``asnumpy``, no numpy array;
* a float tensor on an accelerator (Ascend, GPU) gets them from MindSpore ops on its device (max, min,
  sum and sum of squares, in float32 for the 16-bit types, stacked into one small tensor), and the
  batch's are fetched with one ``stack`` and one ``asnumpy``;
* the rest (integers, booleans, overlapping views, NaN or infinity, no kernel built) on the host with
  numpy's reductions in float64 — never with ``mint`` ops, some of which (``mint.norm``,
  ``mint.linalg.vector_norm``, ...) have no CPU kernel.

A tensor seen again in the same batch reuses its statistics (the cache is dropped at each flush and
before each in-place call).
bfloat16 has no numpy type: its statistics go through float32 (exact), and its
raw bytes (md5 mode) are the upper halves of the float32 words, i.e. the very
bytes the tensor holds, as the PyTorch side hashes them.
"""

from __future__ import annotations

from typing import Any

import mindspore as ms
import numpy as np
from mindspore import ops
from mindspore.common import dtype as mstype
from mindspore.common.api import _no_grad
from probe_core.api import KINDS, TensorOps, row_layout
from probe_core.api import host_stats as fused_stats

_WIDEN = (mstype.bfloat16,)
#: The kernel's ``kind`` of each MindSpore float type (:data:`probe_core.api.KINDS`).
_KINDS = {getattr(mstype, name): kind for name, kind in KINDS.items()}
#: Float types reduced on the device in float32 (no 16-bit accumulation; some have no reduce kernel).
_LOW_PRECISION = (mstype.float16, mstype.bfloat16)
_COMPLEX = (mstype.complex64, mstype.complex128)


class DtypeFacts:
    """What collection asks of a MindSpore dtype, worked out once per dtype (see :func:`dtype_facts`)."""

    __slots__ = ("name", "kind", "is_float", "low_precision", "is_complex")

    def __init__(self, dtype: Any) -> None:
        self.name = str(dtype)  # describe()'s "dtype"
        self.kind = _KINDS.get(dtype)  # the host kernel's kind, None where it reads no such type
        self.is_float = dtype in mstype.float_type  # may need a gradient
        self.low_precision = dtype in _LOW_PRECISION  # reduced in float32 on a device
        self.is_complex = dtype in _COMPLEX  # no statistics


_FACTS: dict[int, tuple[Any, DtypeFacts]] = {}  # id(dtype) -> (dtype, its facts); the entry keeps dtype alive
_FACTS_MAX = 256  # dtypes are module-level singletons; a build that makes new ones per tensor is not cached


def dtype_facts(dtype: Any) -> DtypeFacts:
    """The facts of ``dtype``, looked up by identity: hashing or comparing a MindSpore dtype runs C++ through
    Python (1-4 us a time), and every tensor a call records asks its dtype several questions."""
    hit = _FACTS.get(id(dtype))
    if hit is not None and hit[0] is dtype:
        return hit[1]
    facts = DtypeFacts(dtype)
    if len(_FACTS) < _FACTS_MAX:
        _FACTS[id(dtype)] = (dtype, facts)
    return facts

# Primitive instances of our own: never the recording wrappers of ``ops``/``Tensor`` methods, never
# the primitives of a network's cells.
_MAX, _MIN, _SUM = ops.ReduceMax(), ops.ReduceMin(), ops.ReduceSum()
_MUL, _STACK, _CAST = ops.Mul(), ops.Stack(), ops.Cast()


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


def memory_stats(tensor: ms.Tensor, kind: int, size: int) -> tuple[float, float, float, float] | None:
    """The kernel's pass over a tensor in host memory, read where it lies (``data_ptr`` waits for the op
    writing it and points at the view's first element): a dense block in any order (a transpose), or
    evenly spaced rows (a chunk of ``split``); None for another layout, or where the kernel declines
    (NaN, infinity, not built)."""
    if tensor.is_contiguous():
        return fused_stats(tensor.data_ptr(), size, kind)
    layout = row_layout(tensor.shape, tensor.stride())
    if layout is None:
        return None
    rows, length, step = layout
    return fused_stats(tensor.data_ptr(), length, kind, rows, step * tensor.itemsize)


def launch_stats(tensor: ms.Tensor) -> tuple[Any, int]:
    """(max, min, sum, sum of squares) of a float tensor as one 1-D tensor on its own device, computed by
    MindSpore ops without a host transfer or an autograd record; with the element count."""
    with _no_grad():
        if dtype_facts(tensor.dtype).low_precision:
            tensor = _CAST(tensor, mstype.float32)
        return _STACK((_MAX(tensor), _MIN(tensor), _SUM(tensor), _SUM(_MUL(tensor, tensor)))), tensor.size


class MindSporeTensorOps(TensorOps):
    """:class:`probe_core.collect.TensorOps` for ``mindspore.Tensor`` (and ``Parameter``).

    Statistics are cached per batch (``new_batch`` forgets them);
    ``once_per_batch`` and ``alias`` keep the base class's neutral defaults
    (a CRC and a file per tensor record; aliases are not tracked).

    A handle is ``("h", values)`` (resolved at once on the host) or ``("d", stacked, count)`` (reductions
    on the device, fetched with the batch). ``device_stats=True`` takes the device path for CPU tensors
    too (what an accelerator's tensors always get): to check one path against the other.
    """

    framework = "mindspore"
    tensor_suffix = ".npy"
    capabilities = frozenset({"new_batch", "nbytes"})

    def __init__(self, device_stats: bool = False) -> None:
        self.device_stats = device_stats
        self._seen: dict[int, tuple[ms.Tensor, Any]] = {}
        self._described: tuple[Any, DtypeFacts | None] = (None, None)  # the tensor describe() saw last, its facts

    def is_tensor(self, value: Any) -> bool:
        return isinstance(value, ms.Tensor)

    def describe(self, tensor: ms.Tensor) -> dict[str, Any]:
        dtype = tensor.dtype
        hit = _FACTS.get(id(dtype))  # dtype_facts(dtype) without the call: every recorded tensor comes here
        facts = hit[1] if hit is not None and hit[0] is dtype else dtype_facts(dtype)
        self._described = (tensor, facts)  # stats() of the same tensor follows at once: its facts are known
        return {"type": "mindspore.Tensor", "dtype": facts.name, "shape": list(tensor.shape)}

    def requires_grad(self, tensor: ms.Tensor) -> None:
        """MindSpore tensors carry no such flag (PyNative decides at the grad call): unknown."""
        return None

    def new_batch(self) -> None:
        """Forget cached statistics (each flush, and before every in-place call)."""
        self._seen = {}
        self._described = (None, None)

    def stats(self, tensor: ms.Tensor) -> Any:
        """A statistics handle, made once per tensor object and batch (a call's output is the next one's input):
        a float tensor's in host memory at once by the kernel (a dense block; memory_stats works out a strided
        view's rows), on an accelerator by MindSpore ops, the rest (and what the kernel declines) by numpy."""
        key = id(tensor)
        hit = self._seen.get(key)
        if hit is not None and hit[0] is tensor:
            return hit[1]
        described, facts = self._described
        if described is not tensor:
            facts = dtype_facts(tensor.dtype)
        kind, size, handle = facts.kind, tensor.size, None
        if kind is not None and size:
            if self.device_stats or tensor.device != "CPU":
                handle = ("d", *launch_stats(tensor))
            else:
                values = fused_stats(tensor.data_ptr(), size, kind) if tensor.is_contiguous() \
                    else memory_stats(tensor, kind, size)
                handle = None if values is None else ("h", values)
        if handle is None and not facts.is_complex:
            values = host_stats(to_numpy(tensor))
            handle = None if values is None else ("h", values)
        self._seen[key] = (tensor, handle)
        return handle

    def fetch_stats(self, handles: list[Any]) -> list[tuple[Any, Any, Any, Any] | None]:
        """The batch's values; the device reductions of each float type come with one ``asnumpy``."""
        by_dtype: dict[Any, list[Any]] = {}
        for handle in handles:
            if handle is not None and handle[0] == "d":
                by_dtype.setdefault(handle[1].dtype, []).append(handle[1])
        rows = {dtype: iter(_STACK(stacked).asnumpy().tolist()) for dtype, stacked in by_dtype.items()}
        out: list[tuple[Any, Any, Any, Any] | None] = []
        for handle in handles:
            if handle is None or handle[0] == "h":
                out.append(None if handle is None else handle[1])
                continue
            high, low, total, squares = next(rows[handle[1].dtype])
            out.append((high, low, total / handle[2], squares ** 0.5))
        return out

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

