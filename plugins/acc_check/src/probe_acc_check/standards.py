"""Precision standards: how one tested output is judged against its benchmark.

A standard is any object with two methods::

    applies(check: OutputCheck) -> bool    # does it judge this output?
    judge(check: OutputCheck) -> Verdict   # pass, warning or error, and why

Standards are registered with the ``probe_acc_standards`` hook
(:class:`~probe_core.specs.AccStandardSpec`, whose ``load`` returns the
object) and consulted in ``(priority, name)`` order: the first whose
``applies`` is true judges the output. msprobe's standards come with
priorities 100-1000, so a third-party standard for its own operator takes a
priority below 100 to be asked first. An output no standard claims is a
``SKIP`` row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from probe_core.api import AccStandardSpec

from probe_acc_check.cases import op_of
from probe_acc_check.dtypes import canonical, float_info

if TYPE_CHECKING:  # numpy stays unimported until a pre-check runs
    from probe_acc_check.backend import Output
    from probe_acc_check.metrics import Metrics

PASS, WARNING, ERROR, SKIP = "pass", "warning", "error", "SKIP"
_LOW = ("float16", "bfloat16")


@dataclass(frozen=True)
class OutputCheck:
    """One output of one API call, as a standard sees it.

    ``api``: ``Functional.gelu``; ``name``: the details row's name
    (``Functional.gelu.0.forward.output.0``); ``direction``: ``forward`` or
    ``backward`` (then the output is the gradient of an input); ``tested``
    and ``bench``: the two runs' :class:`~probe_acc_check.backend.Output`
    (numpy values in ``.value``); ``metrics``: the computed
    :class:`~probe_acc_check.metrics.Metrics`; ``terms``: how many terms
    each element of a gradient sums (:func:`~probe_acc_check.judge.summed_terms`:
    the broadcast dimensions of an element-wise op's input, the windows of a
    max pooling that share an element), 1 for forward outputs.
    """

    api: str
    name: str
    direction: str
    tested: Output
    bench: Output
    metrics: Metrics
    terms: int = 1

    @property
    def op(self) -> str:
        """The operator's own name: ``gelu`` for ``Functional.gelu``."""
        return op_of(self.api)

    @property
    def dtype(self) -> str:
        """The tested output's dtype, framework-neutral (``bfloat16``)."""
        return canonical(self.tested.dtype)


@dataclass(frozen=True)
class Verdict:
    """``status``: ``pass``, ``warning`` or ``error``; ``message``: which criterion failed, with the numbers."""

    status: str
    message: str = ""


def _pct(share: float) -> str:
    return f"{share:.3%}"


class BinaryConsistency:
    """Integer, boolean and non-tensor outputs, and operators that only move or select values, must equal
    the benchmark element for element (msprobe's binary-consistency standard)."""

    OPS = frozenset({
        "reshape", "view", "view_as", "transpose", "transpose_", "permute", "flatten", "unflatten", "contiguous",
        "chunk", "split", "split_with_sizes", "tensor_split", "unbind", "cat", "concat", "stack", "squeeze",
        "unsqueeze", "expand", "expand_as", "broadcast_to", "select", "narrow", "__getitem__", "t", "swapaxes",
        "swapdims", "movedim", "clone", "detach", "tile", "repeat", "flip", "roll", "masked_fill", "masked_fill_",
        "fill_", "zero_", "zeros_like", "ones_like", "relu", "relu_", "neg", "neg_", "__neg__", "abs", "abs_",
        "maximum", "minimum", "floor", "ceil", "round", "sign", "tril", "triu", "pad", "one_hot", "gather",
        "index_select", "sort", "topk", "where", "max_pool2d", "max_pool3d", "argmax", "argmin", "type_as",
    })

    def applies(self, check: OutputCheck) -> bool:
        return not check.tested.floating or (check.op in self.OPS and check.terms == 1)

    def judge(self, check: OutputCheck) -> Verdict:
        err = check.metrics.binary_err or 0.0
        if err == 0.0:
            return Verdict(PASS)
        return Verdict(ERROR, f"binary consistency: {_pct(err)} of the elements differ from the benchmark")


