"""The columnar compare writes what the row-at-a-time path writes, on every test dump.

Each real msprobe dump of tests/fixtures is compared with a copy of itself that has the differences a
compare must report (a statistic off, a NaN, an int argument changed, another dtype, another shape, an entry
missing), once with the columnar path and once with it switched off: the CSVs must be byte for byte the same,
and so must summary.json. A spy checks that the columnar path did take most entries.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import probe_compare.engine as engine
import probe_compare.rank as rank
from probe_core.api import ComparatorSpec, hookimpl
from probe_compare.columnar import ColumnarCompare
from probe_compare.engine import CompareOptions, run_compare
from probe_core.plugins import load_registry
from tests.compare.dumps import tiny_model_entries, write_dump

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
DUMPS = sorted(p.parent for p in FIXTURES.glob("msprobe_*_stat*/**/dump.json"))


class RowPath(ColumnarCompare):
    """The columnar path switched off: every entry row by row, as before it existed."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.active = False


class Spy(ColumnarCompare):
    taken = 0
    offered = 0

    def _plain(self, leaves):
        found = super()._plain(leaves)
        Spy.taken += sum(1 for f in found if f is not None)
        Spy.offered += len(leaves)
        return found


def _leaves(node):
    if isinstance(node, dict):
        if isinstance(node.get("type"), str):
            yield node
        else:
            for value in node.values():
                yield from _leaves(value)
    elif isinstance(node, list):
        for value in node:
            yield from _leaves(value)


def _mutate(dump: dict) -> dict:
    """A target that differs from ``dump`` in every way a compare reports."""
    out = copy.deepcopy(dump)
    names = list(out["data"])
    del out["data"][names[-1]]  # unmatched on the bench side
    tensors = [leaf for name in names[:-1] for leaf in _leaves(out["data"][name]) if "Norm" in leaf]
    scalars = [leaf for name in names[:-1] for leaf in _leaves(out["data"][name])
               if type(leaf.get("value")) is int]
    for i, leaf in enumerate(tensors):
        if i % 7 == 3 and isinstance(leaf["Norm"], float):
            leaf["Norm"] *= 1.001
        if i % 7 == 5 and isinstance(leaf["Max"], float):
            leaf["Max"] *= 0.999
    tensors[1]["Max"] = float("nan")
    tensors[2]["dtype"] = "torch.bfloat16"
    tensors[4]["shape"] = [*tensors[4]["shape"], 1]
    tensors[5]["Mean"] = None
    tensors[6]["requires_grad"] = not tensors[6].get("requires_grad")
    if scalars:
        scalars[0]["value"] += 1
    return out


def _run(target: Path, bench: Path, out: Path, path: type, registry=None) -> tuple[str, dict]:
    old = rank.ColumnarCompare
    rank.ColumnarCompare = path
    try:
        summary = run_compare(CompareOptions(target, bench, out, progress=False, stamp="20260101000000"),
                              registry or load_registry())
    finally:
        rank.ColumnarCompare = old
    csv = "".join(Path(r["csv"]).read_text() for r in summary["ranks"])
    return csv, dict(summary, output=None, ranks=[dict(r, csv=None) for r in summary["ranks"]])


def _same_both_ways(target: Path, bench: Path, where: Path) -> None:
    Spy.taken = Spy.offered = 0
    rows, row_summary = _run(target, bench, where / "rows", RowPath)
    columns, column_summary = _run(target, bench, where / "columns", Spy)
    assert columns == rows
    assert column_summary == row_summary
    assert Spy.taken >= Spy.offered // 2, (Spy.taken, Spy.offered)


def _mutated_pair(tmp_path: Path, dump: Path) -> tuple[Path, Path]:
    """(target, bench) rank folders: the fixture ``dump`` as bench, a mutated copy of it as target."""
    bench = tmp_path / "bench" / "rank0"
    shutil.copytree(dump, bench)
    target = tmp_path / "target" / "rank0"
    shutil.copytree(dump, target)
    (target / "dump.json").write_text(json.dumps(_mutate(json.loads((dump / "dump.json").read_text())), indent=1))
    return target, bench


