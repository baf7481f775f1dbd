"""Values in MindSpore dumps: statistics equal numpy's, md5 is the CRC-32 of the raw bytes, tensors as .npy."""

from __future__ import annotations

import zlib

import mindspore as ms
import numpy as np
import pytest
import torch
from mindspore import mint, nn

from .conftest import dump_ms, read_json


def _numpy_stats(array: np.ndarray) -> tuple[float, float, float, float]:
    wide = array.astype(np.float64)
    return float(array.max()), float(array.min()), float(wide.mean()), float(np.sqrt((wide * wide).sum()))


class Scale(nn.Cell):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Dense(6, 3)

    def construct(self, x):
        return mint.mul(self.fc(x), 2.0) + 1


@pytest.fixture()
def net_and_input():
    rng = np.random.default_rng(3)
    net = Scale()
    net.fc.weight.set_data(ms.Tensor(rng.standard_normal((3, 6)).astype(np.float32)))
    net.fc.bias.set_data(ms.Tensor(rng.standard_normal(3).astype(np.float32)))
    return net, rng.standard_normal((5, 6)).astype(np.float32)


def _expected(net, x):
    w, b = net.fc.weight.asnumpy(), net.fc.bias.asnumpy()
    fc_out = x @ w.T + b
    return fc_out, fc_out * 2.0, fc_out * 2.0 + 1


def test_statistics_equal_numpy(tmp_path, net_and_input):
    net, x = net_and_input
    rank = dump_ms(tmp_path, lambda: net(ms.Tensor(x)), model=net)
    data = read_json(rank / "dump.json")["data"]
    fc_out, doubled, final = _expected(net, x)
    checks = {
        ("Cell.fc.Dense.forward.0", "input_args", 0): x,
        ("Cell.fc.Dense.forward.0", "output", 0): fc_out,
        ("Mint.mul.0.forward", "output", 0): doubled,
        ("Tensor.__add__.0.forward", "output", 0): final,
    }
    for (entry, side, index), array in checks.items():
        record = data[entry][side][index]
        assert record["shape"] == list(array.shape) and record["dtype"] == "Float32"
        got = (record["Max"], record["Min"], record["Mean"], record["Norm"])
        np.testing.assert_allclose(got, _numpy_stats(array), rtol=2e-6, atol=1e-6, err_msg=entry)
    weight = data["Cell.fc.Dense.forward.0"]["parameters"]["weight"]
    np.testing.assert_allclose((weight["Max"], weight["Min"], weight["Mean"], weight["Norm"]),
                               _numpy_stats(net.fc.weight.asnumpy()), rtol=1e-6)
    assert data["Mint.mul.0.forward"]["input_args"][1] == {"type": "float", "value": 2.0}
    assert data["Tensor.__add__.0.forward"]["input_args"][1] == {"type": "int", "value": 1}


def test_md5_is_crc32_of_raw_bytes(tmp_path, net_and_input):
    net, x = net_and_input
    rank = dump_ms(tmp_path, lambda: net(ms.Tensor(x)), model=net, summary_mode="md5")
    data = read_json(rank / "dump.json")["data"]
    record = data["Cell.fc.Dense.forward.0"]["input_args"][0]
    assert record["md5"] == f"{zlib.crc32(x.tobytes()) & 0xFFFFFFFF:08x}"
    assert "Max" in record


def test_bfloat16_md5_matches_pytorch_bytes(tmp_path):
    values = np.array([1.5, -2.25, 3.0, 1e-3, -7.0], np.float32)
    rank = dump_ms(tmp_path, lambda: ms.Tensor(values).astype(ms.bfloat16).reshape(5, 1), level="L1",
                   summary_mode="md5")  # (most ops have no bfloat16 CPU kernel; reshape has)
    record = read_json(rank / "dump.json")["data"]["Tensor.reshape.0.forward"]["input_args"][0]
    torch_bytes = torch.from_numpy(values).to(torch.bfloat16).view(torch.uint8).numpy().tobytes()
    assert record["dtype"] == "BFloat16"
    assert record["md5"] == f"{zlib.crc32(torch_bytes) & 0xFFFFFFFF:08x}"
    as_bf16 = torch.from_numpy(values).to(torch.bfloat16).float().numpy()
    np.testing.assert_allclose((record["Max"], record["Min"]), (as_bf16.max(), as_bf16.min()))