class AbsoluteThreshold:
    """Element-wise arithmetic (add, sub, mul, div, ...): every element within the dtype's relative
    tolerance (float32 1e-6, float16 1e-3, bfloat16 4e-3), small values within its absolute tolerance,
    and no inf/nan the benchmark does not have (msprobe's absolute-threshold standard)."""

    OPS = frozenset({
        "add", "add_", "__add__", "__iadd__", "__radd__", "sub", "sub_", "rsub", "__sub__", "__isub__", "__rsub__",
        "mul", "mul_", "__mul__", "__imul__", "__rmul__", "div", "div_", "divide", "divide_", "true_divide",
        "__div__", "__idiv__", "__truediv__", "__itruediv__", "__rtruediv__", "reciprocal", "reciprocal_",
        "rsqrt", "rsqrt_", "square", "square_", "leaky_relu", "leaky_relu_", "prelu",
    })

    def applies(self, check: OutputCheck) -> bool:
        return check.tested.floating and check.op in self.OPS and check.dtype in ("float16", "bfloat16", "float32")

    def judge(self, check: OutputCheck) -> Verdict:
        m, info = check.metrics, float_info(check.dtype)
        if m.inf_nan_err:
            return Verdict(ERROR, f"absolute threshold: {_pct(m.inf_nan_err)} of the elements are inf/nan "
                                  f"where the benchmark's are not (or the reverse)")
        big = m.max_rel_err if m.max_rel_err is not None else 0.0
        if big > info.rtol:
            return Verdict(ERROR, f"absolute threshold: relative error up to {big:.3g} > {info.rtol:g} "
                                  f"({check.dtype})")
        if m.small_value_err:
            return Verdict(ERROR, f"absolute threshold: {_pct(m.small_value_err)} of the small values "
                                  f"(|x| < {info.small:g}) are off by more than {info.small_atol:g}")
        return Verdict(PASS)


class SummedGradient:
    """Gradients that are sums, of element-wise and data-movement ops (whose own standards judge element by
    element): an input broadcast to the output's shape gets the sum over the broadcast dimensions, an input
    element shared by overlapping max-pooling windows the sum of their shares. The rounding of a sum of
    ``n`` terms grows with ``n`` (at most ``(n - 1) u sum|x|``), and where the terms cancel the sum is small
    beside them: every element must be within ``n x rtol`` (the absolute-threshold tolerance of the dtype,
    scaled by the reduction length, as for a matrix product's dot products) of the benchmark, relative to
    the larger of its own magnitude and the gradient's root mean square, with no inf/nan mismatch."""

    OPS = BinaryConsistency.OPS | AbsoluteThreshold.OPS

    def applies(self, check: OutputCheck) -> bool:
        return (check.tested.floating and check.direction == "backward" and check.terms > 1
                and check.op in self.OPS)

    def judge(self, check: OutputCheck) -> Verdict:
        import numpy as np

        m, info = check.metrics, float_info(check.dtype)
        if m.inf_nan_err:
            return Verdict(ERROR, f"summed gradient: {_pct(m.inf_nan_err)} of the elements are inf/nan where the "
                                  f"benchmark's are not (or the reverse)")
        t, b = np.asarray(check.tested.value, np.float64), np.asarray(check.bench.value, np.float64)
        finite = np.isfinite(t) & np.isfinite(b)
        t, b = t[finite], b[finite]
        rms = float(np.sqrt(np.mean(b * b))) if b.size else 0.0
        tolerance = check.terms * info.rtol
        over = np.abs(t - b) > tolerance * np.maximum(np.abs(b), rms) + info.small_atol
        if not over.any():
            return Verdict(PASS)
        return Verdict(ERROR, f"summed gradient: {_pct(over.mean())} of the elements are off by more than "
                              f"{check.terms} terms x {info.rtol:g} = {tolerance:.3g} of max(|bench|, rms "
                              f"{rms:.3g}) ({check.dtype})")


