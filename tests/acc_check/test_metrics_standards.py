"""Metrics against hand computations, and msprobe's standards on outputs built to sit either side of each bound."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from probe_acc_check.backend import Output
from probe_acc_check.metrics import binary_metrics, float_metrics, round_to
from probe_acc_check.standards import (
    AbsoluteThreshold,
    AccumulativeError,
    BinaryConsistency,
    CosineAndRatios,
    OutputCheck,
    SummedGradient,
    Thousandth,
    Ulp,
    judge,
    specs,
)

STANDARDS = [(spec.name, spec.load()) for spec in sorted(specs(), key=lambda s: (s.priority, s.name))]


def check(api: str, tested: np.ndarray, bench: np.ndarray, dtype: str = "torch.float32") -> tuple[str, str]:
    t, b = Output(tested, dtype), Output(bench, "torch.float64")
    name, verdict = judge(OutputCheck(api, f"{api}.0.forward.output.0", "forward", t, b,
                                      float_metrics(tested, bench, dtype)), STANDARDS)
    return name, verdict.status


def test_float_metrics_match_hand_computation():
    bench = np.array([1.0, -2.0, 0.5, 1e-8, 3.0])
    tested = np.array([1.001, -2.0, 0.5, 2e-8, 2.97])
    m = float_metrics(tested, bench, "float32")
    cos = tested @ bench / (np.linalg.norm(tested) * np.linalg.norm(bench))
    rel = np.abs(tested - bench) / np.maximum(np.abs(bench), 1e-6)  # 1e-8 is a small value: divided by 1e-6
    assert m.cosine == pytest.approx(cos, abs=1e-15)
    assert m.max_abs_err == pytest.approx(0.03) and m.max_rel_err == pytest.approx(0.01)
    assert (m.hundredth, m.thousandth) == (pytest.approx(np.mean(rel <= 1e-2)), pytest.approx(np.mean(rel <= 1e-3)))
    assert m.small_value_err == 1.0  # the one small value is off by 1e-8 > 1e-9
    assert m.rmse == pytest.approx(np.sqrt(np.mean((tested - bench) ** 2)))
    assert m.eb == pytest.approx(np.sum(tested - bench) / np.sum(np.abs(bench)))
    assert m.inf_nan_err == 0.0 and m.binary_err == pytest.approx(0.6)


def test_inf_nan_patterns_are_compared_and_excluded_from_the_other_metrics():
    m = float_metrics(np.array([np.inf, np.nan, 1.0]), np.array([np.inf, 2.0, 1.0]), "float32")
    assert m.inf_nan_err == pytest.approx(1 / 3) and m.max_abs_err == 0.0


def test_rounding_to_bfloat16_matches_torch_and_costs_at_most_half_an_ulp():
    values = np.random.default_rng(1).standard_normal(4096) * 100
    rounded = round_to(values, "bfloat16")
    assert np.array_equal(rounded, torch.from_numpy(values).to(torch.bfloat16).double().numpy())
    m = float_metrics(rounded, values, "bfloat16")
    assert 0.4 < m.ulp_max <= 0.5 and m.ulp_ratio == 0.0


def test_binary_metrics_for_integers_and_plain_values():
    assert binary_metrics(np.array([1, 2, 3]), np.array([1, 2, 4])).binary_err == pytest.approx(1 / 3)
    assert binary_metrics((4, 8), (4, 8)).binary_err == 0.0
    assert binary_metrics(np.array([1]), 1).binary_err == 1.0


def test_standards_are_chosen_by_operator_and_dtype():
    x = np.linspace(-1, 1, 64)
    assert check("Tensor.reshape", round_to(x, "bfloat16"), x, "torch.bfloat16") == ("binary_consistency", "pass")
    assert check("Tensor.__add__", x, x) == ("absolute_threshold", "pass")
    assert check("Functional.linear", x, x) == ("ulp", "pass")
    assert check("Functional.conv2d", x, x) == ("thousandth", "pass")
    assert check("Tensor.sum", x, x) == ("accumulative_error", "pass")
    assert check("Functional.gelu", x, x) == ("cosine_and_ratios", "pass")
    one, two = np.array([1]), np.array([2])
    ints = OutputCheck("Torch.argmax", "n", "forward", Output(one, "torch.int64", floating=False),
                       Output(two, "torch.int64", floating=False), binary_metrics(one, two))
    assert judge(ints, STANDARDS)[1].status == "error"


def test_each_standard_fails_just_past_its_bound():
    x = np.linspace(0.5, 1.5, 1000)
    # binary consistency: one element off by one bfloat16 ULP
    off = round_to(x, "bfloat16")
    off[3] += 2.0 ** -7
    assert check("Tensor.transpose", off, x, "torch.bfloat16")[1] == "error"
    # absolute threshold: float32 allows a relative error of 1e-6
    assert check("Tensor.__mul__", x * (1 + 9e-7), x)[1] == "pass"
    assert check("Tensor.__mul__", x * (1 + 2e-6), x)[1] == "error"
    # ULP, bfloat16: under 0.1% of the elements may be off by more than 1 ULP (2**-7 near 1)
    rounded = round_to(x, "bfloat16")
    assert check("Torch.matmul", rounded, x, "torch.bfloat16")[1] == "pass"
    bad = rounded.copy()
    bad[:2] += 2.0 ** -6
    assert check("Torch.matmul", bad, x, "torch.bfloat16")[1] == "error"
    # accumulative error, float32: 2**-11 of max(|bench|, 1)
    assert check("Tensor.sum", x + 2.0 ** -12, x)[1] == "pass"
    assert check("Tensor.sum", x + 2.0 ** -10, x)[1] == "error"


def test_cosine_and_ratios_follow_msprobe_rule_per_dtype():
    x = np.linspace(0.5, 1.5, 1000)
    assert check("Torch.softmax", x + 5e-5, x)[1] == "pass"                    # max abs err < 1e-4
    assert check("Torch.softmax", x * (1 + 2e-4), x)[1] == "warning"          # float32: within 1/1000, not 1/10000
    assert check("Torch.softmax", x * (1 + 2e-3), x)[1] == "error"            # float32: not within 1/1000
    assert check("Torch.softmax", x * (1 + 2e-3), x, "torch.bfloat16")[1] == "warning"  # bf16: within 1/100 only
    assert check("Torch.softmax", x * (1 + 2e-2), x, "torch.bfloat16")[1] == "error"
    assert check("Torch.softmax", -x, x)[1] == "error"                         # cosine -1


def test_a_standard_registered_first_claims_its_operator():
    class Strict:
        def applies(self, out):
            return out.op == "gelu"

        def judge(self, out):
            from probe_acc_check.standards import Verdict
            return Verdict("error" if out.metrics.max_abs_err else "pass", "must be exact")

    standards = [("strict_gelu", Strict()), *STANDARDS]
    x = np.linspace(-1, 1, 16)
    t, b = Output(x + 1e-9, "torch.float32"), Output(x, "torch.float64")
    found = judge(OutputCheck("Functional.gelu", "g", "forward", t, b, float_metrics(t.value, x, "float32")), standards)
    assert found[0] == "strict_gelu" and found[1].status == "error"
    assert [name for name, _ in STANDARDS][-1] == "cosine_and_ratios"
    assert {type(s) for _, s in STANDARDS} == {BinaryConsistency, SummedGradient, AbsoluteThreshold, Ulp,
                                                 AccumulativeError, Thousandth, CosineAndRatios}
