"""Conditioning: how far the float64 benchmark itself moves when its inputs move by one rounding.

Some outputs are ill-conditioned at the tested precision: a BatchNorm's gradient divides by the batch's
standard deviation and subtracts nearly equal terms (a ResNet's last BatchNorm sees 2 values per channel
at batch size 2), a convolution's bias gradient ahead of a BatchNorm is a sum of hundreds of terms that
cancel to almost nothing. A correct float32 kernel is then far more than the standards' 1/1000 from the
float64 benchmark. So the backend runs the benchmark a second time with its inputs and output gradients
moved by up to one rounding of the tested dtype (relative ``u``, seeded per API): the *spread*. Only for
float32 outputs (:func:`needs_spread`). An output
the standards fail whose error is within :data:`SPREAD_FACTOR` times that spread (root mean squares over
the output; times the square root of the number of terms for a gradient that is a sum) is as close as
the problem's own conditioning allows: it passes, saying so. A wrong kernel
(0.1% off) is thousands of times the spread of a well-conditioned output and stays an error.

Framework-neutral (numpy).
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from typing import TYPE_CHECKING

from probe_acc_check.cases import map_leaves
from probe_acc_check.dtypes import canonical, float_info, is_float
from probe_acc_check.inputs import Array

if TYPE_CHECKING:
    from probe_acc_check.backend import Outcome

#: an error within this many times the benchmark's spread is conditioning, not a wrong kernel: the spread
#: moves only the inputs, a float32 kernel also rounds its accumulations (a clean ResNet-18's BatchNorm
#: outputs are up to 9 times their spread)
SPREAD_FACTOR = 10.0


def needs_spread(tested: Outcome) -> bool:
    """Whether a run has a float32 output, whose verdict the spread could inform. 16-bit outputs keep their
    standards' own tolerances: a 16-bit rounding of the inputs moves an output about as far as a 16-bit
    kernel's own roundings, which the pre-check is there to flag where they exceed the standards."""
    return any(out is not None and out.is_tensor and canonical(out.dtype) == "float32" for out in tested.forward)


def dithered(args: list, kwargs: dict, grads: tuple, grad_dtypes: list[str], name: str) -> tuple[list, dict, tuple]:
    """The benchmark's arguments and output gradients, each floating value moved by a relative ``u * r``
    (``r`` uniform in [-1, 1], ``u`` the unit roundoff of its tested dtype: ``grad_dtypes`` for the
    gradients, those of the outputs they are given to); seeded by ``name`` (the API's)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))

    def move(data: np.ndarray, dtype: str) -> np.ndarray:
        if not is_float(dtype) or canonical(dtype) == "float64":
            return data
        unit = 2.0 ** -(float_info(dtype).mantissa + 1)
        return np.asarray(data * (1.0 + unit * rng.uniform(-1.0, 1.0, np.shape(data))), dtype=np.float64)

    def array(value: object) -> object:
        return Array(move(value.data, value.dtype), value.dtype, value.name) if isinstance(value, Array) else value

    moved = tuple(grad if grad is None else move(grad, dtype) for grad, dtype in zip(grads, grad_dtypes))
    return map_leaves(args, array), map_leaves(kwargs, array), moved + tuple(grads[len(moved):])


def within_spread(tested: np.ndarray, bench: np.ndarray, spread: np.ndarray, terms: int = 1) -> str:
    """Why a failing output is only as far from the benchmark as the benchmark is from itself under one
    rounding of its inputs (``""`` when it is farther, or either holds inf/nan). An output that sums
    ``terms`` terms (:func:`~probe_acc_check.judge.summed_terms`) is allowed ``sqrt(terms)`` times more: the
    spread moves each term once, a float32 sum also rounds each of its ``terms`` partial sums."""
    t, b, s = (np.asarray(v, np.float64) for v in (tested, bench, spread))
    if not (np.isfinite(t).all() and np.isfinite(b).all() and np.isfinite(s).all()) or t.shape != s.shape:
        return ""
    error, noise = (math.sqrt(float(np.mean((v - b) ** 2))) if b.size else 0.0 for v in (t, s))
    factor = SPREAD_FACTOR * math.sqrt(max(terms, 1))
    if noise == 0.0 or error > factor * noise:
        return ""
    return (f"ill-conditioned: rms error {error:.3g} is within {factor:.3g} x the benchmark's own spread "
            f"({noise:.3g}) when its inputs move by one rounding of the tested dtype")
