"""The statistics mode's column form in C (probe_modes._stats) gives what its numpy form gives, so a compare of
statistics dumps needs no numpy.

Held element for element and type for type (a float by its repr: NaN is NaN, -0.0 is not 0.0) on a seeded fuzz
of rows mixing NaN, infinities, signed zeros, ints, bools, saturated values (a dtype's ``finfo.min`` or
overflow) and the dtypes' largest values; items the C does not read (None, a string) go to numpy, as do lists of
the wrong length. Then a whole ``probe compare`` of a statistics pair, in its own process, never imports numpy.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from probe_compare.api import largest
from probe_modes import statistics
from probe_modes.statistics import StatColumns

from tests.compare.dumps import write_dump

native = pytest.importorskip("probe_modes._stats", reason="probe-modes was built without a C compiler")

DTYPES = ("torch.float32", "torch.bfloat16", "torch.float16", "torch.float64", "torch.int64", "torch.bool")
SPECIAL = [0.0, -0.0, 1.0, -2.5, 3, True, float("nan"), float("inf"), -float("inf"), 1e-300, 1e308, -1e308,
           -3.4028234663852886e38, 3.3895313892515355e38, -65504.0, 2 ** 60]


def _same(ours, theirs) -> bool:
    if ours.__class__ is not theirs.__class__:
        return False
    if isinstance(ours, (list, tuple)):
        return len(ours) == len(theirs) and all(_same(a, b) for a, b in zip(ours, theirs))
    if isinstance(ours, dict):
        return list(ours) == list(theirs) and all(_same(ours[k], theirs[k]) for k in ours)
    return repr(ours) == repr(theirs)


def _columns(rng: random.Random, rows: int) -> tuple[StatColumns, StatColumns]:
    def value(scale: float):
        return rng.choice(SPECIAL) if rng.random() < 0.15 else rng.uniform(-3, 3) * scale

    target, bench = [], []
    for _ in range(rows):
        scale = 10.0 ** rng.randrange(-6, 6)
        a = [value(scale) for _ in range(4)]
        b = [x if rng.random() < 0.4 else (x * (1 + rng.gauss(0, 1e-4)) if type(x) is float and rng.random() < 0.7
                                         else value(scale)) for x in a]
        if rng.random() < 0.1:
            b = list(a)
        target += a
        bench += b
    counts = [rng.choice([0, 1, 7, 4096, 2 ** 40]) for _ in range(rows)]
    dtypes = [rng.choice(DTYPES) for _ in range(rows)]
    bigs = [largest(dtype) for dtype in dtypes]
    other = [largest(rng.choice(DTYPES)) if rng.random() < 0.2 else big for big in bigs]
    return StatColumns(target, counts, bigs), StatColumns(bench, counts, other)


def test_the_constants_are_the_modes():
    assert native.SATURATED == statistics.SATURATED


def test_c_and_numpy_agree_on_random_rows():
    rng = random.Random(36)
    for _ in range(40):
        target, bench = _columns(rng, rng.randrange(0, 400))
        assert _same(statistics.statistics_columns(target, bench), statistics._metrics_numpy(target, bench))
        assert _same(statistics.discrepancy_columns(target, bench), statistics._discrepancies_numpy(target, bench))


def test_items_the_c_does_not_read_go_to_numpy():
    """None and a string: numpy reads None as NaN and refuses the string, with the C or without it."""
    counts, bigs = [1, 1], [0.0, 0.0]
    target = StatColumns([1.0, None, 0.5, 2.0, 1.0, 1.0, 1.0, 1.0], counts, bigs)
    bench = StatColumns([1.0, 0.0, 0.5, 2.0, 1.0, 1.0, 1.0, 2.0], counts, bigs)
    with pytest.raises(TypeError):
        native.metrics(target.flat, bench.flat)
    got = statistics.statistics_columns(target, bench)
    assert _same(got, statistics._metrics_numpy(target, bench))
    assert json.dumps(got["MinRelativeErr"]) == "[NaN, 0.0]"
    assert _same(statistics.discrepancy_columns(target, bench), statistics._discrepancies_numpy(target, bench))
    with pytest.raises(ValueError):
        native.discrepancies(target.flat[:7], bench.flat, counts, bigs, bigs)
    text = StatColumns([1.0, "x", 0.5, 2.0], [1], [0.0])
    with pytest.raises(ValueError):
        statistics.statistics_columns(text, StatColumns([1.0, 0.0, 0.5, 2.0], [1], [0.0]))


def test_columns_read_as_numpy_arrays():
    """A third-party comparator's compare_columns reads ``stats``, ``count`` and ``big`` as numpy arrays."""
    target, _ = _columns(random.Random(2), 5)
    assert target.stats.shape == (5, 4) and target.stats.dtype.name == "float64"
    assert target.count.tolist() == [float(n) for n in target.counts]
    assert target.big.tolist() == target.bigs


def test_a_statistics_compare_imports_no_numpy(tmp_path):
    rows = [(f"Functional.linear.{i}.forward", None, [[1.0 + i, 2.0], 3.0], [[4.0 * i, 0.5]]) for i in range(30)]
    write_dump(tmp_path / "t", rows)
    write_dump(tmp_path / "b", [(name, None, args, [[out[0][0] * 1.001, out[0][1]]]) for name, _, args, out in rows])
    code = ("import sys; from probe_core.cli import main\n"
            f"code = main(['compare', {str(tmp_path / 't')!r}, {str(tmp_path / 'b')!r}, '-o', "
            f"{str(tmp_path / 'out')!r}, '--no-xlsx'])\n"
            "print(code, 'numpy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split()[-2:] == ["0", "False"], done.stdout + done.stderr
    assert list((tmp_path / "out").glob("compare_result_*.csv"))
