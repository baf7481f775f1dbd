"""A DTensor recorded as this rank's part (``"dtensor": "local"``: a shard, a partial sum) against the whole
tensor of a one-device run: not compared, with a message saying why and how to compare it; no error and no
divergence by default (the noise judge does not see its statistics), msprobe's Shape inconsistent with
``--rules msprobe``. Two parts of the same layout, and a DTensor recorded whole, are compared as usual."""

from __future__ import annotations

import json
from pathlib import Path

from probe_compare.rules import part_of_whole
from probe_core.dump import TensorMeta
from tests.compare.helpers import read_csv, read_summary, result_file, run_probe

DTENSOR = "torch.distributed.tensor.DTensor"
SHARD0, PARTIAL = [{"Shard": {"dim": 0}}], [{"Partial": {"reduce_op": "sum"}}]


def leaf(shape: list[int], norm: float, placements: list | None = None, **extra) -> dict:
    record = {"type": DTENSOR if placements else "torch.Tensor", "dtype": "torch.float32", "shape": shape}
    if placements:
        record |= {"device_mesh": [0, 1], "placements": placements, **extra}
    return record | {"Max": norm / 2, "Min": -norm / 2, "Mean": 0.0, "Norm": norm, "requires_grad": False}


def write_dump(root: Path, sharded: bool) -> Path:
    """A tensor-parallel step as rank 0 records it (``sharded``) or one device does: the first Linear's
    weight and output split by rows and columns, the second's output a partial sum, its gradient a shard.
    The parts' statistics are far from the whole tensors' (another size, a partial sum)."""
    part = (lambda shape, whole, norm, placements: leaf(shape, norm, placements)) if sharded else \
        (lambda shape, whole, norm, placements: leaf(whole, 3 * norm))
    x = leaf([4, 8], 2.0)
    data = {
        "Functional.linear.0.forward": {"input_args": [x, part([8, 8], [16, 8], 1.0, SHARD0)], "input_kwargs": {},
                                        "output": [part([4, 8], [4, 16], 1.5, [{"Shard": {"dim": 1}}])]},
        "Functional.linear.1.forward": {"input_args": [leaf([4, 16], 1.0)], "input_kwargs": {},
                                        "output": [leaf([4, 16], 0.7, PARTIAL) if sharded else leaf([4, 16], 2.1)]},
        "Functional.gelu.0.forward": {"input_args": [leaf([4, 16], 1.0)], "input_kwargs": {},
                                      "output": [leaf([4, 16], 0.8)]},
        "Module.0.Linear.parameters_grad.0": {"weight": [part([8, 8], [16, 8], 0.1, SHARD0)]},
    }
    dump = root / "step0" / "rank0" / "dump.json"
    dump.parent.mkdir(parents=True)
    dump.write_text(json.dumps({"task": "statistics", "level": "mix", "framework": "pytorch", "data": data}))
    return root


def _compare(tmp_path: Path, *options: str, bench_sharded: bool = False) -> tuple[dict, dict[str, dict[str, str]]]:
    target, bench = write_dump(tmp_path / "target", True), write_dump(tmp_path / "bench", bench_sharded)
    if bench_sharded:  # the bench gathered the partial sum whole ("dtensor": "full"): same type and shape
        dump = bench / "step0" / "rank0" / "dump.json"
        record = json.loads(dump.read_text())
        record["data"]["Functional.linear.1.forward"]["output"] = [leaf([4, 16], 2.1, PARTIAL, full_tensor=True)]
        dump.write_text(json.dumps(record))
    out = tmp_path / "out"
    done = run_probe("compare", target, bench, "-o", out, *options)
    assert done.returncode == 0, done.stderr[-3000:]
    return read_summary(out), {row["NPU Name"]: row for row in read_csv(result_file(out))}


