"""Tensor-mode comparator: msprobe's real-data metrics, in float64, from the saved tensor files.

Columns: Cosine, EucDist, MaxAbsErr, MaxRelativeErr, One Thousandth Err Ratio,
Five Thousandths Err Ratio (the arrays are cast into float64 work buffers
first). Implements the comparator interface of
:mod:`probe_compare.comparator`; the loaded arrays are kept in
``pair.cache["arrays"]`` so other tensor-mode comparators reuse them.

NaN/Inf: positions where both sides hold the same non-finite value agree
(the seeds ignore NaN/Inf present on both sides); the other metrics are taken
over positions where both are finite, and a position finite on one side only
counts as an element over every error threshold. Relative errors divide by
``|bench|``; where the bench holds an exact 0, both sides are shifted by the
machine epsilon of the pair's float type first, as msprobe does (a finite
MaxRelativeErr of ``|target| / eps``; 0 where both are 0).
Cosine of two all-zero tensors is 1, of one all-zero tensor 0.
As msprobe: a 0-d or one-element tensor has no Cosine, EucDist or error ratios
(``unsupported``), only MaxAbsErr and MaxRelativeErr; an empty tensor has none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from probe_compare.api import LeafPair
from probe_core.api import DumpError, cosine
from probe_modes.tensor_io import load_array

COLUMNS = ("Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
           "Five Thousandths Err Ratio")


def arrays(pair: LeafPair) -> tuple[np.ndarray, np.ndarray]:
    """Both sides' tensors as numeric arrays (loaded once per row)."""
    if "arrays" not in pair.cache:
        npu, bench = _load_checked(pair.npu_path, pair.npu), _load_checked(pair.bench_path, pair.bench)
        if pair.postprocess:
            npu = _postprocess(npu, pair.postprocess.get(("npu", pair.npu.data_name), ()))
            bench = _postprocess(bench, pair.postprocess.get(("bench", pair.bench.data_name), ()))
        pair.cache["arrays"] = (npu, bench)
    return pair.cache["arrays"]


def _postprocess(array: np.ndarray, steps: Any) -> np.ndarray:
    """``probe compare --config``: multiply by calibration tensors, left (``mat @ x``) or right (``x @ mat``)."""
    for direction, calibration in steps:
        matrix = load_array(Path(calibration), calibration)
        try:
            array = np.matmul(matrix, array) if direction == "left" else np.matmul(array, matrix)
        except ValueError as exc:
            raise DumpError(f"--config: {calibration} cannot be {direction}-multiplied with a tensor of shape "
                            f"{list(array.shape)} ({exc}); check the tensor map of the post-process config") from None
    return array


def _load_checked(path: Any, leaf: Any) -> np.ndarray:
    """A leaf's tensor file, which must hold the shape dump.json records for it (else it is another tensor's)."""
    array = load_array(path, leaf.name)
    if leaf.shape is not None and tuple(array.shape) != tuple(leaf.shape):
        raise DumpError(f"{path}: holds a tensor of shape {list(array.shape)}, but dump.json records shape "
                        f"{list(leaf.shape)} for {leaf.name} (key \"shape\"); the tensor file does not belong to "
                        "this dump: copy the dump folder whole (dump.json with its dump_tensor_data/) or re-run the "
                        "dump; --lenient marks such rows as errors and goes on")
    return array


_SCRATCH: dict[int, np.ndarray] = {}


def _scratch(slot: int, size: int) -> np.ndarray:
    """A float64 work buffer of ``size`` elements, kept between calls (fresh big buffers cost page faults)."""
    buffer = _SCRATCH.get(slot)
    if buffer is None or buffer.size < size:
        buffer = _SCRATCH[slot] = np.empty(max(size, 1), dtype=np.float64)
    return buffer[:size]


