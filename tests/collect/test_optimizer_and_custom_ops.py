"""What msprobe 26.2 records beyond the model's own calls: an optimizer update (its tensor calls under
construct.json's ``optimizer`` node), between start() and stop() as under ``probe run``, the calls made
inside ``loss.backward()`` (gradient hooks, a custom ``autograd.Function``'s Python backward) and the
operators of ``custom_op_namespaces`` (``torch.ops.<ns>.<op>``, named ``<ns>.<op>.<n>.forward``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.collect.helpers import PROBE, load, run_probe
from tests.collect.test_config_keys import Net, data, train


@torch.library.custom_op("probecollecttest::scale", mutates_args=())
def _scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor


def _train_with_update(tmp_path: Path, config: dict, steps: int = 2) -> Path:
    """Net trained with SGD; the update runs between start() and stop(), as in most training loops."""
    from probe_torch import PrecisionDebugger

    dump = tmp_path / "dump"
    (tmp_path / "config.json").write_text(json.dumps({"dump_path": str(dump), **config}))
    torch.manual_seed(0)
    net = Net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    debugger = PrecisionDebugger(config_path=str(tmp_path / "config.json"))
    for _ in range(steps):
        debugger.start(net)
        net(torch.randn(2, 4)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
        debugger.stop()
        debugger.step()
    debugger.close()
    return dump


UPDATES = [f"Tensor.add_.{n}.forward" for n in range(6)]  # SGD: one add_ per parameter of Net's six


def test_update_between_start_and_stop_is_recorded_under_the_optimizer_node(tmp_path):
    dump = _train_with_update(tmp_path, {"level": "mix"})
    for step in (0, 1):
        entries = data(dump, step)
        assert [name for name in entries if name.startswith("Tensor.add_")] == UPDATES
        first = entries["Tensor.add_.0.forward"]
        assert first["input_kwargs"] == {"alpha": {"type": "float", "value": -0.1}}  # param.add_(grad, alpha=-lr)
        assert first["input_args"][0]["shape"] == [6, 4]  # fc1.weight, updated in place
        construct = load(dump / f"step{step}" / "rank0" / "construct.json")
        assert construct["optimizer"] is None
        assert {construct[name] for name in UPDATES} == {"optimizer"}
        assert construct["Module.fc1.Linear.forward.0"] is None  # the model's tree is untouched


def test_update_at_l1_is_recorded_without_a_structure(tmp_path):
    dump = _train_with_update(tmp_path, {"level": "L1"}, steps=1)
    assert [name for name in data(dump) if name.startswith("Tensor.add_")] == UPDATES
    assert not (dump / "step0" / "rank0" / "construct.json").exists() or \
        "optimizer" not in load(dump / "step0" / "rank0" / "construct.json")


def test_update_after_stop_is_not_recorded(tmp_path):
    dump = train(tmp_path, {"level": "mix"})
    assert not [name for name in data(dump) if name.startswith("Tensor.add_")]
    assert "optimizer" not in load(dump / "step0" / "rank0" / "construct.json")


# -- probe run: the calls inside loss.backward() and the update are entries of their step ------------------

UPDATE_SCRIPT = """
import sys
import torch
import torch.nn as nn

plant = sys.argv[1] if len(sys.argv) > 1 else "none"


class Doubled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return torch.mul(grad, 2.0)  # Python code in a custom backward


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(torch.relu(Doubled.apply(self.fc1(x))))


torch.manual_seed(0)
model = Net()
model.fc2.weight.register_hook(lambda grad: torch.mul(grad, 0.5))  # a gradient hook calling torch
optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
data = torch.randn(3, 5, 4)
for step in range(3):
    if step == 1 and plant == "lr":  # update-path bugs from step 1 on: the forward and backward of step 1 agree
        optimizer.param_groups[0]["lr"] = 0.0101
    if step == 1 and plant == "eps":
        optimizer.param_groups[0]["eps"] = 1e-6
    loss = model(data[step]).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"loss {loss.item():.10f}")