@pytest.mark.parametrize("dump", DUMPS, ids=[p.relative_to(FIXTURES).parts[0] for p in DUMPS])
def test_columnar_and_row_paths_agree_on_msprobe_dumps(tmp_path, dump):
    _same_both_ways(*_mutated_pair(tmp_path, dump), tmp_path)


def _graph_rows(target: Path, bench: Path, out: Path, path: type) -> list:
    import sqlite3

    import probe_graph.precision as precision
    from probe_core.cli import main

    old = precision.ColumnarCompare
    precision.ColumnarCompare = path
    try:
        assert main(["graph", "-tp", str(target), "-gp", str(bench), "-o", str(out)]) == 0
    finally:
        precision.ColumnarCompare = old
    (db,) = out.glob("*.vis.db")
    conn = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    try:
        return conn.execute("SELECT * FROM tb_nodes ORDER BY id").fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("dump", DUMPS, ids=[p.relative_to(FIXTURES).parts[0] for p in DUMPS])
def test_the_graph_writes_the_same_nodes_on_both_paths(tmp_path, dump):
    target, bench = _mutated_pair(tmp_path, dump)
    Spy.taken = Spy.offered = 0
    rows = _graph_rows(target, bench, tmp_path / "rows", RowPath)
    columns = _graph_rows(target, bench, tmp_path / "columns", Spy)
    assert columns == rows
    assert Spy.taken >= Spy.offered // 2, (Spy.taken, Spy.offered)


def test_columnar_and_row_paths_agree_on_synthetic_dumps(tmp_path):
    entries = tiny_model_entries(1.01)
    nan = [list(e) for e in tiny_model_entries()]
    relu = nan[2][3][0]
    nan[2][3] = [np.where(relu > 0, np.inf, np.nan).astype(np.float32)]  # Inf/NaN outputs on one side
    write_dump(tmp_path / "t" / "rank0", entries + [("Tensor.add.0.forward", None, [1.0, 2], [3.0])])
    write_dump(tmp_path / "b" / "rank0", [tuple(e) for e in nan] + [("Tensor.add.0.forward", None, [1.0, 3], [3.0])])
    _same_both_ways(tmp_path / "t", tmp_path / "b", tmp_path)
    assert len(DUMPS) == 3  # the fixtures above are all there


def test_the_statistics_columns_equal_the_row_functions_on_edge_values():
    from probe_core.dump.leaves import TensorMeta
    from probe_modes.statistics import (StatColumns, discrepancy_columns, statistics_columns, statistics_metrics,
                                        stats_discrepancy)

    rng = np.random.default_rng(3)
    special = [0.0, -0.0, 1.0, -2.5, 3, float("nan"), float("inf"), -float("inf"), 1e-300, 7]
    rows = []
    for _ in range(3000):
        a = [float(v) if rng.random() < 0.5 else special[rng.integers(len(special))] for v in rng.normal(size=4)]
        b = [v if rng.random() < 0.4 else (v * (1 + rng.normal() * 1e-3) if rng.random() < 0.7
                                          else special[rng.integers(len(special))]) for v in a]
        shape = tuple(int(n) for n in rng.integers(0, 5, size=rng.integers(0, 3)))
        rows.append((TensorMeta("t", "output", "torch.Tensor", "torch.float32", shape, *a, is_tensor=True),
                     TensorMeta("b", "output", "torch.Tensor", "torch.float32", shape, *b, is_tensor=True)))
    target, bench = StatColumns.of(rows)
    columns = statistics_columns(target, bench)
    errs = discrepancy_columns(target, bench)
    for i, (a, b) in enumerate(rows):
        expected = statistics_metrics(a, b)
        got = {name: values[i] for name, values in columns.items()}
        assert json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True), (a.stats, b.stats)
        assert json.dumps(errs[i]) == json.dumps(stats_discrepancy(a, b)), (a.stats, b.stats, b.shape)


