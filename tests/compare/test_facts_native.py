"""The C measure of a plain entry's discrepancies (probe_compare._facts) gives what judge._spread gives.

For the entries it takes (every discrepancy a finite float, no output measured against its inputs' magnitude)
it must return judge._spread's tuple element for element and type for type (-0.0 included); for any other it
returns None and the Python measures. Held to it on a seeded fuzz of layouts, discrepancies and statistics
(NaN, infinities, ints, bools, cancelled sums, positions out of range), and on every plain entry of a noisy
pair, whose facts must be the same with the helper and without it.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest

from probe_compare import columnar, judge
from probe_compare.columnar import ColumnarCompare
from probe_compare.comparator import load_comparators
from probe_compare.judge import plain_facts
from probe_compare.rank import detect_mode
from probe_core.dump.reader import RankDump
from probe_core.plugins import load_registry

from tests.compare.dumps import write_dump

native = pytest.importorskip("probe_compare._facts", reason="probe-core was built without a C compiler")

ROLES = ("input", "parameters", "output")
ODD = [math.nan, math.inf, -math.inf, 0, 3, 2 ** 60, True, None, "x"]


def _same(ours, theirs) -> bool:
    """Equal and of the same types all through (a float by its repr: NaN matches NaN, -0.0 is not 0.0)."""
    if ours.__class__ is not theirs.__class__:
        return False
    if ours.__class__ in (tuple, list):
        return len(ours) == len(theirs) and all(_same(a, b) for a, b in zip(ours, theirs))
    if ours.__class__ is float:
        return repr(ours) == repr(theirs)
    return ours == theirs


def _outcome(measure, *args):
    try:
        return measure(*args)
    except Exception as error:  # noqa: BLE001 - both must raise alike where the C gives the entry to Python
        return type(error)


def _entry(rng: random.Random):
    """(layout, pairs, errs, stats) of a random plain entry: rows of random roles, dtypes and numbers."""
    rows = rng.randrange(1, 7)
    signature = tuple((f".{ROLES[i % 3]}.{i}", rng.choice(ROLES), "torch.Tensor",
                       rng.choice(["torch.float32", "torch.bfloat16", "torch.float16"]), (2, 3), None, None)
                      for i in range(rows))
    scale = 10.0 ** rng.randrange(-8, 4)

    def stat():
        roll = rng.random()
        if roll < 0.03:
            return rng.choice(ODD[:6])
        return rng.uniform(-3, 3) * scale * (1e-5 if roll < 0.2 else 1.0)

    target = tuple(stat() for _ in range(4 * rows))
    bench = tuple(value if rng.random() < 0.7 else stat() for value in target)
    pairs = list(zip(columnar._leaves("E", (signature, target)), columnar._leaves("E", (signature, bench))))
    layout = judge.RowLayout.of(pairs)

    def err():
        roll = rng.random()
        if roll < 0.04:
            return rng.choice(ODD)
        if roll < 0.3:
            return rng.choice([0.0, -0.0])
        return rng.choice([1e-9, 1e-7, 1e-4, 0.5, 30.0]) * rng.random()

    errs = [err() for _ in range(rows)]
    if rng.random() < 0.02:
        errs.pop()  # a position out of range
    return layout, pairs, errs if rng.random() < 0.8 else tuple(errs), (target, bench)


def test_the_judge_uses_the_c_measure():
    assert judge._spread_native is native.spread


def test_both_measures_agree_on_random_entries():
    rng = random.Random(36)
    taken = 0
    for _ in range(20000):
        layout, pairs, errs, stats = _entry(rng)
        ours = _outcome(native.spread, layout.outputs, layout.others, layout.input_rows, errs, *stats)
        if ours is None:
            continue
        taken += 1
        theirs = _outcome(judge._spread, layout, pairs, errs, stats)
        assert _same(ours, theirs), (layout, errs, stats, ours, theirs)
    assert taken > 5000  # most entries are the common kind


def test_fields_held_in_other_containers_are_left_to_python():
    """A layout or statistics held in lists (not as RowLayout and the compact forms hold them): None, no error."""
    rng = random.Random(1)
    fields: list = []
    while not fields or native.spread(*fields) is None:  # an entry the C takes, as they come
        layout, _, errs, stats = _entry(rng)
        fields = [layout.outputs, layout.others, layout.input_rows, list(errs), *stats]
    for i in (0, 1, 2, 4, 5):
        odd = list(fields)
        odd[i] = list(odd[i])
        assert native.spread(*odd) is None
    assert native.spread(*fields[:3], iter(errs), *stats) is None


def test_a_cancelled_output_is_left_to_python():
    """An output far smaller than the inputs it is made of, with an error: the Python measures it against the
    inputs' magnitude (it reads the leaves), the C gives it back."""
    signature = ((".input.0", "input", "torch.Tensor", "torch.float32", (4,), None, None),
                 (".output.0", "output", "torch.Tensor", "torch.float32", (4,), None, None))
    target, bench = (100.0, -100.0, 0.0, 200.0, 1e-7, -1e-7, 0.0, 2e-7), \
        (100.0, -100.0, 0.0, 200.0, 2e-7, -1e-7, 0.0, 3e-7)
    pairs = list(zip(columnar._leaves("E", (signature, target)), columnar._leaves("E", (signature, bench))))
    layout = judge.RowLayout.of(pairs)
    errs = [0.0, 0.5]
    assert native.spread(layout.outputs, layout.others, layout.input_rows, errs, target, bench) is None
    measured = judge._spread(layout, pairs, errs, (target, bench))
    assert measured[0] == pytest.approx(1e-9)  # the difference of the Max, 1e-7, over the inputs' 100


