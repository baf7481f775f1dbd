"""The monitor on MindSpore PyNative: statistics equal the tensors' (gradients, parameters, Adam's moments), training
is bitwise untouched, and ``probe run --task monitor`` on an unmodified script writes what TrainerMon writes."""

from __future__ import annotations

import numpy as np
import pytest

from tests.monitor.helpers import SCRIPTS, probe, rank_dir, read_csv, train_here, write_config

ms = pytest.importorskip("mindspore")

OPS = ["min", "max", "mean", "norm", "zeros", "nans"]


def _expected(array: np.ndarray) -> dict[str, float]:
    a = array.astype(np.float64)
    return {"min": a.min(), "max": a.max(), "mean": a.mean(), "norm": float(np.sqrt((a * a).sum())),
            "zeros": float((np.abs(a) < 1e-8).mean()), "nans": float(np.isnan(a).sum())}


def _assert_rows(path, arrays: dict[str, np.ndarray]) -> None:
    header, rows = read_csv(path)
    assert header == ["vpp_stage", "name", "step", *OPS, "shape", "dtype"]
    assert {r["name"] for r in rows} == set(arrays)
    for row in rows:
        array = arrays[row["name"]]
        assert row["shape"] == str(list(array.shape)) and row["dtype"] == "Float32"
        for op, value in _expected(array).items():
            assert float(row[op]) == pytest.approx(value, rel=1e-5, abs=1e-8), (path.name, row["name"], op)


def test_statistics_equal_the_tensors(tmp_path):
    from mindspore import nn

    from probe_mindspore import TrainerMon

    ms.set_context(mode=ms.PYNATIVE_MODE)
    ms.set_seed(0)
    net = nn.SequentialCell(nn.Dense(6, 8), nn.Tanh(), nn.Dense(8, 3))
    optimizer = nn.Adam(net.trainable_params(), learning_rate=1e-2)
    mon = TrainerMon(write_config(tmp_path / "c.json", wg_distribution=True, param_distribution=True,
                                  mv_distribution=True, xy_distribution=True, ops=OPS),
                     params_have_main_grad=False, output_dir=tmp_path / "out")
    mon.set_monitor(net, optimizer)
    loss_fn = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    grad_fn = ms.value_and_grad(lambda x, y: loss_fn(net(x), y), None, optimizer.parameters)
    names = [name for name, _ in net.parameters_and_names()]  # asnumpy() below shares memory on CPU: copies
    seen = {}
    for step in range(2):
        rng = np.random.default_rng(step)
        x = ms.Tensor(rng.standard_normal((16, 6)).astype(np.float32))
        _, grads = grad_fn(x, ms.Tensor(rng.integers(0, 3, 16).astype(np.int32)))
        seen[("grad", step)] = dict(zip(names, (g.asnumpy().copy() for g in grads)))
        seen[("origin", step)] = {n: p.asnumpy().copy() for n, p in zip(names, optimizer.parameters)}
        seen[("m", step)] = {n: m.asnumpy().copy() for n, m in zip(names, optimizer.moment1)}  # as the step starts
        seen[("v", step)] = {n: v.asnumpy().copy() for n, v in zip(names, optimizer.moment2)}
        optimizer(grads)
        seen[("updated", step)] = {n: p.asnumpy().copy() for n, p in zip(names, optimizer.parameters)}
    mon.close()
    out = rank_dir(tmp_path / "out")
    for step in range(2):
        for tag, key in (("grad_unreduced", "grad"), ("grad_reduced", "grad"), ("param_origin", "origin"),
                         ("param_updated", "updated"), ("exp_avg", "m"), ("exp_avg_sq", "v")):
            _assert_rows(out / f"{tag}_{step}-{step}.csv", seen[(key, step)])
    _, actv = read_csv(out / "actv_0-0.csv")
    assert [r["name"] for r in actv][:2] == ["0.input", "0.output"]


def test_probe_run_writes_what_trainermon_writes_and_training_is_untouched(tmp_path):
    config = write_config(tmp_path / "c.json", wg_distribution=True, param_distribution=True, mv_distribution=True,
                          xy_distribution=True, ops=["min", "max", "norm"])
    script = SCRIPTS / "ms_train.py"
    probe("run", "--task", "monitor", "-c", config, "--dump-path", "run_out", script, "--save", "run.npz", cwd=tmp_path)
    train_here("--monitor", config, "--out", "api_out", "--save", "api.npz", cwd=tmp_path, script=script)
    train_here("--save", "plain.npz", cwd=tmp_path, script=script)
    files = sorted(p.name for p in rank_dir(tmp_path / "api_out").glob("*.csv"))
    assert "actv_grad_2-2.csv" in files and "exp_avg_sq_2-2.csv" in files
    for name in files:
        assert (rank_dir(tmp_path / "run_out") / name).read_text() == \
            (rank_dir(tmp_path / "api_out") / name).read_text()
    plain = np.load(tmp_path / "plain.npz")
    for monitored in ("api.npz", "run.npz"):
        other = np.load(tmp_path / monitored)
        assert all(np.array_equal(plain[k], other[k]) for k in plain.files), monitored
