"""``probe compare --rules msprobe`` writes msprobe's Result column row for row.

The fixture ``msprobe_pytorch_rules`` is two SGD steps of a tiny residual CNN dumped by msprobe 26.2.0
(``make_dump.py``); ``msprobe_result.csv`` holds the NPU Name, Bench Name and Result columns of
``msprobe compare -tp step1 -gp step0``. It holds each case msprobe's legend decides its own way: BatchNorm's
in-place ``num_batches_tracked.add_(1)`` (the bench's Norm 0: an input error that counts for nothing, so the output's
100% is an error), the 10x warning written on an entry's first output, parameter gradients judged as inputs, and
entries and arguments on one side only (the target's pass with bench N/A, the bench's are not written).
"""

from __future__ import annotations

from pathlib import Path

from .helpers import FIXTURES, read_csv, run_probe

DUMP = FIXTURES / "msprobe_pytorch_rules"
TARGET, BENCH = DUMP / "step1" / "proc7500", DUMP / "step0" / "proc7500"


def _compare(out: Path, rules: str) -> list[dict[str, str]]:
    done = run_probe("compare", TARGET, BENCH, "-o", out, "--rules", rules, "--quiet")
    assert done.returncode == 0, done.stderr
    (csv_path,) = out.glob("compare_result_*.csv")
    return read_csv(csv_path)


def test_the_fixture_holds_each_case_of_msprobes_legend():
    expected = read_csv(DUMP / "msprobe_result.csv")
    results = {(row["NPU Name"], row["Bench Name"]): row["Result"] for row in expected}
    assert results[("Tensor.add_.0.forward.output.0",) * 2] == "error"
    assert results[("Torch.add.0.backward.output.0",) * 2] == "warning"  # the outputs' 10x, written on output.0
    assert results[("Torch.add.0.backward.output.1",) * 2] == "error"
    assert results[("Module.bn1.BatchNorm2d.parameters_grad.0.weight",) * 2] == "pass"
    assert results[("Torch.sigmoid.0.forward.output.0", "N/A")] == "pass"  # target only
    assert results[("Torch.add.0.forward.input.alpha", "N/A")] == "pass"
    assert not any("tanh" in bench or "softmax.0.forward.input.dtype" in bench for _, bench in results)  # bench only


def test_rules_msprobe_gives_msprobes_result_row_for_row(tmp_path):
    expected = read_csv(DUMP / "msprobe_result.csv")
    ours = _compare(tmp_path, "msprobe")
    assert len(ours) == len(expected)
    theirs = {(row["NPU Name"], row["Bench Name"]): row["Result"] for row in expected}
    mine = {(row["NPU Name"], row["Bench Name"]): row["Result"] for row in ours}
    assert mine.keys() == theirs.keys()
    differing = {key: (theirs[key], mine[key]) for key in theirs if theirs[key] != mine[key]}
    assert differing == {}


def test_default_rules_still_report_one_sided_rows(tmp_path):
    rows = _compare(tmp_path, "noise")
    by_bench = {row["Bench Name"]: row["Result"] for row in rows if row["NPU Name"] == "N/A"}
    assert by_bench["Torch.tanh.0.forward.output.0"] == "unmatched"
    assert by_bench["Torch.softmax.0.forward.input.dtype"] == "warning"
    assert {row["Result"] for row in rows if row["NPU Name"].startswith("Torch.sigmoid.")} == {"unmatched"}