def _tricky_entries() -> list[tuple[str, dict]]:
    """Entries the flat reader must hand to the full walk, or read exactly as it does: values of one type
    standing in for another (``True == 1``, ``1.0 == 1``), NaN arguments, nulls, nesting, other key orders."""
    tensor = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 3], "Max": 1.0, "Min": -1.0,
              "Mean": 0.0, "Norm": 2.0, "requires_grad": False}
    variants = [dict(tensor), dict(tensor, shape=[2, True]), dict(tensor, shape=[2.0, 3]), dict(tensor, shape=[-2, 3]),
                dict(tensor, requires_grad=1), dict(tensor, requires_grad=True), dict(tensor, requires_grad=None), dict(tensor, Max=True),
                dict(tensor, Mean=None), dict(tensor, Norm="2.0"), dict(tensor, dtype=None), dict(tensor, shape="23"),
                dict(tensor, shape=[[2], 3]), dict(tensor, type="int"), dict(tensor, type=None),
                {k: tensor[k] for k in reversed(tensor)}, dict(tensor, data_name="x.pt"),
                {"type": "int", "value": 1}, {"type": "int", "value": True}, {"type": "float", "value": 1.0}, {"type": "float", "value": 1},
                {"type": "float", "value": float("nan")}, {"type": "float", "value": -0.0},
                {"type": "torch.Tensor", "value": 1}, {"type": "str", "value": "x"}, {"type": "int", "value": [1]}]
    entries = []
    for i, leaf in enumerate(variants):
        entries.append((f"Functional.f.{i}.forward", {"input_args": [tensor, leaf], "input_kwargs": {},
                                                       "output": [tensor]}))
        entries.append((f"Functional.g.{i}.forward", {"input_args": [leaf], "input_kwargs": {"eps": leaf},
                                                       "output": [[tensor, leaf]]}))
        entries.append((f"Functional.h.{i}.forward", {"input_args": None, "output": {"type": "x"}}))
        entries.append((f"Module.m.M.forward.{i}", {"input_args": [], "input_kwargs": {"type": "x", "a": leaf},
                                                    "output": [leaf], "parameters": {"weight": tensor}}))
        entries.append((f"Module.m.M.parameters_grad.{i}", {"weight": leaf}))
    return entries


def test_the_flat_reader_gives_the_forms_of_the_full_walk():
    """Every entry of the fixtures, their mutated copies and the tricky entries gets the same compact form
    (the same signature object, the same statistics) as the full walk alone gives it, read in any order."""
    from probe_compare.columnar import Forms

    entries = _tricky_entries()
    for dump in DUMPS:
        data = json.loads((dump / "dump.json").read_text())
        entries += list(data["data"].items()) + list(_mutate(data)["data"].items())
    for order in (entries, entries[::-1], entries + entries):
        forms = Forms()
        for name, value in order:
            got = forms(name, value)
            walked = forms._walked(name, value)
            assert repr(got) == repr(walked), (name, value)
            assert got is None or got[0] is walked[0], (name, value)
    assert forms.by_key, "the flat reader read no entry"


def test_plain_facts_say_what_the_row_path_says(tmp_path):
    """The judge's facts of an entry the columnar path compared equal the row path's; its worst input and
    output, made when first shown, read as the row path's texts, and a pickled one is that text."""
    import pickle

    from probe_compare.comparator import load_comparators
    from probe_compare.entries import compare_entry
    from probe_compare.rank import detect_mode
    from probe_compare.judge import Reason, plain_facts
    from probe_core.dump.reader import RankDump

    registry = load_registry()
    checked = 0
    for dump in DUMPS:
        target, bench = _mutated_pair(tmp_path / dump.relative_to(FIXTURES).parts[0], dump)
        ours, theirs = RankDump(target / "dump.json"), RankDump(bench / "dump.json")
        mode = detect_mode(ours, theirs, registry)
        comparators = load_comparators(registry, mode.name)
        columnar = ColumnarCompare(mode, comparators, "noise")
        by_name = {entry.name: entry for entry in theirs.entries()}
        pairs = [(entry, by_name[entry.name]) for entry in ours.entries() if entry.name in by_name]
        for (npu, other), plain in zip(pairs, columnar.compare_entries(pairs)):
            if plain is None:
                continue
            lazy = plain_facts(npu.index, npu.parent, plain, mode)
            eager = compare_entry(npu, other, mode, comparators).facts
            reasons = [lazy.worst_input, lazy.worst_output]
            assert all(type(r) is Reason for r in reasons if r), reasons
            assert [f"{r}" for r in reasons] == [eager.worst_input, eager.worst_output]
            assert pickle.loads(pickle.dumps(lazy)) == eager
            assert (lazy.stats_out(), lazy.stats_in()) == (eager.stats_out(), eager.stats_in())
            checked += 1
    assert checked > 20, checked


