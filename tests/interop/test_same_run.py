"""One seeded training run dumped by msprobe 26.2.0 and by probe: the two dumps line up entry for entry.

The same script (Linear, LayerNorm, GELU, ReLU, a view op, cross_entropy, an SGD step; two steps) runs once
under msprobe's PrecisionDebugger in its own venv and once under probe's, with msprobe's default config
(``risk_level`` FOCUS, level mix). Then ``probe compare PROBE MSPROBE`` finds every entry on both sides and
no error, and ``msprobe compare -tp PROBE -gp MSPROBE`` gives every row a bench and no error row, in
statistics, md5 and tensor mode.

The optimizer step runs after ``debugger.stop()``: msprobe records the optimizer's own tensor calls (six
``Tensor.add_`` for SGD) when they run between start and stop, probe never does.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.interop.msprobe_env import msprobe_cli, run_msprobe_python

pytestmark = pytest.mark.slow

SCRIPT = '''
import json, sys
import torch, torch.nn as nn, torch.nn.functional as F
tool, task, dump = sys.argv[1:4]
if tool == "msprobe":
    from msprobe.pytorch import PrecisionDebugger
else:
    from probe_torch import PrecisionDebugger
section = {"scope": [], "list": [], "data_mode": ["all"]}
if task == "md5":
    task, section["summary_mode"] = "statistics", "md5"
config = {"task": task, "dump_path": dump, "rank": [], "step": [], "level": "mix", task: section}
with open(dump + ".config.json", "w") as f:
    json.dump(config, f)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.norm, self.fc2 = nn.Linear(8, 16), nn.LayerNorm(16), nn.Linear(16, 4)

    def forward(self, x):
        h = F.gelu(self.norm(self.fc1(x)))
        return self.fc2(torch.relu(h.reshape(-1, 16)))


torch.manual_seed(0)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(4, 8), torch.tensor([0, 1, 2, 3])
debugger = PrecisionDebugger(config_path=dump + ".config.json")
for _ in range(2):
    debugger.start(model)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    debugger.stop()
    optimizer.step()
    optimizer.zero_grad()
    debugger.step()
'''


def _dump_both(msprobe: str, tmp_path: Path, task: str) -> tuple[Path, Path]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    theirs, ours = tmp_path / "msprobe_dump", tmp_path / "probe_dump"
    done = run_msprobe_python(msprobe, script, "msprobe", task, theirs, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    env = dict(os.environ, OMP_NUM_THREADS="1")  # as msprobe's run: one thread sums in one order (md5 is bitwise)
    done = subprocess.run([sys.executable, str(script), "probe", task, str(ours)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return ours, theirs


def _rank_folder(dump: Path, step: int) -> Path:
    (folder,) = [p for p in (dump / f"step{step}").iterdir() if p.is_dir()]  # rank0 (probe), proc{pid} (msprobe)
    return folder


@pytest.mark.parametrize("task", ["statistics", "md5", "tensor"])
def test_probe_and_msprobe_dumps_of_one_run_compare_clean(msprobe, tmp_path, task):
    ours, theirs = _dump_both(msprobe, tmp_path, task)
    for step in (0, 1):
        our_data = json.loads((_rank_folder(ours, step) / "dump.json").read_text())["data"]
        their_data = json.loads((_rank_folder(theirs, step) / "dump.json").read_text())["data"]
        assert sorted(our_data) == sorted(their_data)  # the same entries: views left out, backward as msprobe's

    # probe compare: every entry on both sides, none in error
    out = tmp_path / "probe_compare"
    done = subprocess.run([str(Path(sys.executable).parent / "probe"), "compare", str(ours), str(theirs), "-o",
                           str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    counts = json.loads((out / "summary.json").read_text())["counts"]
    assert counts["error"] == 0 and counts["unmatched"] == 0 and counts["pass"] >= 40, counts

    # msprobe compare, probe's dump as the target: every row has a bench, none is an error
    out = tmp_path / "msprobe_compare"
    done = msprobe_cli(msprobe, "compare", "-tp", _rank_folder(ours, 0) / "dump.json",
                       "-gp", _rank_folder(theirs, 0) / "dump.json", "-o", out, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (result,) = out.glob("compare_result_*.csv")
    with result.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) >= 60  # every input, output, parameter and gradient of the 21 entries
    assert [row["NPU Name"] for row in rows if row["Bench Name"] in ("", "N/A")] == []
    assert [row["NPU Name"] for row in rows if row["Result"].lower() == "error"] == []
