"""--workers, --filter, -f and what cannot run: a skipped row with the reason, never a crash."""

from __future__ import annotations

import importlib.util
import json

import pytest

from probe_core import hookimpl
from probe_core.specs import AccStandardSpec
from probe_core.testing import registry_with

from probe_acc_check import AccCheckError, CheckOptions, Verdict, run_check

from .conftest import details, probe, results


def test_workers_give_the_same_results_as_a_serial_run(stat_dump, registry, tmp_path):
    serial = run_check(CheckOptions(str(stat_dump), str(tmp_path / "serial")), registry)
    parallel = run_check(CheckOptions(str(stat_dump), str(tmp_path / "parallel"), workers=2), registry)
    assert list(results(parallel)) == list(results(serial))  # the dump's order, whichever worker finished first
    assert results(parallel) == results(serial)
    assert [(r["API Name"], r["Status"]) for r in details(parallel).values()] == [
        (r["API Name"], r["Status"]) for r in details(serial).values()]
    assert parallel["workers"] == 2 and parallel["pass"] == 27


def test_a_dask_cluster_gives_the_serial_runs_results(stat_dump, registry, tmp_path):
    """--scheduler: the APIs run in batches on a real 2-worker cluster; the client judges and writes, so the
    CSVs are the serial run's. -d with a cluster, or no Dask installed, is a clear error."""
    import distributed  # the [dask] extra: part of make test's install

    serial = run_check(CheckOptions(str(stat_dump), str(tmp_path / "serial")), registry)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        done = probe("acc-check", "-api_info", str(stat_dump), "-o", str(tmp_path / "dask"), "--scheduler",
                     cluster.scheduler_address, cwd=tmp_path)
        with distributed.Client(cluster) as client:  # the jobs ran on the cluster's workers
            ran = client.run(lambda: sorted(__import__("probe_acc_check.workers").workers._BACKENDS))
        refused = probe("acc-check", "-api_info", str(stat_dump), "-o", "refused", "-d", "0", "1",
                        "--scheduler", cluster.scheduler_address, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    on_cluster = json.loads((tmp_path / "dask" / "summary.json").read_text())
    assert on_cluster["executor"] == "dask" and on_cluster["pass"] == serial["pass"] == 27
    assert list(results(on_cluster)) == list(results(serial)) and results(on_cluster) == results(serial)
    assert [(r["API Name"], r["Status"]) for r in details(on_cluster).values()] == [
        (r["API Name"], r["Status"]) for r in details(serial).values()]
    key = ("pytorch", "cpu", None, False)
    assert len(ran) == 2 and key in sum(ran.values(), []) and all(b in ([], [key]) for b in ran.values())
    assert refused.returncode != 0 and "CUDA_VISIBLE_DEVICES" in refused.stderr and "Traceback" not in refused.stderr
    # without Dask: said before any file is written, the pip extra as it is spelled
    missing = probe("acc-check", "-api_info", str(stat_dump), "-o", str(tmp_path / "nodask"), "--executor", "dask",
                    cwd=tmp_path, prelude="import sys\nsys.modules['distributed'] = None\n")
    assert missing.returncode == 2 and "pip install 'probe-core[dask]'" in missing.stderr, missing.stderr
    assert not (tmp_path / "nodask").exists()


def test_filter_and_filter_api_narrow_the_run(stat_dump, registry, tmp_path):
    only = run_check(CheckOptions(str(stat_dump), str(tmp_path / "a"), filters=("Functional.linear.*", "softmax")),
                     registry)
    assert list(results(only)) == ["Functional.linear.0", "Torch.softmax.0"] + [
        f"Functional.linear.{i}" for i in range(1, 5)]
    once = run_check(CheckOptions(str(stat_dump), str(tmp_path / "b"), filter_api=True), registry)
    names = list(results(once))
    assert "Tensor.transpose.0" in names and "Tensor.transpose.1" not in names and len(names) < 27


def test_apis_that_cannot_run_are_skipped_rows_with_their_reason(registry, tmp_path):
    tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 3], "Max": 1.0, "Min": -1.0}
    data = {
        "Torch.no_such_op.0.forward": {"input_args": [tensor], "input_kwargs": {}, "output": [tensor]},
        "Functional.relu.0.forward": {"input_args": [tensor], "input_kwargs": {}, "output": [tensor]},
        "Torch.matmul.0.forward": {"input_args": [tensor, tensor], "input_kwargs": {}, "output": [tensor]},
        "Distributed.all_reduce.0.forward": {"input_args": [tensor], "input_kwargs": {}, "output": [tensor]},
        "Tensor.mean.0.forward": {"input_args": [{**tensor, "Max": None, "Min": None}], "input_kwargs": {},
                                  "output": [tensor]},
    }
    (tmp_path / "dump.json").write_text(json.dumps({"task": "statistics", "level": "L1", "framework": "pytorch",
                                                    "data": data}))
    summary = run_check(CheckOptions(str(tmp_path), str(tmp_path / "out")), registry)
    rows = {name: (row["Forward Test Success"], row["Message"]) for name, row in results(summary).items()}
    assert rows["Torch.no_such_op.0"] == ("SKIP", "refused: Torch.no_such_op is not a PyTorch operator the collector "
                                                  "records (the pre-check runs only the framework's operators, never "
                                                  "other callables a dump names)")
    assert rows["Functional.relu.0"][0] == "pass"
    assert rows["Torch.matmul.0"][0] == "SKIP" and "the tested run failed on cpu: RuntimeError" in rows[
        "Torch.matmul.0"][1]  # (2, 3) @ (2, 3)
    assert rows["Distributed.all_reduce.0"][1].startswith("collective communication")
    assert "no Min recorded" in rows["Tensor.mean.0"][1]
    assert summary["skipped"] == 4 and len(summary["skipped_reasons"]) == 4


def test_a_device_that_is_not_there_is_one_error_before_any_file(stat_dump, registry, tmp_path):
    if importlib.util.find_spec("torch_npu"):
        pytest.skip("torch_npu is installed")
    with pytest.raises(AccCheckError, match=r"^--device npu:0: torch_npu is not installed; use --device cpu"):
        run_check(CheckOptions(str(stat_dump), str(tmp_path / "out"), device="npu:0"), registry)
    assert not (tmp_path / "out").exists()


class ExactRelu:
    """A third party's standard for its own operator: relu must be bit-exact in every dtype."""

    def applies(self, out):
        return out.op == "relu"

    def judge(self, out):
        return Verdict("pass" if out.metrics.binary_err == 0 else "error", "relu must be exact")


class RelustStandards:
    @hookimpl
    def probe_acc_standards(self):
        return [AccStandardSpec("exact_relu", "relu is bit-exact", ExactRelu, priority=10)]


def test_a_plugin_standard_judges_its_operator_before_msprobes(tmp_path):
    tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [8], "Max": 1.0, "Min": -1.0}
    (tmp_path / "dump.json").write_text(json.dumps({"task": "statistics", "level": "L1", "framework": "pytorch",
                                                    "data": {"Functional.relu.0.forward": {
                                                        "input_args": [tensor], "input_kwargs": {},
                                                        "output": [tensor]}}}))
    registry = registry_with(RelustStandards(), enable=["acc_check", "torch"])
    summary = run_check(CheckOptions(str(tmp_path), str(tmp_path / "out")), registry)
    assert summary["standards"][0] == "exact_relu" and "cosine_and_ratios" in summary["standards"]
    assert {row["Standard"] for row in details(summary).values()} == {"exact_relu"}