def test_plain_facts_of_a_sum_that_cancels_are_the_row_paths(tmp_path):
    """A bias gradient that cancels (0 in exact arithmetic, 1e-9 left of its 1e-3 terms) and differs by half on
    the other side: the columnar path measures it against its terms' magnitude from the statistics, as the
    row path does from the leaves, and both find roundoff, not an error."""
    from probe_compare.comparator import load_comparators
    from probe_compare.entries import compare_entry
    from probe_compare.judge import plain_facts
    from probe_compare.rank import detect_mode
    from probe_core.dump.reader import RankDump

    grad = np.linspace(-1.0e-3, 1.4e-3, 64, dtype=np.float32)
    bias = np.array([2.6e-9, -2.5e-9, 1e-10, 3e-10], dtype=np.float32)
    name = "Functional.conv2d.0.backward"
    ours = RankDump(write_dump(tmp_path / "target", [(name, None, [grad], [grad, bias])]) / "dump.json")
    theirs = RankDump(write_dump(tmp_path / "bench", [(name, None, [grad], [grad, bias * 1.5])]) / "dump.json")
    registry = load_registry()
    mode = detect_mode(ours, theirs, registry)
    comparators = load_comparators(registry, mode.name)
    (npu,), (other,) = list(ours.entries()), list(theirs.entries())
    (plain,) = ColumnarCompare(mode, comparators, "noise").compare_entries([(npu, other)])
    assert plain is not None, "the entry took the row path"
    lazy = plain_facts(npu.index, npu.parent, plain, mode, texts=True)
    eager = compare_entry(npu, other, mode, comparators).facts
    assert lazy == eager
    assert 0 < lazy.out_err < 1e-5 < max(plain.errs)  # measured against the terms, not its own scale


def test_rows_spooled_as_text_give_the_csv_of_rows_spooled_as_values(tmp_path, monkeypatch):
    """With the CSV alone, rows wait for the job's verdicts as CSV text (an entry a verdict changes is
    parsed back, marked and written again); with --xlsx they wait as values. Both CSVs are the same."""
    from probe_compare import output

    parsed, original = [], output.csv_rows
    monkeypatch.setattr(output, "csv_rows", lambda text: parsed.append(text) or original(text))
    for dump in DUMPS:
        where = tmp_path / dump.relative_to(FIXTURES).parts[0]
        target, bench = _mutated_pair(where, dump)
        texts = []
        for xlsx in (False, True):
            summary = run_compare(CompareOptions(target, bench, where / f"out{xlsx}", progress=False,
                                                 stamp="20260101000000", xlsx=xlsx), load_registry())
            texts.append(Path(summary["ranks"][0]["csv"]).read_text())
        assert texts[0] == texts[1], dump
    assert parsed  # entries the job's verdicts changed were parsed back, marked and written again


def test_plain_rows_written_as_text_quote_as_the_csv_writer_does(tmp_path):
    """Plain entries reach the CSV as text written a column at a time (render.render_plains); names, dtypes and
    stacks with commas, quotes and line breaks are quoted as csv.writer quotes them."""
    names = ['Functional.lin,ear.0.forward', 'Torch.a"dd.0.forward', "Tensor.mul\r\n.0.forward", "Torch.neg.0.forward"]
    for side, scale in (("t", 1.0), ("b", 1.0001)):
        folder = tmp_path / side / "rank0"
        write_dump(folder, [(name, None, [np.arange(6.0).reshape(2, 3) * scale, 2], [np.ones(4) * scale])
                            for name in names])
        dump = json.loads((folder / "dump.json").read_text())
        dump["data"][names[3]]["output"][0]["dtype"] = 'torch.float32,"odd"'
        (folder / "dump.json").write_text(json.dumps(dump, indent=1))
        (folder / "stack.json").write_text(json.dumps({"0": [names[:2], ["File \"m.py\", line 1, in f, it's\n x"]]}))
    Spy.taken = Spy.offered = 0
    texts = []
    for xlsx in (False, True):
        old = rank.ColumnarCompare
        rank.ColumnarCompare = Spy
        try:
            summary = run_compare(CompareOptions(tmp_path / "t", tmp_path / "b", tmp_path / f"out{xlsx}",
                                                 progress=False, stamp="20260101000000", xlsx=xlsx), load_registry())
        finally:
            rank.ColumnarCompare = old
        texts.append(Path(summary["ranks"][0]["csv"]).read_text())
    assert texts[0] == texts[1]
    assert Spy.taken == 2 * len(names)  # every entry plain, on both runs
    assert 'Functional.lin,ear' in texts[0] and '"Torch.a""dd.0.forward.input.0"' in texts[0]


