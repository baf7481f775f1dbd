"""Collection of CUDA tensors (``make gpu-check`` runs the ``gpu`` tests): statistics, md5 and tensor modes give
the values the same model gives on the CPU. Skipped, naming the missing GPU, where torch sees no CUDA device."""

from __future__ import annotations

import pytest
import torch

from tests.collect.helpers import load

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch sees none)")]


def _dump(tmp_path, device: str, task: str, summary_mode: str | None = None) -> dict:
    from probe_torch import PrecisionDebugger

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).to(device)
    x = torch.randn(8, 16).to(device)
    options = {"summary_mode": summary_mode} if summary_mode else {}
    debugger = PrecisionDebugger(dump_path=str(tmp_path / device), task=task, level="mix", **options)
    debugger.start(model)
    model(x).pow(2).mean().backward()
    debugger.stop()
    debugger.step()
    debugger.close()
    return load(tmp_path / device / "step0" / "rank0" / "dump.json")["data"]


@pytest.mark.parametrize("task,summary_mode", [("statistics", None), ("statistics", "md5"), ("tensor", None)])
def test_cuda_tensors_recorded_as_on_cpu(tmp_path, task, summary_mode):
    cpu, cuda = _dump(tmp_path, "cpu", task, summary_mode), _dump(tmp_path, "cuda", task, summary_mode)
    assert cuda.keys() == cpu.keys()
    out_cpu = cpu["Functional.linear.0.forward"]["output"][0]
    out_cuda = cuda["Functional.linear.0.forward"]["output"][0]
    for stat in ("Max", "Min", "Mean", "Norm"):
        assert out_cuda[stat] == pytest.approx(out_cpu[stat], rel=1e-3, abs=1e-5)
    if task == "tensor":
        assert (tmp_path / "cuda" / "step0" / "rank0" / "dump_tensor_data").is_dir()