class Ulp:
    """Matrix products' outputs: errors counted in units in the last place of the tested dtype (msprobe's
    ULP standard): float16/bfloat16 pass when under 0.1% of the elements are off by more than 1 ULP;
    float32 when the mean is under 64 ULP or under 5% are off by more than 32 ULP. Gradients are left to
    the other standards: a bias gradient is a sum whose cancellations make ULPs of the result meaningless."""

    OPS = frozenset({
        "matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "baddbmm", "baddbmm_", "addmm", "addmm_", "addbmm",
        "addbmm_", "mv", "dot", "inner", "linear", "bilinear", "chain_matmul", "einsum", "dense", "batch_matmul",
    })

    def applies(self, check: OutputCheck) -> bool:
        return (check.tested.floating and check.direction == "forward" and check.op in self.OPS
                and check.dtype in ("float16", "bfloat16", "float32"))

    def judge(self, check: OutputCheck) -> Verdict:
        m = check.metrics
        ratio, mean = m.ulp_ratio or 0.0, m.ulp_mean or 0.0
        if check.dtype in _LOW:
            if ratio < 0.001:
                return Verdict(PASS)
            return Verdict(ERROR, f"ULP: {_pct(ratio)} of the elements are off by more than 1 ULP "
                                  f"({check.dtype} allows < 0.1%)")
        if mean < 64 or ratio < 0.05:
            return Verdict(PASS)
        return Verdict(ERROR, f"ULP: mean error {mean:.3g} ULP >= 64 and {_pct(ratio)} of the elements are off by "
                              f"more than 32 ULP (float32 allows < 5%)")


class AccumulativeError:
    """Reductions' outputs (sum, mean, cumsum, norm, ...): each element within an error bound that allows
    for accumulation in the tested dtype — ``|t - b| <= bound * max(|b|, 1)`` with bound 2^-8 for
    float16, 2^-7 for bfloat16, 2^-11 for float32 (probe's reading of msprobe's accumulative-error
    standard: a few units of rounding of a long sum, absolute below 1, relative above)."""

    OPS = frozenset({"sum", "mean", "nansum", "nanmean", "cumsum", "cumprod", "prod", "norm", "vector_norm",
                     "logsumexp", "var", "std", "var_mean", "std_mean"})
    BOUNDS = {"float16": 2.0 ** -8, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -11}

    def applies(self, check: OutputCheck) -> bool:
        return (check.tested.floating and check.direction == "forward" and check.op in self.OPS
                and check.dtype in self.BOUNDS)

    def judge(self, check: OutputCheck) -> Verdict:
        import numpy as np

        bound = self.BOUNDS[check.dtype]
        t, b = np.asarray(check.tested.value, np.float64), np.asarray(check.bench.value, np.float64)
        finite = np.isfinite(t) & np.isfinite(b)
        over = np.abs(t - b)[finite] > bound * np.maximum(np.abs(b[finite]), 1.0)
        if not over.any() and not check.metrics.inf_nan_err:
            return Verdict(PASS)
        return Verdict(ERROR, f"accumulative error: {_pct(over.mean() if over.size else 0.0)} of the elements "
                              f"exceed {bound:g} x max(|bench|, 1), {_pct(check.metrics.inf_nan_err or 0.0)} "
                              f"inf/nan mismatches")


