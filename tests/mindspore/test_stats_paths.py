"""Where MindSpore statistics are computed: CPU tensors (views included) in place by the fused kernel, without
``asnumpy``; accelerator tensors by MindSpore ops on their device, fetched with one ``asnumpy`` per batch
(``device_stats=True`` takes that path on the CPU)."""

from __future__ import annotations

import math

import mindspore as ms
import numpy as np
import pytest
from mindspore import mint

from mindspore.common import dtype as mstype

from probe_mindspore.ops import MindSporeTensorOps, dtype_facts

from . import ms_net
from .conftest import dump_ms, read_json


def _exact(array: np.ndarray) -> tuple[float, float, float, float]:
    wide = array.astype(np.float64).ravel()
    return float(wide.max()), float(wide.min()), math.fsum(wide) / wide.size, math.sqrt(math.fsum(wide * wide))


def _tensors() -> dict[str, ms.Tensor]:
    x = ms.Tensor(np.random.default_rng(5).standard_normal((4, 8, 96)).astype(np.float32))
    return {"dense": x * 1.0, "split chunk": mint.split(x, 32, dim=-1)[1],
            "transpose": x.reshape(4, 8, 12, 8).transpose(0, 2, 1, 3), "slice": x[:, 2:5],
            "float16": x.astype(ms.float16), "bfloat16": x.astype(ms.bfloat16),
            "float64": x.astype(ms.float64)[1]}


def test_dtype_facts_by_identity_answer_as_the_dtypes_themselves():
    """Facts are looked up by the dtype object's identity (hashing a MindSpore dtype is slow): each answer is the
    one its own comparison gives, for every dtype, and a tensor's dtype is the very object cached."""
    dtypes = [mstype.float16, mstype.bfloat16, mstype.float32, mstype.float64, mstype.int8, mstype.int32,
              mstype.int64, mstype.uint8, mstype.bool_, mstype.complex64, mstype.complex128]
    for dtype in dtypes:
        facts = dtype_facts(dtype)
        assert (facts.name, facts.is_float, facts.low_precision, facts.is_complex) == (
            str(dtype), dtype in mstype.float_type, dtype in (mstype.float16, mstype.bfloat16),
            dtype in (mstype.complex64, mstype.complex128)), dtype
        assert (facts.kind is not None) == (dtype in (mstype.float16, mstype.bfloat16, mstype.float32,
                                                      mstype.float64)), dtype
    x = ms.Tensor(np.ones((2, 3), np.float32))
    assert dtype_facts(x.dtype) is dtype_facts(mstype.float32)
    ops = MindSporeTensorOps()
    assert ops.describe(x.astype(ms.bfloat16))["dtype"] == "BFloat16"


def test_statistics_follow_their_own_tensors_dtype_whatever_was_described_before():
    """describe() hands the dtype facts of the tensor it described to the stats() that follows: a stats() of
    another tensor (an integer one after a float one, and back) still reads its own dtype."""
    ops = MindSporeTensorOps()
    floats = ms.Tensor(np.array([1.5, -2.0, 4.0], np.float32))
    ints = ms.Tensor(np.array([3, -1, 7], np.int32))
    ops.describe(floats)
    got_ints = ops.fetch_stats([ops.stats(ints)])[0]
    ops.describe(ints)
    got_floats = ops.fetch_stats([ops.stats(floats)])[0]
    assert got_ints == (7.0, -1.0, 3.0, math.sqrt(59.0))
    assert got_floats == (4.0, -2.0, 3.5 / 3, math.sqrt(22.25))


