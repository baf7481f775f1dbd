"""The same config.json, the same seeded run, under the real msprobe 26.2.0 and under probe: the keys probe
honours write what msprobe writes (file sets, entry names, record keys)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.interop.msprobe_env import run_msprobe_python

SCRIPT = '''
import sys, torch, torch.nn as nn
tool, config = sys.argv[1], sys.argv[2]
if tool == "msprobe":
    from msprobe.pytorch import PrecisionDebugger
else:
    from probe_torch import PrecisionDebugger
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(s):
        super().__init__(); s.fc1 = nn.Linear(4, 6); s.ln = nn.LayerNorm(6); s.fc2 = nn.Linear(6, 3)
    def forward(s, x):
        return s.fc2(torch.relu(s.ln(s.fc1(x))))
net, x = Net(), torch.randn(2, 4)
debugger = PrecisionDebugger(config_path=config)
debugger.start(net)
net(x).sum().backward()
debugger.stop()
debugger.step()
'''

CONFIGS = {
    "structure": {"task": "structure", "level": "mix"},
    "extra_info": {"task": "statistics", "level": "mix", "extra_info": False},
    "tensor_list": {"task": "statistics", "level": "mix", "statistics": {"tensor_list": ["relu", "fc2"]}},
    "data_mode_input": {"task": "statistics", "level": "mix", "statistics": {"data_mode": ["input"]}},
    "scope": {"task": "statistics", "level": "mix",
              "statistics": {"scope": ["Module.ln.LayerNorm.forward.0", "Functional.linear.1.forward"]}},
}


def _dump(tmp_path: Path, tool: str, python: str, name: str) -> Path:
    work = tmp_path / tool
    work.mkdir()
    (work / "train.py").write_text(SCRIPT)
    (work / "config.json").write_text(json.dumps({"dump_path": str(work / "dump"), **CONFIGS[name]}))
    if tool == "msprobe":
        done = run_msprobe_python(python, "train.py", tool, "config.json", cwd=work, timeout=300)
    else:
        done = subprocess.run([python, "train.py", tool, "config.json"], cwd=work, capture_output=True, text=True,
                              timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (rank,) = (work / "dump" / "step0").iterdir()  # msprobe: proc{pid}; probe: rank0
    return rank


def _json(rank: Path, name: str) -> dict:
    return json.loads((rank / name).read_text())


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_probe_writes_what_msprobe_writes_for_the_config(tmp_path, msprobe, name):
    theirs, ours = _dump(tmp_path, "msprobe", msprobe, name), _dump(tmp_path, "probe", sys.executable, name)
    files = sorted(p.name for p in theirs.iterdir())
    assert sorted(p.name for p in ours.iterdir()) == files
    their_data, our_data = _json(theirs, "dump.json")["data"], _json(ours, "dump.json")["data"]
    if name == "structure":
        assert their_data == our_data == {}
        assert set(_json(ours, "construct.json")) == set(_json(theirs, "construct.json"))
    elif name == "tensor_list":
        assert sorted(p.name for p in (ours / "dump_tensor_data").iterdir()) == \
            sorted(p.name for p in (theirs / "dump_tensor_data").iterdir())
    elif name == "data_mode_input":
        modules = [n for n in their_data if n.startswith("Module.") and ".forward." in n]
        assert modules and all(set(our_data[n]) == set(their_data[n]) for n in modules)
    elif name == "scope":
        assert set(our_data) == set(their_data)
    else:
        assert files == ["dump.json"]
