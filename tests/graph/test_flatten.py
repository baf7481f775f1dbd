"""A node's input/output tables: the C flattener (``probe_core._reprs.flatten_entry``) gives the Python one's."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from probe_graph import flatten
from tests.graph.helpers import MS_DUMP, TORCH_DUMP

pytestmark = pytest.mark.skipif(flatten.flatten_entry is flatten.python_flatten_entry,
                                reason="the C extension is not built")


def _same(name, entry):
    ours, python = flatten.flatten_entry(name, entry), flatten.python_flatten_entry(name, entry)
    assert [list(table.items()) for table in ours] == [list(table.items()) for table in python], name  # order too


@pytest.mark.parametrize("dump", [TORCH_DUMP / "dump.json", MS_DUMP / "dump.json"])
def test_real_entries_flatten_as_in_python(dump):
    data = json.loads(dump.read_text())["data"]
    assert data
    for name, entry in data.items():
        _same(name, entry)


LEAF = st.one_of(st.none(), st.integers(), st.floats(allow_nan=False), st.text(max_size=3),
                 st.fixed_dictionaries({"type": st.text(max_size=3)}, optional={"Max": st.floats(allow_nan=False)}))
VALUES = st.recursive(LEAF, lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                                                    st.dictionaries(st.one_of(st.text(max_size=3), st.integers()),
                                                                    inner, max_size=3)), max_leaves=12)
FIELDS = st.sampled_from(["input_args", "input", "input_kwargs", "parameters", "output", "weight", "other"])


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["Functional.add.0.forward", "Functional.ädd.0.forward",
                        "Module.fc.Linear.parameters_grad.0"]),
       st.one_of(st.dictionaries(FIELDS, VALUES, max_size=4), VALUES))
def test_any_entry_flattens_as_in_python(name, entry):
    _same(name, entry)


def test_a_too_deep_entry_is_a_recursion_error_not_a_crash():
    deep: dict = {}
    inner = deep
    for _ in range(100_000):
        inner["x"] = {}
        inner = inner["x"]
    with pytest.raises(RecursionError):
        flatten.flatten_entry("Functional.add.0.forward", {"input": deep})
