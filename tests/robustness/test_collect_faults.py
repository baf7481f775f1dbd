"""Issue 32: collection honest under faults. Real training scripts under the real ``probe run`` (or python)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.compare.helpers import read_summary
from tests.robustness.helpers import PROBE, env, run_probe

SCRIPTS = Path(__file__).parent / "scripts"

#: A loop on a slow disk: each tensor file takes 10 ms to write (the writer thread falls behind training, as
#: on a loaded machine). After each step it prints which steps' dump.json exist; ``--kill-at K`` SIGKILLs
#: itself in step K, ``--pause`` seconds after the forward (the writer is then amid step K-1's files).
_SLOW_DISK_TRAINING = """
import argparse, os, signal, sys, time
from pathlib import Path
import torch
import torch.nn as nn
import probe_torch.ptfile as ptfile

parser = argparse.ArgumentParser()
parser.add_argument("--dump", required=True)
parser.add_argument("--steps", type=int, default=400)
parser.add_argument("--kill-at", type=int, default=-1)
parser.add_argument("--pause", type=float, default=0.0)
args = parser.parse_args()

real_save = ptfile.save
def slow_save(tensor, path):
    time.sleep(0.01)
    return real_save(tensor, path)
ptfile.save = slow_save

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 8)
for step in range(args.steps):
    loss = model(x).pow(2).mean()
    if step == args.kill_at:
        time.sleep(args.pause)
        os.kill(os.getpid(), signal.SIGKILL)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    written = sorted(int(p.parent.parent.name[4:]) for p in Path(args.dump).glob("step*/rank0/dump.json"))
    print(f"step {step} done; written {written}", flush=True)
"""


def _script(tmp_path: Path) -> Path:
    path = tmp_path / "train_slow_disk.py"
    path.write_text(_SLOW_DISK_TRAINING)
    return path


def _command(tmp_path: Path, dump: Path, *args: object) -> list[str]:
    return [PROBE, "run", "--task", "tensor", "--dump-path", str(dump), str(_script(tmp_path)),
            "--dump", str(dump), *map(str, args)]


def _done_lines(stdout: str) -> list[tuple[int, list[int]]]:
    """(step, steps whose dump.json existed when it ended) of each ``step N done`` line."""
    found = []
    for line in stdout.splitlines():
        if line.startswith("step ") and " done; written " in line:
            head, _, written = line.partition(" done; written ")
            found.append((int(head.split()[1]), json.loads(written)))
    return found


def _missing_tensor_files(dump: Path) -> list[str]:
    """Every data_name of every dump.json and debug.json under ``dump`` whose file is not on disk."""
    def names(value) -> list[str]:
        if isinstance(value, dict):
            own = [value["data_name"]] if "data_name" in value else []
            return own + [n for item in value.values() for n in names(item)]
        return [n for item in value for n in names(item)] if isinstance(value, list) else []

    missing = []
    for path in sorted(dump.glob("step*/rank*/*.json")):
        if path.name in ("dump.json", "debug.json"):
            tensor_dir = path.parent / "dump_tensor_data"
            missing += [f"{path}: {n}" for n in names(json.loads(path.read_text())["data"])
                        if not (tensor_dir / n).is_file()]
    return missing


def test_a_sigkilled_tensor_run_runs_one_step_ahead_and_recovers_only_files_on_disk(tmp_path):
    dump = tmp_path / "killed"
    run = subprocess.Popen(_command(tmp_path, dump), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=env(), cwd=tmp_path)
    lines = []
    try:
        deadline = time.time() + 240
        while len(lines) < 6 and time.time() < deadline:  # killed from outside, wherever step 6 happens to be
            line = run.stdout.readline()
            assert line or run.poll() is None, run.stderr.read()[-3000:]
            lines += _done_lines(line)
    finally:
        run.send_signal(signal.SIGKILL)
        run.communicate(timeout=60)
    assert run.returncode == -signal.SIGKILL and len(lines) == 6
    for step, written in lines:  # back-pressure: when step N ends, step N-1 is on disk whole
        assert step == 0 or step - 1 in written, (step, written)
    steps = sorted(dump.glob("step*/rank0"))
    finished = [s for s in steps if (s / "dump.json").is_file()]
    assert len(finished) >= 5 and len(steps) - len(finished) <= 2  # at most the killed step and the one before
    assert _missing_tensor_files(dump) == []  # a finished step names only files on disk

    journals = [s for s in steps if (s / ".journal.jsonl").is_file()]
    assert journals and set(journals).isdisjoint(finished)

    recovered = run_probe("recover", dump)
    assert recovered.returncode == 0, recovered.stderr
    assert list(dump.glob("step*/rank0/.journal.jsonl")) == []
    for step in journals:  # recovered, or every entry left out (the killed run wrote none of its files)
        assert (step / "dump.json").is_file() or f"{step}: left out" in recovered.stderr, recovered.stderr
    assert _missing_tensor_files(dump) == []  # nor does a recovered one


def test_compare_names_the_killed_runs_missing_file_and_recover_leaves_its_entries_out(tmp_path):
    killed = subprocess.run(_command(tmp_path, tmp_path / "killed", "--kill-at", 2, "--pause", 0.15),
                            capture_output=True, text=True, env=env(), cwd=tmp_path, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    full = subprocess.run(_command(tmp_path, tmp_path / "full", "--steps", 3), capture_output=True, text=True,
                          env=env(), cwd=tmp_path, timeout=300)
    assert full.returncode == 0, full.stderr[-3000:]
    step1 = tmp_path / "killed" / "step1" / "rank0"  # ended, its files half written when the kill came
    assert (step1 / ".journal.jsonl").is_file() and not (step1 / "dump.json").exists()
    written = len(list((step1 / "dump_tensor_data").iterdir()))
    assert 0 < written < len(list((tmp_path / "full" / "step1" / "rank0" / "dump_tensor_data").iterdir()))

    cmp = run_probe("compare", tmp_path / "killed", tmp_path / "full", "-o", tmp_path / "cmp", "--step", "1")
    assert cmp.returncode == 2 and "Traceback" not in cmp.stderr, cmp.stderr[-3000:]
    error = [line for line in cmp.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "tensor file missing" in error[0], cmp.stderr[-3000:]
    assert "killed before writing it" in error[0] and f"probe recover {tmp_path / 'killed'}" in error[0]
    assert "copy the whole dump folder" not in error[0]

    recovered = run_probe("recover", tmp_path / "killed")
    assert recovered.returncode == 0, recovered.stderr
    assert f"{step1}: left out" in recovered.stderr and "names only files on disk" in recovered.stderr
    assert _missing_tensor_files(tmp_path / "killed") == []
    again = run_probe("compare", tmp_path / "killed", tmp_path / "full", "-o", tmp_path / "cmp2", "--step", "1")
    assert again.returncode == 0, again.stderr[-3000:]
    summary = read_summary(tmp_path / "cmp2")
    assert summary["partial"] and summary["counts"]["pass"] >= 1


_SAVES = """
import sys
import torch
from probe_torch import PrecisionDebugger