"""
ADAMW = ("Tensor.__iadd__", "Tensor.mul_", "Tensor.lerp_", "Tensor.mul_", "Tensor.addcmul_", "Tensor.sqrt", "Tensor.__truediv__",
         "Tensor.add_", "Tensor.addcdiv_")  # torch 2.13's single-tensor AdamW, per parameter


@pytest.fixture(scope="module")
def update_runs(tmp_path_factory) -> Path:
    """The script under ``probe run --level mix``: ``bench`` as written, ``lr`` and ``eps`` with a planted change
    in the update from step 1 on; ``plain.txt`` is what the script prints without probe."""
    root = tmp_path_factory.mktemp("update")
    script = root / "train_update.py"
    script.write_text(UPDATE_SCRIPT)
    runs = {name: subprocess.Popen([PROBE, "run", "--level", "mix", "--dump-path", str(root / name), str(script), plant],
                                   cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for name, plant in (("bench", "none"), ("lr", "lr"), ("eps", "eps"))}
    plain = subprocess.run([sys.executable, str(script)], cwd=root, capture_output=True, text=True, check=True)
    (root / "plain.txt").write_text(plain.stdout)
    for name, run in runs.items():
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, (name, err[-3000:])
        (root / f"{name}.txt").write_text(out)
    return root


def test_probe_run_records_backward_hooks_custom_backward_and_the_update_in_their_step(update_runs):
    dump = update_runs / "bench"
    assert sorted(p.name for p in dump.iterdir()) == ["step0", "step1", "step2"]  # a step ends at each update
    losses = [line for line in (update_runs / "bench.txt").read_text().splitlines() if line.startswith("loss")]
    assert losses == (update_runs / "plain.txt").read_text().splitlines()  # training runs as without probe
    for step in range(3):
        entries = data(dump, step)
        names = list(entries)
        construct = load(dump / f"step{step}" / "rank0" / "construct.json")
        assert names[0] == "Functional.linear.0.forward"  # the step starts at its forward (not at zero_grad)
        # inside loss.backward(): the hook on fc2.weight (during fc2's backward), then Doubled.backward (after
        # relu's), forward entries named as msprobe names them; no backward of their own (grad is off there)
        hook, custom = entries["Torch.mul.0.forward"], entries["Torch.mul.1.forward"]
        assert hook["input_args"][1] == {"type": "float", "value": 0.5} and hook["input_args"][0]["shape"] == [2, 8]
        assert custom["input_args"][1] == {"type": "float", "value": 2.0} and custom["input_args"][0]["shape"] == [5, 8]
        assert names.index("Functional.linear.1.backward") < names.index("Torch.mul.0.forward") \
            < names.index("Torch.relu.0.backward") < names.index("Torch.mul.1.forward") \
            < names.index("Functional.linear.0.backward")
        assert "Torch.mul.0.backward" not in entries and "Torch.mul.1.backward" not in entries
        # msprobe's parents: the module whose backward runs (the hook), none between two modules' backwards
        assert construct["Torch.mul.0.forward"] == "Module.fc2.Linear.backward.0"
        assert construct["Torch.mul.1.forward"] is None
        # a hook in the middle of the backward pass settles no module backward early: fc2's has its input gradient
        assert entries["Module.fc2.Linear.backward.0"]["output"][0]["shape"] == [5, 8]
        # the update: AdamW's calls for each of the four parameters, under the optimizer node, last in the step
        update = [name for name in names if construct.get(name) == "optimizer"]
        assert [name.rsplit(".", 2)[0] for name in update if not name.startswith("Torch.tensor")] == list(ADAMW) * 4
        assert names[-len(update):] == update and construct["optimizer"] is None
        assert entries["Tensor.addcdiv_.3.forward"]["input_args"][0]["shape"] == [2]  # fc2.bias, updated in place


@pytest.mark.parametrize("plant,entry,reason", [("lr", "Tensor.mul_.0.forward", "0.999899 vs 0.9999"),
                                                ("eps", "Tensor.add_.0.forward", "1e-06 vs 1e-08")])
def test_compare_names_a_planted_update_change_at_the_step_and_call_that_make_it(update_runs, plant, entry, reason):
    out = update_runs / f"compare_{plant}"
    result = run_probe("compare", str(update_runs / plant), str(update_runs / "bench"), "-o", str(out),
                       cwd=update_runs)
    assert result.returncode == 0, result.stderr
    ranks = {rank["label"]: rank["first_divergence"] for rank in load(out / "summary.json")["ranks"]}
    assert ranks["rank0_step0"] is None  # step 0 is the same run on both sides
    first = ranks["rank0_step1"]  # lr: the weight decay param.mul_(1 - lr * wd) is the first call it enters; eps: denom.add_(eps)
    assert (first["name"], first["module"]) == (entry, "optimizer")
    assert reason in result.stdout


def _run_custom_op(tmp_path: Path, config: dict) -> tuple[Path, list]:
    from probe_torch import PrecisionDebugger

    dump = tmp_path / "dump"
    (tmp_path / "config.json").write_text(json.dumps({"dump_path": str(dump), "level": "L1", **config}))
    debugger = PrecisionDebugger(config_path=str(tmp_path / "config.json"))
    x = torch.arange(6.0).reshape(2, 3)
    debugger.start()
    y = torch.ops.probecollecttest.scale(x, 2.0)
    z = torch.ops.probecollecttest.scale(y, factor=3.0)
    through_overload = torch.ops.probecollecttest.scale.default(x, 1.0)  # overloads stay reachable (msprobe's go)
    debugger.stop()
    debugger.step()
    debugger.close()
    return dump, [y, z, through_overload]


def test_custom_op_namespaces_records_torch_ops_as_msprobe_names_them(tmp_path):
    dump, (y, z, same) = _run_custom_op(tmp_path, {"custom_op_namespaces": ["probecollecttest"]})
    assert torch.equal(z, torch.arange(6.0).reshape(2, 3) * 6) and torch.equal(same, torch.arange(6.0).reshape(2, 3))
    entries = data(dump)
    named = sorted(name for name in entries if name.startswith("probecollecttest."))
    assert named == ["probecollecttest.scale.0.forward", "probecollecttest.scale.1.forward"]
    first, second = entries["probecollecttest.scale.0.forward"], entries["probecollecttest.scale.1.forward"]
    assert first["input_args"][1] == {"type": "float", "value": 2.0}
    assert first["output"][0]["Max"] == 10.0
    assert second["input_kwargs"] == {"factor": {"type": "float", "value": 3.0}}
    assert second["output"][0]["Max"] == 30.0
    assert not hasattr(torch.ops.probecollecttest.scale, "__wrapped__")  # the operator is restored at stop()


def test_custom_ops_are_not_recorded_without_their_namespace(tmp_path):
    dump, _ = _run_custom_op(tmp_path, {})
    assert not (dump / "step0").exists() or not [n for n in data(dump) if n.startswith("probecollecttest")]


# -- load: module inputs from an earlier tensor dump ------------------------------------------------------

FC2 = "Module.fc2.Linear.forward.0"


def _forward(tmp_path: Path, config: dict, seed: int) -> tuple[Path, torch.Tensor, list[str]]:
    """One step of Net on a seeded input under ``config``: (dump path, model output, probe warnings)."""
    import warnings

    from probe_core.plugins import ProbeWarning
    from probe_torch import PrecisionDebugger

    tmp_path.mkdir(parents=True, exist_ok=True)
    dump = tmp_path / "dump"
    (tmp_path / "config.json").write_text(json.dumps({"dump_path": str(dump), "level": "mix", **config}))
    torch.manual_seed(0)
    net = Net()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        debugger = PrecisionDebugger(config_path=str(tmp_path / "config.json"))
        debugger.start(net)
        out = net(torch.randn(2, 4, generator=torch.Generator().manual_seed(seed)))
        out.sum().backward()
        debugger.stop()
        debugger.step()
        debugger.close()
    return dump, out.detach(), [str(w.message) for w in caught if issubclass(w.category, ProbeWarning)]


def test_load_replaces_the_listed_module_inputs_and_dumps_after_load(tmp_path):
    source, source_out, _ = _forward(tmp_path / "source", {"task": "tensor"}, seed=1)
    dump, out, said = _forward(tmp_path / "run", {"load": {"path": str(source), "modules": [FC2],
                                                           "dump_after_load": True}}, seed=2)
    assert said == [] and torch.equal(out, source_out)  # fc2 saw the source run's input: same output
    before, after = data(source)[FC2]["input_args"][0], data(dump)[FC2]["input_args"][0]
    assert (after["Max"], after["Norm"]) == (before["Max"], before["Norm"])
    assert data(dump)["Module.fc1.Linear.forward.0"]["input_args"][0]["Max"] != \
        data(source)["Module.fc1.Linear.forward.0"]["input_args"][0]["Max"]  # the rest runs on its own input


def test_load_only_dumps_nothing_and_reads_msprobe_proc_folders(tmp_path):
    source, source_out, _ = _forward(tmp_path / "source", {"task": "tensor"}, seed=1)
    (source / "step0" / "rank0").rename(source / "step0" / "proc4242")  # msprobe's single-card folder name
    dump, out, said = _forward(tmp_path / "run", {"load": {"path": str(source), "modules": [FC2]}}, seed=2)
    assert said == [] and torch.equal(out, source_out)
    assert not dump.exists() or not list(dump.rglob("dump.json"))


def test_load_without_the_file_keeps_the_run_input_with_one_warning(tmp_path):
    source, _, _ = _forward(tmp_path / "source", {"task": "tensor"}, seed=1)
    (source / "step0" / "rank0" / "dump_tensor_data" / f"{FC2}.input.0.pt").unlink()
    _, own_out, _ = _forward(tmp_path / "plain", {}, seed=2)
    _, out, said = _forward(tmp_path / "run", {"load": {"path": str(source), "modules": [FC2]}}, seed=2)
    assert torch.equal(out, own_out)
    assert len(said) == 1 and f"{FC2}.input.0.pt: no such tensor file" in said[0]


def test_load_outside_its_steps_changes_nothing(tmp_path):
    source, source_out, _ = _forward(tmp_path / "source", {"task": "tensor"}, seed=1)
    _, own_out, _ = _forward(tmp_path / "plain", {}, seed=2)
    _, out, _ = _forward(tmp_path / "run", {"load": {"path": str(source), "modules": [FC2], "step": [3]}}, seed=2)
    assert torch.equal(out, own_out) and not torch.equal(out, source_out)
