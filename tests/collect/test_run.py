"""``probe run`` on unmodified scripts: steps at optimizer steps, exit codes, errors, crash safety."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from probe_core.collect import recover_step
from tests.collect.helpers import PROBE, ROOT, load, run_probe

SCRIPT = ROOT / "tests" / "collect" / "scripts" / "train_small.py"


def _names(rank_dir):
    return list(load(rank_dir / "dump.json")["data"])


@pytest.mark.slow
def test_run_unmodified_script_writes_one_folder_per_optimizer_step(tmp_path):
    result = run_probe("run", str(SCRIPT), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "done" in result.stdout and "collection summary" in result.stdout
    assert sorted(p.name for p in (tmp_path / "probe_dump").iterdir()) == ["step0", "step1", "step2"]
    for step in range(3):
        names = _names(tmp_path / "probe_dump" / f"step{step}" / "rank0")
        assert "Module.0.Linear.forward.0" in names and "Functional.linear.0.forward" in names
        assert "Module.2.Linear.parameters_grad.0" in names
        # the step ends with its update: SGD's param.add_(grad, alpha=-lr) for each of the four parameters
        assert names[-4:] == [f"Tensor.add_.{i}.forward" for i in range(4)]
    assert not list((tmp_path / "probe_dump").rglob(".journal.jsonl"))
    # recording starts at the model's first forward: construction and weight init (torch.empty's
    # uninitialised memory, kaiming_uniform_) are no entries, as with start() called after them
    step0 = _names(tmp_path / "probe_dump" / "step0" / "rank0")
    assert step0[0] == "Functional.linear.0.forward"
    assert not any("empty" in n or "uniform" in n for n in step0)
    stacks = load(tmp_path / "probe_dump" / "step0" / "rank0" / "stack.json")
    for _names_, lines in stacks.values():  # stacks end at the script, not in probe's launcher
        assert "in <module>" in lines[-1] and "train_small.py" in lines[-1]


@pytest.mark.slow
@pytest.mark.parametrize("behaviour,code,message", [("exit", 3, ""), ("raise", 1, "ValueError: boom")])
def test_run_script_that_exits_or_raises(tmp_path, behaviour, code, message):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"task": "statistics", "level": "L0", "dump_path": "out"}))
    result = run_probe("run", "-c", str(config), "--level", "L1", str(SCRIPT), behaviour, cwd=tmp_path)
    assert result.returncode == code, result.stderr
    assert message in result.stderr
    assert "collection summary" in result.stdout
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["step0", "step1"]
    names = _names(tmp_path / "out" / "step1" / "rank0")
    assert names and not any(n.startswith("Module.") for n in names)  # --level L1 overrode the config


@pytest.mark.parametrize("case", ["bad_config", "unwritable", "missing_script"])
def test_run_errors_are_one_clear_line_and_write_nothing(tmp_path, case):
    args = ["run", str(SCRIPT)]
    if case == "bad_config":
        (tmp_path / "config.json").write_text('{"task": "statistics", "levle": "L1"}')
        args = ["run", "-c", "config.json", str(SCRIPT)]
    elif case == "unwritable":  # /proc refuses new folders even to root
        args = ["run", "--dump-path", "/proc/probe_dump", str(SCRIPT)]
    else:
        args = ["run", str(tmp_path / "nope.py")]
    before = sorted(p.name for p in tmp_path.iterdir())
    result = run_probe(*args, cwd=tmp_path)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in result.stderr
    assert {"bad_config": "did you mean", "unwritable": "not writable", "missing_script": "no such script"}[case] \
        in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_dump_path_under_a_file_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    result = run_probe("run", "--dump-path", str(tmp_path / "file" / "dump"), str(SCRIPT), cwd=tmp_path)
    assert result.returncode == 2 and "is a file, not a folder" in result.stderr


@pytest.mark.slow
def test_sigkill_mid_step_keeps_completed_steps_and_journal(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with subprocess.Popen([PROBE, "run", str(SCRIPT), "hang"], cwd=tmp_path, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) as proc:
        try:
            assert proc.stdout.readline().strip() == "READY"
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    dump = tmp_path / "probe_dump"
    for step in (0, 1):  # completed steps: final, valid files, no journal
        rank_dir = dump / f"step{step}" / "rank0"
        assert len(_names(rank_dir)) > 10
        assert load(rank_dir / "construct.json") and load(rank_dir / "stack.json")
        assert not (rank_dir / ".journal.jsonl").exists()
    broken = dump / "step2" / "rank0"
    assert not (broken / "dump.json").exists()
    recover_step(broken)
    names = _names(broken)  # the interrupted step is readable up to its last record
    assert "Module.2.Linear.forward.0" in names and "Functional.linear.1.forward" in names
    assert load(broken / "dump.json")["level"] == "mix"
