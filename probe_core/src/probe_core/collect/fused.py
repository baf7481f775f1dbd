"""Max, Min, Mean and Norm of floats in host memory (one block, or evenly spaced rows) in one pass.

The frameworks' own reductions read a tensor four times (max, min, sum, norm); :func:`host_stats` reads
it once, in the small C extension ``probe_core.collect._fused`` (built with probe-core when a C compiler
is there; the extension is optional). Sums are kept in float64, so a float32 tensor's mean and norm are
closer to the exact ones than the frameworks' float32 reductions.

Both collectors use it for CPU tensors of the four float types; their own reductions remain for the
rest (accelerator tensors, integers, other strided views) and whenever :func:`host_stats` returns None:

* the extension is not built, or ``PROBE_FUSED_STATS=0`` is set (to rule it out when a number looks
  wrong; ``PROBE_FUSED_STATS=generic`` keeps the kernel but not its AVX2 build);
* a value is NaN or infinite: the framework then gives its own NaN and infinity semantics;
* float32 squares are in the subnormal range (a norm below about 3.6e-15 that is not zero): the
  framework's float32 norm loses them as this kernel would, and stays the reference for it.
"""

from __future__ import annotations

import math
import os

try:
    from probe_core.collect import _fused
except ImportError:  # built without a C compiler
    _fused = None

#: The ``kind`` codes of :func:`host_stats`, by the dtype's common name.
KINDS = {"float32": 0, "float64": 1, "bfloat16": 2, "float16": 3}

_FLOAT64 = KINDS["float64"]
#: A sum of squares below this (2**-96) may hold float32 squares that lost bits as subnormals.
_TINY_SQUARES = 2.0 ** -96

_SWITCH = os.environ.get("PROBE_FUSED_STATS", "1")
_ENABLED = _fused is not None and _SWITCH != "0"
if _ENABLED and _SWITCH == "generic":
    _fused.use("generic")
_stats = _fused.stats if _ENABLED else None


def loops() -> str | None:
    """Which build of the kernel runs: ``"avx2"`` (x86-64 with AVX2 and FMA), ``"generic"``, or None."""
    return _fused.which() if _ENABLED else None


def available() -> bool:
    """Whether :func:`host_stats` computes anything (the extension is built and not switched off)."""
    return _ENABLED


def host_stats(address: int, count: int, kind: int, rows: int = 1,
               row_stride: int = 0) -> tuple[float, float, float, float] | None:
    """(Max, Min, Mean, Norm) of ``count`` elements of type ``kind`` stored densely from ``address``, or of
    ``rows`` such runs, each ``row_stride`` bytes after the one before (a slice of a tensor's last dimension).

    The caller owns the memory and keeps it alive and unchanged during the call; the elements' order
    does not matter (a transposed tensor is read in its memory order). None when the kernel is not
    available, the data holds a NaN or an infinity, or its norm is within float32's subnormal range.
    """
    if not _ENABLED or count <= 0 or rows <= 0:
        return None
    high, low, total, squares = _stats(address, count, kind, rows, row_stride)
    if not math.isfinite(total + squares) or (squares < _TINY_SQUARES and kind != _FLOAT64 and (high or low)):
        return None
    return high, low, total / (count * rows), math.sqrt(squares)


def row_layout(shape: tuple[int, ...], strides: tuple[int, ...],
               shortest_row: int = 1) -> tuple[int, int, int] | None:
    """(rows, row length, row stride in elements) of a strided tensor whose elements lie as evenly spaced
    runs of dense elements, for :func:`host_stats`: its dimensions taken in memory order, a transpose is
    one run, a chunk of the last dimension one run per row. None for overlapping or unevenly spaced rows,
    and for rows shorter than ``shortest_row`` (a framework's own strided reduction may be cheaper)."""
    dims = sorted((d for d in range(len(shape)) if shape[d] != 1), key=lambda d: -strides[d])
    length, inner = 1, len(dims)
    while inner and strides[dims[inner - 1]] == length:  # the dense run at the bottom
        inner -= 1
        length *= shape[dims[inner]]
    if not inner:
        return 1, length, 0
    step = expected = strides[dims[inner - 1]]
    rows = 1
    for d in reversed(dims[:inner]):  # the rest must step evenly from row to row
        if strides[d] != expected:
            return None
        rows *= shape[d]
        expected = strides[d] * shape[d]
    return (rows, length, step) if step >= length >= shortest_row else None
