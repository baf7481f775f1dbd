"""Top-level calls only the bench made, just before the optimizer (issue 33: the bench clips gradients, the target
does not): ``probe graph`` pairs the optimizer's calls as ``probe compare`` pairs them, hands the bench-only calls
to the judge, and both commands name the same entry.

The bench's extra calls and its ``optimizer`` node form one ``Apis_Between_Modules`` group on the bench side
only; the target's ``optimizer`` stands alone under the root.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

from probe_compare.api import StepFacts, judge_job
from probe_core.api import current_registry
from probe_graph.service import GraphOptions, plan_jobs, run_job
from tests.graph.helpers import only_db, PROBE, rows, run_probe

HEADER = {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None}
CLIP = ["Torch._foreach_norm.0.forward", "Torch.linalg_vector_norm.0.forward", "Torch._foreach_mul_.0.forward"]
WEIGHT = [0.5, -0.25, 0.125, -0.75]
X = [1.0, 2.0, -1.0, 0.5]


def _tensor(values: list[float]) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [len(values)], "Max": max(values),
            "Min": min(values), "Mean": sum(values) / len(values), "Norm": math.sqrt(sum(v * v for v in values)),
            "requires_grad": False}


def _write_rank(folder: Path, grad: list[float], clipped: bool) -> None:
    """One rank: a Linear's forward, then (bench: gradient clipping, top level) the optimizer's Adam update."""
    y = [w * x for w, x in zip(WEIGHT, X)]
    exp_avg = [0.1 * g for g in grad]
    data = {"Functional.linear.0.forward": {"input_args": [_tensor(X), _tensor(WEIGHT)], "input_kwargs": {},
                                            "output": [_tensor(y)]},
            "Module.fc.Linear.forward.0": {"input_args": [_tensor(X)], "input_kwargs": {}, "output": [_tensor(y)],
                                           "parameters": {"weight": _tensor(WEIGHT)}}}
    construct: dict = {"Functional.linear.0.forward": "Module.fc.Linear.forward.0",
                       "Module.fc.Linear.forward.0": None}
    if clipped:
        for name in CLIP:
            data[name] = {"input_args": [_tensor(grad)], "input_kwargs": {}, "output": [_tensor(grad)]}
            construct[name] = None
    beta = {"type": "float", "value": 0.1}
    data["Tensor.lerp_.0.forward"] = {"input_args": [_tensor([0.0] * 4), _tensor(grad), beta], "input_kwargs": {},
                                      "output": [_tensor(exp_avg)]}
    data["Tensor.add_.0.forward"] = {"input_args": [_tensor(WEIGHT), _tensor(exp_avg)], "input_kwargs": {},
                                     "output": [_tensor([w + e for w, e in zip(WEIGHT, exp_avg)])]}
    construct.update({"Tensor.lerp_.0.forward": "optimizer", "Tensor.add_.0.forward": "optimizer"})
    folder.mkdir(parents=True)
    (folder / "dump.json").write_text(json.dumps({**HEADER, "data": data}))
    (folder / "construct.json").write_text(json.dumps(construct))
    (folder / "stack.json").write_text(json.dumps({"0": [list(data), ["File train.py, line 9, in fit, \n step()"]]}))


def test_optimizer_calls_pair_after_calls_only_the_bench_made(tmp_path: Path) -> None:
    grad = [0.03, -0.02, 0.01, -0.04]
    _write_rank(tmp_path / "target" / "step0" / "rank0", grad, clipped=False)
    _write_rank(tmp_path / "bench" / "step0" / "rank0", [g / 2 for g in grad], clipped=True)
    done = run_probe(tmp_path / "target", tmp_path / "bench", "-o", tmp_path / "graph")
    compared = subprocess.run([PROBE, "compare", str(tmp_path / "target"), str(tmp_path / "bench"), "-o",
                               str(tmp_path / "compare")], capture_output=True, text=True, timeout=120)
    assert compared.returncode == 0, compared.stderr
    first = json.loads((tmp_path / "compare" / "summary.json").read_text())["first_divergence"]
    assert first["name"] == "Tensor.lerp_.0.forward", first
    assert "calls only the bench made" in first["reason"], first["reason"]
    assert "first divergent node Tensor.lerp_.0.forward" in " ".join(done.stdout.split()), done.stdout

    found = rows(only_db(tmp_path / "graph"))
    target = {name: row for (source, name), row in found.items() if source == "NPU"}
    bench = {name: row for (source, name), row in found.items() if source == "Bench"}
    for name in ("optimizer", "Tensor.lerp_.0.forward", "Tensor.add_.0.forward"):  # paired across the group
        assert json.loads(target[name]["matched_node_link"])[-1] == name, name
    assert json.loads(target["Tensor.lerp_.0.forward"]["matched_node_link"])[:2] == ["DefaultModel",
                                                                                     "Apis_Between_Modules.0"]
    assert target["Tensor.lerp_.0.forward"]["precision_index"] == 1
    for name in CLIP:  # the bench-only calls stay unmatched
        assert bench[name]["up_node"] == "Apis_Between_Modules.0" and bench[name]["matched_node_link"] == "[]"

    # the judge hears of the bench-only calls, in the bench's order, and gives compare's reason word for word
    job, = plan_jobs(tmp_path / "target", tmp_path / "bench", GraphOptions())
    result = run_job(job, GraphOptions(), current_registry())
    assert [f.name for f in sorted((f for f in result.facts if f.side == "bench"), key=lambda f: -f.index)] == CLIP
    answer = judge_job([StepFacts(result.step, result.rank, result.facts)], "noise")
    assert answer is not None and answer.finding.name == first["name"] and answer.finding.reason == first["reason"]
