"""One clear error each: bad config keys and values, an unknown writer, an unwritable output folder, a missing
optimizer (TrainerMon and probe run), a folder that is no monitor output."""

from __future__ import annotations

import pytest
import torch

from probe_core.errors import ConfigError
from probe_monitor.errors import MonitorError
from probe_torch import TrainerMon
from tests.monitor.helpers import SCRIPTS, TRAIN, probe, probe_here, write_config


def test_bad_keys_and_values_are_all_reported_by_the_cli(tmp_path):
    config = write_config(tmp_path / "monitor_config.json", wg_distributon=True, ops=["norm", "median"],
                          step_interval=0, alert={"rules": [{"rule_name": "AnomalyMagic"}]})
    done = probe("run", "--task", "monitor", "-c", config, "--dump-path", "out", TRAIN, cwd=tmp_path, check=False)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f'error: {config}: unknown key "wg_distributon" at the top level; did you mean "wg_distribution"?',
        f'error: {config}: key "ops": "median" is not allowed; allowed values: "min", "max", "mean", "norm", '
        '"zeros", "nans"',
        f'error: {config}: key "step_interval": must be a positive integer',
        f'error: {config}: key "alert": each rule needs "rule_name" among AnomalyZScore, AnomalyTurbulence; got '
        '{"rule_name": "AnomalyMagic"}',
    ]
    assert not (tmp_path / "out").exists()


def test_unknown_writer_names_the_installed_ones(tmp_path):
    mon = TrainerMon(write_config(tmp_path / "c.json", wg_distribution=True, format="parquet"),
                     output_dir=tmp_path / "out")
    model = torch.nn.Linear(2, 2)
    with pytest.raises(ConfigError, match=r'key "format": "parquet" is not an installed monitor writer; installed: '
                                          r'"csv", "tensorboard"'):
        mon.set_monitor(model, torch.optim.SGD(model.parameters(), lr=0.1))


def test_unwritable_output_folder(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    mon = TrainerMon(write_config(tmp_path / "c.json", wg_distribution=True), output_dir=blocker / "out")
    model = torch.nn.Linear(2, 2)
    with pytest.raises(MonitorError, match=r"a_file/out: cannot be created \(.*\); pass a writable folder"):
        mon.set_monitor(model, torch.optim.SGD(model.parameters(), lr=0.1))


def test_missing_optimizer(tmp_path, capfd):
    mon = TrainerMon(write_config(tmp_path / "c.json", wg_distribution=True), output_dir=tmp_path / "out")
    with pytest.raises(MonitorError, match=r"set_monitor: optimizer is None; pass the optimizer"):
        mon.set_monitor(torch.nn.Linear(2, 2), None)
    assert probe_here("run", "--task", "monitor", "--dump-path", "out", SCRIPTS / "no_step.py", cwd=tmp_path) == 2
    assert "error: probe run --task monitor: the script never called optimizer.step()" in capfd.readouterr().err


def test_compare_of_a_folder_without_monitor_files(tmp_path):
    (tmp_path / "empty").mkdir()
    done = probe("monitor", "compare", "empty", "empty", "-o", "out", cwd=tmp_path, check=False)
    assert done.returncode == 2
    assert "empty: no monitor CSV files" in done.stderr
