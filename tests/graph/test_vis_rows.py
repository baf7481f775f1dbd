"""The viewer's input/output columns: the C writer (``probe_core._reprs.tables_json``) gives format_table's text."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probe_graph import vis_db

TENSOR = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [8, 64], "Max": 1.5, "Min": -2.25e-07,
          "Mean": float("nan"), "Norm": float("inf"), "requires_grad": True}
TABLES = [
    {},
    {"input.0": TENSOR, "input.1": {"type": "int", "value": 3}, "input.2": {"type": "float", "value": -1e16}},
    {"output.0": {"value": None}, "output.1": {"type": "bool", "value": True},
     "output.2": {"type": "slice", "value": [1, None, 2]}, "output.3": {"type": "str", "value": 'a"b\\c\n\x01\x7f'}},
    {"input.0": {**TENSOR, "data_name": "Functional.add.0.forward.input.0.pt", "Max": None}},
    {"kwargs.x": {"type": "torch.Tensor", "dtype": "torch.bfloat16", "shape": [], "Max": 0.0, "Min": -0.0,
                  "Mean": 1e-05, "Norm": 123456789.125, "md5": "0123abcd"}},
]
METRICS = [None, {"input.0": {"MaxAbsErr": "0.5", "Max": "overridden", "Requires": "x"}, "input.9": {"a": "b"}},
           {"output.3": {}}, {"input.0": {"Cosine": "1.0"}}, None]


def python_texts(tables, metrics):
    texts = iter(vis_db.table_floats(tables))
    return [vis_db.format_table(table, extra, texts) for table, extra in zip(tables, metrics)]


def test_tables_json_writes_format_tables_text():
    assert vis_db.tables_json is not None, "probe_core._reprs was not built (no C compiler?)"
    written = vis_db.tables_json(TABLES, METRICS)  # each float's repr written in C
    assert written == python_texts(TABLES, METRICS)
    assert vis_db.tables_json(TABLES, METRICS, vis_db.table_floats(TABLES)) == written  # the texts given
    assert '"Min":"-2.25e-07","Mean":"nan","Norm":"inf"' in written[1]
    shown = json.loads(written[1])
    assert shown["input.0"]["Max"] == "overridden" and shown["input.0"]["MaxAbsErr"] == "0.5"
    assert shown["input.1"] == {"type": "int", "value": "3", "Max": "3", "Min": "3", "Mean": "3", "Norm": "3",
                                "dtype": "<class int>", "shape": "[]", "requires_grad": "null", "data_name": "-1"}
    assert json.loads(written[2])["output.0"] == {"value": "null"}
    assert vis_db.format_tables(TABLES, METRICS) == written


def test_tables_json_refuses_what_it_does_not_write(monkeypatch):
    tables = [{"input.0": {**TENSOR, "dtype": "torch.float32é"}}]
    with pytest.raises(ValueError):
        vis_db.tables_json(tables, [None], vis_db.table_floats(tables))
    with pytest.raises(ValueError):
        vis_db.tables_json(tables, [None])
    with pytest.raises(ValueError):  # metrics as columns: two columns for one name
        vis_db.tables_json([{"input.0": TENSOR}], [(("Cosine",), {"input.0": 0}, [["1.0"], ["2.0"]])])
    with pytest.raises(ValueError):  # a row beyond the column
        vis_db.tables_json([{"input.0": TENSOR}], [(("Cosine",), {"input.0": 1}, [["1.0"]])])
    with pytest.raises(ValueError):  # a float short
        vis_db.tables_json(TABLES, METRICS, vis_db.table_floats(TABLES)[:-1])
    assert vis_db.format_tables(tables, [None]) == python_texts(tables, [None])  # falls back to Python
    monkeypatch.setattr(vis_db, "tables_json", None)
    assert vis_db.format_tables(TABLES, METRICS) == python_texts(TABLES, METRICS)


scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                    st.text(max_size=6), st.lists(st.one_of(st.integers(-2**70, 2**70), st.booleans()), max_size=3))
fields = st.sampled_from(["type", "dtype", "shape", "Max", "Min", "Mean", "Norm", "value", "requires_grad",
                          "data_name", "md5"])
keys = st.one_of(st.sampled_from(["input.0", "input.1", "output.0"]), st.text(max_size=8))  # shared: extras merge
descriptions = st.dictionaries(fields, scalars, max_size=8)
tables = st.dictionaries(keys, descriptions, max_size=4)
metric_names = st.one_of(fields, st.text(max_size=4))
#: fmt % x as tables_json writes it (%r, %.<n>g and a tail), and ones it leaves to Python
formats = st.sampled_from(["%r", "%.6g%%", "%.1g", "%.17g e", "%.3g%%%%", "%.6f", "%d", "%.18g"])
WRITTEN_IN_C = {"%r", "%.6g%%", "%.1g", "%.17g e", "%.3g%%%%"}
#: (names, {key: row}, columns): shown_columns' columns, texts or (fmt, floats)
extra_columns = st.tuples(st.lists(metric_names, unique=True, max_size=3), st.integers(1, 3)).flatmap(
    lambda shape: st.tuples(
        st.just(tuple(shape[0])), st.dictionaries(keys, st.integers(0, shape[1] - 1), max_size=3),
        st.tuples(*[st.one_of(st.lists(st.text(max_size=4), min_size=shape[1], max_size=shape[1]),
                              st.tuples(formats, st.lists(st.floats(), min_size=shape[1], max_size=shape[1])))
                    for _ in shape[0]]).map(list)))
extras = st.one_of(st.none(), st.dictionaries(keys, st.dictionaries(metric_names, st.text(max_size=4), max_size=3)),
                   extra_columns)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(tables, extras), max_size=5))
def test_format_tables_equals_format_table(pairs):
    chosen = [table for table, _ in pairs]
    metrics = [extra for _, extra in pairs]
    expected = python_texts(chosen, metrics)
    assert vis_db.format_tables(chosen, metrics) == expected
    for floats in (None, vis_db.table_floats(chosen)):  # repr'd in C, or the texts given
        try:
            assert vis_db.tables_json(chosen, metrics, floats) == expected
        except ValueError:  # refused only for text beyond ASCII, or a format it leaves to Python
            assert not "".join(expected).isascii() or any(
                column[0] not in WRITTEN_IN_C for extra in metrics if extra.__class__ is tuple for column in extra[2]
                if column.__class__ is tuple)
    for text in expected:  # the viewer reads every column as JSON
        assert isinstance(json.loads(text), dict)


def test_rows_order_and_links_follow_the_tree():
    """node_order is the post-order (children first, in call order) and matched_node_link the partner's path from
    the root, on a nested graph with a backward mirrored under its forward's parent and parameter gradients."""
    from probe_graph.api import build_graph
    from probe_graph.match import match_graphs

    construct = {"Module.a.A.forward.0": None, "Module.a.b.B.forward.0": "Module.a.A.forward.0",
                 "Functional.relu.0.forward": "Module.a.b.B.forward.0", "Tensor.add.0.forward": None,
                 "Tensor.add.1.forward": None, "Module.a.A.backward.0": None,
                 "Module.a.b.B.backward.0": None, "Functional.relu.0.backward": "Module.a.b.B.backward.0"}
    data = {name: {"input_args": [TENSOR], "output": [TENSOR]} for name in construct}
    data["Module.a.b.B.parameters_grad.0"] = {"weight": [TENSOR]}
    target, bench = (build_graph(construct, data, source=side) for side in ("NPU", "Bench"))
    assert target.renumber() == len(target.nodes)
    match_graphs(target, bench)

    def postorder(node):
        for child in node.children:
            yield from postorder(child)
        yield node

    def path(node):
        return (path(node.parent) if node.parent is not None else []) + [node.name]

    rows = {row[3]: row for row in vis_db.graph_rows(target).node_rows()}
    assert [rows[node.name][2] for node in postorder(target.root)] == list(range(len(target.nodes)))
    assert all(json.loads(rows[node.name][10]) == path(node.matched) for node in target.nodes.values())
    assert path(bench["Module.a.b.B.parameters_grad.0"]) == ["DefaultModel", "Module.a.A.backward.0",
                                                             "Module.a.b.B.backward.0", "Module.a.b.B.parameters_grad.0"]


