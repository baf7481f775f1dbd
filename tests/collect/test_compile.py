"""Inside ``torch.compile``: the calls of a compiled graph are entries with the compiled run's own values, under
the names eager code gets, so that a compiled target pairs with an eager bench (``probe_torch.compiled``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import torch
import torch.nn as nn

from tests.collect.helpers import ROOT, load, run_probe

SCRIPT = ROOT / "tests" / "collect" / "scripts" / "compiled_mlp.py"


def _printed(stdout: str) -> dict[str, tuple[str, str]]:
    return {step: (loss, out) for step, loss, out in re.findall(r"(step\d) loss (\S+) out (\S+)", stdout)}


@pytest.mark.slow
def test_compiled_target_against_eager_bench(tmp_path):
    plain = subprocess.run([sys.executable, str(SCRIPT), "--plant"], capture_output=True, text=True, timeout=300)
    target = run_probe("run", "--level", "mix", "--dump-path", "target", str(SCRIPT), "--plant", cwd=tmp_path,
                       timeout=300)
    bench = run_probe("run", "--level", "mix", "--dump-path", "bench", str(SCRIPT), "--eager", cwd=tmp_path)
    assert plain.returncode == target.returncode == bench.returncode == 0, target.stderr[-3000:] + bench.stderr
    assert _printed(target.stdout) == _printed(plain.stdout) and len(_printed(plain.stdout)) == 2  # bit for bit
    assert "forward calls are recorded" in target.stderr

    rank = tmp_path / "target" / "step0" / "rank0"
    data = load(rank / "dump.json")["data"]
    for name in ("Functional.linear.0.forward", "Functional.gelu.0.forward", "Functional.linear.1.forward",
                 "Module.0.Linear.forward.0", "Module.1.GELU.forward.0", "Module.2.Linear.forward.0"):
        assert name in data, sorted(data)
    assert data["Functional.gelu.0.forward"]["input_kwargs"]["approximate"]["value"] == "tanh"
    last = data["Functional.linear.1.forward"]["output"][0]
    # the compiled run's own output (its norm as torch computes it, to float32 rounding), not an eager re-run
    assert last["requires_grad"] is True and last["Norm"] == pytest.approx(float(_printed(plain.stdout)["step0"][1]),
                                                                          rel=1e-6)
    # the GELU module's input is the first Linear's output, its output the second Linear's input
    assert data["Module.1.GELU.forward.0"]["input_args"][0]["Norm"] == data["Module.0.Linear.forward.0"]["output"][0]["Norm"]
    assert data["Module.1.GELU.forward.0"]["output"][0]["Norm"] == data["Functional.linear.1.forward"]["input_args"][0]["Norm"]
    assert data["Module.2.Linear.forward.0"]["parameters"]["weight"]["shape"] == [4, 16]
    construct = load(rank / "construct.json")
    assert construct["Functional.gelu.0.forward"] == "Module.1.GELU.forward.0"

    done = run_probe("compare", "target", "bench", "-o", "cmp", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    first = json.loads((tmp_path / "cmp" / "summary.json").read_text())["first_divergence"]
    assert first["name"] == "Functional.gelu.0.forward" and first["step"] == 0, first


class _InPlace(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(16, 32), nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x) * 1.7 + 0.3  # a fused chain in bfloat16
        h = torch.tanh(h) - h * 0.5
        return self.b(torch.relu_(h))


@pytest.mark.slow
def test_half_precision_keeps_compiled_numerics_and_in_place_shows_before(tmp_path):
    """A bfloat16 graph recorded returns what it returns without probe, bit for bit, and the value a later
    ``relu_`` changes is recorded as it was before the change."""
    from probe_torch import PrecisionDebugger

    torch.manual_seed(0)
    net = _InPlace().to(torch.bfloat16)
    x = torch.randn(8, 16, dtype=torch.bfloat16)
    torch._dynamo.reset()
    alone = torch.compile(net)(x)
    torch._dynamo.reset()
    debugger = PrecisionDebugger(dump_path=str(tmp_path), level="L1")
    compiled = torch.compile(net)
    debugger.start(compiled)
    recorded = compiled(x)
    debugger.stop()
    debugger.step()
    debugger.close()
    torch._dynamo.reset()
    assert torch.equal(recorded, alone)
    data = load(tmp_path / "step0" / "rank0" / "dump.json")["data"]
    difference = data["Tensor.__sub__.0.forward"]["output"][0]  # tanh(h) - h / 2, before relu_ changes it
    assert difference["dtype"] == "torch.bfloat16"
    assert data["Functional.relu_.0.forward"]["input_args"][0]["Min"] == difference["Min"] < 0
    assert data["Functional.relu_.0.forward"]["output"][0]["Min"] == 0
    assert data["Functional.linear.1.forward"]["input_args"][0]["Min"] == 0
