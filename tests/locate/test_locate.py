"""probe locate end to end: the real CLI on a tiny training script with a planted bug after step 0.

One funnel run is shared (module fixture): first with ``--stop-after l0``, then resumed to the end, then rerun
with every stage reused. Its commands run the script under the venv's Python, both sides at once (--parallel).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from probe_core import testing
from probe_core.api import ConfigError

SCRIPT = Path(__file__).with_name("train_tiny.py")
PROBE = str(Path(sys.executable).parent / "probe")
PY = sys.executable


def locate(out: Path, *args: str, parallel: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROBE_", "MONITOR_"))} | {"COLUMNS": "200"}
    done = subprocess.run([PROBE, "locate", "-o", str(out), *(["--parallel"] if parallel else []), *args], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def state(out: Path, folder: str) -> dict:
    return json.loads((out / folder / "locate_state.json").read_text())


@pytest.fixture(scope="module")
def gelu(tmp_path_factory):
    """The GELU of the target switches to its tanh approximation from step 2: three runs of the same funnel. The
    script runs 6 steps; stage 1 monitors the first 4 (the default)."""
    out = tmp_path_factory.mktemp("locate") / "out"
    commands = ["--bench", f"{PY} {SCRIPT} --steps 6", "--target", f"{PY} {SCRIPT} --steps 6 --gelu-tanh-from 2"]
    first = locate(out, *commands, "--stop-after", "l0")
    first_states = {f: state(out, f) for f in ("stage1-monitor", "stage2-l0")}
    second = locate(out, *commands)
    third = locate(out, *commands)
    return out, (first, second, third), first_states


def test_stage_findings(gelu):
    out, _, _ = gelu
    monitor = state(out, "stage1-monitor")["finding"]
    assert (monitor["step"], monitor["rank"], monitor["quantity"]) == (2, 0, "grad_unreduced")
    l0 = state(out, "stage2-l0")["finding"]
    assert (l0["name"], l0["step"], l0["kind"]) == ("Module.1.GELU.forward.0", 2, "adds error")
    mix = state(out, "stage3-mix")
    assert mix["finding"]["name"] == "Functional.gelu.0.forward"
    # a forward divergence in a small module: one pair of runs records the tensors of everything inside it at step 2
    config = json.loads((out / "stage3-mix" / "config.json").read_text())
    assert (config["task"], config["level"], config["step"]) == ("tensor", "mix", [2])
    assert config["tensor"] == {"scope": ["Module.1.GELU.forward.0"] * 2, "data_mode": ["forward"]}
    assert sum(line.startswith(("bench:", "target:")) for line in mix["ran"]) == 2
    assert not (out / "stage3-mix" / "tensor").exists()  # no second pair
    tensors = out / "stage3-mix" / "target" / "step2" / "rank0"
    assert sorted(json.loads((tensors / "dump.json").read_text())["data"]) == [
        "Functional.gelu.0.forward", "Module.1.GELU.forward.0"]
    assert sorted(p.name for p in (tensors / "dump_tensor_data").iterdir()) == [
        "Functional.gelu.0.forward.input.0.pt", "Functional.gelu.0.forward.output.0.pt",
        "Module.1.GELU.forward.0.input.0.pt", "Module.1.GELU.forward.0.output.0.pt"]
    # stage 3: earlier steps ran without recording; the steps after the one recorded did not run (exit_after_last_step)
    for log in ("stage3-mix/target.log", "stage3-mix/bench.log"):
        text = (out / log).read_text()
        assert "step 1: loss" in text and "step 2: loss" not in text and "step 3: loss" not in text, log
        assert "exit_after_last_step: the script ends after step 2" in text
    # stage 1's runs, at the same time, both end right after step 2, where they part (of the 4 steps monitored):
    # steps 0-2 ran (the script prints after the update, so not step 2), 3-5 did not
    for side in ("bench", "target"):
        monitored = (out / "stage1-monitor" / f"{side}.log").read_text()
        assert "step 1: loss" in monitored and "step 2: loss" not in monitored, monitored
        assert "the script ends after step 2: the runs part there (grad_unreduced of 2.weight, step 2" in monitored
        assert "the dump recorded steps 0-2" in monitored
    # stage 1's runs dumped L0 beside the monitor; stage 2 ran no training: it compares their step 2, hard-linked
    for side in ("bench", "target"):
        dumped, compared = out / "stage1-monitor" / side / "l0", out / "stage2-l0" / side
        assert sorted(p.name for p in dumped.iterdir()) == [f"step{i}" for i in range(3)]
        assert [p.relative_to(compared).as_posix() for p in compared.rglob("dump.json")] == ["step2/rank0/dump.json"]
        linked = compared / "step2" / "rank0" / "dump.json"
        assert linked.stat().st_ino == (dumped / "step2" / "rank0" / "dump.json").stat().st_ino
    assert [line.split()[:2] for line in state(out, "stage2-l0")["ran"]] == [["probe", "compare"]]
    assert state(out, "stage2-l0")["bytes"] < state(out, "stage1-monitor")["bytes"]  # the dumps count in stage 1


def test_referee_reads_each_step_once(gelu):
    """Stage 1's referee checked steps 0, 1, 2 (where the runs part), each check judging the new step's rows alone
    (probe monitor compare --incremental), with the verdict of the final compare."""
    out, _, _ = gelu
    referee = out / "stage1-monitor" / "referee"
    log = (referee / "compare.log").read_text()
    assert re.findall(r"judged steps (\d+)-(\d+)", log) == [("0", "0"), ("1", "1"), ("2", "2")], log
    assert "started over" not in log
    checked = json.loads((referee / "compare" / "summary.json").read_text())["first_divergence"]
    final = json.loads((out / "stage1-monitor" / "compare" / "summary.json").read_text())["first_divergence"]
    assert checked == final and checked["step"] == 2
    assert json.loads((referee / "target" / "verdict.json").read_text())["parted"] == checked


def test_answer_names_the_call(gelu):
    out, runs, _ = gelu
    summary = json.loads((out / "locate_summary.json").read_text())
    answer = summary["answer"]
    assert answer["kind"] == "call" and answer["api"] == "Functional.gelu.0"
    assert "approximate" in answer["text"] and "'tanh' vs 'none'" in answer["text"]
    assert answer["acc_check"]["pass"] == 1  # the replay on the bench's inputs passes its standard
    replay = json.loads((out / "stage4-replay" / "replay" / "dump.json").read_text())
    assert replay["data"]["Functional.gelu.0.forward"]["input_kwargs"]["approximate"]["value"] == "tanh"
    bench_input = out / "stage3-mix" / "bench" / "step2" / "rank0" / "dump_tensor_data" / \
        "Functional.gelu.0.forward.input.0.pt"
    replayed = out / "stage4-replay" / "replay" / "dump_tensor_data" / bench_input.name
    assert replayed.read_bytes() == bench_input.read_bytes()
    assert replayed.stat().st_ino == bench_input.stat().st_ino  # a hard link: written once, counted once
    assert state(out, "stage4-replay")["bytes"] < 8192  # its dump.json and acc-check's results, no tensor
    assert "probe locate: call" in runs[1].stdout
    assert summary["bytes"] == sum(s["bytes"] for s in summary["stages"].values()) > 0


def test_stop_after_and_resume(gelu):
    out, (first, second, third), first_states = gelu
    assert "stopped after stage l0" in first.stdout
    # the resumed run reused stages 1 and 2 (their state files unchanged) and ran 3 and 4
    for folder, before in first_states.items():
        assert state(out, folder) == before
    assert second.stdout.count("finished before: reused") == 2
    assert "probe run -c" in second.stdout and "stage3-mix/config.json" in second.stdout
    # the third run ran nothing
    assert third.stdout.count("finished before: reused") == 4


def test_backward_divergence_in_two_pairs(tmp_path):
    """The GELU module's backward passes on its input gradient times 1.001 from step 1 (a hook registered before
    probe's): L0 names the module's backward, so stage 3 records statistics from its forward to its backward, then
    the tensors of the one call that adds error inside it (the hook's multiplication), and the replay names the
    call's argument."""
    out, script = tmp_path / "out", f"{PY} {SCRIPT} --steps 2"
    done = locate(out, "--bench", f"{script} --backward-hook", "--target", f"{script} --grad-bug-from 1", "--steps", "2")
    l0 = state(out, "stage2-l0")["finding"]
    assert (l0["name"], l0["step"]) == ("Module.1.GELU.backward.0", 1), done.stdout
    config = json.loads((out / "stage3-mix" / "config.json").read_text())
    assert (config["task"], config["statistics"]["scope"]) == (
        "statistics", ["Module.1.GELU.forward.0", "Module.1.GELU.backward.0"])
    mix = state(out, "stage3-mix")["finding"]
    assert (mix["name"], mix["module"]) == ("Tensor.__mul__.0.forward", "Module.1.GELU.backward.0")
    tensors = json.loads((out / "stage3-mix" / "tensor" / "config.json").read_text())["tensor"]
    assert tensors == {"list": ["Tensor.__mul__.0.forward"], "data_mode": ["forward"]}
    answer = json.loads((out / "locate_summary.json").read_text())["answer"]
    assert answer["kind"] == "call" and "1.001 vs 1.0" in answer["text"]


def test_update_divergence(tmp_path):
    """lr x10 from step 2: the gradients agree, the update parts: stage 1 answers, no further stage runs. The sides
    run one after the other: the bench runs the 4 steps monitored (nothing to compare it with yet), the target's run
    ends right after step 2, where it parts from the bench's."""
    out = tmp_path / "out"
    done = locate(out, "--bench", f"{PY} {SCRIPT} --steps 5", "--target", f"{PY} {SCRIPT} --steps 5 --lr-from 2",
                  parallel=False)
    answer = json.loads((out / "locate_summary.json").read_text())["answer"]
    assert (answer["kind"], answer["step"]) == ("update", 2), done.stdout
    assert "param_updated" in answer["text"]
    assert not (out / "stage2-l0").exists()
    bench, target = ((out / "stage1-monitor" / f"{side}.log").read_text() for side in ("bench", "target"))
    assert "the script ends after step 3, the last one stage 1 monitors" in bench
    assert "the script ends after step 2: the runs part there (param_updated of" in target
    assert "step 1: loss" in target and "step 2: loss" not in target  # the script prints after the update
    assert sorted(p.name for p in (out / "stage1-monitor" / "target" / "l0").iterdir()) == ["step0", "step1", "step2"]
    # each check judged the target's new step alone against the bench's finished output (its later steps left)
    log = (out / "stage1-monitor" / "referee" / "compare.log").read_text()
    assert re.findall(r"judged steps (\d+)-(\d+)", log) == [("0", "0"), ("1", "1"), ("2", "2")], log
    assert "started over" not in log


def test_from_monitor_outputs_that_agree(gelu, tmp_path):
    """Two already-made monitor outputs (here one run's, twice): nothing parts, the funnel says so and stops."""
    bench = gelu[0] / "stage1-monitor" / "bench" / "monitor"
    out = tmp_path / "out"
    done = locate(out, "--bench-monitor", str(bench), "--target-monitor", str(bench))
    answer = json.loads((out / "locate_summary.json").read_text())["answer"]
    assert answer["kind"] == "agree" and "do not part" in done.stdout
    assert state(out, "stage1-monitor")["ran"][0].startswith("probe monitor compare")


def test_bad_input_is_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="--bench and --target go together"):
        testing.command(["locate", "--bench", f"{PY} {SCRIPT}", "-o", tmp_path / "o"])
    with pytest.raises(ConfigError, match=r"no training script \(\*\.py\)"):
        testing.command(["locate", "--bench", "make train", "--target", f"{PY} {SCRIPT}", "-o", tmp_path / "o"])
    config = tmp_path / "locate.json"
    config.write_text(json.dumps({"stepz": 3}))
    with pytest.raises(ConfigError, match=r"locate.json: unknown key 'stepz'"):
        testing.command(["locate", "-c", config, "-o", tmp_path / "o"])
    # stage 1's run task: its config names the monitor's config and the dump's, files beside it
    task = tmp_path / "task.json"
    task.write_text(json.dumps({"monitor": "missing.json"}))
    with pytest.raises(ConfigError, match=r"task.json: key 'monitor': 'missing.json' is not a file beside the config"):
        testing.command(["run", "--task", "locate-monitor", "-c", task, "--dump-path", tmp_path / "d", SCRIPT])
    task.write_text(json.dumps({"monitor": "task.json", "referee": "nowhere"}))
    with pytest.raises(ConfigError, match=r"key 'referee': 'nowhere' is not a folder \(probe locate's referee"):
        testing.command(["run", "--task", "locate-monitor", "-c", task, "--dump-path", tmp_path / "d", SCRIPT])


