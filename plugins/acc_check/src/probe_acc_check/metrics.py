"""Error metrics of one tested output against its benchmark (numpy, framework-neutral).

Values are compared in float64. The relative error of an element is
``|t - b| / max(|b|, s)`` with ``s`` the small-value threshold of the tested
dtype (1e-6 for float32, 1e-3 for float16/bfloat16), so that values near zero
are not judged by a relative error they cannot have. The ``*_ratio`` shares
count the elements *within* a bound (bigger is better), as msprobe's
"One Thousandth Err Ratio" does; the error shares (``inf_nan_err``,
``small_value_err``, ``binary_err``, ``ulp_ratio``) count the elements
*outside* one (smaller is better).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from probe_acc_check.dtypes import canonical, float_info


@dataclass(frozen=True)
class Metrics:
    """Every metric the details CSV shows; ``None`` where one does not apply (``N/A``).

    ``cosine``: cosine similarity (``None`` for fewer than two elements, or
    when every benchmark element is below the dtype's small-value threshold);
    ``max_abs_err``, ``max_rel_err``, ``mean_rel_err``; ``hundredth``,
    ``thousandth``, ``ten_thousandth``: shares of elements whose relative
    error is at most 1/100, 1/1000, 1/10000; ``inf_nan_err``: share whose
    inf/nan pattern differs; ``small_value_err``: share of the small values
    (below the dtype's threshold) whose absolute error exceeds the dtype's
    small-value tolerance; ``rmse``: root-mean-square error; ``eb``: error
    balance, the signed error sum over the benchmark's absolute sum (near 0
    when errors cancel, ±1 when all lean one way at full size);
    ``binary_err``: share of elements not equal to the benchmark rounded to
    the tested dtype (what a bit-exact operator gives); ``ulp_max``/``ulp_mean``:
    errors in units in the last place of the tested dtype; ``ulp_ratio``:
    share above the ULP threshold (1 for 16-bit floats, 32 for float32).
    """

    cosine: float | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    hundredth: float | None = None
    thousandth: float | None = None
    ten_thousandth: float | None = None
    inf_nan_err: float | None = None
    small_value_err: float | None = None
    rmse: float | None = None
    eb: float | None = None
    mean_rel_err: float | None = None
    binary_err: float | None = None
    ulp_max: float | None = None
    ulp_mean: float | None = None
    ulp_ratio: float | None = None


def round_to(values: np.ndarray, dtype: str) -> np.ndarray:
    """``values`` rounded to ``dtype`` as the frameworks cast (through float32), in float64."""
    kind = canonical(dtype)
    if kind not in ("float16", "bfloat16", "float32"):
        return values
    single = values.astype(np.float32)
    if kind != "bfloat16":
        return single.astype(kind).astype(np.float64)
    bits = single.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32)
    rounded = np.where(np.isnan(single), single.view(np.uint32), rounded)
    return rounded.view(np.float32).astype(np.float64)


def ulp_threshold(dtype: str) -> float:
    return 32.0 if canonical(dtype) == "float32" else 1.0


def _cosine(tested: np.ndarray, bench: np.ndarray, small: float) -> float | None:
    """Cosine similarity; ``None`` for fewer than two elements or a benchmark that is all small values
    (an exact zero computed as rounding noise has no direction to compare)."""
    if tested.size < 2 or float(np.max(np.abs(bench))) < small:
        return None
    scale = max(float(np.max(np.abs(tested))), float(np.max(np.abs(bench))))  # no overflow in the norms
    t, b = tested / scale, bench / scale
    nt, nb = float(np.linalg.norm(t)), float(np.linalg.norm(b))
    return float(np.dot(t, b) / (nt * nb)) if nt > 0.0 else 0.0


def _share(mask: np.ndarray) -> float:
    return float(np.mean(mask)) if mask.size else 0.0


def float_metrics(tested: np.ndarray, bench: np.ndarray, dtype: str) -> Metrics:
    """Metrics of a floating tensor output computed in ``dtype`` (the tested run's dtype)."""
    t = np.asarray(tested, dtype=np.float64).ravel()
    b = np.asarray(bench, dtype=np.float64).ravel()
    in_dtype = round_to(b, dtype)
    equal = (t == b) | (np.isnan(t) & np.isnan(b))
    same_bits = (t == in_dtype) | (np.isnan(t) & np.isnan(in_dtype))
    finite = np.isfinite(t) & np.isfinite(b)
    info = float_info(dtype)
    tf, bf = t[finite], b[finite]
    diff = tf - bf
    abs_err, abs_bench = np.abs(diff), np.abs(bf)
    rel = abs_err / np.maximum(abs_bench, info.small)
    small = abs_bench < info.small
    exponent = np.floor(np.log2(np.where(abs_bench > 0, abs_bench, 1.0)))
    exponent = np.where(abs_bench > 0, np.maximum(exponent, info.min_exp), info.min_exp)
    ulp = abs_err / np.exp2(exponent - info.mantissa)
    empty = not diff.size
    return Metrics(
        cosine=_cosine(tf, bf, info.small),
        max_abs_err=0.0 if empty else float(abs_err.max()),
        max_rel_err=0.0 if empty else float(rel.max()),
        hundredth=1.0 if empty else _share(rel <= 1e-2),
        thousandth=1.0 if empty else _share(rel <= 1e-3),
        ten_thousandth=1.0 if empty else _share(rel <= 1e-4),
        inf_nan_err=_share(~finite & ~equal),
        small_value_err=_share(abs_err[small] > info.small_atol),
        rmse=0.0 if empty else math.sqrt(float(np.mean(diff * diff))),
        eb=0.0 if empty else float(np.sum(diff) / max(float(np.sum(abs_bench)), np.finfo(np.float64).tiny)),
        mean_rel_err=0.0 if empty else float(rel.mean()),
        binary_err=_share(~same_bits),
        ulp_max=0.0 if empty else float(ulp.max()),
        ulp_mean=0.0 if empty else float(ulp.mean()),
        ulp_ratio=_share(ulp > ulp_threshold(dtype)),
    )


def binary_metrics(tested: object, bench: object) -> Metrics:
    """Integer, boolean and non-tensor outputs: only whether they are equal, element by element."""
    if isinstance(tested, np.ndarray) or isinstance(bench, np.ndarray):
        same = isinstance(tested, np.ndarray) and isinstance(bench, np.ndarray) and tested.shape == bench.shape
        return Metrics(binary_err=_share(tested != bench) if same else 1.0)
    return Metrics(binary_err=0.0 if tested == bench else 1.0)
