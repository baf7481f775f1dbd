"""MindSpore dumps: the APIs run in MindSpore PyNative on the CPU, benchmarked by their PyTorch twins in float64."""

from __future__ import annotations

import pytest

from probe_acc_check import CheckOptions, run_check

from .conftest import FIXTURES, details, results

ms = pytest.importorskip("mindspore")


@pytest.fixture(scope="module")
def ms_l1_dump(tmp_path_factory):
    """A fresh L1 dump of tests/mindspore's network (two blocks, mint/ops/Tensor APIs), one training step."""
    from probe_mindspore import PrecisionDebugger

    from tests.mindspore import ms_net

    out = tmp_path_factory.mktemp("ms_l1")
    ms.set_seed(0)
    net = ms_net.Net()
    debugger = PrecisionDebugger(dump_path=str(out), task="statistics", level="L1")
    debugger.start(net)
    try:
        ms_net.train(net, 1)
    finally:
        debugger.stop()
        debugger.close()
    return out / "step0" / "rank0"


def _clean(summary: dict) -> None:
    rows = results(summary)
    assert summary["error"] == summary["warning"] == 0, summary["failing"]
    ran = [name for name, row in rows.items() if row["Forward Test Success"] != "SKIP"]
    assert {name.split(".")[0] for name in ran} >= {"Mint", "Functional", "Tensor"}
    assert all(rows[name]["Forward Test Success"] == "pass" for name in ran)


def test_msprobe_mindspore_dump_passes_a_clean_run(registry, tmp_path):
    summary = run_check(CheckOptions(str(FIXTURES / "msprobe_mindspore_stat_mix"), str(tmp_path)), registry)
    _clean(summary)
    skipped = {row["Message"] for row in results(summary).values() if row["Forward Test Success"] == "SKIP"}
    assert skipped == {"MindSpore primitive: no public API to call (mint, ops and Tensor APIs are pre-checked)"}
    rows = details(summary)
    entropy = rows["Functional.cross_entropy.0.backward.output.0"]  # ops' positional convention, int32 targets
    assert (entropy["Tested Dtype"], entropy["Bench Dtype"], entropy["Status"]) == ("Float32", "torch.float64", "pass")
    assert rows["Tensor.transpose.0.forward.output.0"]["Shape"] == "[4, 4, 8, 8]"  # a permutation in MindSpore
    assert rows["Mint.split.0.backward.output.0"]["Status"] == "pass"


def test_a_fresh_mindspore_l1_dump_passes_a_clean_run(ms_l1_dump, registry, tmp_path):
    summary = run_check(CheckOptions(str(ms_l1_dump), str(tmp_path)), registry)
    _clean(summary)
    assert summary["framework"] == "mindspore" and summary["pass"] >= 30
    assert results(summary)["Mint.softmax.0"]["Backward Test Success"] == "pass"