debugger = PrecisionDebugger(task="tensor", dump_path=sys.argv[1], level="L1")
x = torch.ones(3, requires_grad=True)
debugger.start()
for name in ("../../../../escape", sys.argv[2], "layer/attn", "plain"):
    PrecisionDebugger.save(x * 2, name)
(x * 3).sum().backward()
debugger.stop()
debugger.step()
debugger.close()
"""


def test_a_save_name_never_makes_a_path_leave_the_dump_folder(tmp_path):
    script, outside = tmp_path / "saves.py", tmp_path / "abs" / "x"
    script.write_text(_SAVES)
    result = subprocess.run([sys.executable, str(script), str(tmp_path / "dump"), str(outside)],
                            capture_output=True, text=True, env=env(), cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dump", "saves.py"]  # nothing written beside the dump
    tensor_dir = tmp_path / "dump" / "step0" / "rank0" / "dump_tensor_data"
    assert all(p.is_file() for p in tensor_dir.iterdir())  # one folder: no name made a subfolder
    debug = json.loads((tensor_dir.parent / "debug.json").read_text())["data"]
    assert "../../../../escape.0.debug" in debug  # the entry keeps the name the script gave
    assert debug["../../../../escape.0.debug"]["data_name"] == ".._.._.._.._escape.0.debug.pt"
    assert debug["layer/attn.0.debug"]["data_name"] == "layer_attn.0.debug.pt"
    assert debug["plain.0.debug"]["data_name"] == "plain.0.debug.pt"  # msprobe's name, unchanged
    assert debug[f"{outside}.0.debug"]["data_name"] == str(outside).replace("/", "_") + ".0.debug.pt"
    assert _missing_tensor_files(tmp_path / "dump") == []


def test_ctrl_c_is_reported_as_exit_code_130_interrupted(tmp_path):
    dump, gate = tmp_path / "d", tmp_path / "gate"
    run = subprocess.Popen([PROBE, "run", "--dump-path", str(dump), str(SCRIPTS / "train_signal.py"),
                            "--wait-file", str(gate)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=env(), cwd=tmp_path)
    try:
        deadline = time.time() + 120
        while not Path(str(gate) + ".ready").exists():  # step 0 done, the script waits: Ctrl-C now
            assert run.poll() is None and time.time() < deadline, run.communicate()
            time.sleep(0.05)
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 130, err[-3000:]
    assert "KeyboardInterrupt" in err and "Traceback" not in err
    summary = [line for line in out.splitlines() if "script exit code" in line]
    assert len(summary) == 1 and "130 (interrupted" in summary[0], out
    assert (dump / "step0" / "rank0" / "dump.json").is_file()
