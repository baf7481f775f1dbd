"""Dual-graph compare: precision index and colours, unmatched nodes, fuzzy matching, layer mapping."""

from __future__ import annotations

import json
import pickle
import sqlite3
from pathlib import Path

from probe_core.plugins import current_registry
from probe_graph.service import GraphOptions, apply_verdicts, plan_jobs, run_job
from tests.graph.helpers import only_db, rows, run_probe

PERTURBED = "Functional.linear.6.forward"            # blocks.1.mlp.fc1's linear
PERTURBED_MODULE = "Module.blocks.1.mlp.fc1.Linear.forward.0"


def _compare(tmp_path: Path, target, bench, *extra: str) -> dict:
    out = tmp_path / "out"
    done = run_probe("-tp", target.folder, "-gp", bench.folder, "-o", out, *extra)
    db = only_db(out)
    return {"rows": rows(db), "db": db, "stdout": done.stdout}


def test_perturbed_layer_is_red_before_it_passes_unmatched_grey(tmp_path: Path, torch_pair) -> None:
    target, bench = torch_pair
    target.scale_output(PERTURBED, 3.0)            # the layer's output is 3x off
    target.scale_output(PERTURBED_MODULE, 3.0)
    target.rename("Tensor.mean.0.", "Tensor.mean.7.")  # an API only the target calls (by count)
    result = _compare(tmp_path, target, bench)
    npu = {name: row for (source, name), row in result["rows"].items() if source == "NPU"}
    assert npu[PERTURBED]["precision_index"] == 1  # error: inputs agree, output norm off by > 0.5
    assert npu[PERTURBED_MODULE]["precision_index"] == 1
    for row in npu.values():  # every node before the perturbed one passes
        if row["node_order"] < npu[PERTURBED]["node_order"] and row["matched_node_link"] != "[]":
            assert row["precision_index"] == 0, row["node_name"]
    assert npu["Tensor.mean.7.forward"]["matched_node_link"] == "[]"
    assert npu["Tensor.mean.7.forward"]["precision_index"] is None
    bench_rows = {name: row for (source, name), row in result["rows"].items() if source == "Bench"}
    assert bench_rows["Tensor.mean.0.forward"]["matched_node_link"] == "[]"
    link = json.loads(npu[PERTURBED]["matched_node_link"])
    assert link[-1] == PERTURBED and link[0] == "DefaultModel"
    # the viewer shows the metrics beside the tensor
    output = json.loads(npu[PERTURBED]["output_data"])[f"{PERTURBED}.output.0"]
    assert output["NormRelativeErr"].endswith("%") and float(output["NormAbsErr"]) > 0
    # the colour legend and task the viewer needs
    conn = sqlite3.connect(f"file:{result['db']}?mode=ro&immutable=1", uri=True)
    graph_type, task, colors = conn.execute("SELECT graph_type, task, node_colors FROM tb_config").fetchone()
    conn.close()
    colors = json.loads(colors)
    assert graph_type == "compare" and task == "summary"
    assert colors["#C7C7C7"]["value"] == [] and colors["#FF704D"]["value"] == [0.6, 1]
    assert "Functional.linear.6.forward" in result["stdout"]  # first divergent node in the summary


def test_identical_dumps_all_pass(tmp_path: Path, torch_pair) -> None:
    target, bench = torch_pair
    result = _compare(tmp_path, target, bench)
    npu = [row for (source, _), row in result["rows"].items() if source == "NPU"]
    assert len(npu) == 164
    assert all(row["precision_index"] == 0 for row in npu)
    assert all(json.loads(row["matched_node_link"]) for row in npu)


