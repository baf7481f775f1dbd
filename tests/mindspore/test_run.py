"""``probe run`` on unmodified MindSpore scripts; GRAPH_MODE and ``@jit`` are refused or reported, never silent."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import FIXTURE, read_json

HERE = Path(__file__).resolve().parent
PROBE = str(Path(sys.executable).parent / "probe")


def _probe_run(tmp_path: Path, script: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PROBE, "run", "--dump-path", str(tmp_path / "dump"), str(script), *args],
                          capture_output=True, text=True, timeout=240, cwd=tmp_path)


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(body))
    return path


@pytest.mark.slow
def test_probe_run_dumps_each_optimizer_step(tmp_path):
    proc = _probe_run(tmp_path, HERE / "ms_net.py", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "steps written" in proc.stdout and "0-1" in proc.stdout
    for step in (0, 1):
        dump = read_json(tmp_path / "dump" / f"step{step}" / "rank0" / "dump.json")
        assert dump["framework"] == "mindspore" and dump["level"] == "mix"
        # the root net is found by itself; optimizer calls are no entries
        assert list(dump["data"]) == list(read_json(FIXTURE / "dump.json")["data"])


def _graph_mode_script(tmp_path: Path, where: str) -> Path:
    return _script(tmp_path, f"""
        import mindspore as ms
        import numpy as np
        from mindspore import nn
        ms.set_device("CPU")
        {'ms.set_context(mode=ms.GRAPH_MODE)' if where == 'before' else ''}
        from probe_mindspore import PrecisionDebugger
        debugger = PrecisionDebugger(dump_path="dump", task="statistics", level="L0")
        debugger.start()
        {'ms.set_context(mode=ms.GRAPH_MODE)' if where == 'after' else ''}
        nn.Dense(2, 2)(ms.Tensor(np.ones((1, 2), np.float32)))
        debugger.stop()
    """)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["before", "after"])
def test_graph_mode_is_refused_with_a_clear_message(tmp_path, where):
    proc = subprocess.run([sys.executable, str(_graph_mode_script(tmp_path, where))], capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode != 0
    assert "GRAPH_MODE" in proc.stderr and "PYNATIVE_MODE" in proc.stderr
    assert not (tmp_path / "dump").exists() or not list((tmp_path / "dump").rglob("dump.json"))


@pytest.mark.slow
def test_jit_function_is_reported(tmp_path):
    script = _script(tmp_path, """
        import mindspore as ms
        import numpy as np
        from mindspore import mint, nn
        ms.set_device("CPU")

        dense = nn.Dense(3, 3)

        @ms.jit
        def compiled(x):
            return dense(x) * 2

        x = ms.Tensor(np.ones((2, 3), np.float32))
        compiled(x)
        mint.exp(dense(x))  # eager: recorded
    """)
    proc = _probe_run(tmp_path, script)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "compiled runs under @jit" in proc.stderr
    data = read_json(tmp_path / "dump" / "step0" / "rank0" / "dump.json")["data"]
    assert "Mint.exp.0.forward" in data and "Tensor.__mul__.0.forward" not in data


def _killed_midway_script(tmp_path: Path) -> Path:
    return _script(tmp_path, """
        import os, signal
        import mindspore as ms
        import numpy as np
        from mindspore import mint, nn
        ms.set_device("CPU")
        from probe_mindspore import PrecisionDebugger

        class Net(nn.Cell):
            def __init__(self):
                super().__init__()
                self.a = nn.Dense(4, 4)
                self.b = nn.Dense(4, 2)

            def construct(self, x):
                return self.b(mint.tanh(self.a(x)))

        net = Net()
        debugger = PrecisionDebugger(dump_path="dump", task="statistics", level="mix")
        debugger.start(net)
        x = ms.Tensor(np.ones((3, 4), np.float32))
        net(x)
        debugger.step()          # step 0 is complete
        debugger.start(net)
        net.a(x)                 # a top-level cell of step 1 ends: journaled
        if os.environ.get("KILL"):
            import time
            time.sleep(1)        # the writer thread appends the flushed batch to the journal
            os.kill(os.getpid(), signal.SIGKILL)
    """)


@pytest.mark.slow
def test_step_in_progress_is_written_at_exit(tmp_path):
    proc = subprocess.run([sys.executable, str(_killed_midway_script(tmp_path))], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert list(read_json(tmp_path / "dump" / "step1" / "rank0" / "dump.json")["data"]) == \
        ["Primitive.shape_op.Shape.0.forward", "Primitive.matmul.MatMul.0.forward",
         "Primitive.bias_add.BiasAdd.0.forward", "Cell.a.Dense.forward.0"]  # counts restart each step
    assert "Cell.b.Dense.forward.0" in read_json(tmp_path / "dump" / "step0" / "rank0" / "dump.json")["data"]


@pytest.mark.slow
def test_killed_process_keeps_finished_steps_and_a_recoverable_journal(tmp_path):
    import os

    from probe_core.collect import recover_step

    proc = subprocess.run([sys.executable, str(_killed_midway_script(tmp_path))], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env={**os.environ, "KILL": "1"})
    assert proc.returncode == -9
    step0 = read_json(tmp_path / "dump" / "step0" / "rank0" / "dump.json")
    assert list(step0["data"])[-1] == "Cell.b.Dense.forward.0"
    rank1 = tmp_path / "dump" / "step1" / "rank0"
    assert not (rank1 / "dump.json").exists()
    recover_step(rank1)
    recovered = read_json(rank1 / "dump.json")
    assert recovered["framework"] == "mindspore" and list(recovered["data"])[-1] == "Cell.a.Dense.forward.0"
