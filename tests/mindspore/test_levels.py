"""Levels, scope, overflow_check and seed_all with the MindSpore collector."""

from __future__ import annotations

import mindspore as ms
import numpy as np
from mindspore import mint, nn

from . import ms_net
from .conftest import dump_ms, read_json


class Pair(nn.Cell):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Dense(3, 3)
        self.second = nn.Dense(3, 3)

    def construct(self, x):
        return self.second(mint.exp(self.first(x)))


def _run_pair(tmp_path, **overrides):
    net = Pair()
    x = ms.Tensor(np.ones((2, 3), np.float32))
    return read_json(dump_ms(tmp_path, lambda: net(x), model=net, **overrides) / "dump.json"), net


def test_level_l0_records_cells_only(tmp_path):
    dump, _ = _run_pair(tmp_path, level="L0")
    assert list(dump["data"]) == ["Cell.first.Dense.forward.0", "Cell.second.Dense.forward.0"]
    construct = read_json(tmp_path / "step0" / "rank0" / "construct.json")
    assert construct == {"Cell.first.Dense.forward.0": None, "Cell.second.Dense.forward.0": None}


def test_level_l1_records_apis_only(tmp_path):
    dump, _ = _run_pair(tmp_path, level="L1")
    names = list(dump["data"])
    assert not any(name.startswith("Cell.") for name in names)
    assert names[3] == "Mint.exp.0.forward"  # between the primitives of the two Dense cells
    assert names[:3] == ["Primitive.shape_op.Shape.0.forward", "Primitive.matmul.MatMul.0.forward",
                         "Primitive.bias_add.BiasAdd.0.forward"]
    assert read_json(tmp_path / "step0" / "rank0" / "construct.json") == {}


def test_scope_is_an_inclusive_range(tmp_path):
    dump, _ = _run_pair(tmp_path, level="mix", scope=["Mint.exp.0.forward", "Cell.second.Dense.forward.0"])
    assert list(dump["data"])[0] == "Mint.exp.0.forward" and list(dump["data"])[-1] == "Cell.second.Dense.forward.0"
    assert not any(name.startswith("Cell.first") for name in dump["data"])


def test_overflow_check_keeps_only_entries_with_inf_or_nan(tmp_path):
    net = Pair()
    big = ms.Tensor(np.full((2, 3), 100.0, np.float32))  # exp(100) overflows float32

    net.first.weight.set_data(ms.Tensor(np.eye(3, dtype=np.float32)))
    net.first.bias.set_data(ms.Tensor(np.zeros(3, np.float32)))
    rank = dump_ms(tmp_path, lambda: net(big), model=net, task="overflow_check")
    data = read_json(rank / "dump.json")["data"]
    assert "Mint.exp.0.forward" in data and "Cell.first.Dense.forward.0" not in data
    assert data["Mint.exp.0.forward"]["output"][0]["Max"] == float("inf")


def test_seed_all_makes_runs_repeat_and_removes_dropout(monkeypatch):
    from mindspore import mint, nn, ops

    from probe_mindspore import seed_all

    # seed_all removes dropout for the rest of the process, as msprobe's does: put it back after this test
    for owner, attr in ((ops, "dropout"), (mint.nn.functional, "dropout"), (nn.Dropout, "construct"),
                        (mint.nn.Dropout, "construct"), (ops, "_probe_dropout_removed")):
        monkeypatch.setattr(owner, attr, getattr(owner, attr, False), raising=False)

    def run():
        seed_all(7)
        net = ms_net.Net()
        return net(ms_net.data()[0]).asnumpy(), ms.ops.dropout(ms.Tensor(np.ones(8, np.float32)), p=0.9)

    (a, dropped), (b, _) = run(), run()
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(dropped.asnumpy(), np.ones(8, np.float32))


def test_optimizer_updates_are_no_entries_at_l1(tmp_path):
    net = ms_net.Net()
    rank = dump_ms(tmp_path, lambda: ms_net.train(net, 1), level="L1")
    names = list(read_json(rank / "dump.json")["data"])
    assert "Mint.mean.0.forward" in names and "Functional.cross_entropy.0.backward" in names
    assert not any("assign" in n or "sgd" in n.lower() for n in names)


def test_rank_folder_follows_the_launchers_rank_id(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK_ID", "3")
    rank = dump_ms(tmp_path, lambda: mint.exp(ms.Tensor(np.zeros(2, np.float32))), level="L1")
    assert rank.parent.joinpath("rank3", "dump.json").is_file() and not rank.exists()


def test_a_cell_that_raises_is_no_entry_and_nesting_recovers(tmp_path):
    class Boom(nn.Cell):
        def construct(self, x):
            raise ValueError("boom")

    class Outer(nn.Cell):
        def __init__(self) -> None:
            super().__init__()
            self.boom = Boom()
            self.dense = nn.Dense(2, 2)

        def construct(self, x):
            try:
                self.boom(x)
            except ValueError:
                pass
            return self.dense(x)

    net = Outer()
    rank = dump_ms(tmp_path, lambda: net(ms.Tensor(np.ones((1, 2), np.float32))), model=net, level="L0")
    assert list(read_json(rank / "dump.json")["data"]) == ["Cell.dense.Dense.forward.0"]
    assert read_json(rank / "construct.json") == {"Cell.dense.Dense.forward.0": None}
