"""Inside ``torch.compile``: the calls of a compiled graph are entries with the compiled run's own values, under
the names eager code gets, so that a compiled target pairs with an eager bench (``probe_torch.compiled``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

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
    # module backward inside the compiled region (gradient taps): GELU's output gradient reaches the last Linear's
    # input, and the loss gradient reaches the last Linear's output
    assert data["Module.1.GELU.backward.0"]["input"][0]["Norm"] == data["Module.2.Linear.backward.0"]["output"][0]["Norm"]
    assert data["Module.2.Linear.backward.0"]["input"][0]["Norm"] == data["Tensor.pow.0.backward"]["output"][0]["Norm"]
    assert data["Module.0.Linear.backward.0"]["output"] == []  # its input (the data) needs no gradient
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


def _forward_backward(net: nn.Module, model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    net.zero_grad()
    out = model(x)
    out.float().pow(2).mean().backward()
    return out, [p.grad.clone() for p in net.parameters()]


def _recorded(tmp_path, net: nn.Module, model: nn.Module, x: torch.Tensor, level: str) -> tuple[Any, dict]:
    """One forward and backward of ``model`` under probe at ``level``: (output and gradients, the dump)."""
    from probe_torch import PrecisionDebugger

    debugger = PrecisionDebugger(dump_path=str(tmp_path), level=level)
    debugger.start(model)
    result = _forward_backward(net, model, x)
    debugger.stop()
    debugger.step()
    debugger.close()
    return result, load(tmp_path / "step0" / "rank0" / "dump.json")["data"]


@pytest.mark.slow
def test_half_precision_keeps_compiled_numerics_and_in_place_shows_before(tmp_path):
    """A bfloat16 graph recorded returns what it returns without probe and gets the same parameter gradients,
    bit for bit, and the value a later ``relu_`` changes is recorded as it was
    before the change."""
    torch.manual_seed(0)
    net = _InPlace().to(torch.bfloat16)
    x = torch.randn(8, 16, dtype=torch.bfloat16)
    torch._dynamo.reset()
    alone, alone_grads = _forward_backward(net, torch.compile(net), x)
    torch._dynamo.reset()
    (recorded, grads), data = _recorded(tmp_path, net, torch.compile(net), x, "mix")
    torch._dynamo.reset()
    assert torch.equal(recorded, alone)
    assert all(torch.equal(a, b) for a, b in zip(grads, alone_grads, strict=True))
    assert "Module.b.Linear.backward.0" not in data  # half precision: no gradient taps (probe_torch.compiled_backward)
    difference = data["Tensor.__sub__.0.forward"]["output"][0]  # tanh(h) - h / 2, before relu_ changes it
    assert difference["dtype"] == "torch.bfloat16"
    assert data["Functional.relu_.0.forward"]["input_args"][0]["Min"] == difference["Min"] < 0
    assert data["Functional.relu_.0.forward"]["output"][0]["Min"] == 0
    assert data["Functional.linear.1.forward"]["input_args"][0]["Min"] == 0


class _Block(nn.Module):
    """A residual block: its input is read by ``up`` and by the residual sum, ``norm`` reads the sum."""

    def __init__(self) -> None:
        super().__init__()
        self.up, self.act, self.down, self.norm = nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 8), nn.LayerNorm(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.down(self.act(self.up(x))))


@pytest.mark.slow
def test_module_backward_inside_compiled_code_pairs_with_eager(tmp_path):
    """Every module backward entry of an eager run is recorded inside the compiled graph, with the same
    gradients (to float32 rounding: compiled and eager code round differently), nested modules included; the
    compiled run's output stays bit for bit that without probe."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 8), _Block(), nn.Linear(8, 4))
    x = torch.randn(6, 8, requires_grad=True)  # the graph's input needs a gradient too: Module.0's grad_input
    _, eager = _recorded(tmp_path / "eager", net, net, x, "L0")
    torch._dynamo.reset()
    alone = _forward_backward(net, torch.compile(net), x)
    torch._dynamo.reset()
    recorded, compiled = _recorded(tmp_path / "compiled", net, torch.compile(net), x, "L0")
    torch._dynamo.reset()
    assert torch.equal(recorded[0], alone[0])
    # the gradient of a value read inside a module and outside it (Module.0's output: by up and by the residual
    # sum) is summed in another order once the module's uses are tapped: its last bits may change, as at L0 and
    # mix in eager code (README, "Levels and rounding"); every other gradient is bit for bit
    assert all(torch.equal(a, b) for a, b in zip(recorded[1][2:], alone[1][2:], strict=True))
    assert all(torch.allclose(a, b, rtol=1e-6, atol=1e-7) for a, b in zip(recorded[1][:2], alone[1][:2]))

    backward = [name for name in eager if ".backward." in name]
    assert len(backward) == 7 and [n for n in compiled if ".backward." in n] == backward  # eager's order too
    for name in backward:
        for side in ("input", "output"):  # the gradients w.r.t. the outputs, and w.r.t. the inputs
            want, got = eager[name][side], compiled[name][side]
            assert len(got) == len(want) > 0, (name, side)
            for w, g in zip(want, got):
                assert g["shape"] == w["shape"] and g["Norm"] == pytest.approx(w["Norm"], rel=1e-5), (name, side)
    # the block's input gradient is through the block only: up's path plus the residual's, not Module.0's
    block = compiled["Module.1._Block.backward.0"]
    assert block["output"][0]["Norm"] != compiled["Module.1.up.Linear.backward.0"]["output"][0]["Norm"]
