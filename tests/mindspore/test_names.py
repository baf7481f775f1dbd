"""Names, nesting and file layout of a MindSpore dump against msprobe's own dump of the same network."""

from __future__ import annotations

import csv

from .conftest import FIXTURE, read_json


def test_header_and_files(fixture_net_dump):
    dump = read_json(fixture_net_dump / "dump.json")
    assert {k: dump[k] for k in ("task", "level", "framework", "dump_data_dir")} == \
        {"task": "statistics", "level": "mix", "framework": "mindspore", "dump_data_dir": None}
    assert {p.name for p in fixture_net_dump.iterdir()} == {"dump.json", "stack.json", "construct.json"}


def test_entry_names_and_order_match_msprobe(fixture_net_dump):
    ours = list(read_json(fixture_net_dump / "dump.json")["data"])
    theirs = list(read_json(FIXTURE / "dump.json")["data"])
    assert ours == theirs
    assert "Cell.blocks.0.attn.qkv.Dense.forward.0" in ours and "Mint.matmul.0.forward" in ours
    assert "Functional.gelu.0.forward" in ours and "Tensor.__truediv__.0.forward" in ours
    assert "Primitive.matmul.MatMul.0.forward" in ours and "Cell.head.Dense.parameters_grad.0" in ours


def test_construct_nesting_matches_msprobe(fixture_net_dump):
    ours = read_json(fixture_net_dump / "construct.json")
    theirs = read_json(FIXTURE / "construct.json")
    assert ours == theirs


def test_entry_keys_match_msprobe(fixture_net_dump):
    ours = read_json(fixture_net_dump / "dump.json")["data"]
    theirs = read_json(FIXTURE / "dump.json")["data"]
    for name, entry in theirs.items():
        mine = ours[name]
        assert list(mine) == list(entry), name
        if "parameters" in entry:
            assert sorted(mine["parameters"]) == sorted(entry["parameters"]), name
    record = ours["Cell.blocks.0.ln1.LayerNorm.forward.0"]["input_args"][0]
    assert list(record) == ["type", "dtype", "shape", "Max", "Min", "Mean", "Norm"]  # no requires_grad, like msprobe
    # nn.LayerNorm's gamma.astype(dtype) is the Tensor.to it delegates to, as msprobe records it
    assert ours["Tensor.to.0.forward"]["input_args"][1] == {"type": "mindspore.dtype", "value": "Float32"}


def test_same_data_gives_msprobes_statistics(fixture_net_dump):
    """The fixture was made from the same seeded input: the first cell's input statistics agree."""
    ours = read_json(fixture_net_dump / "dump.json")["data"]["Cell.blocks.0.ln1.LayerNorm.forward.0"]
    theirs = read_json(FIXTURE / "dump.json")["data"]["Cell.blocks.0.ln1.LayerNorm.forward.0"]
    for key in ("Max", "Min", "Mean", "Norm"):
        mine, msprobe = ours["input_args"][0][key], theirs["input_args"][0][key]
        assert abs(mine - msprobe) <= 1e-6 * max(1, abs(msprobe)), key


def test_backward_of_undifferentiated_inputs_is_null(fixture_net_dump):
    data = read_json(fixture_net_dump / "dump.json")["data"]
    assert data["Cell.blocks.0.Block.backward.0"]["output"] == [None]
    assert data["Cell.blocks.0.ln1.LayerNorm.backward.0"]["output"] == [None]
    grads = data["Cell.blocks.1.fc1.Dense.backward.0"]
    assert grads["output"][0]["shape"] == [4, 8, 32] and grads["input"][0]["shape"] == [4, 8, 128]
    assert data["Tensor.__add__.0.backward"]["output"][0] is None  # x + attn(...): x is the network input


def test_stack_json_layout(fixture_net_dump):
    stacks = read_json(fixture_net_dump / "stack.json")
    names, lines = stacks["0"]
    assert names and all(line.startswith("File ") for line in lines)
    assert not any("probe_mindspore" in line or "probe_core" in line for _, (_, ls) in stacks.items() for line in ls)
    assert any("ms_net.py" in line for _, (_, ls) in stacks.items() for line in ls)


def test_probe_compare_against_msprobes_own_dump(fixture_net_dump, tmp_path):
    """Same network, seed and data as msprobe's run: every entry matches, every forward value agrees."""
    from probe_core.compare.engine import CompareOptions, run_compare
    from probe_core.plugins import load_registry

    out = tmp_path / "out"
    summary = run_compare(CompareOptions(FIXTURE, fixture_net_dump, out, xlsx=False, progress=False), load_registry())
    with open(next(out.glob("*.csv")), newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert summary["counts"]["unmatched"] == 0
    not_passing = {r["NPU Name"] for r in rows if r["Result"] != "pass"}
    # msprobe records ops.cross_entropy with its default arguments filled in (positional 2..5)
    assert {n for n in not_passing if ".forward." in n} == \
        {f"Functional.cross_entropy.0.forward.input.{i}" for i in range(2, 6)}
    # msprobe writes a primitive's input gradients in reverse order (bias first), probe in input order; and
    # msprobe writes a gradient for the network input x in x + attn(...), which gets none (probe: null)
    backward = {n.split(".backward")[0] for n in not_passing if ".backward." in n}
    assert {n for n in backward if not n.startswith("Primitive.")} == {"Tensor.__add__.0"}
    data = read_json(fixture_net_dump / "dump.json")["data"]
    assert [g["shape"] for g in data["Primitive.bias_add.BiasAdd.4.backward"]["output"]] == [[4, 10], [10]]
