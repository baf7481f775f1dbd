"""One answer from compare and graph, on the demo (make demo's transformers Llama) and on a 2-rank job whose bug
is on rank 1 only.

``probe compare`` (summary.json, per step and rank) and ``probe graph`` (each graph's first divergent node and
the job's line) come from one judge: they must name the same entry on every step. Real subprocesses of the CLI
collect the runs; the comparisons go through the public entry points.
"""

from __future__ import annotations

import csv
from contextlib import closing
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from probe_compare.engine import CompareOptions, run_compare
from probe_core.plugins import load_registry
from probe_graph.precision import ERROR_INDEX, PASS_INDEX, WARNING_INDEX
from probe_graph.service import GraphOptions, run_graph
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
PROBE = str(Path(sys.executable).parent / "probe")
ENV = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
#: the demo's transformers script needs the torchvision shim the Makefile's demo target puts on PYTHONPATH
DEMO_ENV = dict(ENV, PYTHONPATH=os.pathsep.join([str(ROOT / "examples" / "shim"), str(ROOT)]))

RANKED = '''
import argparse, os
import torch, torch.distributed as dist, torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--plant", action="store_true")
args = parser.parse_args()
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 1))
if args.plant and rank == 1:
    model[1].approximate = "tanh"   # the bug: rank 1 only
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.randn(2, 2, 16, 8)
for step in range(2):
    x = data[step, rank]
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    for p in model.parameters():        # data parallel by hand: average the gradients
        dist.all_reduce(p.grad)
        p.grad /= 2
    optimizer.step()
dist.destroy_process_group()
'''


def _probe_run(cwd: Path, dump: Path, script: Path, *argv: str, ranks: int = 1, env: dict = ENV) -> subprocess.Popen:
    head = [str(Path(sys.executable).parent / "torchrun"), f"--nproc_per_node={ranks}",
            f"--master_port={free_port()}", PROBE] if ranks > 1 else [PROBE]
    return subprocess.Popen([*head, "run", "--level", "mix", "--dump-path", str(dump), str(script), *argv],
                            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _collect(procs: dict[str, subprocess.Popen]) -> None:
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, (name, err[-3000:])


def _place(label: str) -> tuple[int, int]:
    """``rank1_step0`` -> (step 0, rank 1)."""
    found = re.fullmatch(r"rank(\d+)_step(\d+)", label)
    assert found, label
    return int(found[2]), int(found[1])


def _answers(target: Path, bench: Path, out: Path) -> tuple[dict, dict]:
    """Compare's and graph's first divergent entry per (step, rank), and each one's job-level answer."""
    registry = load_registry()
    summary = run_compare(CompareOptions(target, bench, out / "compare", progress=False), registry)
    compare = {_place(r["label"]): (r["first_divergence"] or {}).get("name") for r in summary["ranks"]}
    _, graphs = run_graph(target, bench, out / "graph", GraphOptions(), registry=registry, progress=False)
    graph = {(s.step, s.rank): s.first_divergent for s in graphs}
    first = summary["first_divergence"]
    jobs = {s.job_first for s in graphs}
    assert len(jobs) == 1, jobs  # every graph carries the same job-level answer
    return (compare, first), (graph, jobs.pop())


def test_compare_and_graph_name_the_same_entry_on_every_step_of_the_demo(tmp_path):
    """make demo's run: transformers' Llama, the target's RMSNorm epsilon 1e-5 instead of 1e-6."""
    script = ROOT / "examples" / "train_demo.py"
    _collect({"bench": _probe_run(tmp_path, tmp_path / "bench", script, env=DEMO_ENV),
              "target": _probe_run(tmp_path, tmp_path / "target", script, "--rms-eps", env=DEMO_ENV)})
    (compare, first), (graph, job) = _answers(tmp_path / "target", tmp_path / "bench", tmp_path)
    assert len(compare) == 4 and compare == graph, (compare, graph)
    # the epsilon's add inside the first RMSNorm (``variance + self.variance_epsilon``)
    assert (first["name"], first["step"], first["rank_id"]) == ("Tensor.__add__.1.forward", 0, 0), first
    assert first["module"] == "Module.model.layers.0.input_layernorm.LlamaRMSNorm.forward.0", first
    assert job == "step 0 rank 0: Tensor.__add__.1.forward"


@pytest.mark.slow
def test_a_bug_on_rank_1_is_named_on_rank_1_not_at_rank_0s_all_reduce(tmp_path):
    script = tmp_path / "ranked.py"
    script.write_text(RANKED)
    _collect({"bench": _probe_run(tmp_path, tmp_path / "bench", script, ranks=2)})
    _collect({"target": _probe_run(tmp_path, tmp_path / "target", script, "--plant", ranks=2)})
    (compare, first), (graph, job) = _answers(tmp_path / "target", tmp_path / "bench", tmp_path)
    assert compare == graph, (compare, graph)
    # rank 1's GELU is the cause; rank 0 first sees the error come out of the gradients' all_reduce
    assert (first["step"], first["rank_id"], first["name"]) == (0, 1, "Functional.gelu.0.forward"), first
    assert job == "step 0 rank 1: Functional.gelu.0.forward"
    assert compare[(0, 0)] is None or compare[(0, 0)].startswith("Distributed.all_reduce"), compare
    # the CSVs give the same answer: rank 0's all_reduce rows are warnings that say where the divergence comes from
    errors, warnings = _flagged_rows(tmp_path / "compare")
    assert errors and errors[0][:2] == (0, 1) and errors[0][2].startswith("Functional.gelu.0.forward."), errors
    assert all(rank == 1 for _, rank, _, _ in errors), errors
    arrived = [w for w in warnings if w[1] == 0 and w[2].startswith("Distributed.all_reduce.")]
    assert arrived and all("arrives through this call" in message for *_, message in arrived), warnings
    # the graph colours them as the CSVs flag them: rank 1's GELU red, rank 0's all_reduce yellow (a warning)
    index = {}
    for db in (tmp_path / "graph").glob("*.vis.db"):
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            index.update(((step, rank, name), value) for step, rank, name, value in conn.execute(
                "SELECT step, rank, node_name, precision_index FROM tb_nodes WHERE data_source = 'NPU'"))
    assert index[(0, 1, "Functional.gelu.0.forward")] == ERROR_INDEX, index
    assert index[(0, 0, compare[(0, 0)])] == WARNING_INDEX if compare[(0, 0)] else True, index
    assert {value for (step, rank, _), value in index.items() if (step, rank) == (0, 0)} <= {PASS_INDEX, WARNING_INDEX}


def _flagged_rows(folder: Path) -> tuple[list, list]:
    """The error and warning rows of every compare CSV, as (step, rank, row name, message), in (step, rank) order."""
    found: dict[str, list] = {"error": [], "warning": []}
    for path in folder.rglob("compare_result_rank*.csv"):
        rank = int(re.search(r"rank(\d+)", path.name)[1])
        step = int(re.search(r"step(\d+)", str(path.relative_to(folder)))[1])
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                if row["Result"] in found:
                    found[row["Result"]].append((step, rank, row["NPU Name"], row["Err_message"]))
    return sorted(found["error"], key=lambda r: r[:2]), found["warning"]