def test_parts_of_a_dtensor_are_not_compared_with_the_whole(tmp_path):
    summary, rows = _compare(tmp_path)
    assert summary["first_divergence"] is None and summary["counts"]["error"] == 0, summary
    parts = {"Functional.linear.0.forward.input.1": "dim 0 split across 2 ranks; [8, 8] vs [16, 8]",
             "Functional.linear.0.forward.output.0": "dim 1 split across 2 ranks; [4, 8] vs [4, 16]",
             "Functional.linear.1.forward.output.0": "a partial sum over 2 ranks; [4, 16] vs [4, 16]",
             "Module.0.Linear.parameters_grad.0.weight": "dim 0 split across 2 ranks"}
    for name, what in parts.items():
        row = rows[name]
        assert row["Result"] == "pass" and what in row["Err_message"], row
        assert "not compared" in row["Err_message"] and '"dtensor": "full"' in row["Err_message"]
        assert row["Max diff"] == "N/A" and row["NormRelativeErr"] == "N/A"  # no metric from a part
        assert float(row["NPU l2norm"]) != float(row["Bench l2norm"])  # each side's statistics still shown
    whole = rows["Functional.linear.0.forward.input.0"]  # the replicated input is compared
    assert whole["Err_message"] in ("", "N/A") and float(whole["Max diff"]) == 0.0


def test_part_against_a_whole_dtensor_of_the_same_shape_takes_the_row_path(tmp_path):
    """A partial sum against the same DTensor recorded whole: equal type, dtype and shape, so the columnar
    compare would take the pair as plain; a part takes the row path, where it is not compared. The shards of
    the same layout on both sides are compared (and agree)."""
    summary, rows = _compare(tmp_path, bench_sharded=True)
    assert summary["first_divergence"] is None and summary["counts"]["error"] == 0, summary
    partial = rows["Functional.linear.1.forward.output.0"]
    assert partial["Result"] == "pass" and "a partial sum over 2 ranks" in partial["Err_message"], partial
    shard = rows["Functional.linear.0.forward.input.1"]
    assert shard["Err_message"] in ("", "N/A") and float(shard["Max diff"]) == 0.0, shard


def test_msprobe_rules_keep_shape_inconsistent(tmp_path):
    """msprobe's compare reads no placements: a shard against the whole tensor is its Shape inconsistent."""
    _, rows = _compare(tmp_path, "--rules", "msprobe")
    row = rows["Functional.linear.0.forward.input.1"]
    assert row["Result"] == "error" and "Shape inconsistent ([8, 8] vs [16, 8])" in row["Err_message"], row


def meta(record: dict) -> TensorMeta:
    return TensorMeta("X.0.forward.output.0", "output", record["type"], record["dtype"], tuple(record["shape"]),
                      record["Max"], record["Min"], record["Mean"], record["Norm"], False, record, is_tensor=True)


def test_same_layout_and_whole_records_are_compared():
    """Two runs sharded alike (the same part of each), a DTensor recorded whole (``full_tensor``), a shard
    over a one-rank mesh and a replicated DTensor hold comparable values; another mesh's shard does not."""
    shard = meta(leaf([8, 8], 1.0, SHARD0))
    assert part_of_whole(shard, meta(leaf([8, 8], 5.0, SHARD0))) is None
    assert part_of_whole(meta(leaf([16, 8], 1.0, SHARD0, full_tensor=True)), meta(leaf([16, 8], 2.0))) is None
    assert part_of_whole(meta(leaf([16, 8], 1.0, [{"Replicate": {}}])), meta(leaf([16, 8], 2.0))) is None
    one_rank = meta(leaf([16, 8], 1.0, SHARD0) | {"device_mesh": [0]})
    assert part_of_whole(one_rank, meta(leaf([16, 8], 2.0))) is None
    four_ranks = meta(leaf([4, 8], 1.0, SHARD0) | {"device_mesh": [[0, 1], [2, 3]],
                                                   "placements": [{"Replicate": {}}, {"Shard": {"dim": 0}}]})
    assert "dim 0 split across 2 ranks" in part_of_whole(shard, four_ranks)
    assert part_of_whole(meta(leaf([16, 8], 1.0)), shard).startswith("The bench's tensor")
