"""The ``tb_nodes`` rows written to the file are the graph's whole rows: the columns a graph holds one value for
(graph id, data source, dump folder, step, rank) go into the INSERT once, as SQL literals where they can."""

from __future__ import annotations

import pickle
import sqlite3

import pytest

from probe_graph.api import build_graph
from probe_graph import vis_db

TENSOR = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0, "Mean": 0.5,
          "Norm": 1.25, "requires_grad": False}
CONSTRUCT = {"Module.a.A.forward.0": None, "Functional.relu.0.forward": "Module.a.A.forward.0",
             "Tensor.add.0.forward": None, "Tensor.add.1.forward": None}


def _written(path, table="tb_nodes"):
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("dump_dir", [None, "/data/it's here", "nul\x00inside"], ids=["null", "quote", "nul"])
def test_written_rows_are_the_whole_rows(tmp_path, dump_dir):
    """Every column lands where NODE_COLUMNS puts it, for a dump folder that is NULL, needs quoting, or holds a
    NUL (no SQL literal: bound per row); the pickled rows (a worker's) write the same file."""
    data = {name: {"input_args": [TENSOR], "output": [TENSOR]} for name in CONSTRUCT}
    graph = build_graph(CONSTRUCT, data, {"Functional.relu.0.forward": ("File m.py, line 1",)},
                        rank=3, step=2, source="Bench", dump_dir=dump_dir)
    expected = list(vis_db.graph_rows(graph).node_rows())
    columns = [name for name, _ in vis_db.NODE_COLUMNS]
    assert len(expected) == len(graph.nodes) and all(len(row) == len(columns) for row in expected)
    for row in expected:
        named = dict(zip(columns, row))
        assert named["id"] == f"Bench_2_3_{named['node_name']}" and named["graph_id"] == "Bench_2_3"
        assert (named["data_source"], named["dump_data_dir"], named["step"], named["rank"]) == \
            ("Bench", dump_dir, 2, 3)
        assert (named["matched_distributed"], named["modified"], named["is_distributed"]) == ("{}", 0, 0)
        assert named["node_type"] == str(int(graph[named["node_name"]].kind))
    assert [row[3] for row in expected][-1] == "DefaultModel"  # children before their parent

    config = vis_db.VisConfig("build")
    here = vis_db.write_vis_db(tmp_path / "here.vis.db", [vis_db.graph_rows(graph)], config)
    assert _written(here) == expected
    assert len(_written(here, "tb_stack")) == 2  # the relu's stack and the empty one

    moved = pickle.loads(pickle.dumps(vis_db.graph_rows(graph)))  # made in the worker, written here
    moved.flag({"Tensor.add.0.forward": 1.0})
    there = vis_db.write_vis_db(tmp_path / "there.vis.db", [moved], config)
    flagged = [row[:7] + (1.0 if row[3] == "Tensor.add.0.forward" else row[7],) + row[8:] for row in expected]
    assert _written(there) == flagged == list(moved.node_rows())
