"""Every msprobe 26.2 config.json key and value loads, and each one probe honours changes what a real run writes."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from probe_core.config import load_config
from probe_core.plugins import ProbeWarning
from tests.collect.helpers import load, run_probe

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "msprobe_configs"


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.ln, self.fc2 = nn.Linear(4, 6), nn.LayerNorm(6), nn.Linear(6, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.ln(self.fc1(x))))


def train(tmp_path: Path, config: dict, steps: int = 1, between=None, **start) -> Path:
    """``steps`` training steps of Net under a PrecisionDebugger reading ``config`` from a file; returns the
    dump path. ``between(step)`` runs after each step (edits the config file)."""
    from probe_torch import PrecisionDebugger

    tmp_path.mkdir(parents=True, exist_ok=True)
    dump = tmp_path / "dump"
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"dump_path": str(dump), **config}))
    torch.manual_seed(0)
    net = Net()
    debugger = PrecisionDebugger(config_path=str(path))
    for step in range(steps):
        debugger.start(net, **start)
        net(torch.randn(2, 4)).sum().backward()
        debugger.stop()
        debugger.step()
        if between:
            between(step)
    debugger.close()
    return dump


def data(dump: Path, step: int = 0) -> dict:
    return load(dump / f"step{step}" / "rank0" / "dump.json")["data"]


def loaded(config: dict, tmp_path: Path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result, _ = load_config(path)
    return result, [str(w.message) for w in caught if issubclass(w.category, ProbeWarning)]


# -- every key and value loads ---------------------------------------------------------------------

EVERY_26_2_KEY = {
    "task": "statistics", "dump_path": "./dump", "rank": [], "step": [], "level": "mix", "extra_info": True,
    "async_dump": False, "dump_enable": True, "precision": "high", "risk_level": "FOCUS",
    "statistics": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics", "tensor_list": [],
                   "slice": [{"dim": 0, "begin": 0, "end": 2, "size": 4}], "request_id": "req-0",
                   "device": "host", "precision": "high"},
    "tensor": {"scope": [], "list": [], "data_mode": ["all"], "summary_mode": "statistics", "slice": [],
               "request_id": None, "bench_path": "./bench", "file_format": "npy"},
    "structure": {"scope": [], "list": [], "data_mode": ["all"]},
    "nan_check": {"list": [], "data_mode": ["output"], "tensor_list": ["linear"]},
    "diff_check": {"list": [], "data_mode": ["all"], "diff_nums": -1},
    "acc_check": {"white_list": [], "black_list": [], "error_data_path": "./"},
    "exception_dump": {"scope": [], "list": []},
}


@pytest.mark.parametrize("name", sorted(p.stem for p in FIXTURES.glob("*.json")))
def test_every_fixture_config_loads(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ProbeWarning)  # full_legacy_8x warns for its 8.x sections
        config, _ = load_config(FIXTURES / f"{name}.json")
    assert config.task == json.loads((FIXTURES / f"{name}.json").read_text())["task"]


def test_every_26_2_key_loads_without_a_warning(tmp_path):
    config, said = loaded(EVERY_26_2_KEY, tmp_path)
    assert said == []
    assert config.dump_enable is True and config.precision == "high" and config.risk_level == "FOCUS"
    assert config.slice == ({"dim": 0, "begin": 0, "end": 2, "size": 4},) and config.request_id == "req-0"


def test_load_section_is_checked_and_kept(tmp_path):
    (tmp_path / "earlier").mkdir()
    load_key = {"path": str(tmp_path / "earlier"), "modules": ["Module.fc1.Linear.forward.0"], "step": [0],
                "rank": [], "dump_after_load": False}
    config, said = loaded({"load": load_key}, tmp_path)
    assert config.load == load_key
    assert said == []  # applied by the collector (tests/collect/test_optimizer_and_custom_ops.py)
    with pytest.raises(Exception, match='"modules": "fc1" is not a module forward name'):
        loaded({"load": dict(load_key, modules=["fc1"])}, tmp_path)


NPU_ONLY = [
    ({"level": "L2", "task": "tensor", "tensor": {"list": ["Functional.linear.0.forward"]}},
     "tensor", "L1", 'level "L2" dumps the kernels of one API through ACL on an Ascend NPU'),
    ({"task": "nan_check"}, "overflow_check", "mix", 'task "nan_check" finds the first API'),
    ({"task": "diff_check"}, "statistics", "mix", 'task "diff_check" compares each API live'),
    ({"task": "structure", "level": "L1"}, "structure", "mix", 'level "L1" is read as "mix"'),
    ({"precision": "low"}, "statistics", "mix", 'precision "low": probe always accumulates'),
    ({"statistics": {"summary_mode": ["max", "nan count"]}}, "statistics", "mix", 'summary_mode "nan count"'),
    ({"task": "acc_check"}, "acc_check", "mix", "nothing is dumped; run \"probe acc-check"),
]


@pytest.mark.parametrize("config,task,level,warning", NPU_ONLY, ids=[w[3][:24] for w in NPU_ONLY])
def test_keys_this_machine_cannot_apply_load_with_one_warning(tmp_path, config, task, level, warning):
    loaded_config, said = loaded(config, tmp_path)
    assert (loaded_config.task, loaded_config.level) == (task, level)
    assert len(said) == 1 and warning in said[0]


def test_probe_run_accepts_npu_only_tasks_and_levels(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\nnet = torch.nn.Linear(4, 2)\nnet(torch.randn(3, 4)).sum().backward()\n")
    for config in ({"task": "nan_check"}, {"level": "L2", "task": "tensor"}):
        path = tmp_path / "config.json"
        path.write_text(json.dumps({"dump_path": str(tmp_path / "d"), "overwrite": True, **config}))
        done = run_probe("run", "-c", str(path), str(script), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr and "Ascend NPU" in done.stderr


# -- keys with an effect -------------------------------------------------------------------------------


def test_dump_enable_is_re_read_at_step_boundaries(tmp_path):
    def toggle(step):
        path = tmp_path / "config.json"
        raw = json.loads(path.read_text())
        raw["dump_enable"] = {0: False, 2: True}.get(step, raw["dump_enable"])
        if step == 1:
            raw["level"] = "L0"  # read once at the start: reported, not applied
        path.write_text(json.dumps(raw, indent=1))
        os.utime(path, ns=(10**18 + step, 10**18 + step))  # a new modification time even on coarse clocks
    dump = train(tmp_path, {"dump_enable": True, "level": "mix"}, steps=4, between=toggle)
    assert sorted(p.name for p in dump.iterdir()) == ["step0", "step3"]
    assert any(n.startswith("Functional.") for n in data(dump, 3))  # still mix: level was not re-read


def test_dump_enable_false_dumps_nothing_until_switched_on(tmp_path):
    dump = train(tmp_path, {"dump_enable": False}, steps=2)
    assert not dump.exists() or not any(dump.iterdir())


def test_slice_cuts_tensors_before_their_statistics(tmp_path):
    dump = train(tmp_path, {"level": "L1", "statistics": {"slice": [{"dim": 1, "begin": 0, "end": 2}]}})
    record = data(dump)["Functional.linear.0.forward"]["input_args"][0]
    assert record["shape"] == [2, 2]  # x is 2x4: columns 0-1
    torch.manual_seed(0)
    Net()
    x = torch.randn(2, 4)[:, :2]
    assert record["Max"] == pytest.approx(x.max().item()) and record["Norm"] == pytest.approx(x.norm().item())


def test_slice_with_size_applies_only_to_tensors_that_long(tmp_path):
    dump = train(tmp_path, {"level": "L1", "statistics": {"slice": [{"dim": 1, "begin": 1, "end": 3, "size": 6}]}})
    entry = data(dump)["Functional.linear.0.forward"]
    assert entry["input_args"][0]["shape"] == [2, 4] and entry["output"][0]["shape"] == [2, 2]


def test_request_id_keeps_the_request_tokens_of_the_batch(tmp_path):
    config = {"level": "L1", "statistics": {"request_id": "b"}}
    dump = train(tmp_path, config, scheduled_tokens={"a": 1, "b": 1})
    assert data(dump)["Functional.linear.0.forward"]["input_args"][0]["shape"] == [1, 4]
    absent = train(tmp_path / "other", config, scheduled_tokens={"a": 2})
    assert not absent.exists() or not any(absent.iterdir())


def test_tensor_list_saves_whole_tensors_of_the_listed_entries(tmp_path):
    dump = train(tmp_path, {"level": "mix", "statistics": {"tensor_list": ["relu", "fc2"]}})
    rank = dump / "step0" / "rank0"
    header = load(rank / "dump.json")
    assert header["dump_data_dir"].endswith("dump_tensor_data")
    record = header["data"]["Torch.relu.0.forward"]["output"][0]
    assert record["data_name"] == "Torch.relu.0.forward.output.0.pt" and "Max" in record
    files = {p.name for p in (rank / "dump_tensor_data").iterdir()}
    assert "Module.fc2.Linear.parameters_grad.0.weight.pt" in files and len(files) == 12
    assert not any("fc1" in name or "layer_norm" in name for name in files)
    assert "data_name" not in header["data"]["Functional.linear.0.forward"]["output"][0]


def test_summary_mode_list_writes_only_the_listed_statistics(tmp_path):
    dump = train(tmp_path, {"level": "L1", "statistics": {"summary_mode": ["max", "l2norm"]}})
    record = data(dump)["Functional.linear.0.forward"]["output"][0]
    assert record["Max"] is not None and record["Norm"] is not None
    assert record["Min"] is None and record["Mean"] is None
    md5 = data(train(tmp_path / "md5", {"level": "L1", "statistics": {"summary_mode": ["md5", "max"]}}))
    record = md5["Functional.linear.0.forward"]["output"][0]
    assert len(record["md5"]) == 8 and record["Max"] is not None and record["Norm"] is None


def test_extra_info_false_writes_dump_json_only(tmp_path):
    dump = train(tmp_path, {"level": "mix", "extra_info": False})
    assert sorted(p.name for p in (dump / "step0" / "rank0").iterdir()) == ["dump.json"]


def test_structure_writes_empty_data_and_the_structure(tmp_path):
    dump = train(tmp_path, {"task": "structure", "level": "mix"})
    rank = dump / "step0" / "rank0"
    assert load(rank / "dump.json") == {"task": "structure", "level": "mix", "framework": "pytorch",
                                        "dump_data_dir": None, "data": {}}
    construct = load(rank / "construct.json")
    assert construct["Functional.linear.0.forward"] == "Module.fc1.Linear.forward.0"
    assert "Module.fc1.Linear.backward.0" in construct
    assert load(rank / "stack.json")


def test_scope_of_forward_calls_takes_no_backward_entry(tmp_path):
    scope = ["Module.ln.LayerNorm.forward.0", "Functional.linear.1.forward"]
    names = set(data(train(tmp_path, {"level": "mix", "statistics": {"scope": scope}})))
    assert names == {"Module.ln.LayerNorm.forward.0", "Functional.layer_norm.0.forward", "Torch.relu.0.forward",
                     "Functional.linear.1.forward", "Module.fc2.Linear.forward.0"}


def test_data_mode_input_leaves_module_parameters_out(tmp_path):
    entries = data(train(tmp_path, {"level": "L0", "statistics": {"data_mode": ["input"]}}))
    forward = entries["Module.fc1.Linear.forward.0"]
    assert set(forward) == {"input_args", "input_kwargs"}
    output = data(train(tmp_path / "o", {"level": "L0", "statistics": {"data_mode": ["output"]}}))
    assert set(output["Module.fc1.Linear.forward.0"]) == {"output", "parameters"}
