"""The monitor's output folder under faults (issue 32), with the real ``probe run --task monitor``: one writer at a
time, no mixing of two runs unless overwrite, no write through links, a full disk keeps the finished steps and
is one error line, a bad live config edit (``DYNAMIC_MONITOR=true``) is one warning and never stops training."""

from __future__ import annotations

import csv
import json
import resource
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from probe_core.errors import CollectionError
from probe_monitor.errors import MonitorError
from probe_torch import TrainerMon
from tests.monitor.helpers import SCRIPTS, TRAIN, rank_dir, write_config
from tests.robustness.helpers import PROBE, assert_clean_error, env


def monitor(tmp_path: Path, out: str, script: Path, *args: object, config: Path | None = None, preexec=None,
            **extra: str) -> subprocess.CompletedProcess:
    options = ["-c", str(config)] if config else []
    command = [PROBE, "run", "--task", "monitor", *options, "--dump-path", out, str(script), *map(str, args)]
    return subprocess.run(command, cwd=tmp_path, env=env() | extra, capture_output=True, text=True, timeout=300,
                          preexec_fn=preexec)


def steps_in(folder: Path, tag: str = "grad_reduced") -> list[int]:
    steps = []
    for path in sorted(folder.glob(f"{tag}_*.csv")):
        with open(path, newline="") as handle:
            steps += [int(row["step"]) for row in csv.DictReader(handle)]
    return sorted(set(steps))


def trainer_mon(tmp_path: Path, out: str, **config) -> TrainerMon:
    """A TrainerMon in this process (another process than any probe run started by a test) on a tiny model."""
    mon = TrainerMon(write_config(tmp_path / "in_process.json", wg_distribution=True, **config),
                     params_have_main_grad=False, output_dir=tmp_path / out)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    mon.set_monitor(model, optimizer)
    for _ in range(2):
        model(torch.randn(8, 4)).pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
    mon.close()
    return mon


def test_one_writer_at_a_time_and_no_mixing_of_two_runs(tmp_path):
    config = write_config(tmp_path / "monitor_config.json", wg_distribution=True)
    go = tmp_path / "go"
    command = [PROBE, "run", "--task", "monitor", "-c", str(config), "--dump-path", "out",
               str(SCRIPTS / "hold_train.py"), str(go)]
    first = subprocess.Popen(command, cwd=tmp_path, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        deadline = time.monotonic() + 120
        while not list((tmp_path / "out").glob("*-rank0-*/grad_reduced_0-0.csv")) and time.monotonic() < deadline:
            time.sleep(0.1)  # the first run holds the folder and has written its step 0
        second = monitor(tmp_path, "out", TRAIN, "--steps", 2, config=config)
        assert_clean_error(second, '"out" is being written by another probe run')
        with pytest.raises(CollectionError, match="is being written by another probe run"):
            trainer_mon(tmp_path, "out")
    finally:
        go.touch()
        stdout, stderr = first.communicate(timeout=120)
    assert first.returncode == 0, stderr
    assert steps_in(rank_dir(tmp_path / "out")) == [0, 1, 2]  # the first run's data, whole

    first_folder = rank_dir(tmp_path / "out")
    refused = rf'out: already holds a monitor run \({first_folder.name}\); .* "overwrite": true'
    with pytest.raises(MonitorError, match=refused):
        trainer_mon(tmp_path, "out")
    assert steps_in(rank_dir(tmp_path / "out")) == [0, 1, 2]

    trainer_mon(tmp_path, "out", overwrite=True)
    assert steps_in(rank_dir(tmp_path / "out")) == [0, 1]  # the new run only: the old one was removed
    assert not first_folder.exists()
    with open(rank_dir(tmp_path / "out") / "grad_reduced_0-0.csv", newline="") as handle:
        assert {row["name"] for row in csv.DictReader(handle)} == {"weight", "bias"}
    assert [p.name for p in (tmp_path / "out").iterdir()] == [rank_dir(tmp_path / "out").name]  # lock, marker gone


def test_no_write_through_a_symbolic_link(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "linked").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(MonitorError, match="linked: is a symbolic link"):
        trainer_mon(tmp_path, "linked")
    (tmp_path / "out").mkdir()
    link = tmp_path / "out" / "Jan02_03-04-05-rank0-0123abcd"  # an earlier run's rank folder, linked
    link.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(MonitorError, match=f"{link.name}: is a symbolic link"):
        trainer_mon(tmp_path, "out", overwrite=True)  # not even removed through
    assert list(elsewhere.iterdir()) == []
    assert [p.name for p in (tmp_path / "out").iterdir()] == [link.name]  # no lock left behind


def test_a_full_disk_keeps_the_finished_steps_and_is_one_error_line(tmp_path):
    def small_disk() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as ENOSPC would
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))  # no file over 20 kB

    config = write_config(tmp_path / "monitor_config.json", wg_distribution=True, param_distribution=True,
                          step_count_per_record=100_000)
    done = monitor(tmp_path, "out", TRAIN, "--steps", 300, config=config, preexec=small_disk)
    line = assert_clean_error(done, "writing the monitor output of step", "the disk is full", "_0-")
    folder = rank_dir(tmp_path / "out")
    files = sorted(folder.glob("*.csv"))
    last = {int(p.stem.rsplit("-", 1)[1]) for p in files}
    assert len(last) == 1, files  # every quantity's file ends at the same step
    last_step = last.pop()
    assert 3 <= last_step < 299 and f"written completely: steps 0-{last_step}" in line
    assert f"writing the monitor output of step {last_step + 1} " in line
    for path in files:  # the finished steps, whole: every row complete, every step there
        with open(path, newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert all(None not in row.values() and row["dtype"] for row in rows), path
        assert sorted({int(row["step"]) for row in rows}) == list(range(last_step + 1)), path
    assert f"probe monitor: {last_step + 1} steps recorded (0-{last_step})" in done.stderr


def test_a_bad_live_config_edit_is_one_warning_and_training_goes_on(tmp_path):
    config = write_config(tmp_path / "monitor_config.json", wg_distribution=True, dynamic_on=True)
    typos = ['{"wg_distribution": true, "dynamic_on": tru',  # bad JSON
             '{"wg_distributon": true, "dynamic_on": true}',  # unknown key
             '{"wg_distribution": "yes", "dynamic_on": true}',  # bad value type
             '{"wg_distribution": true, "dynamic_on": true, "step_interval": 0}',  # bad value
             '{"wg_distribution": true, "dynamic_on": true, "format": "parquet"}',  # no such writer
             '["wg_distribution"]']  # not an object
    edits = tmp_path / "edits.json"
    edits.write_text(json.dumps(typos + ['{"wg_distribution": true, "dynamic_on": false}']))
    done = monitor(tmp_path, "out", SCRIPTS / "live_edit.py", config, edits, config=config, DYNAMIC_MONITOR="true")
    assert done.returncode == 0, done.stderr
    assert f"trained {len(typos) + 3} steps" in done.stdout
    warnings = [line for line in done.stderr.splitlines() if "live config edit is ignored" in line]
    assert len(warnings) == len(typos), done.stderr
    for warning, needle in zip(warnings, ["not valid JSON", 'unknown key "wg_distributon"', 'key "wg_distribution"',
                                          'key "step_interval"', 'key "format": "parquet"', "top level"]):
        assert str(config) in warning and needle in warning, (needle, warning)
    # the last good config recorded every step through the typos; the good edit switched it off
    assert steps_in(rank_dir(tmp_path / "out")) == list(range(len(typos) + 2))
