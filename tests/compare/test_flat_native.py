"""The C reader of flat entries (probe_compare._flat) gives what columnar._flat_python gives.

Both read a decoded dump.json entry into the key of its compact form's signature and its statistics, or
``None``. They are held to the same results, element for element and type for type (NaN, infinities and
-0.0 included), on every entry of the real dumps in tests/fixtures, on a dump probe's own collector writes
of a small torch model, and on a seeded fuzz of odd entries.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from probe_compare import columnar

native = pytest.importorskip("probe_compare._flat", reason="probe-core was built without a C compiler")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DUMPS = sorted(FIXTURES.glob("msprobe_*/**/dump.json"))
TENSOR = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 3], "Max": 1.0, "Min": -1.0,
          "Mean": 0.0, "Norm": 2.0, "requires_grad": False}


def _same(ours, theirs) -> bool:
    """Equal and of the same types all through (a float by its repr: NaN matches NaN, -0.0 is not 0.0)."""
    if ours.__class__ is not theirs.__class__:
        return False
    if ours.__class__ is tuple:
        return len(ours) == len(theirs) and all(_same(a, b) for a, b in zip(ours, theirs))
    if ours.__class__ is float:
        return repr(ours) == repr(theirs)
    if ours.__class__ is list:  # an unhashable dtype, kept as the entry holds it
        return ours is theirs
    return ours is theirs or ours == theirs


def _outcome(read, data):
    try:
        return read(data)
    except Exception as error:  # noqa: BLE001 - both readers must raise alike
        return type(error)


def _assert_alike(entries) -> int:
    """Both readers on every (name, data); the number of entries with a key."""
    keyed = 0
    for name, data in entries:
        ours, theirs = _outcome(native.flat, data), _outcome(columnar._flat_python, data)
        assert _same(ours, theirs), (name, data, ours, theirs)
        keyed += ours.__class__ is tuple
    return keyed


def test_the_compare_uses_the_c_reader():
    assert columnar._flat is native.flat


@pytest.mark.parametrize("dump", DUMPS, ids=lambda p: str(p.relative_to(FIXTURES).parent))
def test_both_readers_agree_on_msprobe_dumps(dump):
    entries = json.loads(dump.read_text())["data"].items()
    assert _assert_alike(entries) > 0


PROBE_DUMP = textwrap.dedent("""
    import sys, torch
    from probe_torch import PrecisionDebugger
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    x = torch.randn(2, 8)
    x[0, 0] = float("nan")
    debugger = PrecisionDebugger(task="statistics", dump_path=sys.argv[1], level="mix")
    debugger.start(net)
    y = torch.nn.functional.softmax(net(x), dim=-1, dtype=torch.float64)
    (y.sum() + torch.tensor(float("inf"))).backward()
    debugger.stop()
    debugger.step()
