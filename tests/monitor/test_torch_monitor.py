"""TrainerMon on PyTorch, in-process: msprobe's files, columns and numbers; statistics equal the tensors'; the
step-selection keys; targets; the TensorBoard writer read back with tensorboard's EventAccumulator."""

from __future__ import annotations

import gc
import importlib.util
import json
import math
import os
import weakref

import pytest
import torch
import torch.nn.functional as F

from probe_torch import TrainerMon, seed_all
from tests.monitor.helpers import FIXTURE, read_csv, write_config

FIXTURE_OUT = FIXTURE / "rank0_out"


def _fixture_model():
    spec = importlib.util.spec_from_file_location("msprobe_fixture_model", FIXTURE / "model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _train(model, optimizer, steps, batch):
    for step in range(steps):
        x, y = batch(step)
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(6, 8), torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def _batch(step):
    g = torch.Generator().manual_seed(step)
    return torch.randn(16, 6, generator=g), torch.randint(0, 3, (16,), generator=g)


def _monitor(tmp_path, model, optimizer, **config):
    mon = TrainerMon(write_config(tmp_path / "monitor_config.json", **config), params_have_main_grad=False,
                     output_dir=tmp_path / "out")
    mon.set_monitor(model, optimizer)
    return mon


def test_msprobe_fixture_files_columns_and_numbers(tmp_path):
    """The fixture's own script under probe: every file msprobe wrote exists with the same columns and rows in the
    same order, and the numbers are msprobe's, exp_avg/exp_avg_sq at msprobe's step (the moments step N starts
    from: none at step 0). Numbers are compared at step 0 (the moments: step 1, made of step 0's gradients only):
    the fixture was made on another machine, and Adam's first update of near-zero gradients amplifies the last
    bits."""
    fixture = _fixture_model()
    seed_all(1234)
    model = fixture.TinyNet()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    config = json.loads((FIXTURE / "monitor_config.json").read_text())
    mon = _monitor(tmp_path, model, optimizer, **config)
    _train(model, optimizer, 3, lambda step: fixture.make_batch(step, 4, 8, 64, 10, torch.float32))
    mon.close()
    ours = {p.name for p in mon.output.glob("*.csv")}
    theirs = {p.name for p in FIXTURE_OUT.glob("*.csv")}
    assert theirs <= ours
    assert ours - theirs == {"grad_norm_0-0.csv", "grad_norm_1-1.csv", "grad_norm_2-2.csv"}
    for name in sorted(theirs):
        header, rows = read_csv(mon.output / name)
        their_header, their_rows = read_csv(FIXTURE_OUT / name)
        assert header == their_header, name
        assert [r["name"] for r in rows] == [r["name"] for r in their_rows], name
        assert [(r["shape"], r["dtype"]) for r in rows] == [(r["shape"], r["dtype"]) for r in their_rows], name
        first_step = name.endswith("_0-0.csv") and not name.startswith("param_updated")
        if first_step or name in ("exp_avg_1-1.csv", "exp_avg_sq_1-1.csv"):
            for row, their in zip(rows, their_rows):
                for op in ("norm", "min", "max"):
                    assert float(row[op]) == pytest.approx(float(their[op]), rel=1e-5, abs=2e-6, nan_ok=True), (name, row)


def test_statistics_equal_the_tensors(tmp_path):
    torch.manual_seed(0)
    model = Net()
    with torch.no_grad():
        model.fc1.bias.zero_()  # zeros = 1.0
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # parameters stay as they are
    mon = _monitor(tmp_path, model, optimizer, wg_distribution=True, param_distribution=True,
                   ops=["min", "max", "mean", "norm", "zeros", "nans"])
    _train(model, optimizer, 1, _batch)
    x, y = _batch(0)
    F.cross_entropy(model(x), y).backward()  # the same gradients, computed again by the test
    mon.close()
    grads = {name: p.grad for name, p in model.named_parameters()}
    for tag, tensors in (("param_updated", dict(model.named_parameters())), ("grad_reduced", grads)):
        header, rows = read_csv(mon.output / f"{tag}_0-0.csv")
        assert header == ["vpp_stage", "name", "step", "min", "max", "mean", "norm", "zeros", "nans", "shape", "dtype"]
        assert [r["name"] for r in rows] == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
        for row in rows:
            t = tensors[row["name"]].detach()
            expected = {"min": t.min(), "max": t.max(), "mean": t.mean(), "norm": t.norm(),
                        "zeros": (t == 0).float().mean(), "nans": torch.isnan(t).sum()}
            for op, value in expected.items():
                assert float(row[op]) == pytest.approx(float(value), rel=1e-6, abs=1e-9), (tag, row["name"], op)
            assert row["shape"] == str(list(t.shape)) and row["dtype"] == "torch.float32"
    _, bias = read_csv(mon.output / "param_updated_0-0.csv")
    assert float(bias[1]["zeros"]) == 1.0
    _, norm = read_csv(mon.output / "grad_norm_0-0.csv")
    total = math.sqrt(sum(float(g.norm()) ** 2 for g in grads.values()))
    assert float(norm[0]["norm"]) == pytest.approx(total, rel=1e-6)


def test_step_selection_record_windows_and_targets(tmp_path):
    """start_step/step_interval/collect_times pick steps 1 and 3; step_count_per_record puts both in one file;
    targets keep fc2 only (parameters and activations); print_struct writes the module names."""
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    mon = _monitor(tmp_path, model, optimizer, targets={"fc2": {}}, wg_distribution=True, mv_distribution=True,
                   xy_distribution=True, start_step=1, step_interval=2, collect_times=2, step_count_per_record=2,
                   print_struct=True, ops=["norm"])
    _train(model, optimizer, 6, _batch)
    mon.close()
    files = sorted(p.name for p in mon.output.glob("*.csv"))
    assert files == [f"{tag}_1-3.csv" for tag in ("actv", "actv_grad", "exp_avg", "exp_avg_sq", "grad_norm",
                                                  "grad_reduced", "grad_unreduced")]
    _, rows = read_csv(mon.output / "grad_reduced_1-3.csv")
    assert [(r["step"], r["name"]) for r in rows] == [("1", "fc2.weight"), ("1", "fc2.bias"),
                                                     ("3", "fc2.weight"), ("3", "fc2.bias")]
    _, actv = read_csv(mon.output / "actv_1-3.csv")
    assert {r["name"] for r in actv} == {"fc2.input", "fc2.output"}
    assert set(json.loads((mon.output / "module_struct.json").read_text())) == {"", "fc1", "fc2"}


def test_tensorboard_writer_read_back(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    mon = _monitor(tmp_path, model, optimizer, wg_distribution=True, param_distribution=True, format="tensorboard",
                   ops=["max", "norm"])
    _train(model, optimizer, 3, _batch)
    mon.close()
    assert not list(mon.output.glob("*.csv"))
    events = EventAccumulator(str(mon.output))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"grad_reduced/fc1.weight/norm", "grad_unreduced/fc2.bias/max", "param_updated/fc2.weight/norm",
            "grad_norm/global/norm"} <= set(tags)
    updated = events.Scalars("param_updated/fc2.weight/norm")
    assert [e.step for e in updated] == [0, 1, 2]
    assert updated[-1].value == pytest.approx(float(model.fc2.weight.detach().norm()), rel=1e-6)


def test_dynamic_on_switches_recording_while_training(tmp_path, monkeypatch):
    monkeypatch.setenv("DYNAMIC_MONITOR", "true")
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    mon = _monitor(tmp_path, model, optimizer, wg_distribution=True, dynamic_on=False)
    _train(model, optimizer, 2, _batch)
    config = tmp_path / "monitor_config.json"
    write_config(config, wg_distribution=True, dynamic_on=True, collect_times=2)
    os.utime(config, (config.stat().st_atime, config.stat().st_mtime + 5))
    _train(model, optimizer, 5, _batch)  # steps 2..6: the change is seen as step 2 ends
    mon.close()
    assert sorted(p.name for p in mon.output.glob("grad_reduced_*.csv")) == ["grad_reduced_3-3.csv",
                                                                           "grad_reduced_4-4.csv"]


def test_gradient_accumulation_micro_steps(tmp_path):
    """Two micro-batches per step: activations per micro-step, the unreduced gradient accumulated over both."""
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    mon = _monitor(tmp_path, model, optimizer, wg_distribution=True, xy_distribution=True, targets={"fc1": {}},
                   ops=["norm"])
    for micro in range(2):
        x, y = _batch(micro)
        F.cross_entropy(model(x), y).backward()
    optimizer.step()
    mon.close()
    _, actv = read_csv(mon.output / "actv_0-0.csv")
    assert [(r["name"], r["micro_step"]) for r in actv] == [("fc1.input", "0"), ("fc1.output", "0"),
                                                           ("fc1.input", "1"), ("fc1.output", "1")]
    assert float(actv[2]["norm"]) == pytest.approx(float(_batch(1)[0].norm()), rel=1e-6)
    _, unreduced = read_csv(mon.output / "grad_unreduced_0-0.csv")
    weight = next(r for r in unreduced if r["name"] == "fc1.weight")
    assert float(weight["norm"]) == pytest.approx(float(model.fc1.weight.grad.norm()), rel=1e-6)


def test_the_monitor_does_not_keep_the_model_alive(tmp_path):
    """A script that lets its model go (a DDP wrapper and its reducer, before destroy_process_group) frees it
    while the monitor still runs: the monitor holds hooks and names, not the model."""
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    mon = _monitor(tmp_path, model, optimizer, wg_distribution=True, xy_distribution=True)
    _train(model, optimizer, 1, _batch)
    gone = weakref.ref(model)
    del model
    gc.collect()
    assert gone() is None
    mon.close()


def test_one_pass_statistics_match_torch_and_fall_back():
    """Dense float CPU tensors take the fused kernel (host floats, rounded to float32 once per step); NaN, infinity,
    strided views, integers and statistics the kernel lacks keep torch's reductions; all equal torch's values."""
    from probe_monitor.torch_monitor import TorchBackend

    backend, g = TorchBackend(), torch.Generator().manual_seed(0)
    dense = torch.randn(64, 33, generator=g) * 3 + 1
    nan, inf = dense.clone(), dense.clone()
    nan[5, 7], inf[0, 1] = math.nan, -math.inf
    cases = {"float32": (dense, True), "bfloat16": (dense.bfloat16(), True), "float64": (dense.double(), True),
             "transposed": (dense.t(), False), "nan": (nan, False), "inf": (inf, False),
             "int64": (torch.arange(-5, 40), False), "zeros": (torch.zeros(10), True)}
    ops = ("min", "max", "mean", "norm")
    vectors = {name: backend.stats(t, ops, 1e-8) for name, (t, _) in cases.items()}
    for name, (_, fused) in cases.items():
        assert isinstance(vectors[name], list) == fused, name
    fetched = dict(zip(vectors, backend.fetch(list(vectors.values()))))
    for name, (t, _) in cases.items():
        x = t.double()
        expected = [x.min(), x.max(), x.mean(), x.norm()]
        assert fetched[name] == pytest.approx([float(torch.tensor(float(v)).float()) for v in expected], rel=2e-7,
                                              nan_ok=True), name
        assert all(v == float(torch.tensor(v).float()) or math.isnan(v) for v in fetched[name]), name  # float32
    mixed = backend.stats(dense, ("norm", "zeros", "max", "nans"), 1e-8)  # the kernel's part and torch's
    assert backend.fetch([mixed])[0] == pytest.approx([float(dense.norm()), 0.0, float(dense.max()), 0.0], rel=1e-6)
