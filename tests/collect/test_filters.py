"""step / rank / scope / list / data_mode filters, async_dump, events and plugin registration."""

from __future__ import annotations

import subprocess
import sys

import torch
import torch.nn.functional as F

from probe_core import hookimpl
from probe_core.config import load_config
from probe_core.plugins import load_registry
from tests.collect.fixture_model import Model
from tests.collect.helpers import load, one_step


def _names(rank_dir):
    return list(load(rank_dir / "dump.json")["data"])


def test_list_filter_keeps_matching_entries_and_their_backward(tmp_path):
    names = _names(one_step(tmp_path, level="mix", list=["softmax", "ln_f"]))
    assert set(names) == {"Torch.softmax.0.forward", "Torch.softmax.1.forward", "Torch.softmax.0.backward",
                          "Torch.softmax.1.backward", "Module.ln_f.LayerNorm.forward.0",
                          "Module.ln_f.LayerNorm.backward.0", "Module.ln_f.LayerNorm.parameters_grad.0"}


def test_scope_is_an_inclusive_range_in_call_order(tmp_path):
    names = _names(one_step(tmp_path, level="L1", scope=["Torch.matmul.0.forward", "Torch.matmul.1.forward"]))
    forward = [n for n in names if n.endswith("forward")]
    assert forward[0] == "Torch.matmul.0.forward" and forward[-1] == "Torch.matmul.1.forward"
    assert "Torch.softmax.0.forward" in forward and "Functional.linear.1.forward" not in forward
    assert forward == names  # a range in time, as msprobe's: one of forward calls takes no backward entry


def test_data_mode(tmp_path):
    forward = _names(one_step(tmp_path / "f", level="L1", data_mode=["forward"]))
    assert forward and all(n.endswith("forward") for n in forward)
    backward = _names(one_step(tmp_path / "b", level="L1", data_mode=["backward"]))
    assert backward and all(n.endswith("backward") for n in backward)
    data = load(one_step(tmp_path / "i", level="L1", data_mode=["input"]) / "dump.json")["data"]
    entry = data["Functional.linear.0.forward"]
    assert "input_args" in entry and "output" not in entry
    assert "input" in data["Functional.linear.0.backward"] and "output" not in data["Functional.linear.0.backward"]


def _train(debugger, steps):
    torch.manual_seed(0)
    model = Model()
    debugger.start(model)
    for _ in range(steps):
        loss = F.cross_entropy(model(torch.randn(4, 8, 64)), torch.randint(0, 10, (4,)))
        loss.backward()
        debugger.step()
    debugger.close()


def test_step_and_rank_filters(tmp_path):
    from probe_torch import PrecisionDebugger

    _train(PrecisionDebugger(dump_path=str(tmp_path / "s"), level="L0", step=["1-2"]), 4)
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["step1", "step2"]
    _train(PrecisionDebugger(dump_path=str(tmp_path / "r"), level="L0", rank=[1]), 1)
    assert not (tmp_path / "r").exists()


def test_async_dump_writes_the_same_entries(tmp_path):
    sync = load(one_step(tmp_path / "sync", level="mix") / "dump.json")["data"]
    asynchronous = load(one_step(tmp_path / "async", level="mix", async_dump=True) / "dump.json")["data"]
    assert asynchronous == sync


class _Listener:
    def __init__(self):
        self.records, self.steps = [], []

    @hookimpl
    def probe_on_record(self, name, entry, step, rank):
        self.records.append((name, step, rank))

    @hookimpl
    def probe_on_step_end(self, step, rank, dump_dir):
        self.steps.append((step, rank, sorted(p.name for p in __import__("pathlib").Path(dump_dir).iterdir())))


def test_events_are_emitted(tmp_path):
    from probe_torch.collector import TorchCollector
    from probe_modes.statistics import StatisticsMode

    listener = _Listener()
    registry = load_registry(extra=[("listener", listener)])
    config, registry = load_config(None, registry=registry, dump_path=str(tmp_path), level="L0")
    collector = TorchCollector(config, registry, StatisticsMode())
    torch.manual_seed(0)
    model = Model()
    collector.start(model)
    model(torch.randn(4, 8, 64)).sum().backward()
    collector.step()
    collector.close()
    assert ("Module.head.Linear.forward.0", 0, 0) in listener.records
    assert listener.steps == [(0, 0, ["construct.json", "dump.json", "stack.json"])]


def test_listing_plugins_and_the_neutral_engine_do_not_import_torch():
    code = ("import sys; from probe_core.plugins import load_registry; r = load_registry(); "
            "import probe_core.collect.driver, probe_core.collect.command, probe_core.collect.debugger; "
            "import probe_modes.statistics, probe_modes.md5, probe_modes.tensor, probe_modes.overflow; "
            "spec = r.collector_for('pytorch'); assert spec.plugin == 'torch'; "
            "assert 'statistics' in r.data_modes; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