def test_two_ranks_under_torchrun(tmp_path):
    """2 gloo ranks under torchrun, rank 1's GELU switched from step 1, both sides at once: stage 1 names rank 1, and
    every rank of both runs ends right after step 1, where the runs part (of the 3 steps monitored): each rank
    reports its step and reads the same verdict, none waiting for another in a collective. The L0 dumps beside the
    monitor hold both ranks; stage 2 compares rank 1 at step 1 alone."""
    out, torchrun = tmp_path / "out", Path(PY).with_name("torchrun")
    command = f"{torchrun} --standalone --nproc_per_node=2 {SCRIPT.with_name('train_ddp.py')} --steps 4"
    done = locate(out, "--bench", command, "--target", f"{command} --gelu-tanh-from 1", "--steps", "3",
                  "--stop-after", "l0")
    monitor = state(out, "stage1-monitor")["finding"]
    assert (monitor["step"], monitor["rank"], monitor["quantity"]) == (1, 1, "grad_unreduced"), done.stdout
    for side in ("bench", "target"):
        folder = out / "stage1-monitor" / side
        monitored = [p.name for p in (folder / "monitor").iterdir() if p.is_dir()]
        assert sorted(name.split("rank")[1][:1] for name in monitored) == ["0", "1"]  # both ranks ran under probe
        assert sorted(p.relative_to(folder / "l0").as_posix() for p in (folder / "l0").glob("step*/rank*")) == [
            "step0/rank0", "step0/rank1", "step1/rank0", "step1/rank1"]
        log = (out / "stage1-monitor" / f"{side}.log").read_text()
        assert log.count("the script ends after step 1: the runs part there (grad_unreduced of module.2.bias") == 2
        assert "step 1: loss" not in log, log
        reports = out / "stage1-monitor" / "referee" / side
        assert {p.name: json.loads(p.read_text()) for p in reports.glob("rank*.json")} == {
            "rank0.json": {"step": 1, "world": 2}, "rank1.json": {"step": 1, "world": 2}}
    l0 = state(out, "stage2-l0")["finding"]
    assert (l0["name"], l0["step"], l0["rank_id"]) == ("Module.module.1.GELU.forward.0", 1, 1)
    assert sorted(p.name for p in (out / "stage2-l0" / "target").glob("step*/rank*")) == ["rank1"]