def test_the_graph_takes_statistics_metrics_as_columns():
    """StatisticsMode.shown_columns (the fast form of shown_rows the graph asks for) gives shown_rows' texts as
    columns, and a table's metrics in that form are written as the same text as in dicts."""
    from probe_modes.md5 import Md5Mode
    from probe_modes.statistics import DIFF_COLUMNS, RELATIVE_COLUMNS, StatisticsMode

    mode, names = StatisticsMode(), DIFF_COLUMNS + RELATIVE_COLUMNS
    rows = [(-0.5, 0.25, 1e-09, float("nan"), 3.0, 1e300, -0.0, float("inf")), (2.0, "N/A", 1.5, 0.0, 0.1, 0.2, 1, 2)]
    assert Md5Mode().shown_columns(names, rows) is None  # shows its metrics otherwise: the graph takes its rows
    shown_names, columns = mode.shown_columns(names, rows)
    as_dicts = mode.shown_rows(names, rows)
    assert [dict(zip(shown_names, cells)) for cells in zip(*map(vis_db.column_texts, columns))] == as_dicts
    table = {"input.0": TENSOR, "input.1": {"type": "int", "value": 3}}
    in_columns = (shown_names, {"input.0": 0, "input.1": 1}, columns)
    in_dicts = {"input.0": as_dicts[0], "input.1": as_dicts[1]}
    assert vis_db.format_tables([table], [in_columns]) == vis_db.format_tables([table], [in_dicts]) \
        == [vis_db.format_table(table, in_columns)]
    assert json.loads(vis_db.format_tables([table], [in_columns])[0])["input.0"]["MaxRelativeErr"] == "300%"


