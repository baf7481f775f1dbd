"""FSDP2 and tensor parallelism (DTensor) under ``probe run`` on two gloo CPU ranks: training as without probe,
entries inside the model on every rank, shards recorded with msprobe's DTensor keys, and ``probe compare`` of a
run with a planted change (the second GELU's tanh approximation) naming it, against another sharded run and
against the same model on one device. Buffers a call writes without
reading them (FSDP2's freshly allocated all-gather buffers, ``out=``) are recorded as null, as msprobe records
them."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from probe_torch.buffers import UNREAD_INPUTS
from tests.collect.helpers import PROBE, ROOT, load
from tests.ports import free_port

SCRIPT = ROOT / "tests" / "collect" / "scripts" / "sharded_train.py"
TORCHRUN = str(Path(sys.executable).parent / "torchrun")


def _torchrun(*args: str, cwd: Path) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    result = subprocess.run([TORCHRUN, "--nproc_per_node=2", f"--master_port={free_port()}", *args], cwd=cwd,
                            env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


def _losses(stdout: str) -> dict[str, str]:
    return dict(re.findall(r"(rank\d step\d) loss (\d+\.\d{10})", stdout))


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["fsdp", "tp"])
def test_sharded_run_same_losses_and_compare_finds_plant(tmp_path, layout):
    plain = _losses(_torchrun(str(SCRIPT), layout, cwd=tmp_path))
    bench = _losses(_torchrun(PROBE, "run", "--dump-path", "bench", str(SCRIPT), layout, cwd=tmp_path))
    assert len(plain) == 6 and bench == plain  # bit for bit the losses of the run without probe
    _torchrun(PROBE, "run", "--dump-path", "target", str(SCRIPT), layout, "--plant", cwd=tmp_path)

    for rank in (0, 1):
        data = load(tmp_path / "bench" / "step0" / f"rank{rank}" / "dump.json")["data"]
        first = next(iter(data))
        assert not first.startswith(("Torch.sym_", "Torch.chunk", "Tensor.chunk")), first  # sharding is no entry
        assert "Functional.linear.1.forward" in data and "Functional.gelu.1.forward" in data
        grads = data["Module.2.Linear.parameters_grad.0"]  # FSDP2: the class the model defines
        weight = grads["weight"][0]
        assert weight["type"] == "torch.distributed.tensor.DTensor"
        assert weight["device_mesh"] == [0, 1]
        if layout == "fsdp":  # each rank holds half the rows of the 16x16 gradient
            assert weight["placements"] == [{"Shard": {"dim": 0}}] and weight["shape"] == [8, 16]
            _assert_fsdp_buffers_null(data)
        else:  # RowwiseParallel: half the columns; the partial sums are reduced by DTensor's all_reduce
            assert weight["placements"] == [{"Shard": {"dim": 1}}] and weight["shape"] == [16, 8]
            reduce = data["Torch.all_reduce.0.forward"]
            assert reduce["output"][0]["Norm"] != reduce["input_args"][0]["Norm"]  # recorded after the reduction
    shards = [load(tmp_path / "bench" / "step0" / f"rank{r}" / "dump.json")["data"]["Functional.linear.0.forward"]
              for r in (0, 1)]
    assert shards[0]["input_args"][1]["Norm"] != shards[1]["input_args"][1]["Norm"] or layout == "fsdp"

    first = _compare(tmp_path, "target", "bench", "cmp")["first_divergence"]
    assert first["name"].startswith("Functional.gelu.1.forward") and first["rank"] == "rank0_step0", first
    # the only errors are the planted GELU's (FSDP2's all-gather buffers, recorded as null, are none)
    rows = list(csv.DictReader(next((tmp_path / "cmp" / "step0").glob("compare_result_rank0_*.csv")).open()))
    errors = {r["NPU Name"].split(".forward")[0] for r in rows if r["Result"] == "error"}
    assert errors == {"Functional.gelu.1"}, errors


@pytest.mark.slow
@pytest.mark.parametrize("layout, option", [("fsdp", "--same-batch"), ("tp", "--dtensor-activations")])
def test_sharded_run_compared_against_one_device(tmp_path, layout, option):
    """A 2-rank FSDP2 or tensor-parallel run collected with ``"dtensor": "full"`` against the same model in one
    process (every FSDP2 rank on the single run's batch; ColwiseParallel's columns kept a DTensor): modules
    named as one device names them, parameters and gradients whole, so compare pairs every module, parameter
    and gradient entry of the single run, finds no divergence between the clean runs and names the planted
    GELU (on either rank) against the single run that has it. Collected with the default ``"dtensor": "local"``
    (a run with the GELU planted against the clean single run), each rank's shards and partial sums are not
    compared with the whole tensors (no false divergence, no error) and the planted GELU is still named."""
    config = tmp_path / "full.json"
    config.write_text(json.dumps({"task": "statistics", "level": "mix", "dtensor": "full"}))
    alone = _losses(_single(PROBE, "run", "--dump-path", "one", str(SCRIPT), "single", cwd=tmp_path))
    _single(PROBE, "run", "--dump-path", "one_plant", str(SCRIPT), "single", "--plant", cwd=tmp_path)
    sharded = _losses(_torchrun(PROBE, "run", "-c", str(config), "--dump-path", "sharded", str(SCRIPT), layout,
                                option, cwd=tmp_path))
    for name, loss in sharded.items():  # FSDP2 on one batch computes what one device does, bit for bit
        one_device = alone["rank0" + name[5:]]
        assert loss == one_device if layout == "fsdp" else float(loss) == pytest.approx(float(one_device), 1e-6)

    single = load(tmp_path / "one" / "step0" / "rank0" / "dump.json")["data"]
    for rank in (0, 1):
        data = load(tmp_path / "sharded" / "step0" / f"rank{rank}" / "dump.json")["data"]
        assert {n for n in data if n.startswith("Module.")} == {n for n in single if n.startswith("Module.")}
        weight = data["Module.2.Linear.parameters_grad.0"]["weight"][0]  # gathered: the whole gradient
        assert weight["full_tensor"] and weight["shape"] == [16, 16] and weight["placements"][0]["Shard"]

    clean = _compare(tmp_path, "sharded", "one", "clean")
    assert clean["first_divergence"] is None and clean["counts"]["error"] == 0, clean["counts"]
    for rank in clean["ranks"]:  # every entry of the single run is paired; FSDP2's all-gathers, TP's
        assert rank["unmatched"]["bench"] == []  # all-reduce are the sharded run's own
        assert {n.split(".")[1] for n in rank["unmatched"]["target"]} <= {
            "all_gather_copy_in", "all_gather_single", "split_with_sizes_copy", "as_strided", "all_reduce"}
    for rank in (0, 1):
        planted = _compare(tmp_path, f"sharded/step0/rank{rank}", "one_plant/step0/rank0", f"plant{rank}")
        first = planted["first_divergence"]
        assert first["name"].startswith("Functional.gelu.1.forward"), first
        assert planted["counts"]["error"] == 1, planted["counts"]  # the planted GELU's entry alone
    _torchrun(PROBE, "run", "--dump-path", "local", str(SCRIPT), layout, option, "--plant", cwd=tmp_path)
    _assert_local_parts_not_compared(tmp_path, layout)


def _assert_local_parts_not_compared(tmp_path: Path, layout: str) -> None:
    """``local`` (the planted run, each rank's part of every DTensor) against ``one`` (the clean single run):
    the planted GELU is the first divergence and, at each step, the only error; the sharded parameter
    gradient is not compared, with a message saying which part it is and how to compare it."""
    summary = _compare(tmp_path, "local", "one", "local_cmp")
    first = summary["first_divergence"]
    assert first["name"].startswith("Functional.gelu.1.forward") and first["rank"] == "rank0_step0", first
    for rank in summary["ranks"]:
        rows = list(csv.DictReader((tmp_path / rank["csv"]).open()))
        errors = {r["NPU Name"].split(".forward")[0] for r in rows if r["Result"] == "error"}
        assert errors == {"Functional.gelu.1"}, (rank["label"], errors)
        grad = next(r for r in rows if r["NPU Name"] == "Module.2.Linear.parameters_grad.0.weight")
        split = "dim 0 split across 2 ranks; [8, 16]" if layout == "fsdp" else "dim 1 split across 2 ranks; [16, 8]"
        assert grad["Result"] == "pass" and split in grad["Err_message"], grad
        assert '"dtensor": "full"' in grad["Err_message"] and grad["Max diff"] == "N/A"
    rank1 = _compare(tmp_path, "local/step0/rank1", "one/step0/rank0", "local_rank1")
    assert rank1["first_divergence"]["name"].startswith("Functional.gelu.1.forward"), rank1["first_divergence"]


def _single(*args: str, cwd: Path) -> str:
    """One process (the one-device run), its stdout."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


def _compare(tmp_path: Path, target: str, bench: str, out: str) -> dict:
    """``probe compare TARGET BENCH -o OUT`` in ``tmp_path``; its summary.json."""
    done = subprocess.run([PROBE, "compare", target, bench, "-o", out], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((tmp_path / out / "summary.json").read_text())


def _assert_fsdp_buffers_null(data: dict) -> None:
    """FSDP2's forward all-gather of the first Linear (64 weights and 8 biases a rank): the buffer it allocates
    is null where it is written without being read, and shows the gathered values as the call's output."""
    copy_in = data["Torch.all_gather_copy_in.0.forward"]  # this rank's shard copied into a fresh buffer
    assert copy_in["input_args"][1] is None and copy_in["output"][1] is None
    assert copy_in["output"][0]["shape"] == [72] and copy_in["output"][0]["Norm"] > 0  # this rank's part
    gather = data["Distributed.all_gather_single.0.forward"]
    assert gather["input_args"][0] is None and gather["input_args"][1]["shape"] == [72]
    assert gather["output"][0]["shape"] == [144] and abs(gather["output"][0]["Max"]) < 1  # both shards
    split = data["Torch.split_with_sizes_copy.0.forward"]  # into the unsharded parameters: out= shown as output
    assert split["input_kwargs"]["out"] is None
    assert [o["shape"] for o in split["output"]] == [[2, 64], [2, 8]]
    assert split["output"][0]["Norm"] ** 2 + split["output"][1]["Norm"] ** 2 == \
        pytest.approx(gather["output"][0]["Norm"] ** 2)


def test_collective_and_out_buffers_recorded_null_as_msprobe(tmp_path):
    """One gloo rank: the buffer a collective fills is null in input_args (by position, as msprobe) and in
    input_kwargs (by keyword, where msprobe records it as given), an ``out=`` tensor is null; outputs show
    the values the call wrote."""
    from probe_torch import PrecisionDebugger

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        debugger = PrecisionDebugger(dump_path=str(tmp_path / "dump"), level="L1")
        debugger.start()
        x = torch.arange(1.0, 4.0)
        dist.all_gather_into_tensor(torch.full((3,), 7.0), x)
        dist.all_gather_into_tensor(output_tensor=torch.full((3,), 7.0), input_tensor=x)
        dist.all_gather([torch.full((3,), 7.0)], x)
        torch.add(x, 1, out=torch.full((3,), 7.0))
        debugger.stop()
        debugger.step()
        debugger.close()
    finally:
        dist.destroy_process_group()
    data = load(tmp_path / "dump" / "step0" / "rank0" / "dump.json")["data"]
    by_position, by_keyword = data["Distributed.all_gather_into_tensor.0.forward"], \
        data["Distributed.all_gather_into_tensor.1.forward"]
    assert by_position["input_args"][0] is None and by_position["input_args"][1]["Max"] == 3.0
    assert by_keyword["input_kwargs"]["output_tensor"] is None and by_keyword["input_kwargs"]["input_tensor"]
    for entry in (by_position, by_keyword):
        assert entry["output"][0]["Max"] == 3.0 and entry["output"][0]["Min"] == 1.0  # gathered, not the 7s
    gathered = data["Distributed.all_gather.0.forward"]
    assert gathered["input_args"][0] is None and gathered["output"][0][0]["Max"] == 3.0
    add = data["Torch.add.0.forward"]
    assert add["input_kwargs"]["out"] is None and add["output"][0]["Min"] == 2.0


def test_unread_buffer_keywords_are_torchs_parameter_names():
    import inspect

    for api, rules in UNREAD_INPUTS.items():
        prefix, name = api.split(".")
        if prefix == "Distributed":
            parameters = list(inspect.signature(getattr(dist, name)).parameters)
        else:  # FSDP2's operator
            import torch.distributed.fsdp  # noqa: F401  (registers torch.ops.fsdp)
            parameters = [a.name for a in getattr(torch.ops.fsdp, name).default._schema.arguments]
        for position, keyword in rules:
            assert parameters[position] == keyword, (api, parameters)


def test_fsdp2_modules_named_by_the_models_class(tmp_path):
    """One gloo rank: the modules ``fully_shard`` wraps (classes ``FSDPLinear``, ``FSDPSequential``) are entries
    named by the model's classes, as one device names them."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from probe_torch import PrecisionDebugger

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
        fully_shard(model[0], mesh=init_device_mesh("cpu", (1,)))
        assert type(model[0]).__name__ == "FSDPLinear"
        debugger = PrecisionDebugger(dump_path=str(tmp_path / "dump"), level="L0")
        debugger.start(model)
        model(torch.randn(2, 4)).sum().backward()
        debugger.stop()
        debugger.step()
        debugger.close()
    finally:
        dist.destroy_process_group()
    data = load(tmp_path / "dump" / "step0" / "rank0" / "dump.json")["data"]
    assert "Module.0.Linear.forward.0" in data and "Module.0.Linear.parameters_grad.0" in data
    assert not [name for name in data if "FSDP" in name]