def test_tensor_mode_writes_npy(tmp_path, net_and_input):
    net, x = net_and_input
    rank = dump_ms(tmp_path, lambda: net(ms.Tensor(x)), model=net, task="tensor")
    dump = read_json(rank / "dump.json")
    assert dump["dump_data_dir"] == str(rank / "dump_tensor_data")
    record = dump["data"]["Cell.fc.Dense.forward.0"]["input_args"][0]
    assert record["data_name"] == "Cell.fc.Dense.forward.0.input.0.npy"
    np.testing.assert_array_equal(np.load(rank / "dump_tensor_data" / record["data_name"]), x)
    saved = np.load(rank / "dump_tensor_data" / dump["data"]["Mint.mul.0.forward"]["output"][0]["data_name"])
    np.testing.assert_allclose(saved, _expected(net, x)[1], rtol=1e-6)


def test_filters_list_and_data_mode(tmp_path, net_and_input):
    net, x = net_and_input
    rank = dump_ms(tmp_path, lambda: net(ms.Tensor(x)), model=net, list=["Mint.mul"], data_mode=["forward"])
    data = read_json(rank / "dump.json")["data"]
    assert list(data) == ["Mint.mul.0.forward"]


def test_save_variable_and_its_gradient(tmp_path):
    from probe_mindspore import PrecisionDebugger

    weight = ms.Parameter(ms.Tensor(np.array([1.0, 2.0, 3.0], np.float32)), name="w")
    debugger = PrecisionDebugger(dump_path=str(tmp_path), task="statistics", level="L1")
    debugger.start()

    def loss(x):
        hidden = x * weight
        PrecisionDebugger.save(hidden, "hidden")
        return (hidden * hidden).sum()

    ms.value_and_grad(loss, None, [weight])(ms.Tensor(np.ones(3, np.float32)))
    debugger.stop()
    debugger.close()
    saved = read_json(tmp_path / "step0" / "rank0" / "debug.json")["data"]
    assert saved["hidden.0.debug"]["Max"] == 3.0
    assert saved["hidden_grad.0.debug"]["Max"] == 6.0  # d(h^2)/dh = 2h


def test_steps_layout_and_step_filter(tmp_path):
    from probe_mindspore import PrecisionDebugger

    debugger = PrecisionDebugger(dump_path=str(tmp_path), task="statistics", level="L1", step=[1, 2])
    for _ in range(4):
        debugger.start()
        mint.exp(ms.Tensor(np.zeros(2, np.float32)))
        debugger.stop()
        debugger.step()
    debugger.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step1", "step2"]
    assert list(read_json(tmp_path / "step1" / "rank0" / "dump.json")["data"]) == ["Mint.exp.0.forward"]


def test_hooks_are_removed_after_close(tmp_path):
    before = (ms.Tensor.__add__, mint.matmul, nn.Cell.__call__, "reshape" in vars(ms.Tensor))
    dump_ms(tmp_path, lambda: ms.Tensor(np.ones(2, np.float32)) + 1)
    assert (ms.Tensor.__add__, mint.matmul, nn.Cell.__call__, "reshape" in vars(ms.Tensor)) == before


def test_primitive_classes_are_restored_after_close(tmp_path, net_and_input):
    net, x = net_and_input
    matmul_class = type(net.fc.matmul)
    rank = dump_ms(tmp_path, lambda: net(ms.Tensor(x)), model=net)
    assert "Primitive.matmul.MatMul.0.forward" in read_json(rank / "dump.json")["data"]
    assert type(net.fc.matmul) is matmul_class
