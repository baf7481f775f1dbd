"""probe_core.testing: a plugin's own test suite runs probe in-process with in-process plugins.

A tiny data mode (``bytesum``: the sum of each tensor's bytes), a comparator with a verdict and a
checker, registered with :func:`probe_core.testing.registry_with`, go through a collection, a
compare, a graph and a check — no entry point, no subprocess.
"""

from __future__ import annotations

import json
from pathlib import Path
import subprocess
import sys
from typing import Any

import pytest
from probe_compare.rules import ERROR
from probe_core.modes import DataMode
from probe_core.specs import CheckerSpec, CheckRow, ComparatorSpec, DataModeSpec

from probe_core import hookimpl
from tests.plugins.conftest import read_db

# The probe_kit fixture. (Imported by pytest first: this module imports the kit only inside its tests, so
# that pytest can still rewrite the kit's asserts.)
pytest_plugins = ["probe_core.testing"]

torch = pytest.importorskip("torch")

KEY = "bytesum"


def _sum(leaf: Any) -> int | None:
    return (leaf.raw or {}).get(KEY) if leaf.is_tensor else None


class ByteSumMode(DataMode):
    name = KEY
    statistics_columns = False
    legend = "byte sums of inputs/outputs"

    def encode(self, tensor, ops, sink, label):
        record = ops.describe(tensor)
        record[KEY] = sum(bytes(ops.raw_bytes(tensor)))
        return record

    def recognises(self, task, record):
        return record is not None and isinstance(record.get(KEY), int)

    def differs(self, row):
        a, b = _sum(row.npu), _sum(row.bench)
        return None if a == b else f"byte sum {a} vs {b}"


class ByteSumColumns:
    columns = ("NPU bytesum", "BENCH bytesum")
    tool_tips = {"NPU bytesum": "sum of the target tensor's bytes"}

    def compare(self, pair):
        return {"NPU bytesum": _sum(pair.npu), "BENCH bytesum": _sum(pair.bench)}

    def judge(self, row):
        if row.metrics.get("NPU bytesum") != row.metrics.get("BENCH bytesum"):
            return ERROR, "byte sum differs"
        return None


def _collect_seed(ctx):
    return {"seed": ctx.options.get("seed")}


def _compare_seed(bench, target):
    return [CheckRow("seed", bench["seed"], target["seed"], bench["seed"] == target["seed"])]


class BytesumPlugin:
    """One in-process plugin object implementing three hooks."""

    @hookimpl
    def probe_data_modes(self):
        return [DataModeSpec(KEY, "sum of each tensor's bytes", ByteSumMode, tasks=("statistics",),
                             summary_modes=(KEY,))]

    @hookimpl
    def probe_comparators(self):
        return [ComparatorSpec(KEY, KEY, "both sides' byte sums", ByteSumColumns)]

    @hookimpl
    def probe_checkers(self):
        return [CheckerSpec("seed", "the seed passed in options", _collect_seed, _compare_seed)]


def _steps(scale: float):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    x = torch.randn(3, 4)

    def step():
        hidden = model[1](model[0](x))
        model[2](hidden * scale).sum().backward()

    return model, step


@pytest.fixture(scope="module")
def registry():
    from probe_core import testing

    return testing.registry_with(BytesumPlugin(), names=["bytesum"], enable=["torch", "compare", "graph"])


def test_registry_holds_exactly_what_was_asked(registry):
    assert list(registry.data_modes) == [KEY] and list(registry.comparators) == [KEY]
    assert registry.info("bytesum").distribution == "(in-process)"
    assert registry.info("torch").status == "enabled" and registry.info("statistics").status == "not loaded"
    from probe_core import testing

    with pytest.raises(ValueError, match="2 plugins but 1 names"):
        testing.registry_with(BytesumPlugin(), BytesumPlugin(), names=["a"])


def test_collect_compare_graph(registry, probe_kit):
    model, step = _steps(1.0)
    a = probe_kit.collect(step, "a", registry=registry, model=model, summary_mode=KEY)
    model, step = _steps(1.5)
    b = probe_kit.collect(step, "b", registry=registry, model=model, summary_mode=KEY, steps=2)
    record = json.loads((a / "step0" / "rank0" / "dump.json").read_text())["data"]["Functional.linear.0.forward"]
    assert isinstance(record["output"][0][KEY], int) and "Max" not in record["output"][0]
    assert (b / "step1" / "rank0" / "dump.json").exists() and not (a / "step1").exists()

    summary = probe_kit.compare(b / "step0", a / "step0", registry=registry)
    assert summary["mode"] == KEY
    first = summary["first_divergence"]
    assert first["name"] == "Tensor.__mul__.0.forward" and first["reason"].startswith("output.0: byte sum")
    csv_text = Path(summary["ranks"][0]["csv"]).read_text()
    assert "NPU bytesum" in csv_text and "byte sum differs" in csv_text

    db = probe_kit.graph(b / "step0", a / "step0", registry=registry)
    config, nodes = read_db(db)
    assert json.loads(config["tool_tip"]) == {"NPU bytesum": "sum of the target tensor's bytes"}
    assert nodes[("NPU", "Tensor.__mul__.0.forward")]["precision_index"] == 1
    assert nodes[("NPU", "Module.0.Linear.forward.0")]["precision_index"] == 0


def test_collect_a_script(registry, tmp_path):
    from probe_core import testing

    script = tmp_path / "train.py"
    script.write_text("import torch\nm = torch.nn.Linear(2, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
                      "for _ in range(2):\n    m(torch.ones(1, 2)).sum().backward()\n    opt.step()\n")
    dump = testing.collect(script, tmp_path / "dump", registry=registry, summary_mode=KEY)
    assert sorted(p.name for p in dump.iterdir()) == ["step0", "step1"]
    data = json.loads((dump / "step0" / "rank0" / "dump.json").read_text())["data"]
    assert any(name.startswith("Functional.linear.0.") for name in data)  # recorded from the first forward


def test_check(registry):
    from probe_core import testing

    rows = testing.check("seed", {"options": {"seed": 1}}, {"options": {"seed": 2}}, registry=registry)
    assert rows == [CheckRow("seed", 1, 2, False)]
    assert testing.check_rows("seed", {"seed": 3}, {"seed": 3}, registry=registry)[0].passed
    bad = CheckerSpec("bad", "returns tuples", _collect_seed, lambda b, t: [("seed", b, t, True)])
    with pytest.raises(TypeError, match="must return CheckRow"):
        testing.check_rows(bad, {}, {})
    unjsonable = CheckerSpec("sets", "collects a set", lambda ctx: {1, 2}, _compare_seed)
    with pytest.raises(TypeError, match="not JSON serializable"):
        testing.check(unjsonable)


@pytest.mark.parametrize("code", [
    # probe_core never imports the kit, torch or pytest; the kit imports no torch
    "import sys, probe_core, probe_core.plugins, probe_core.specs\n"
    "assert not {'probe_core.testing', 'torch', 'pytest'} & set(sys.modules)\n"
    "import probe_core.testing\n"
    "assert 'torch' not in sys.modules and callable(probe_core.testing.probe_kit)",
    # without pytest the kit works, without its fixture
    "import sys\nsys.modules['pytest'] = None\n"
    "from probe_core import testing\n"
    "assert not hasattr(testing, 'probe_kit') and testing.registry_with().info('core').status == 'enabled'",
])
def test_the_kit_is_light(code):
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
