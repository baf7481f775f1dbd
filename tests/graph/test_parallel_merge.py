"""Parallel merge: real multi-rank dumps (torch.distributed, gloo) merged into the single-rank model graph.

The dumps come from tests/graph/toy_megatron.py run under probe's collector:
the same seeded model on 1 rank, with tp=2, with pp=2 and with tp=2 x pp=2.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from probe_core.errors import GraphError
from probe_graph.build import build_graph
from probe_graph.merge import Layout, merge_side
from probe_core.plugins import PluginSelection, load_registry
from probe_graph.source import discover, load_graph
from probe_parallel_merge.shards import merge_shards, same
from probe_parallel_merge.vpp import VirtualPipelineMerger
from tests.graph.helpers import only_db, rows, run_probe

TOY = Path(__file__).with_name("toy_megatron.py")
RUNS = {"single": (1, 1, 1), "tp2": (2, 2, 1), "pp2": (2, 1, 2), "tp2pp2": (4, 2, 2)}


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("toy")
    for name, (world, tp, pp) in RUNS.items():
        subprocess.run([sys.executable, str(TOY), str(root / name), str(world), str(tp), str(pp)],
                       check=True, timeout=300, capture_output=True)
    return root


def _merged(root: Path, name: str):
    world, tp, pp = RUNS[name]
    layout = Layout(world, tp, pp)
    folders = sorted(discover(root / name), key=lambda f: (layout.coords(f.rank)["pp"], layout.coords(f.rank)["tp"]))
    return merge_side([load_graph(f) for f in folders], layout, load_registry())


def _assert_same_numbers(merged, single) -> None:
    for name, node in single.nodes.items():
        other = merged.nodes[name]
        assert (other.parent.name if other.parent else None) == (node.parent.name if node.parent else None), name
        for attr in ("inputs", "outputs"):
            ours, theirs = getattr(other, attr), getattr(node, attr)
            assert set(ours) == set(theirs), name
            for key, value in theirs.items():
                if "shape" not in value:
                    continue
                assert ours[key]["shape"] == value["shape"], key
                for stat in ("Max", "Min", "Mean", "Norm"):
                    assert math.isclose(ours[key][stat], value[stat], rel_tol=1e-5, abs_tol=1e-6), (key, stat)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tp2", "pp2", "tp2pp2"])
def test_merged_graph_matches_single_rank_run(dumps: Path, name: str) -> None:
    single = load_graph(discover(dumps / "single")[0])
    merged = _merged(dumps, name)
    extra = set(merged.nodes) - set(single.nodes)
    assert set(single.nodes) <= set(merged.nodes)
    expected_extra = {"Distributed.all_reduce.0.forward", "Distributed.all_reduce.1.forward"} if "tp" in name else set()
    assert extra == expected_extra
    _assert_same_numbers(merged, single)
    if "tp" in name:
        info = merged.nodes["Module.layers.0.dense_h_to_4h.ColumnParallelLinear.forward.0"].merge_info
        assert any("parameters.weight: 2 shards merged along dim 0" in note for note in info)
    if "pp" in name:
        assert "Module.layers.1.ParallelMLP.forward.0" in merged.nodes  # stage 1's local layers.0
        assert any("Distributed.send" in note for note in merged.root.merge_info)


@pytest.mark.slow
def test_cli_compares_merged_layouts(dumps: Path, tmp_path: Path) -> None:
    done = run_probe("-tp", dumps / "tp2pp2", "-gp", dumps / "single", "-o", tmp_path / "out",
                     "--rank-size", "4", "1", "--tp", "2", "1", "--pp", "2", "1")
    nodes = rows(only_db(tmp_path / "out"))
    npu = {name: row for (source, name), row in nodes.items() if source == "NPU"}
    assert npu["Distributed.all_reduce.0.forward"]["matched_node_link"] == "[]"  # grey: tp only
    scored = [row["precision_index"] for row in npu.values() if row["matched_node_link"] != "[]"]
    assert scored and all(index == 0 for index in scored)
    assert "shards merged" in npu["Module.layers.1.dense_h_to_4h.ColumnParallelLinear.forward.0"]["parallel_merge_info"]
    assert "pp=2" in npu["DefaultModel"]["parallel_merge_info"]
    assert "errors" in done.stdout


@pytest.mark.slow
def test_file_type_json_writes_the_merged_graph_as_a_dump(dumps: Path, tmp_path: Path) -> None:
    """msprobe's --file_type json: the merged tp=2 graph comes back as a dump that compares with the 1-rank run."""
    out = tmp_path / "merged"
    run_probe("-tp", dumps / "tp2", "-o", out, "--rank_size", "2", "--tp", "2", "--file_type", "json")
    folder = out / "step0" / "rank0"
    assert sorted(p.name for p in folder.iterdir()) == ["construct.json", "dump.json", "stack.json"]
    assert not list(out.glob("*.vis.db"))
    merged, single = load_graph(discover(folder)[0]), load_graph(discover(dumps / "single")[0])
    assert set(single.nodes) <= set(merged.nodes)
    _assert_same_numbers(merged, single)  # the merged (whole) weights and outputs, not rank 0's shards
    done = run_probe("-tp", dumps / "tp2", "-gp", dumps / "single", "-o", tmp_path / "bad", "--file_type", "json",
                     check=False)
    assert done.returncode == 2 and "--file_type json" in done.stderr


def test_rank_count_must_fit_the_layout() -> None:
    with pytest.raises(GraphError, match="multiple of tp"):
        Layout(6, tp=4, pp=1)
    layout = Layout(8, tp=2, pp=2)
    assert layout.dp == 2
    assert layout.coords(5) == {"tp": 1, "cp": 0, "ep": 0, "dp": 0, "pp": 1}
    assert Layout(8, 2, 2, order="tp-pp-dp-cp-ep").coords(5) == {"tp": 1, "pp": 0, "dp": 1, "cp": 0, "ep": 0}


def test_missing_merger_plugin_is_a_clear_error() -> None:
    registry = load_registry(PluginSelection(disable=("parallel_merge",)))
    graph = build_graph({"Module.a.A.forward.0": None}, {})
    with pytest.raises(GraphError, match="probe-parallel-merge"):
        merge_side([graph, graph], Layout(2, tp=2), registry)


def test_shard_statistics() -> None:
    left = {"shape": [4, 2], "Max": 3.0, "Min": -1.0, "Mean": 1.0, "Norm": 3.0}
    right = {"shape": [4, 6], "Max": 2.0, "Min": -5.0, "Mean": -1.0, "Norm": 4.0}
    merged = merge_shards([left, right], dim=-1)
    assert merged == {"Max": 3.0, "Min": -5.0, "Mean": (8 * 1.0 + 24 * -1.0) / 32, "Norm": 5.0, "shape": [4, 8]}
    assert same([left, dict(left)]) and not same([left, right])


def test_vpp_orders_chunks_across_stages() -> None:
    def stage(first_layer: int):
        construct = {}
        for chunk in (0, 1):
            for local in (0,):
                construct[f"Module.{chunk}.layers.{local}.Layer.forward.0"] = None
        return build_graph(construct, {})

    class VppLayout:
        vpp = 2

    chunks = VirtualPipelineMerger().merge([stage(0), stage(1)], VppLayout())
    assert len(chunks) == 4
    assert all(set(c.nodes) == {"DefaultModel", "Module.0.layers.0.Layer.forward.0"} for c in chunks)
    merged = load_registry().graph_mergers["pp"].load().merge(chunks, VppLayout())[0]
    assert [c.name for c in merged.root.children] == [f"Module.0.layers.{i}.Layer.forward.0" for i in range(4)]
