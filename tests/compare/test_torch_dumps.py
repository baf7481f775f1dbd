"""probe compare on real dumps of a small torch model written by probe's own collector.

The model is dumped twice; in the target run fc1's output is scaled by 1.01,
either inside the module (its forward patched) or by a forward hook (then the
scaling multiplication is a call only the target dump has).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from probe_compare.engine import CompareOptions, run_compare
from probe_core.plugins import load_registry

from .helpers import read_csv, result_csv


SCRIPT = textwrap.dedent("""
    import sys, torch
    from probe_torch import PrecisionDebugger
    mode, scale, how, out = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
    torch.manual_seed(0)
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(8, 16)
            self.act = torch.nn.ReLU()
            self.fc2 = torch.nn.Linear(16, 4)
        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))
    net = Net()
    if how == "hook":
        net.fc1.register_forward_hook(lambda m, i, o: o * scale)
    elif how == "patch":
        plain = net.fc1.forward
        net.fc1.forward = lambda x: plain(x) * scale
    x = torch.randn(2, 8)
    kw = dict(task="tensor" if mode == "tensor" else "statistics", dump_path=out, level="mix")
    if mode == "md5":
        kw["summary_mode"] = "md5"
    debugger = PrecisionDebugger(**kw)
    debugger.start(net)
    net(x).sum().backward()
    debugger.stop()
    debugger.step()
""")


def dump(tmp_path: Path, mode: str, scale: float, how: str, name: str) -> Path:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = tmp_path / name
    proc = subprocess.run([sys.executable, str(script), mode, str(scale), how, str(out)],
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    return out


def compare(target: Path, bench: Path, out: Path) -> dict:
    return run_compare(CompareOptions(target, bench, out, progress=False), load_registry())


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["statistics", "md5", "tensor"])
def test_module_scaled_inside_is_the_first_divergence(tmp_path, mode):
    target = dump(tmp_path, mode, 1.01, "patch", "target")
    bench = dump(tmp_path, mode, 1.0, "none", "bench")
    summary = compare(target, bench, tmp_path / "out")
    first = summary["first_divergence"]
    assert first["name"] == "Module.fc1.Linear.forward.0", first
    assert first["reason"].startswith("output.0")
    rows = read_csv(result_csv(tmp_path / "out"))
    earlier = [r for r in rows if r["NPU Name"].startswith("Functional.linear.0.forward.")]
    assert earlier and all(r["Result"] == "pass" for r in earlier)
    if mode == "tensor":
        data = target / "step0" / "rank0" / "dump_tensor_data"
        ref = bench / "step0" / "rank0" / "dump_tensor_data"
        import torch

        name = "Module.fc1.Linear.forward.0.output.0"
        a = torch.load(data / f"{name}.pt", weights_only=True).double().numpy().ravel()
        b = torch.load(ref / f"{name}.pt", weights_only=True).double().numpy().ravel()
        row = next(r for r in rows if r["NPU Name"] == name)
        assert float(row["Cosine"]) == pytest.approx(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)), rel=1e-12)
        assert float(row["MaxAbsErr"]) == pytest.approx(np.abs(a - b).max(), rel=1e-12)
        rel = np.abs(a - b) / np.abs(b)
        assert float(row["One Thousandth Err Ratio"]) == pytest.approx((rel < 0.001).mean())


@pytest.mark.slow
def test_forward_hook_scaling_is_found_after_the_module(tmp_path):
    target = dump(tmp_path, "statistics", 1.01, "hook", "target")
    bench = dump(tmp_path, "statistics", 1.0, "none", "bench")
    first = compare(target, bench, tmp_path / "out")["first_divergence"]
    # the hook's multiplication is a call only the target made, just before the first entry whose inputs differ
    assert (first["name"], first["kind"]) == ("Tensor.__mul__.0.forward", "only in target")
    assert "the next matched entry Functional.relu.0.forward already has differing inputs" in first["reason"]
    assert any("train.py" in line for line in first["stack"])
    rows = read_csv(result_csv(tmp_path / "out"))
    errors = {r["NPU Name"].rsplit(".", 2)[0] for r in rows if r["Result"] == "error"}
    # only the hook's call: a backward reading fc1's scaled activations carries that error, it adds none
    assert errors == {"Tensor.__mul__.0.forward"}


MSPROBE_MLP = Path(__file__).resolve().parents[1] / "fixtures" / "msprobe_pytorch_mlp_stat"


@pytest.mark.slow
def test_msprobe_dump_against_probe_dump_of_the_same_model(tmp_path):
    probe_dump = dump(tmp_path, "statistics", 1.0, "none", "probe")
    summary = compare(MSPROBE_MLP, probe_dump, tmp_path / "out")
    assert summary["counts"]["unmatched"] == 0
    rows = read_csv(result_csv(tmp_path / "out"))
    forward = [r for r in rows if ".forward." in r["NPU Name"] and not r["NPU Name"].startswith("Tensor.sum")]
    assert len(forward) > 10
    assert all(r["Result"] == "pass" for r in forward), [r["NPU Name"] for r in forward if r["Result"] != "pass"]
    assert {r["NPU Name"].split(".forward")[0] for r in forward} >= {
        "Functional.linear.0", "Module.fc1.Linear", "Functional.relu.0", "Module.fc2.Linear"}