def test_csv_field_is_what_the_csv_writer_writes():
    import csv
    import io
    import random

    from probe_compare.output import csv_field

    rnd = random.Random(3)
    alphabet = 'ab ,"\r\n\t\'é;'
    for _ in range(2000):
        fields = ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 6))) for _ in range(rnd.randint(2, 5))]
        buffer = io.StringIO()
        csv.writer(buffer).writerow(fields)
        assert ",".join(csv_field(f) for f in fields) + "\r\n" == buffer.getvalue(), fields


def csv_writer_texts(rows: list[list[str]], counts: list[int]) -> list[str]:
    """What csv.writer writes for each ``counts`` run of ``rows``."""
    import csv
    import io

    texts, at = [], 0
    for count in counts:
        buffer = io.StringIO()
        csv.writer(buffer).writerows(rows[at:at + count])
        texts.append(buffer.getvalue())
        at += count
    return texts


@pytest.mark.parametrize("native", [True, False], ids=["C", "Python"])
def test_join_rows_writes_what_the_csv_writer_writes(monkeypatch, native):
    """Plain rows are joined a chunk at a time (output.join_rows: in C where built, for ASCII cells): each
    run of rows is the text csv.writer writes for them."""
    import random

    from probe_compare import output

    if native:
        assert output.native_join_rows is not None  # probe-core was built with its C helper
    else:
        monkeypatch.setattr(output, "native_join_rows", None)
    rnd = random.Random(5)
    for alphabet in ('ab ,"\r\n.0', 'ab ,é"'):  # ASCII; and not (the C helper leaves that to Python)
        for _ in range(300):
            # two cells at least, as every result row has (csv.writer quotes the one empty cell of a row of one)
            width, counts = rnd.randint(2, 6), [rnd.randint(1, 4) for _ in range(rnd.randint(1, 5))]
            rows = [["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 5))) for _ in range(width)]
                    for _ in range(sum(counts))]
            columns = [[output.csv_field(row[c]) for row in rows] for c in range(width)]
            assert output.join_rows(columns, counts) == csv_writer_texts(rows, counts), (rows, counts)
    if native:
        with pytest.raises(ValueError):  # counts that do not sum to the rows
            output.native_join_rows([["a", "b"]], [1])


@pytest.mark.parametrize("native", [True, False], ids=["C", "Python"])
def test_join_rows_writes_blocks_of_numbers_as_repr(monkeypatch, native):
    """Columns of numbers (output.Numbers: a block of columns, row-major; a suffix; a text for zero) are
    written as csv.writer writes repr of each, between text columns, without a str per number in C."""
    import random

    from probe_compare import output

    if native:
        assert output.native_join_rows is not None
    else:
        monkeypatch.setattr(output, "native_join_rows", None)
    rnd = random.Random(11)
    specials = [0.0, -0.0, float("nan"), float("inf"), -float("inf"), 1e-05, 1e16, 1.5e+300, 5e-324, 0.0001,
                123456789012345.6, 3, -7, 0, 2**63 - 1, 2**70, 0.1 + 0.2]

    def number():
        return rnd.choice(specials) if rnd.random() < 0.4 else rnd.uniform(-1, 1) * 10.0 ** rnd.randint(-30, 30)

    for _ in range(300):
        counts = [rnd.randint(1, 4) for _ in range(rnd.randint(1, 4))]
        n = sum(counts)
        width = rnd.randint(1, 4)
        block = [number() for _ in range(n * width)]
        percent = [number() for _ in range(n)]
        zero = rnd.choice([None, "0%"])
        names = [rnd.choice(["a", "b,c", 'd"e']) for _ in range(n)]
        rows = [[names[r], *(repr(v) for v in block[r * width:(r + 1) * width]),
                 zero if zero is not None and percent[r] == 0 else repr(percent[r]) + "%"] for r in range(n)]
        columns = [[output.csv_field(name) for name in names], output.Numbers(block, width),
                   output.Numbers(percent, 1, "%", zero)]
        assert output.join_rows(columns, counts) == csv_writer_texts(rows, counts), (rows, counts)
    if native:  # a block whose text is not its numbers, or of another number of rows
        with pytest.raises(ValueError):
            output.native_join_rows([["a"], (b"[1.0,2.0]", [1.0], 1, "", None)], [1])
        with pytest.raises(ValueError):
            output.native_join_rows([["a"], (b"[1.0,2.0]", [1.0, 2.0], 1, "", None)], [1])


def test_a_run_of_plain_entries_the_verdicts_name_is_written_entry_by_entry(tmp_path, monkeypatch):
    """With the CSV alone, consecutive plain entries are spooled as one run and written at once; a run that
    holds an entry the job's verdicts make an error is written entry by entry, that entry marked. The CSV is
    the row path's."""
    from probe_compare import output

    write_dump(tmp_path / "t" / "rank0", tiny_model_entries(1.01))
    write_dump(tmp_path / "b" / "rank0", tiny_model_entries())
    for side in ("t", "b"):  # rank 1: the same on both sides, no verdicts
        write_dump(tmp_path / side / "rank1", tiny_model_entries())
    spooled, judged = [], {}  # (spool, a run's entries); spool -> the entries its rank's verdicts name
    read, write_rank = output.RowSpool.read, engine.write_rank
    monkeypatch.setattr(output.RowSpool, "read", staticmethod(lambda path: _spy(path, read, spooled)))
    monkeypatch.setattr(engine, "write_rank", lambda pending, options: judged.update(
        {pending.spool: set(pending.errors)}) or write_rank(pending, options))
    _same_both_ways(tmp_path / "t", tmp_path / "b", tmp_path)
    named = [bool(run & judged[spool]) for spool, run in spooled if run is not None]
    assert True in named  # a run the verdicts name, written entry by entry
    assert False in named  # and one written at once (rank 1's)


def _spy(path, read, seen):
    """RowSpool.read, noting (spool, the entries of each run it reads)."""
    for item in read(path):
        seen.append((path, set(item[0]) if type(item[0]) is tuple else None))
        yield item


class MaxMoved:
    """A third-party comparator as docs/plugins.md shows one: ``compare`` and ``judge``, no column form."""

    columns = ["MaxMoved"]

    def compare(self, pair):
        if not isinstance(pair.npu.max, float) or not isinstance(pair.bench.max, float):
            return {}
        return {"MaxMoved": abs(pair.npu.max - pair.bench.max)}

    def judge(self, row):
        value = row.metrics.get("MaxMoved")
        return ("warning", f"max moved by {value:.3g}") if isinstance(value, float) and value > 0 else None


class MaxMovedPlugin:
    @hookimpl
    def probe_comparators(self):
        return [ComparatorSpec("max_moved", "statistics", "|max difference|", MaxMoved)]


@pytest.mark.parametrize("dump", DUMPS[:1], ids=[p.relative_to(FIXTURES).parts[0] for p in DUMPS[:1]])
def test_a_comparator_without_a_column_form_costs_only_its_rows(tmp_path, dump):
    """The other comparators keep their column form: most entries still take the columnar path, the rows the
    row comparator's judge raises are flagged as on the row path, and the CSVs are the same."""
    target, bench = _mutated_pair(tmp_path, dump)
    registry = load_registry(extra=[("max_moved", MaxMovedPlugin())])
    Spy.taken = Spy.offered = 0
    rows, _ = _run(target, bench, tmp_path / "rows", RowPath, registry)
    columns, _ = _run(target, bench, tmp_path / "columns", Spy, registry)
    assert columns == rows
    assert "MaxMoved" in rows.splitlines()[0] and "max moved by" in rows
    assert Spy.taken >= Spy.offered // 2, (Spy.taken, Spy.offered)