def test_statistics_columns_are_written_as_shown_metrics_shows_them():
    """The statistics metrics reach tables_json as floats with a format (``(fmt, floats)``) and are written in C
    as shown_metrics writes each (MaxAbsErr's repr of the size, relative errors in percent to 6 digits, NaN
    and the infinities as their repr), for any double: random bit patterns, subnormals, ones that overflow
    times 100."""
    import random
    import struct

    from probe_modes.statistics import DIFF_COLUMNS, RELATIVE_COLUMNS, StatisticsMode

    mode, names, rnd = StatisticsMode(), DIFF_COLUMNS + RELATIVE_COLUMNS, random.Random(11)
    doubles = [struct.unpack("<d", struct.pack("<Q", rnd.getrandbits(64)))[0] for _ in range(3000)]
    doubles += [0.0, -0.0, 5e-324, 1.7976931348623157e308, 9.9999995e-7, 0.0123456785, float("nan"), float("inf")]
    for finite_only in (True, False):  # one overflowing value sends its column as texts
        pool = [x for x in doubles if x - x == 0.0 and abs(x) < 1e300] if finite_only else doubles
        rows = [tuple(pool[(k + 7 * i) % len(pool)] for i in range(len(names))) for k in range(len(pool))]
        shown_names, columns = mode.shown_columns(names, rows)
        assert all(column.__class__ is tuple for column in columns) == finite_only
        tables = [{f"input.{k}": TENSOR} for k in range(len(rows))]
        extras = [(shown_names, {f"input.{k}": k}, columns) for k in range(len(rows))]
        expected = [vis_db.format_table(table, {f"input.{k}": mode.shown_metrics(dict(zip(names, row)))})
                    for k, (table, row) in enumerate(zip(tables, rows))]
        assert vis_db.tables_json(tables, extras) == expected


@pytest.mark.parametrize("fmt", ["%.6g%%", "%.1g", "%.3g", "%.9g e"])
def test_shown_float_columns_are_python_percent_format_at_every_magnitude(fmt):
    """A (fmt, floats) column written in C (its digits from the float times a power of ten, the exact value
    left to Python near a tie) is ``fmt % x`` for values of every magnitude, few and many digits, and ties."""
    rnd = random.Random(5)
    values = []
    for _ in range(4000):
        value = rnd.choice((1, -1)) * 10 ** rnd.uniform(-19, 19)
        values += [value, round(value, rnd.randint(0, 9)), round(value * 1000) / 1000]
    values += [0.0, -0.0, 0.5, 2.5, 100000.5, 999999.5, 9999995.0, 0.0001234565, 99999.95, 1e16, 1e17, 1e-17,
               5e-324, 1.7976931348623157e308, float("nan"), float("-inf")]
    keys = [f"input.{at}" for at in range(len(values))]
    tables = [{key: {"Max": 1.0} for key in keys}]
    extras = [(("Shown",), dict(zip(keys, range(len(values)))), [(fmt, values)])]
    written = json.loads(vis_db.tables_json(tables, extras)[0])
    assert [written[key]["Shown"] for key in keys] == [fmt % x if x - x == 0.0 else repr(x) for x in values]


def test_a_shown_column_named_as_a_field_overrides_it_and_the_floats_after_stay_in_place():
    """A metric named as a description field (met after some float fields were written) replaces that field, and
    the descriptions after it still get their own floats."""
    tensor = {"type": "torch.Tensor", "Max": 1.25, "Min": -3e-07, "Mean": 0.5, "Norm": 7.75}
    tables = [{"input.0": dict(tensor), "input.1": {**tensor, "Max": 2.5}}, {"output.0": {**tensor, "Min": 0.125}}]
    columns = [("%r", [0.1, 0.2]), ["x", "y"]]
    extras = [(("Diff", "Mean"), {"input.0": 0, "input.1": 1}, columns), (("Diff", "Mean"), {"output.0": 1}, columns)]
    written = vis_db.tables_json(tables, extras)
    assert written == python_texts(tables, extras)
    assert json.loads(written[0])["input.0"]["Mean"] == "x" and json.loads(written[1])["output.0"]["Min"] == "0.125"
