"""Tensor-mode comparator: msprobe's real-data metrics, in float64, from the saved tensor files.

Columns: Cosine, EucDist, MaxAbsErr, MaxRelativeErr, One Thousandth Err Ratio,
Five Thousandths Err Ratio (the arrays are cast into float64 work buffers
first). Implements the comparator interface of
:mod:`probe_core.compare.comparator`; the loaded arrays are kept in
``pair.cache["arrays"]`` so other tensor-mode comparators reuse them.

NaN/Inf: positions where both sides hold the same non-finite value agree
(the seeds ignore NaN/Inf present on both sides); the other metrics are taken
over positions where both are finite, and a position finite on one side only
counts as an element over every error threshold. Relative errors divide by
``|bench|``; where the bench is 0 a non-zero difference is infinitely large.
Cosine of two all-zero tensors is 1, of one all-zero tensor 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from probe_core.compare import metrics
from probe_core.compare.comparator import LeafPair
from probe_core.errors import DumpError
from probe_modes.tensor_io import load_array

COLUMNS = ("Cosine", "EucDist", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
           "Five Thousandths Err Ratio")


def arrays(pair: LeafPair) -> tuple[np.ndarray, np.ndarray]:
    """Both sides' tensors as numeric arrays (loaded once per row)."""
    if "arrays" not in pair.cache:
        pair.cache["arrays"] = (_load_checked(pair.npu_path, pair.npu), _load_checked(pair.bench_path, pair.bench))
    return pair.cache["arrays"]


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


def tensor_metrics(npu: np.ndarray, bench: np.ndarray) -> dict[str, Any]:
    """The six metrics of two same-shaped numeric arrays, in float64 (``None`` where they cannot be computed)."""
    if npu.shape != bench.shape or npu.size == 0:
        return dict.fromkeys(COLUMNS)
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
    if zero_bench is not None:  # 0/0 is no error; x/0 stays inf
        rel[zero_bench & (diff == 0)] = 0.0
    cosine = metrics.cosine(float(np.dot(a, b)), float(np.sqrt(np.dot(a, a))), float(np.sqrt(np.dot(b, b))))
    empty_error = np.inf if mismatched_special else 0.0
    return {
        "Cosine": cosine,
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