@pytest.mark.parametrize("device_stats", [False, True], ids=["host", "device"])
def test_both_paths_give_the_exact_statistics(device_stats, monkeypatch):
    tensors = _tensors()
    expected = {name: _exact(t.astype(ms.float32).asnumpy() if t.dtype == ms.bfloat16 else t.asnumpy())
                for name, t in tensors.items()}
    transfers = []
    real_asnumpy = ms.Tensor.asnumpy
    monkeypatch.setattr(ms.Tensor, "asnumpy", lambda t: transfers.append(t.shape) or real_asnumpy(t))
    ops = MindSporeTensorOps(device_stats=device_stats)
    handles = [ops.stats(t) for t in tensors.values()]
    assert transfers == []  # nothing comes to the host before the batch is fetched
    values = ops.fetch_stats(handles)
    # host: read in place, never copied; device: one transfer for the float32 reductions (the 16-bit types'
    # included) and one for the float64 ones
    assert transfers == ([(6, 4), (1, 4)] if device_stats else [])
    rel = 1e-5 if device_stats else 1e-7  # float32 sums on the device; float64 ones in the kernel
    for (name, want), got in zip(expected.items(), values, strict=True):
        assert got[:2] == want[:2], name  # max and min are exact on both paths
        count = tensors[name].size
        assert got[2] == pytest.approx(want[2], abs=rel * want[3] / math.sqrt(count)), name
        assert got[3] == pytest.approx(want[3], rel=rel), name


def test_nan_integers_and_empty_keep_numpys_semantics():
    ops = MindSporeTensorOps()
    nan = ms.Tensor(np.array([1.0, np.nan, 3.0], np.float32))
    ints = ms.Tensor(np.arange(12, dtype=np.int32))
    empty = ms.Tensor(np.zeros((0, 3), np.float32))
    got = ops.fetch_stats([ops.stats(t) for t in (nan, ints, empty)])
    assert all(math.isnan(v) for v in got[0])
    assert got[1] == (11.0, 0.0, 5.5, pytest.approx(math.sqrt(sum(i * i for i in range(12)))))
    assert got[2] is None


def test_device_path_dump_matches_host_dump_and_leaves_training_alone(tmp_path):
    """The fixture net, one step at mix, both ways: the same entries, float32-close values, the same weights."""
    from probe_mindspore import PrecisionDebugger

    dumps, weights = {}, {}
    for device_stats in (False, True):
        ms.set_seed(0)
        net = ms_net.Net()
        out = tmp_path / str(device_stats)
        debugger = PrecisionDebugger(dump_path=str(out), task="statistics", level="mix")
        debugger.collector.ops.device_stats = device_stats
        debugger.start(net)
        ms_net.train(net, 1)
        debugger.stop()
        debugger.close()
        dumps[device_stats] = read_json(out / "step0" / "rank0" / "dump.json")["data"]
        weights[device_stats] = [p.asnumpy() for p in net.trainable_params()]
    host, device = dumps[False], dumps[True]
    assert list(host) == list(device) and len(host) > 100
    compared = 0
    for name, entry in host.items():
        for side in ("input_args", "output"):
            for a, b in zip(entry.get(side) or [], device[name].get(side) or []):
                if isinstance(a, dict) and "Norm" in a and a["Norm"] is not None:
                    assert (a["Max"], a["Min"]) == (b["Max"], b["Min"]), name
                    scale = a["Norm"] / math.sqrt(math.prod(a["shape"]) or 1)
                    assert b["Mean"] == pytest.approx(a["Mean"], abs=1e-6 * scale + 1e-12), name
                    assert b["Norm"] == pytest.approx(a["Norm"], rel=1e-5), name
                    compared += 1
    assert compared > 200
    for a, b in zip(weights[False], weights[True], strict=True):
        np.testing.assert_array_equal(a, b)  # the device reductions recorded no gradient and changed nothing


def test_fixture_net_dump_reads_no_tensor_through_numpy(tmp_path, monkeypatch):
    """At L1 every float tensor of the fixture net (views of split and transpose included) is read in place."""
    from probe_mindspore import ops as ms_ops

    calls = []
    real = ms_ops.to_numpy
    monkeypatch.setattr(ms_ops, "to_numpy", lambda t: calls.append(str(t.dtype)) or real(t))
    ms.set_seed(0)
    net = ms_net.Net()
    rank = dump_ms(tmp_path, lambda: ms_net.train(net, 1), model=net, level="L1")
    assert "Mint.split.0.forward" in read_json(rank / "dump.json")["data"]
    assert calls and set(calls) == {"Int32"}  # only the labels (integers take numpy's reductions)
