"""What msprobe 26.2 records beyond the model's own calls: an optimizer update run between start() and stop()
(its tensor calls under construct.json's ``optimizer`` node) and the operators of ``custom_op_namespaces``
(``torch.ops.<ns>.<op>``, named ``<ns>.<op>.<n>.forward``)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from tests.collect.helpers import load
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
