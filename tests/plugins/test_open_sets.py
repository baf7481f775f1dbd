"""Sets plugins extend, extended from outside (issue 39): a task a data mode brings, a framework's operator
table, an acc-check backend and a name map against pytorch for it, all from one pip-installed package
(tests/plugins/packages/probe-test-open-sets); without it, each refusal lists what is installed."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from tests.compare.dumps import write_dump
from tests.compare.helpers import read_csv, read_summary, result_csv
from tests.config_check.conftest import REPO, run_probe
from tests.monitor.helpers import rank_dir
from tests.plugins.conftest import PACKAGES, TRAIN_SMALL, error_lines, pip_install, write_config


@pytest.fixture(scope="module")
def open_site(tmp_path_factory):
    return pip_install(tmp_path_factory.mktemp("open_site"), [PACKAGES / "probe-test-open-sets"],
                       tmp_path_factory.mktemp("open_src"))


def test_a_data_mode_brings_its_own_task(open_site, tmp_path):
    config = write_config(tmp_path / "config.json", {"task": "histogram", "level": "L1", "step": [0],
                                                     "dump_path": str(tmp_path / "dump")})
    done = run_probe("run", "-c", config, TRAIN_SMALL, pythonpath=[open_site], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    dump = json.loads((tmp_path / "dump" / "step0" / "rank0" / "dump.json").read_text())
    assert dump["task"] == "histogram"
    linear = dump["data"]["Functional.linear.0.forward"]["output"][0]
    assert sum(linear["histogram"]) == 4 * 8 and "Max" not in linear
    refused = run_probe("run", "-c", config, TRAIN_SMALL, cwd=tmp_path)  # the plugin not installed
    (line,) = error_lines(refused.stderr)
    assert refused.returncode == 2 and 'key "task": "histogram" is not allowed' in line
    assert all(f'"{task}"' in line for task in ("statistics", "tensor", "overflow_check", "structure"))


def test_a_framework_probe_does_not_know_is_pre_checked_by_its_own_backend(open_site, tmp_path):
    leaf = {"type": "numpy.ndarray", "dtype": "float32", "shape": [64], "Max": 3.0, "Min": -3.0}
    entries = {f"Toy.{op}.0.forward": {"input_args": args, "input_kwargs": {}, "output": [leaf]}
               for op, args in (("add", [leaf, leaf]), ("tanh", [leaf]), ("system", [{"type": "str", "value": "x"}]))}
    (tmp_path / "dump").mkdir()
    (tmp_path / "dump" / "dump.json").write_text(json.dumps({"task": "statistics", "level": "L1",
                                                             "framework": "toyfw", "data": entries}))
    done = run_probe("acc-check", "-api_info", tmp_path / "dump", "-o", tmp_path / "out", pythonpath=[open_site])
    assert done.returncode == 0, done.stderr
    (result,) = (tmp_path / "out").glob("accuracy_checking_result_*.csv")
    rows = {row["API Name"]: row for row in csv.DictReader(result.open(newline=""))}
    assert rows["Toy.add.0"]["Forward Test Success"] == rows["Toy.tanh.0"]["Forward Test Success"] == "pass"
    assert rows["Toy.system.0"]["Forward Test Success"] == "SKIP" and "refused" in rows["Toy.system.0"]["Message"]
    refused = run_probe("acc-check", "-api_info", tmp_path / "dump", "-o", tmp_path / "out2")
    (line,) = error_lines(refused.stderr)
    assert refused.returncode == 2 and "'toyfw' is pre-checked by no installed backend" in line
    assert "backends for: mindspore, pytorch" in line


def test_a_framework_probe_does_not_know_is_compared_against_pytorch_through_its_name_map(open_site, tmp_path):
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((4, 8)), rng.standard_normal((4, 8))
    h = x + w
    y = np.tanh(h)

    def entries(api, fc, param, tanh):
        return [(f"{api}.0.forward", f"Module.fc.{fc}.forward.0", [x, w], [h]),
                (f"Module.fc.{fc}.forward.0", None, [x], [h], {param: w}),
                (f"{tanh}.0.forward", None, [h], [y])]

    write_dump(tmp_path / "toy" / "step0" / "rank0", entries("Toy.plus", "Dense", "kernel", "Toy.tanh"),
               framework="toyfw")
    write_dump(tmp_path / "pt" / "step0" / "rank0", entries("Torch.add", "Linear", "weight", "Torch.tanh"))
    out = tmp_path / "out"
    done = run_probe("compare", tmp_path / "toy", tmp_path / "pt", "-o", out, "-lm", "--quiet",
                     pythonpath=[open_site])
    assert done.returncode == 0, done.stderr
    pairs = {row["NPU Name"]: row["Bench Name"] for row in read_csv(result_csv(out))}
    assert pairs["Toy.plus.0.forward.input.1"] == "Torch.add.0.forward.input.1"
    assert pairs["Toy.tanh.0.forward.output.0"] == "Torch.tanh.0.forward.output.0"
    assert pairs["Module.fc.Dense.forward.0.parameters.kernel"] == "Module.fc.Linear.forward.0.parameters.weight"
    assert read_summary(out)["counts"] == {"pass": 3, "warning": 0, "error": 0, "unmatched": 0}
    plain = run_probe("compare", tmp_path / "toy", tmp_path / "pt", "-o", tmp_path / "plain", "-lm", "--quiet")
    assert plain.returncode == 0, plain.stderr  # the plugin not installed: no map, nothing meets
    assert read_summary(tmp_path / "plain")["counts"] == {"pass": 0, "warning": 0, "error": 0, "unmatched": 6}


def test_config_framework_is_one_an_installed_collector_collects(tmp_path):
    config = write_config(tmp_path / "config.json", {"framework": "jax", "dump_path": str(tmp_path / "dump")})
    refused = run_probe("run", "-c", config, TRAIN_SMALL, cwd=tmp_path)
    (line,) = error_lines(refused.stderr)
    assert refused.returncode == 2 and 'key "framework": "jax" is not allowed; allowed values: "mindspore", ' \
                                       '"pytorch"' in line


def test_a_plugin_adds_a_statistic_the_monitor_records(open_site, tmp_path):
    monitor_train = REPO / "tests" / "monitor" / "scripts" / "train.py"
    config = write_config(tmp_path / "monitor.json", {"targets": {}, "wg_distribution": True,
                                                      "ops": ["norm", "kurtosis"]})
    done = run_probe("run", "--task", "monitor", "-c", config, "--dump-path", tmp_path / "mon", monitor_train,
                     "--steps", "2", pythonpath=[open_site], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    files = sorted(rank_dir(tmp_path / "mon").glob("grad_unreduced_*.csv"))
    rows = [row for path in files for row in csv.DictReader(path.open(newline=""))]
    assert rows and {"norm", "kurtosis"} <= set(rows[0])
    assert all(float(row["kurtosis"]) > 0 for row in rows)  # a kurtosis: positive, finite
    refused = run_probe("run", "--task", "monitor", "-c", config, "--dump-path", tmp_path / "mon2", monitor_train,
                        "--steps", "2", cwd=tmp_path)
    assert refused.returncode == 2 and 'key "ops": "kurtosis" is not allowed' in refused.stderr
    assert '"nans"' in refused.stderr and "Traceback" not in refused.stderr
