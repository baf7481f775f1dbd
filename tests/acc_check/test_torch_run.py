"""The pre-check of a small transformer's L1 dump (probe's collector, statistics and tensor modes) on the CPU."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from probe_core.testing import collect

from probe_acc_check import CheckOptions, run_check
from probe_acc_check.results import DETAIL_COLUMNS, RESULT_COLUMNS

from . import model
from .conftest import FIXTURES, details, read_csv, results

FORWARD_APIS = 27  # the model's API calls per step (forward entries of the dump)


@pytest.fixture(scope="module")
def bf16_tensor_run(tensor_dump, registry, tmp_path_factory):
    return run_check(CheckOptions(str(tensor_dump), str(tmp_path_factory.mktemp("bf16")), dtype="bfloat16"), registry)


@pytest.mark.parametrize("mode", ["stat_dump", "tensor_dump"])
def test_float32_every_api_runs_and_passes(mode, request, registry, tmp_path):
    summary = run_check(CheckOptions(str(request.getfixturevalue(mode)), str(tmp_path)), registry)
    rows = results(summary)
    assert len(rows) == FORWARD_APIS and summary["apis"] == FORWARD_APIS
    skipped = {name: row["Message"] for name, row in rows.items() if row["Forward Test Success"] == "SKIP"}
    assert not skipped  # dropout included: a random op, replayed from one generator state on both runs
    assert all(row["Forward Test Success"] == "pass" and row["Backward Test Success"] in ("pass", "")
               for row in rows.values()), summary["failing"]
    assert (summary["pass"], summary["warning"], summary["error"], summary["skipped"]) == (27, 0, 0, 0)
    assert json.loads((tmp_path / "summary.json").read_text())["pass"] == 27


def test_result_files_have_msprobe_columns(stat_dump, registry, tmp_path):
    summary = run_check(CheckOptions(str(stat_dump), str(tmp_path), filters=("linear",)), registry)
    result, detail = (open(summary[key]).readline().strip() for key in ("result_csv", "details_csv"))
    assert result == ",".join(RESULT_COLUMNS) == "API Name,Forward Test Success,Backward Test Success,Message"
    assert detail.startswith("API Name,Bench Dtype,Tested Dtype,Shape,Cosine,MaxAbsErr,MaxRelativeErr,One ")
    assert detail.endswith("Status,Message") and detail == ",".join(DETAIL_COLUMNS)
    rows = details(summary)
    forward, weight_grad = rows["Functional.linear.0.forward.output.0"], rows["Functional.linear.0.backward.output.1"]
    assert (forward["Bench Dtype"], forward["Tested Dtype"], forward["Shape"]) == (
        "torch.float64", "torch.float32", "[2, 6, 48]")
    assert weight_grad["Shape"] == "[48, 16]" and forward["Standard"] == "ulp"


def test_bfloat16_flags_the_apis_that_lose_precision(bf16_tensor_run):
    rows = results(bf16_tensor_run)
    errors = {name for name, row in rows.items()
              if "error" in (row["Forward Test Success"], row["Backward Test Success"])}
    # layer norm's weight/bias gradients reduce over every row in bfloat16; the loss gradient (softmax minus
    # one-hot) cancels: both lose precision in their backward only
    assert errors == {"Functional.layer_norm.0", "Functional.layer_norm.1", "Functional.cross_entropy.0"}
    assert {rows[name]["Backward Test Success"] for name in errors} == {"error"}
    assert {rows[name]["Forward Test Success"] for name in errors} <= {"pass", "warning"}
    for exact in ("Tensor.reshape.0", "Tensor.transpose.0", "Tensor.chunk.0", "Tensor.__add__.0",
                  "Tensor.__truediv__.0", "Functional.linear.0", "Torch.matmul.0"):
        assert rows[exact]["Forward Test Success"] == "pass", exact   # moves, exact arithmetic, one rounding
    assert rows["Torch.softmax.0"]["Forward Test Success"] == "warning"
    assert bf16_tensor_run["failing"][0]["api"].startswith("Functional.layer_norm")  # worst first


def _real(dump, name):
    return torch.load(dump / "dump_tensor_data" / f"{name}.pt", weights_only=True)


def test_bfloat16_verdicts_match_hand_computed_metrics(bf16_tensor_run, tensor_dump):
    rows = details(bf16_tensor_run)
    # softmax forward: computed here from the real input
    x = _real(tensor_dump, "Torch.softmax.0.forward.input.0").bfloat16()
    tested, bench = torch.softmax(x, dim=-1).double(), torch.softmax(x.double(), dim=-1)
    row = rows["Torch.softmax.0.forward.output.0"]
    assert float(row["Cosine"]) == pytest.approx(F.cosine_similarity(tested.flatten(), bench.flatten(), dim=0).item(),
                                                 abs=1e-9)
    assert float(row["MaxAbsErr"]) == pytest.approx((tested - bench).abs().max().item(), rel=1e-6)
    within = ((tested - bench).abs() / bench.abs().clamp_min(1e-3) <= 1e-3).double().mean().item()
    assert float(row["One Thousandth Err Ratio"]) == pytest.approx(within) and within < 0.999
    assert row["Status"] == "warning" and row["Standard"] == "cosine_and_ratios"
    # layer norm's weight gradient: the backward from the real output gradient
    x = _real(tensor_dump, "Functional.layer_norm.0.forward.input.0")
    # F.layer_norm(input, shape, weight, bias, eps) as nn.LayerNorm passes them: input_args 2 and 3
    weight, bias = (_real(tensor_dump, f"Functional.layer_norm.0.forward.input.{i}") for i in (2, 3))
    grad = _real(tensor_dump, "Functional.layer_norm.0.backward.input.0").bfloat16()
    grads = {}
    for dtype in (torch.bfloat16, torch.float64):
        w = weight.bfloat16().to(dtype).requires_grad_()
        out = F.layer_norm(x.bfloat16().to(dtype), [16], w, bias.bfloat16().to(dtype), 1e-5)
        (grads[dtype],) = torch.autograd.grad(out, w, grad.to(dtype))
    tested, bench = grads[torch.bfloat16].double(), grads[torch.float64]
    row = rows["Functional.layer_norm.0.backward.output.1"]
    assert float(row["MaxAbsErr"]) == pytest.approx((tested - bench).abs().max().item(), rel=1e-6)
    within = ((tested - bench).abs() / bench.abs().clamp_min(1e-3) <= 1e-2).double().mean().item()
    assert float(row["One Hundredth Err Ratio"]) == pytest.approx(within) and within < 0.99
    assert row["Status"] == "error"
    # a linear layer: one rounding of a float32 accumulation, within half a bfloat16 ULP
    row = rows["Functional.linear.0.forward.output.0"]
    assert row["Standard"] == "ulp" and row["Status"] == "pass" and float(row["ULP Err Max"]) <= 0.5


def test_scalars_indexing_casts_and_exact_zero_gradients_pass(registry, tmp_path, recwarn):
    net, step = model.assorted_step()
    dump = collect(step, tmp_path / "dump", registry=registry, model=net, task="statistics", level="L1")
    summary = run_check(CheckOptions(str(dump), str(tmp_path / "out")), registry)
    rows, outputs = results(summary), details(summary)
    assert summary["apis"] == summary["pass"] > 15, summary["failing"]
    assert outputs["Tensor.__getitem__.0.forward.output.0"]["Shape"] == "[2, 4, 4]"  # y[0, 1:3]: a tuple index
    assert not [w for w in recwarn if "non-tuple sequence" in str(w.message)]
    scalar = [name for name, row in outputs.items() if name.startswith("Tensor.__add__") and row["Shape"] == "[]"]
    assert scalar and all(rows[name.rsplit(".", 3)[0]]["Backward Test Success"] == "pass" for name in scalar)
    # the loss is a mean of a softmax: its input gradient is exactly zero, computed as rounding noise
    softmax = outputs["Functional.softmax.0.backward.output.0"]
    assert softmax["Cosine"] == "N/A" and float(softmax["MaxAbsErr"]) < 1e-6 and softmax["Status"] == "pass"
    assert outputs["Torch.max.0.forward.output.1"]["Standard"] == "binary_consistency"  # the indices


def test_msprobe_pytorch_dump_passes_on_cpu(registry, tmp_path):
    summary = run_check(CheckOptions(str(FIXTURES / "msprobe_pytorch_stat_mix"), str(tmp_path)), registry)
    assert (summary["apis"], summary["pass"]) == (32, 32)
    assert {row["Backward Test Success"] for row in read_csv(tmp_path / summary["result_csv"])} == {"pass"}
