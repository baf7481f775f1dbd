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
    # an API call's backward inside the graph, where eager code's entry (its output's autograd node) lists the
    # gradients w.r.t. its arguments in order: GELU's; not F.linear's (addmm's node: the bias first, weight transposed)
    gelu = data["Functional.gelu.0.backward"]
    assert gelu["input"][0]["Norm"] == data["Module.1.GELU.backward.0"]["input"][0]["Norm"]
    assert gelu["output"][0]["Norm"] == data["Module.1.GELU.backward.0"]["output"][0]["Norm"]
    assert "Functional.linear.1.backward" not in data
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
def test_backward_inside_compiled_code_pairs_with_eager(tmp_path):
    """At mix every module backward entry of an eager run is recorded inside the compiled graph, with the same
    gradients (to float32 rounding: compiled and eager code round differently), nested modules included, and so
    is every API backward entry whose gradients follow the call's arguments (all but F.linear's); the compiled
    run's output stays bit for bit that without probe."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 8), _Block(), nn.Linear(8, 4))
    x = torch.randn(6, 8, requires_grad=True)  # the graph's input needs a gradient too: Module.0's grad_input
    _, eager = _recorded(tmp_path / "eager", net, net, x, "mix")
    torch._dynamo.reset()
    alone = _forward_backward(net, torch.compile(net), x)
    torch._dynamo.reset()
    recorded, compiled = _recorded(tmp_path / "compiled", net, torch.compile(net), x, "mix")
    torch._dynamo.reset()
    assert torch.equal(recorded[0], alone[0])
    # the gradient of a value read inside a module and outside it (Module.0's output: by up and by the residual
    # sum) is summed in another order once the module's uses are tapped: its last bits may change, as at L0 and
    # mix in eager code (README, "Levels and rounding"); every other gradient is bit for bit
    assert all(torch.equal(a, b) for a, b in zip(recorded[1][2:], alone[1][2:], strict=True))
    assert all(torch.allclose(a, b, rtol=1e-6, atol=1e-7) for a, b in zip(recorded[1][:2], alone[1][:2]))

    backward = [name for name in eager if "backward" in name.split(".") and not name.startswith("Functional.linear.")]
    assert len(backward) == 12 and [n for n in compiled if "backward" in n.split(".")] == backward  # eager's order
    for name in backward:
        for side in ("input", "output"):  # the gradients w.r.t. the outputs, and w.r.t. the inputs
            want, got = eager[name][side], compiled[name][side]
            assert len(got) == len(want) > 0, (name, side)
            for w, g in zip(want, got):
                assert g["shape"] == w["shape"] and g["Norm"] == pytest.approx(w["Norm"], rel=1e-5), (name, side)
    # the block's input gradient is through the block only: up's path plus the residual's, not Module.0's
    block = compiled["Module.1._Block.backward.0"]
    assert block["output"][0]["Norm"] != compiled["Module.1.up.Linear.backward.0"]["output"][0]["Norm"]


@pytest.mark.slow
def test_collection_started_after_a_compiled_run_and_toggled_per_step_compiles_once(tmp_path):
    """A model compiled and run before probe starts is compiled again once, with its calls recorded (the graph
    from before guards on nothing of probe's: it would run unrecorded); starting and stopping probe at every
    step then compiles nothing (Dynamo guards on the keys of the global module hooks: they stay installed
    between steps); after close() the model is compiled once more, without recorded values."""
    from torch._dynamo.utils import counters

    from probe_torch import PrecisionDebugger

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    x = torch.randn(6, 8)
    torch._dynamo.reset()
    model = torch.compile(net)
    alone = _forward_backward(net, model, x)
    debugger = PrecisionDebugger(dump_path=str(tmp_path), level="L0", step=[0, 1, 2])
    graphs = []
    for _ in range(3):
        debugger.start(model)
        out, grads = _forward_backward(net, model, x)
        debugger.stop()
        debugger.step()
        graphs.append(counters["stats"]["unique_graphs"])
        assert torch.equal(out, alone[0]) and all(torch.equal(a, b) for a, b in zip(grads, alone[1], strict=True))
    debugger.close()
    assert graphs == [graphs[0]] * 3, graphs
    first = load(tmp_path / "step0" / "rank0" / "dump.json")["data"]
    assert {"Module.1.GELU.forward.0", "Module.1.GELU.backward.0", "Module.2.Linear.backward.0"} <= set(first)
    for step in (1, 2):  # the same values each step (taps over the same zeros, a new leaf per run)
        assert load(tmp_path / f"step{step}" / "rank0" / "dump.json")["data"] == first
    assert torch.equal(_forward_backward(net, model, x)[0], alone[0])
    assert counters["stats"]["unique_graphs"] == graphs[0] + 1
    torch._dynamo.reset()
