"""Every recorded number equals what torch computes directly; md5 and tensor files match the live tensors."""

from __future__ import annotations

import zlib

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.collect.helpers import load, run_probe


class Tiny(nn.Module):
    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.fc = nn.Linear(5, 3).to(dtype)

    def forward(self, x):
        return torch.tanh(self.fc(x))


def _run(tmp_path, dtype=torch.float32, **options):
    """One forward/backward of Tiny on a 3-D input; returns (data, live tensors)."""
    from probe_torch import PrecisionDebugger

    torch.manual_seed(1)
    model = Tiny(dtype)
    x = torch.randn(2, 4, 5, dtype=dtype, requires_grad=True)
    debugger = PrecisionDebugger(dump_path=str(tmp_path), **options)
    debugger.start(model)
    hidden = model.fc(x)
    hidden.retain_grad()
    out = torch.tanh(hidden)
    out.sum().backward()
    debugger.stop()
    debugger.step()
    debugger.close()
    live = {"x": x.detach(), "hidden": hidden.detach(), "out": out.detach(), "weight": model.fc.weight,
            "bias": model.fc.bias, "grad_hidden": hidden.grad, "grad_x": x.grad}
    return load(tmp_path / "step0" / "rank0" / "dump.json")["data"], live


def _expect(record, tensor):
    t = tensor.detach()
    assert record["shape"] == list(t.shape)
    assert record["dtype"] == str(t.dtype)
    assert record["Max"] == pytest.approx(t.max().item(), rel=1e-6)
    assert record["Min"] == pytest.approx(t.min().item(), rel=1e-6)
    assert record["Mean"] == pytest.approx(t.mean().item(), rel=1e-5, abs=1e-7)
    assert record["Norm"] == pytest.approx(t.norm().item(), rel=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_statistics_equal_torch(tmp_path, dtype):
    data, live = _run(tmp_path, dtype, level="mix")
    linear = data["Functional.linear.0.forward"]
    _expect(linear["input_args"][0], live["x"])
    _expect(linear["input_args"][1], live["weight"])
    _expect(linear["output"][0], live["hidden"])
    module = data["Module.fc.Linear.forward.0"]
    _expect(module["parameters"]["weight"], live["weight"])
    _expect(module["parameters"]["bias"], live["bias"])
    assert module["input_args"][0]["requires_grad"] is True
    _expect(data["Torch.tanh.0.forward"]["output"][0], live["out"])
    for record in (linear["output"][0], module["parameters"]["weight"]):
        assert all(isinstance(record[k], float) for k in ("Max", "Min", "Mean", "Norm"))


def test_api_backward_in_msprobes_layout(tmp_path):
    """Default ``api_backward: grad_fn``: an API's backward shows what its first output's gradient node
    computes, as msprobe's does. A 3-D ``F.linear`` ends in a view of ``addmm``'s 2-D output, so its node
    passes on the output gradient flattened to 2-D (msprobe's fixture: ``[[32, 192]]`` for its 4x8x192)."""
    data, live = _run(tmp_path, level="mix")
    back = data["Functional.linear.0.backward"]
    _expect(back["input"][0], live["grad_hidden"])
    assert [g["shape"] for g in back["output"]] == [[8, 3]]
    _expect(back["output"][0], live["grad_hidden"].reshape(8, 3))
    tanh = data["Torch.tanh.0.backward"]
    _expect(tanh["input"][0], torch.ones(2, 4, 3))
    _expect(tanh["output"][0], live["grad_hidden"])


def test_backward_and_parameter_gradients(tmp_path):
    """``api_backward: inputs``: the gradient w.r.t. each input of the API, in argument order."""
    data, live = _run(tmp_path, level="mix", api_backward="inputs")
    back = data["Functional.linear.0.backward"]
    _expect(back["input"][0], live["grad_hidden"])  # gradient w.r.t. the output
    grads = back["output"]  # w.r.t. each input, each shaped like it (x: 3-D, weight, bias)
    assert [g["shape"] for g in grads] == [[2, 4, 5], [3, 5], [3]]
    _expect(grads[0], live["grad_x"])
    _expect(grads[1], live["weight"].grad)
    _expect(grads[2], live["bias"].grad)
    module_back = data["Module.fc.Linear.backward.0"]
    _expect(module_back["input"][0], live["grad_hidden"])
    _expect(module_back["output"][0], live["grad_x"])
    params = data["Module.fc.Linear.parameters_grad.0"]
    _expect(params["weight"][0], live["weight"].grad)
    _expect(params["bias"][0], live["bias"].grad)


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
def test_large_float32_norms_are_as_exact_as_the_float64_bench(tmp_path, layout):
    """A float32 norm summed in one long line drifts (4e-4 on a million equal values): the norm is within
    1e-5 of the exact one, whatever the layout (rows, a transpose read in memory order, a strided slice)."""
    from probe_torch import PrecisionDebugger

    base = torch.full((1000, 1000), -1e4) + torch.linspace(0, 1, 1000)
    x = {"contiguous": base, "transposed": base.t(), "strided": base[:, ::2]}[layout]
    debugger = PrecisionDebugger(dump_path=str(tmp_path), level="L1")
    debugger.start()
    torch.abs(x)
    debugger.stop()
    debugger.step()
    debugger.close()
    record = load(tmp_path / "step0" / "rank0" / "dump.json")["data"]["Torch.abs.0.forward"]["input_args"][0]
    exact = x.double().norm().item()
    assert record["Norm"] == pytest.approx(exact, rel=1e-5)
    assert record["Mean"] == pytest.approx(x.double().mean().item(), rel=1e-5)
    assert (record["Max"], record["Min"]) == (x.max().item(), x.min().item())


def test_integer_and_bool_tensors(tmp_path):
    from probe_torch import PrecisionDebugger

    debugger = PrecisionDebugger(dump_path=str(tmp_path), level="L1")
    debugger.start()
    labels = torch.tensor([3, 1, 4])
    mask = labels > 2
    debugger.stop()
    debugger.step()
    debugger.close()
    data = load(tmp_path / "step0" / "rank0" / "dump.json")["data"]
    ints = data["Tensor.__gt__.0.forward"]["input_args"][0]
    assert (ints["Max"], ints["Min"], ints["Mean"], ints["Norm"]) == (4, 1, None, None)
    bools = data["Tensor.__gt__.0.forward"]["output"][0]
    assert (bools["dtype"], bools["Max"], bools["Min"]) == ("torch.bool", True, False)
    assert mask.tolist() == [True, False, True]


def test_float8_tensors_get_statistics_instead_of_killing_the_script(tmp_path):
    """CPU torch has no amax/amin kernel for float8: the statistics are taken in float32."""
    from probe_torch import PrecisionDebugger

    debugger = PrecisionDebugger(dump_path=str(tmp_path), level="L1", risk_level="ALL")
    debugger.start()
    x = torch.tensor([[0.5, -2.0], [3.0, 0.25]])
    low = x.to(torch.float8_e4m3fn)
    back = low.float() * 2
    debugger.stop()
    debugger.step()
    debugger.close()
    data = load(tmp_path / "step0" / "rank0" / "dump.json")["data"]
    cast = next(entry for name, entry in data.items() if name.startswith("Tensor.to.0.forward"))["output"][0]
    assert cast["dtype"] == "torch.float8_e4m3fn"
    assert (cast["Max"], cast["Min"]) == (3.0, -2.0) and cast["Mean"] == pytest.approx(0.4375)
    assert back.tolist() == [[1.0, -4.0], [6.0, 0.5]]


def test_md5_is_crc32_of_raw_bytes(tmp_path):
    data, live = _run(tmp_path, level="L1", summary_mode="md5")
    record = data["Functional.linear.0.forward"]["input_args"][0]
    assert record["md5"] == f"{zlib.crc32(live['x'].numpy().tobytes()):08x}"
    assert "Max" in record  # md5 mode keeps the statistics


def test_tensor_mode_files_load_and_equal(tmp_path):
    data, live = _run(tmp_path, task="tensor", level="L1")
    rank_dir = tmp_path / "step0" / "rank0"
    dump = load(rank_dir / "dump.json")
    assert dump["dump_data_dir"] == str(rank_dir / "dump_tensor_data")
    entry = dump["data"]["Functional.linear.0.forward"]
    x_file = rank_dir / "dump_tensor_data" / entry["input_args"][0]["data_name"]
    assert x_file.name == "Functional.linear.0.forward.input.0.pt"
    assert torch.equal(torch.load(x_file, weights_only=True), live["x"])
    out_file = rank_dir / "dump_tensor_data" / entry["output"][0]["data_name"]
    assert torch.equal(torch.load(out_file, weights_only=True), live["hidden"])
    grad = dump["data"]["Functional.linear.0.backward"]["output"][0]  # msprobe's layout: addmm's node
    assert grad["data_name"] == "Functional.linear.0.backward.output.0.pt"
    assert torch.equal(torch.load(rank_dir / "dump_tensor_data" / grad["data_name"], weights_only=True),
                       live["grad_hidden"].reshape(8, 3))


def test_a_tensor_saved_twice_is_one_file_linked_until_it_changes(tmp_path):
    """A module's input is its first API's input, and an API's output the next one's input: one file each,
    hard-linked under both names. A tensor changed in place gets files of its own, before and after."""
    from probe_torch import PrecisionDebugger

    model = torch.nn.Sequential(torch.nn.Linear(4, 3))
    x = torch.randn(2, 4)
    debugger = PrecisionDebugger(dump_path=str(tmp_path), task="tensor", level="mix")
    debugger.start(model)
    model(x)
    y = torch.exp(x)
    torch.log(y)
    before = y.clone()
    y.mul_(2)
    debugger.stop()
    debugger.step()
    debugger.close()
    folder = tmp_path / "step0" / "rank0" / "dump_tensor_data"
    data = load(tmp_path / "step0" / "rank0" / "dump.json")["data"]

    def file(name, where="input_args"):
        return folder / data[name][where][0]["data_name"]

    module_x, linear_x = file("Module.0.Linear.forward.0"), file("Functional.linear.0.forward")
    assert module_x != linear_x and module_x.stat().st_ino == linear_x.stat().st_ino
    exp_out, log_in = file("Torch.exp.0.forward", "output"), file("Torch.log.0.forward")
    assert exp_out.stat().st_ino == log_in.stat().st_ino
    mul_in, mul_out = file("Tensor.mul_.0.forward"), file("Tensor.mul_.0.forward", "output")
    assert mul_out.stat().st_ino != mul_in.stat().st_ino
    assert torch.equal(torch.load(mul_in, weights_only=True), before)
    assert torch.equal(torch.load(mul_out, weights_only=True), y)
    assert torch.equal(torch.load(log_in, weights_only=True), before)


def test_snapshots_waiting_for_the_writer_stay_within_the_bound(tmp_path, monkeypatch):
    """The training thread waits once the queued snapshots reach SAVE_QUEUE_BYTES; every file is still written."""
    from probe_core.collect import writer
    from probe_torch import PrecisionDebugger

    monkeypatch.setattr(writer, "SAVE_QUEUE_BYTES", 4096)
    peak = []
    original = writer.StepWriter.save_tensor

    def spy(self, snapshot, data_name, nbytes=0):
        original(self, snapshot, data_name, nbytes)
        peak.append(self._queued_bytes)

    monkeypatch.setattr(writer.StepWriter, "save_tensor", spy)
    debugger = PrecisionDebugger(dump_path=str(tmp_path), task="tensor", level="L1")
    debugger.start()
    values = [torch.full((256,), float(i)) for i in range(12)]  # 1 KiB each
    outs = [torch.exp(v) for v in values]
    debugger.stop()
    debugger.step()
    debugger.close()
    assert peak and max(peak) <= 4096
    folder = tmp_path / "step0" / "rank0" / "dump_tensor_data"
    for i, out in enumerate(outs):
        assert torch.equal(torch.load(folder / f"Torch.exp.{i}.forward.output.0.pt", weights_only=True), out)


def test_overflow_check_keeps_only_nan_inf_entries(tmp_path):
    from probe_torch import PrecisionDebugger

    debugger = PrecisionDebugger(dump_path=str(tmp_path), task="overflow_check", level="L1", overflow_nums=2)
    debugger.start()
    x = torch.tensor([1.0, 0.0, -1.0])
    y = x * 2  # finite: not kept
    z = torch.log(x)  # -inf and nan
    w = torch.exp(z)  # nan in
    torch.exp(w)
    torch.log(x)  # beyond overflow_nums
    debugger.stop()
    debugger.step()
    debugger.close()
    dump = load(tmp_path / "step0" / "rank0" / "dump.json")
    assert dump["task"] == "overflow_check"
    assert list(dump["data"]) == ["Torch.log.0.forward", "Torch.exp.0.forward"]
    assert y.tolist() == [2.0, 0.0, -2.0]


def test_nan_and_inf_written_as_json_tokens(tmp_path):
    from probe_torch import PrecisionDebugger

    debugger = PrecisionDebugger(dump_path=str(tmp_path), level="L1")
    debugger.start()
    torch.log(torch.tensor([0.0, 1.0]))
    debugger.stop()
    debugger.step()
    debugger.close()
    text = (tmp_path / "step0" / "rank0" / "dump.json").read_text()
    assert "-Infinity" in text
    record = load(tmp_path / "step0" / "rank0" / "dump.json")["data"]["Torch.log.0.forward"]["output"][0]
    assert record["Min"] == float("-inf")


def test_save_writes_debug_json(tmp_path):
    from probe_torch import PrecisionDebugger

    debugger = PrecisionDebugger(dump_path=str(tmp_path), level="L1")
    debugger.start()
    w = torch.ones(3, requires_grad=True)
    loss = (w * 2).sum()
    PrecisionDebugger.save(w, "w")
    PrecisionDebugger.save({"lr": 0.1, "t": torch.zeros(2)}, "cfg", save_backward=False)
    loss.backward()
    debugger.stop()
    debugger.step()
    debugger.close()
    debug = load(tmp_path / "step0" / "rank0" / "debug.json")
    assert set(debug["data"]) == {"w.0.debug", "cfg.0.debug", "w_grad.0.debug"}
    assert debug["data"]["cfg.0.debug"]["lr"] == {"type": "float", "value": 0.1}
    assert debug["data"]["w_grad.0.debug"]["Max"] == 2.0


def test_tensor_mode_save_names_follow_msprobe(tmp_path):
    from probe_torch import PrecisionDebugger

    debugger = PrecisionDebugger(dump_path=str(tmp_path), task="tensor", level="L1")
    debugger.start()
    value = torch.arange(4.0)
    PrecisionDebugger.save(value, "act", save_backward=False)
    PrecisionDebugger.save([value, value * 2], "pair", save_backward=False)
    debugger.stop()
    debugger.step()
    debugger.close()
    rank_dir = tmp_path / "step0" / "rank0"
    debug = load(rank_dir / "debug.json")["data"]
    assert debug["act.0.debug"]["data_name"] == "act.0.debug.pt"
    assert [item["data_name"] for item in debug["pair.0.debug"]] == ["pair.0.debug.0.pt", "pair.0.debug.1.pt"]
    loaded = torch.load(rank_dir / "dump_tensor_data" / "pair.0.debug.1.pt", weights_only=True)
    assert torch.equal(loaded, value * 2)


def test_seed_all_makes_runs_repeatable_and_removes_dropout():
    import random

    from probe_torch import seed_all
    from probe_torch.debugger import restore_dropout

    try:
        seed_all(7, mode=False, rm_dropout=True)
        first = (random.random(), torch.rand(3))
        seed_all(7)
        second = (random.random(), torch.rand(3))
        assert first[0] == second[0] and torch.equal(first[1], second[1])
        x = torch.ones(1000)
        assert torch.equal(F.dropout(x, p=0.5, training=True), x)
    finally:
        restore_dropout()
    assert not torch.equal(F.dropout(torch.ones(1000), p=0.5, training=True), torch.ones(1000))


def test_statistics_are_computed_once_per_tensor_across_flushes_without_keeping_it_alive(tmp_path, monkeypatch):
    """Each API's output is the next one's input: its statistics are computed once although a flush falls
    between the two calls, the cache lets a tensor die, and a change probe cannot see (``.data``, the code
    between two steps) is never answered from the cache."""
    import weakref

    from probe_torch import PrecisionDebugger, ops

    launched = []
    original = ops._launch_stats
    monkeypatch.setattr(ops, "_launch_stats", lambda tensor: launched.append(tensor.shape) or original(tensor))
    x, w = torch.rand(64) + 1, torch.ones(8)
    debugger = PrecisionDebugger(dump_path=str(tmp_path), level="L1")
    debugger.start()
    chain = [x]
    for api in (torch.exp, torch.log, torch.sin, torch.cos, torch.tanh):
        chain.append(api(chain[-1]))
    assert len(launched) == len(chain)  # x and five outputs, each once
    alive = weakref.ref(chain[2])
    del chain[2]
    assert alive() is None
    torch.exp(w)
    w.data.mul_(3)  # in place through another handle: w's version does not move
    torch.exp(w)
    debugger.stop()
    w.data.mul_(2)  # between two steps, unrecorded
    debugger.step()
    debugger.start()
    torch.exp(w)
    debugger.stop()
    debugger.step()
    debugger.close()
    first = load(tmp_path / "step0" / "rank0" / "dump.json")["data"]
    exps = sorted((k for k in first if k.startswith("Torch.exp.")), key=lambda k: int(k.split(".")[2]))
    assert [first[k]["input_args"][0]["Max"] for k in exps[-2:]] == [1.0, 3.0]
    second = load(tmp_path / "step1" / "rank0" / "dump.json")["data"]
    assert second["Torch.exp.0.forward"]["input_args"][0]["Max"] == 6.0


def test_statistics_are_fetched_in_batches_not_per_value(tmp_path, monkeypatch):
    from probe_torch.ops import TorchTensorOps

    fetches = []
    original = TorchTensorOps.fetch_stats

    def counting(self, handles):
        fetches.append(len(handles))
        return original(self, handles)

    def forbidden(self):
        raise AssertionError("a per-value .item() during collection")

    monkeypatch.setattr(TorchTensorOps, "fetch_stats", counting)
    monkeypatch.setattr(torch.Tensor, "item", forbidden)
    from tests.collect.helpers import one_step

    data = load(one_step(tmp_path, level="mix") / "dump.json")["data"]
    assert len(data) > 100
    assert len(fetches) < len(data) / 5 and max(fetches) > 20  # one transfer per flush of many tensors


def test_save_of_a_nested_structure_writes_its_gradients_nested_as_msprobe(tmp_path):
    """``{name}_grad.{n}.debug`` keeps the saved structure: each tensor's gradient in its place, ``null`` for
    non-tensors and for tensors no gradient reached; numbered in save order, whatever order backward runs in."""
    from probe_torch import PrecisionDebugger

    debugger = PrecisionDebugger(dump_path=str(tmp_path), task="tensor", level="debug")
    debugger.start()
    a = torch.ones(3, requires_grad=True)
    x, unused = a * 2, a + 1
    PrecisionDebugger.save({"x": x, "pair": [x * 3, 5], "unused": (unused,)}, "v")
    PrecisionDebugger.save(x, "v")
    PrecisionDebugger.save(7, "n")
    x.sum().backward()
    debugger.stop()
    debugger.step()
    debugger.close()
    rank_dir = tmp_path / "step0" / "rank0"
    debug = load(rank_dir / "debug.json")["data"]
    nested = debug["v_grad.0.debug"]
    assert nested["x"]["Max"] == 1.0 and nested["x"]["data_name"] == "v_grad.0.debug.x.pt"
    assert nested["pair"] == [None, None] and nested["unused"] == [None]
    assert debug["v_grad.1.debug"]["data_name"] == "v_grad.1.debug.pt"  # the second save of "v"
    assert debug["n_grad.0.debug"] is None
    assert torch.equal(torch.load(rank_dir / "dump_tensor_data" / "v_grad.0.debug.x.pt", weights_only=True),
                       torch.ones(3))


def test_parameter_gradient_files_are_named_as_msprobe(tmp_path):
    data, _ = _run(tmp_path, task="tensor", level="L0")
    grads = data["Module.fc.Linear.parameters_grad.0"]
    assert grads["weight"][0]["data_name"] == "Module.fc.Linear.parameters_grad.0.weight.pt"
    assert (tmp_path / "step0" / "rank0" / "dump_tensor_data" / grads["bias"][0]["data_name"]).is_file()


def test_per_input_backward_layout_is_declared_in_the_header(tmp_path):
    _run(tmp_path / "inputs", level="L1", api_backward="inputs")
    _run(tmp_path / "grad_fn", level="L1")
    assert load(tmp_path / "inputs" / "step0" / "rank0" / "dump.json")["api_backward"] == "inputs"
    assert "api_backward" not in load(tmp_path / "grad_fn" / "step0" / "rank0" / "dump.json")  # msprobe's header
    compared = run_probe("compare", tmp_path / "inputs", tmp_path / "grad_fn", "-o", tmp_path / "out", cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    assert 'records API backward as "inputs"' in compared.stderr and 'the same "api_backward"' in compared.stderr