def test_fuzzy_matches_apis_with_other_call_counts(tmp_path: Path, torch_pair) -> None:
    target, bench = torch_pair
    bench.rename("Torch.softmax.0.", "Torch.softmax.40.")
    strict = _compare(tmp_path / "strict", target, bench)
    assert strict["rows"][("NPU", "Torch.softmax.0.forward")]["matched_node_link"] == "[]"
    fuzzy = _compare(tmp_path / "fuzzy", target, bench, "--fuzzy")
    link = json.loads(fuzzy["rows"][("NPU", "Torch.softmax.0.forward")]["matched_node_link"])
    assert link[-1] == "Torch.softmax.40.forward"
    assert fuzzy["rows"][("NPU", "Torch.softmax.0.forward")]["precision_index"] == 0


def test_layer_mapping_yaml_and_bare_flag(tmp_path: Path, torch_pair) -> None:
    target, bench = torch_pair
    bench.rename(".mlp.MLP.", ".ffn.MLP.")         # layer renamed on the bench side
    bench.rename(".mlp.", ".ffn.")
    bench.rename(".attn.Attention.", ".attn.SelfAttention.")  # class renamed on the bench side
    plain = _compare(tmp_path / "plain", target, bench)
    assert plain["rows"][("NPU", "Module.blocks.0.mlp.MLP.forward.0")]["matched_node_link"] == "[]"
    assert plain["rows"][("NPU", "Module.blocks.0.attn.Attention.forward.0")]["matched_node_link"] == "[]"

    bare = _compare(tmp_path / "bare", target, bench, "--layer-mapping")
    link = json.loads(bare["rows"][("NPU", "Module.blocks.0.attn.Attention.forward.0")]["matched_node_link"])
    assert link[-1] == "Module.blocks.0.attn.SelfAttention.forward.0"
    assert bare["rows"][("NPU", "Module.blocks.0.mlp.MLP.forward.0")]["matched_node_link"] == "[]"

    mapping = tmp_path / "mapping.yaml"
    mapping.write_text("Block:\n  mlp: ffn\n")
    mapped = _compare(tmp_path / "mapped", target, bench, "--layer-mapping", mapping)
    npu = mapped["rows"]
    assert json.loads(npu[("NPU", "Module.blocks.0.mlp.MLP.forward.0")]["matched_node_link"])[-1] == \
        "Module.blocks.0.ffn.MLP.forward.0"
    assert json.loads(npu[("NPU", "Module.blocks.1.mlp.fc1.Linear.forward.0")]["matched_node_link"])[-1] == \
        "Module.blocks.1.ffn.fc1.Linear.forward.0"
    assert json.loads(npu[("NPU", "Functional.linear.6.forward")]["matched_node_link"])  # APIs inside too


def test_bad_layer_mapping_is_a_clear_error(tmp_path: Path, torch_pair) -> None:
    target, bench = torch_pair
    mapping = tmp_path / "mapping.yaml"
    mapping.write_text("- just\n- a list\n")
    done = run_probe("-tp", target.folder, "-gp", bench.folder, "-o", tmp_path / "out", "-lm", mapping, check=False)
    assert done.returncode == 2 and "mapping.yaml" in done.stderr and "Traceback" not in done.stderr


def test_rows_made_in_a_worker_are_the_rows_made_here(torch_pair) -> None:
    """A job's rows are made from its graphs while the file is written; a worker's job, pickled to the parent,
    makes them first: the same rows and stacks, the verdicts' flags included."""
    target, bench = torch_pair
    target.scale_output(PERTURBED, 3.0)
    options = GraphOptions()
    results = []
    for _ in range(2):
        [job] = plan_jobs(target.folder, bench.folder, options)
        results.append(run_job(job, options, current_registry()))
    here, there = results[0], pickle.loads(pickle.dumps(results[1]))
    for result in (here, there):
        apply_verdicts([result], "noise")
    made_here = [(list(part.node_rows()), part.stacks) for part in here.rows]
    assert made_here == [(list(part.node_rows()), part.stacks) for part in there.rows]
    flagged = {row[3] for row in made_here[0][0] if row[7] == 1.0}
    assert PERTURBED in flagged and PERTURBED_MODULE in flagged
    assert here.summary == there.summary and here.summary.errors >= 2
