"""`probe acc-check compare A.csv B.csv`: two pre-checks of one dump, output by output."""

from __future__ import annotations

from pathlib import Path

from probe_acc_check import CheckOptions, run_check
from probe_acc_check.precision_compare import COMPARE_COLUMNS, compare_results

from .conftest import probe, read_csv


def test_compare_judges_a_against_what_b_achieved(stat_dump, registry, tmp_path):
    bf16 = run_check(CheckOptions(str(stat_dump), str(tmp_path / "bf16"), dtype="bfloat16"), registry)
    fp32 = run_check(CheckOptions(str(stat_dump), str(tmp_path / "fp32")), registry)
    done = probe("acc-check", "compare", bf16["details_csv"], fp32["result_csv"], "-o", "cmp", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (result,) = (tmp_path / "cmp").glob("api_precision_compare_result_*.csv")
    (detail,) = (tmp_path / "cmp").glob("api_precision_compare_details_*.csv")
    apis = {row["API Name"]: row for row in read_csv(result)}
    rows = {row["API Name"]: row for row in read_csv(detail)}
    assert list(rows["Torch.softmax.0.forward.output.0"]) == list(COMPARE_COLUMNS)
    # bfloat16 errors are far above float32's: the benchmark ratios flag them
    softmax = rows["Torch.softmax.0.forward.output.0"]
    assert softmax["Standard"] == "benchmark" and float(softmax["RMSE (A/B)"]) > 2 and softmax["Status"] == "error"
    # absolute standards keep A's own verdict: exact moves and one-rounding arithmetic pass in bfloat16 too
    assert rows["Tensor.transpose.0.forward.output.0"]["Status"] == "pass"
    assert rows["Tensor.__add__.0.forward.output.0"]["Standard"] == "absolute_threshold"
    assert rows["Functional.linear.0.forward.output.0"]["Status"] == "pass"  # ULP: passed on its own
    assert apis["Functional.dropout.0"]["Forward Test Success"] == "pass"  # replayed: the same mask in both
    assert "error" in done.stdout and "Torch.softmax.0" in done.stdout


def test_a_result_compared_with_itself_passes(stat_dump, registry, tmp_path):
    run = run_check(CheckOptions(str(stat_dump), str(tmp_path / "a"), dtype="bfloat16"), registry)
    found = compare_results(run["details_csv"], run["details_csv"], tmp_path / "same")
    assert found["error"] == found["warning"] == 0 and found["pass"] == 27 and found["SKIP"] == 0
    assert Path(found["result_csv"]).parent == tmp_path / "same"


def test_msprobes_api_precision_compare_is_acc_check_compare(stat_dump, registry, tmp_path):
    run = run_check(CheckOptions(str(stat_dump), str(tmp_path / "a"), dtype="bfloat16"), registry)
    done = probe("api_precision_compare", "-npu", run["details_csv"], "-gpu", run["details_csv"], "-o", "cmp",
                 cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (result,) = (tmp_path / "cmp").glob("api_precision_compare_result_*.csv")
    assert {row["API Name"] for row in read_csv(result)} >= {"Torch.softmax.0", "Functional.linear.0"}
    assert "27 pass" in done.stdout
    alone = probe("api_precision_compare", "-npu", run["details_csv"], "-o", "cmp2", cwd=tmp_path)
    assert alone.returncode == 2 and "-npu A.csv and -gpu B.csv go together" in alone.stderr