""")


def test_both_readers_agree_on_a_dump_of_probes_collector(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(PROBE_DUMP)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "dump")], capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, proc.stderr
    found = list((tmp_path / "dump").rglob("dump.json"))
    assert found, proc.stdout
    entries = json.loads(found[0].read_text())["data"].items()
    assert _assert_alike(entries) > 5


class Text(str):
    pass


class Size(int):
    pass


class Number(float):
    pass


class Shape(list):
    pass


class Leaf(dict):
    pass


class Raises:
    """A dict key whose comparison raises."""

    def __eq__(self, other):
        raise ValueError("no comparing")

    __hash__ = object.__hash__


ODD_VALUES = [None, True, False, 0, 1, -3, 2 ** 70, Size(2), 1.5, -0.0, math.nan, math.inf, -math.inf, Number(1.0),
              "x", Text("y"), [], [1, 2], [True], [1.0], [[1]], Shape([2]), {}, {"a": 1}, (1, 2)]
ODD_KEYS = [Text("type"), "Type", 1, None, "extra"]


def _odd_leaf(rng: random.Random):
    """A tensor leaf or a number argument, some fields replaced by odd values, reordered, dropped or added."""
    if rng.random() < 0.4:
        leaf = {"type": rng.choice(["int", "float", "torch.Tensor"]), "value": rng.choice(ODD_VALUES)}
    else:
        leaf = dict(TENSOR)
        for _ in range(rng.randrange(3)):
            leaf[rng.choice(list(TENSOR))] = rng.choice(ODD_VALUES)
        if rng.random() < 0.3:
            leaf["shape"] = [rng.choice([0, 3, Size(4), True, 2.0, -1]) for _ in range(rng.randrange(4))]
    roll = rng.random()
    items = list(leaf.items())
    if roll < 0.05:
        rng.shuffle(items)
    elif roll < 0.1:
        items.pop(rng.randrange(len(items)))
    elif roll < 0.15:
        items.insert(rng.randrange(len(items) + 1), (rng.choice(ODD_KEYS), 1))
    elif roll < 0.2:
        at = rng.randrange(len(items))
        items[at] = (rng.choice(ODD_KEYS), items[at][1])
    if roll > 0.97:
        return rng.choice([Leaf(items), None, 1.0, "leaf", [dict(items)]])
    return dict(items)


def _odd_section(rng: random.Random):
    leaves = [_odd_leaf(rng) if rng.random() < 0.3 else dict(TENSOR) for _ in range(rng.randrange(4))]
    roll = rng.random()
    if roll < 0.25:
        return {f"arg{i}": leaf for i, leaf in enumerate(leaves)}
    if roll < 0.3:
        return rng.choice([None, 1, "x", Shape(leaves), Leaf(a=TENSOR), [leaves], {"a": {"b": TENSOR}}])
    return leaves


def _odd_entries(count: int, seed: int):
    rng = random.Random(seed)
    sections = ["input_args", "input_kwargs", "input", "output", "parameters", "weight", "bias"]
    for i in range(count):
        chosen = rng.sample(sections, rng.randrange(1, 5))
        yield f"odd.{i}", {section: _odd_section(rng) for section in chosen}


def test_both_readers_agree_on_odd_entries():
    assert _assert_alike(_odd_entries(4000, seed=36)) > 1000


def test_both_readers_agree_on_the_corner_cases():
    nan_argument = {"type": "float", "value": math.nan}
    cases = {
        "bool statistic": {"output": [dict(TENSOR, Max=True)]},
        "bool argument": {"input_args": [{"type": "int", "value": True}]},
        "int argument": {"input_args": [{"type": "int", "value": 1}, {"type": "float", "value": 1.0}]},
        "NaN and infinities": {"output": [dict(TENSOR, Max=math.inf, Min=-math.inf, Mean=math.nan)],
                               "input": [nan_argument]},
        "unhashable dtype": {"output": [dict(TENSOR, dtype=["torch.float32"])]},
        "dict section": {"input_kwargs": {"eps": {"type": "float", "value": 1e-5}, "w": TENSOR}},
        "empty sections": {"input_args": [], "input_kwargs": {}, "output": [TENSOR]},
        "no sections": {"other": [TENSOR]},
        "requires_grad None": {"output": [dict(TENSOR, requires_grad=None)]},
        "requires_grad int": {"output": [dict(TENSOR, requires_grad=1)]},
        "str subclass key": {"output": [{Text("type"): "int", "value": 3}]},
        "raising key": {"output": [{Raises(): "int", "value": 3}]},
        "raising key after a wrong one": {"output": [{"kind": "int", Raises(): 3}]},
        "subclass of list shape": {"output": [dict(TENSOR, shape=Shape([2]))]},
        "subclass of dict leaf": {"output": [Leaf(TENSOR)]},
        "nested list": {"output": [[TENSOR]]},
        "null section": {"input_args": None, "output": [TENSOR]},
        "many leaves": {"input_args": [TENSOR] * 40, "output": [{"type": "int", "value": 7}] * 30},
    }
    _assert_alike(cases.items())
    assert _outcome(native.flat, cases["raising key"]) is ValueError
    assert _outcome(native.flat, cases["raising key after a wrong one"]) is None
    key, _ = native.flat(cases["unhashable dtype"])
    with pytest.raises(TypeError):
        hash(key)


def test_the_c_reader_keeps_no_references():
    """Reading an entry many times leaves every object it holds as referenced as before (no leak), and
    takes no reference to a result it dropped."""
    shape, dtype, value = [2, 3], "torch.custom", 12345.5
    entry = {"input_args": [dict(TENSOR, shape=shape, dtype=dtype, Max=value)],
             "input_kwargs": {"eps": {"type": "float", "value": value}}, "output": [dict(TENSOR, Max=True)]}
    flat_one = {"output": [dict(TENSOR, shape=shape, dtype=dtype, Max=value)] * 50}
    before = [sys.getrefcount(obj) for obj in (shape, dtype, value, entry, flat_one)]
    for _ in range(2000):
        native.flat(entry)
        native.flat(flat_one)
    assert [sys.getrefcount(obj) for obj in (shape, dtype, value, entry, flat_one)] == before


def test_the_c_reader_refuses_what_is_no_dict():
    with pytest.raises(TypeError, match="dict"):
        native.flat([TENSOR])
    with pytest.raises(ValueError, match="tensor_keys"):
        native.configure(("output",), ("type",), columnar.ARGUMENT_KEYS)
