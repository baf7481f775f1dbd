"""Tensor-mode metrics of the modes plugin, against numpy, with NaN/Inf and zeros."""

from __future__ import annotations

import math

import numpy as np
import pytest

from probe_modes.compare_tensor import tensor_metrics


def test_metrics_match_a_direct_numpy_computation():
    rng = np.random.default_rng(3)
    b = rng.standard_normal(1000)
    a = b + rng.standard_normal(1000) * 1e-3
    m = tensor_metrics(a, b)
    rel = np.abs(a - b) / np.abs(b)
    assert m["Cosine"] == pytest.approx(a @ b / np.linalg.norm(a) / np.linalg.norm(b), rel=1e-12)
    assert m["EucDist"] == pytest.approx(np.linalg.norm(a - b), rel=1e-12)
    assert m["MaxAbsErr"] == pytest.approx(np.abs(a - b).max(), rel=1e-12)
    assert m["MaxRelativeErr"] == pytest.approx(rel.max(), rel=1e-12)
    assert m["One Thousandth Err Ratio"] == pytest.approx((rel < 0.001).mean())
    assert m["Five Thousandths Err Ratio"] == pytest.approx((rel < 0.005).mean())


def test_nan_and_inf_on_both_sides_agree_one_side_counts_as_error():
    b = np.array([1.0, np.nan, np.inf, 2.0])
    same = tensor_metrics(b.copy(), b)
    assert same["Cosine"] == pytest.approx(1.0) and same["MaxAbsErr"] == 0.0 and same["One Thousandth Err Ratio"] == 1.0
    a = np.array([1.0, np.nan, 5.0, 2.0])  # inf on the bench side only
    one_side = tensor_metrics(a, b)
    assert one_side["One Thousandth Err Ratio"] == pytest.approx(0.75)
    assert one_side["MaxAbsErr"] == 0.0  # over the finite positions


def test_zeros_shape_mismatch_and_empty():
    zeros = np.zeros(4)
    assert tensor_metrics(zeros, zeros.copy())["Cosine"] == 1.0
    assert tensor_metrics(np.ones(4), zeros)["Cosine"] == 0.0
    # msprobe's rule at bench zeros: both sides shifted by the float type's epsilon -> |target| / eps, finite
    assert tensor_metrics(np.ones(4), zeros)["MaxRelativeErr"] == 1 / np.finfo(np.float64).eps
    assert all(v is None for v in tensor_metrics(np.ones(3), np.ones(4)).values())
    assert all(v == "unsupported" for v in tensor_metrics(np.ones(0), np.ones(0)).values())


def test_bench_zeros_give_msprobe_finite_relative_error_in_the_pairs_float_type():
    bench = np.array([0.0, 2.0, 0.0, 4.0], dtype=np.float32)
    target = np.array([3e-4, 2.0, 0.0, 4.002], dtype=np.float32)
    values = tensor_metrics(target, bench)
    eps = np.float32(np.finfo(np.float32).eps)
    assert values["MaxRelativeErr"] == float(np.abs(((np.float32(3e-4) + eps) - eps) / eps))
    assert not math.isinf(values["MaxRelativeErr"])
    # a 0 against a 0 is no error; the shifted non-zero is over both thresholds
    assert values["One Thousandth Err Ratio"] == 0.75 and values["Five Thousandths Err Ratio"] == 0.75


@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
def test_zero_d_and_one_element_tensors_have_no_cosine(shape):
    values = tensor_metrics(np.full(shape, 2.001), np.full(shape, 2.0))
    for column in ("Cosine", "EucDist", "One Thousandth Err Ratio", "Five Thousandths Err Ratio"):
        assert values[column] == "unsupported", column
    assert values["MaxAbsErr"] == pytest.approx(0.001) and values["MaxRelativeErr"] == pytest.approx(0.0005)