UNSUPPORTED = "unsupported"  # msprobe's word for a metric a tensor's shape does not allow
#: What a 0-d or one-element tensor cannot have (msprobe: "This is type of 0-d tensor, can not calculate").
NEEDS_SEVERAL = ("Cosine", "EucDist", "One Thousandth Err Ratio", "Five Thousandths Err Ratio")


def _zero_bench_epsilon(npu: np.ndarray, bench: np.ndarray) -> tuple[np.dtype, float]:
    """The float type relative errors at bench zeros are taken in, and its epsilon (msprobe's rule)."""
    kinds = [a.dtype if a.dtype.kind == "f" else np.dtype(np.float64) for a in (npu, bench)]
    dtype = np.result_type(*kinds, np.float32)
    return dtype, float(np.finfo(dtype).eps)


def tensor_metrics(npu: np.ndarray, bench: np.ndarray) -> dict[str, Any]:
    """The six metrics of two same-shaped numeric arrays, in float64 (``None`` where they cannot be computed)."""
    if npu.shape != bench.shape:
        return dict.fromkeys(COLUMNS)
    if npu.size == 0:
        return dict.fromkeys(COLUMNS, UNSUPPORTED)
    values = _metrics(npu, bench)
    if npu.ndim == 0 or npu.size == 1:
        values.update(dict.fromkeys(NEEDS_SEVERAL, UNSUPPORTED))
    return values


def _metrics(npu: np.ndarray, bench: np.ndarray) -> dict[str, Any]:
    zero_dtype, epsilon = _zero_bench_epsilon(npu, bench)
    total = npu.size
    a, b = _scratch(0, total), _scratch(1, total)
    np.copyto(a, npu.reshape(-1), casting="unsafe")
    np.copyto(b, bench.reshape(-1), casting="unsafe")
    agree = mismatched_special = 0
    finite_a, finite_b = np.isfinite(a), np.isfinite(b)
    if not (finite_a.all() and finite_b.all()):  # the rare case: mask NaN/Inf out
        finite = finite_a & finite_b
        same_special = ~finite & ((a == b) | (np.isnan(a) & np.isnan(b)))
        agree = int(np.count_nonzero(same_special))
        mismatched_special = total - int(np.count_nonzero(finite)) - agree
        a, b = a[finite], b[finite]
    diff = np.subtract(a, b, out=_scratch(2, a.size))
    euc_dist = float(np.sqrt(np.dot(diff, diff)))
    np.abs(diff, out=diff)
    rel = np.abs(b, out=_scratch(3, b.size))
    zero_bench = rel == 0 if not rel.all() else None
    with np.errstate(divide="ignore", invalid="ignore"):
        np.divide(diff, rel, out=rel)
    if zero_bench is not None:  # msprobe: shift both by eps where the bench is 0, in the pair's float type
        shifted = a[zero_bench].astype(zero_dtype) + zero_dtype.type(epsilon)
        eps = zero_dtype.type(epsilon)
        rel[zero_bench] = np.abs((shifted - eps) / eps)
    cos = cosine(float(np.dot(a, b)), float(np.sqrt(np.dot(a, a))), float(np.sqrt(np.dot(b, b))))
    empty_error = np.inf if mismatched_special else 0.0
    return {
        "Cosine": cos,
        "EucDist": euc_dist,
        "MaxAbsErr": float(diff.max()) if diff.size else empty_error,
        "MaxRelativeErr": float(rel.max()) if rel.size else empty_error,
        "One Thousandth Err Ratio": (int(np.count_nonzero(rel < 0.001)) + agree) / total,
        "Five Thousandths Err Ratio": (int(np.count_nonzero(rel < 0.005)) + agree) / total,
    }


class TensorComparator:
    columns = COLUMNS
    placement = "metrics"

    def compare(self, pair: LeafPair) -> dict[str, Any]:
        if not pair.npu.is_tensor or not pair.bench.is_tensor:
            return {}
        npu, bench = arrays(pair)
        return tensor_metrics(npu, bench)