def _plain_facts(folder: Path) -> list:
    """The facts of every plain entry of the pair in ``folder`` (target/, bench/), worst rows as text."""
    ours, theirs = RankDump(folder / "target" / "dump.json"), RankDump(folder / "bench" / "dump.json")
    registry = load_registry()
    mode = detect_mode(ours, theirs, registry)
    pairs = list(zip(ours.entries(), theirs.entries()))
    plains = ColumnarCompare(mode, load_comparators(registry, mode.name), "noise").compare_entries(pairs)
    return [plain_facts(npu.index, npu.parent, plain, mode, texts=True)
            for (npu, _), plain in zip(pairs, plains) if plain is not None]


def test_facts_are_the_same_without_the_helper(tmp_path, monkeypatch):
    """A noisy pair (every output measured against its inputs, a few cancelled sums, a NaN on one side): the
    same facts of every entry with the helper and without it."""
    rng = np.random.default_rng(36)
    entries = {"target": [], "bench": []}
    for i in range(300):
        x, w = rng.standard_normal((4, 8)), rng.standard_normal(8)
        y = x * w if i % 50 else x * w * 1e-9  # a few outputs far smaller than their inputs
        if i == 7:
            y[0, 0] = np.nan
        for side, noise in (("bench", 0.0), ("target", 1e-5)):
            jitter = 1 + noise * rng.standard_normal()
            name = f"Functional.mul.{i}.forward"
            entries[side].append((name, None, [x * jitter, w], [y * jitter if i != 7 or side == "target" else x]))
    for side, items in entries.items():
        write_dump(tmp_path / side, items)
    with_helper = _plain_facts(tmp_path)
    monkeypatch.setattr(judge, "_spread_native", None)
    without = _plain_facts(tmp_path)
    assert len(with_helper) >= 290
    assert with_helper == without
    assert sum(f.out_err > 0 for f in with_helper) >= 290


def test_the_c_leaves_are_the_python_ones():
    """columnar._leaves by the C helper (probe_compare._flat.leaves): the same TensorMeta leaves, field for
    field, as the Python builds, tensors and arguments alike; other containers go to the Python."""
    leaves_native = columnar._leaves_native
    assert leaves_native is not None
    rng = random.Random(7)
    for _ in range(2000):
        _, pairs, _, (target, bench) = _entry(rng)
        signature = tuple((f".{ROLES[i % 3]}.{i}", npu.role, npu.type, npu.dtype, npu.shape, npu.requires_grad,
                           None if rng.random() < 0.8 else "arg") for i, (npu, _) in enumerate(pairs))
        ours = leaves_native("E", signature, target, columnar.TensorMeta)
        theirs = columnar._leaves_python("E", (signature, target))
        assert [type(leaf) for leaf in ours] == [type(leaf) for leaf in theirs]
        assert ours == theirs
    signature = ((".input.0", "input", "torch.Tensor", "torch.float32", (2,), None, None),)
    assert columnar._leaves("E", (signature, [1.0, 2.0, 3.0, 4.0]))[0].max == 1.0  # a list: read by the Python
    with pytest.raises(ValueError):
        leaves_native("E", signature, (1.0, 2.0), columnar.TensorMeta)
    with pytest.raises(TypeError):
        leaves_native("E", (signature[0][:6],), (1.0, 2.0, 3.0, 4.0), columnar.TensorMeta)
