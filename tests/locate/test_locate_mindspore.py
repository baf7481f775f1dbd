"""probe locate with MindSpore (PyNative, CPU): a MindSpore target against its PyTorch twin through the name maps,
every stage; and two ranks under msrun, stage 1.

``train_tiny_ms.py`` and ``train_tiny_pt.py`` train the same MLP from the same weights on the same batches
(``twin_data``); ``--gelu-tanh-from N`` switches the MindSpore GELU to its tanh approximation from step N.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

from tests.locate.test_locate import locate, state

HERE = Path(__file__).parent
PY = sys.executable
MS_SCRIPT, PT_SCRIPT = HERE / "train_tiny_ms.py", HERE / "train_tiny_pt.py"


def test_mindspore_target_against_pytorch_bench(tmp_path):
    """Every stage: stage 1's runs end after the 3 steps monitored (MindSpore too), L0 and mix name the MindSpore
    cell and API through the name maps (``Cell`` -> ``Module``), and the replay runs the MindSpore call on the
    PyTorch bench's input (its .pt file) through acc-check's MindSpore backend: the call's argument differs."""
    out, config = tmp_path / "out", tmp_path / "locate.json"
    # MindSpore's nn.Adam holds its betas in float32: exp_avg_sq differs from PyTorch's by 1.3e-5 (relative) at
    # every step, above the default rtol 1e-5 (stage 1 would answer "update" at step 1)
    config.write_text(json.dumps({"rtol": 3e-5}))
    done = locate(out, "-c", str(config), "--steps", "3", "--bench", f"{PY} {PT_SCRIPT} --steps 5",
                  "--target", f"{PY} {MS_SCRIPT} --steps 5 --gelu-tanh-from 2")
    monitor = state(out, "stage1-monitor")["finding"]
    assert (monitor["step"], monitor["rank"]) == (2, 0), done.stdout
    for side in ("bench", "target"):  # steps 0-2 ran, 3 and 4 did not
        log = (out / "stage1-monitor" / f"{side}.log").read_text()
        assert "step 1: loss" in log and "step 3: loss" not in log, log[-2000:]
        assert "the script ends after step 2, the last one stage 1 monitors" in log
    l0 = state(out, "stage2-l0")["finding"]
    assert (l0["name"], l0["step"]) == ("Cell.1.GELU.forward.0", 2)
    assert "-lm" in state(out, "stage2-l0")["ran"][-1]  # the compare maps the names across frameworks
    mix = state(out, "stage3-mix")["finding"]
    assert (mix["name"], mix["module"]) == ("Functional.gelu.0.forward", "Cell.1.GELU.forward.0")
    answer = json.loads((out / "locate_summary.json").read_text())["answer"]
    assert answer["kind"] == "call" and "'tanh' vs 'none'" in answer["text"], answer
    assert answer["acc_check"]["pass"] == 1
    replay = json.loads((out / "stage4-replay" / "replay" / "dump.json").read_text())
    assert replay["framework"] == "mindspore"
    record = replay["data"]["Functional.gelu.0.forward"]
    assert record["input_args"][0]["data_name"].endswith(".pt")  # the bench's (PyTorch's) input
    assert record["output"][0]["data_name"].endswith(".npy")  # the target's own output


def _free_port() -> int:
    with socket.socket() as handle:
        handle.bind(("127.0.0.1", 0))
        return handle.getsockname()[1]


def test_two_ranks_under_msrun(tmp_path):
    """2 ranks under msrun (MindSpore's CPU collectives), the last rank's GELU switched from step 1, both sides at
    once: stage 1 monitors both ranks, names rank 1, and every rank of both runs ends right after step 1, where the
    runs part (of the 3 steps monitored)."""
    out, launcher = tmp_path / "out", Path(PY).with_name("msrun")
    path = f"PATH={Path(PY).parent}:/usr/bin:/bin"  # msrun starts each rank with the 'python' of PATH

    def command(side: str, extra: str = "") -> str:
        return (f"{path} {launcher} --worker_num=2 --local_worker_num=2 --join=True --master_port={_free_port()} "
                f"--log_dir={tmp_path / side} {MS_SCRIPT} --steps 4{extra}")

    done = locate(out, "--bench", command("bench"), "--target", command("target", " --gelu-tanh-from 1"),
                  "--steps", "3", "--stop-after", "monitor")
    monitor = state(out, "stage1-monitor")["finding"]
    assert (monitor["step"], monitor["rank"]) == (1, 1), done.stdout
    folders = [p for p in (out / "stage1-monitor" / "target" / "monitor").iterdir() if p.is_dir() and any(p.iterdir())]
    ranks = [p.name.split("rank")[1][:1] for p in folders]
    assert sorted(ranks) == ["0", "1"]  # both workers ran under probe (msrun's scheduler records nothing)
    for side in ("bench", "target"):
        for rank in (0, 1):
            log = (tmp_path / side / f"worker_{rank}.log").read_text()
            assert "the script ends after step 1: the runs part there (" in log and "step 2: loss" not in log, log
    # the L0 dump beside the monitor: both workers' ranks at both steps (msrun's scheduler records nothing)
    dumped = sorted(p.relative_to(out / "stage1-monitor" / "target" / "l0").as_posix()
                    for p in (out / "stage1-monitor" / "target" / "l0").glob("step*/rank*"))
    assert dumped == ["step0/rank0", "step0/rank1", "step1/rank0", "step1/rank1"]