class Thousandth:
    """Convolutions' outputs: at least 99.9% of the elements within a relative error of 1/1000 (msprobe's
    thousandth standard). Gradients are left to the other standards, as matrix products' are: a bias
    gradient is a sum over batch and positions, exactly zero when a BatchNorm follows."""

    OPS = frozenset({"conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"})

    def applies(self, check: OutputCheck) -> bool:
        return check.tested.floating and check.direction == "forward" and check.op in self.OPS

    def judge(self, check: OutputCheck) -> Verdict:
        share = check.metrics.thousandth if check.metrics.thousandth is not None else 1.0
        if share >= 0.999:
            return Verdict(PASS)
        return Verdict(ERROR, f"thousandth: only {_pct(share)} of the elements are within 1/1000 (needs 99.9%)")


class CosineAndRatios:
    """Every other floating output, with msprobe's pre-check rule: inf/nan must match the benchmark; cosine
    similarity > 0.99 (when defined: see :class:`~probe_acc_check.metrics.Metrics`) and max absolute error
    < 1e-4 pass; otherwise the dtype decides — float16/bfloat16
    need 99% of the elements within 1/100 (error) and 99.9% within 1/1000 (warning), other dtypes 99.9%
    within 1/1000 (error) and 99.99% within 1/10000 (warning)."""

    def applies(self, check: OutputCheck) -> bool:
        return check.tested.floating

    def judge(self, check: OutputCheck) -> Verdict:
        m = check.metrics
        if m.inf_nan_err:
            return Verdict(ERROR, f"{_pct(m.inf_nan_err)} of the elements are inf/nan where the benchmark's are "
                                  f"not (or the reverse)")
        if m.cosine is not None and not m.cosine > 0.99:
            return Verdict(ERROR, f"cosine {m.cosine:.6f} <= 0.99")
        if m.max_abs_err is None or m.max_abs_err < 1e-4:
            return Verdict(PASS)
        if check.dtype in _LOW:
            levels = (("1/100", m.hundredth, 0.99, ERROR), ("1/1000", m.thousandth, 0.999, WARNING))
        else:
            levels = (("1/1000", m.thousandth, 0.999, ERROR), ("1/10000", m.ten_thousandth, 0.9999, WARNING))
        for bound, share, needed, status in levels:
            if share is not None and share < needed:
                return Verdict(status, f"max abs err {m.max_abs_err:.3g} >= 1e-4 and only {_pct(share)} of the "
                                       f"elements are within {bound} of the benchmark ({check.dtype} needs "
                                       f"{needed:.2%})")
        return Verdict(PASS)


#: msprobe's standards, as this distribution registers them (name, description, class, priority).
MSPROBE_STANDARDS = (
    ("binary_consistency", "integer/bool/non-tensor outputs and data-movement ops equal the benchmark exactly",
     BinaryConsistency, 100),
    ("summed_gradient", "gradients that sum over broadcast dimensions or pooling windows: the dtype's "
     "tolerance times the number of terms", SummedGradient, 150),
    ("absolute_threshold", "element-wise arithmetic within the dtype's relative and small-value tolerances",
     AbsoluteThreshold, 200),
    ("ulp", "matrix products: error in units in the last place of the tested dtype", Ulp, 300),
    ("accumulative_error", "reductions: within a few roundings of an accumulation in the tested dtype",
     AccumulativeError, 350),
    ("thousandth", "convolutions: 99.9% of the elements within 1/1000", Thousandth, 400),
    ("cosine_and_ratios", "cosine > 0.99 and max abs err < 1e-4, else the dtype's relative-error ratios",
     CosineAndRatios, 1000),
)


def specs() -> list[AccStandardSpec]:
    return [AccStandardSpec(name, description, cls, priority) for name, description, cls, priority in MSPROBE_STANDARDS]


def judge(check: OutputCheck, standards: list[tuple[str, object]]) -> tuple[str, Verdict]:
    """``(standard name, verdict)`` from the first of ``standards`` (loaded, in order) that applies."""
    for name, standard in standards:
        if standard.applies(check):
            return name, standard.judge(check)
    return "", Verdict(SKIP, "no precision standard applies to this output")