def test_a_side_that_fails_frees_the_other(tmp_path):
    """Both sides at once, the bench fails before its first step: the target's run, waiting for a verdict on step 0,
    is let go on unchecked (the referee cannot compare), and probe locate names the bench's failure."""
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROBE_", "MONITOR_"))}
    done = subprocess.run([PROBE, "locate", "-o", str(out), "--parallel", "--bench", f"{PY} {SCRIPT} --no-such-flag",
                           "--target", f"{PY} {SCRIPT} --steps 3", "--steps", "3"], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode != 0
    assert "the bench command" in done.stderr + done.stdout and "exited with code 2" in done.stderr + done.stdout
    target = (out / "stage1-monitor" / "target.log").read_text()
    assert "the script ends after step 2, the last one stage 1 monitors" in target
    verdict = json.loads((out / "stage1-monitor" / "referee" / "target" / "verdict.json").read_text())
    assert verdict["free"] and "no monitor CSV files" in verdict["error"]


def test_a_rank_goes_on_when_probe_locate_is_gone(tmp_path):
    """A rank reports its step and waits for a verdict; when the process that gives verdicts has ended (probe locate
    killed), it goes on unchecked instead of waiting for ever."""
    from probe_locate.referee import VERDICT, wait_for_verdict, write_json

    gone = subprocess.run([PY, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    write_json(tmp_path / VERDICT, {"pid": int(gone.stdout), "checked": -1, "parted": None, "free": False})
    assert wait_for_verdict(tmp_path, 1, 2, 0) is None
    assert json.loads((tmp_path / "rank1.json").read_text()) == {"step": 0, "world": 2}
    write_json(tmp_path / VERDICT, {"pid": os.getpid(), "checked": 3, "parted": {"step": 3}, "free": False})
    assert wait_for_verdict(tmp_path, 1, 2, 3) == {"step": 3}  # a verdict on the step: its divergence
