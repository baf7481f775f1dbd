"""Names, nesting and file layout of a MindSpore dump against msprobe's own dump of the same network."""

from __future__ import annotations

from .conftest import FIXTURE, read_json

#: msprobe 26.2 records LayerNorm's ``gamma.astype(...)`` under the name of the ``Tensor.to`` it calls inside;
#: probe records the outermost call the user code made (``Tensor.astype``).
OUR_NAME_FOR = {"Tensor.to.": "Tensor.astype."}


def _ours(name: str) -> str:
    for theirs, ours in OUR_NAME_FOR.items():
        name = name.replace(theirs, ours)
    return name


def test_header_and_files(fixture_net_dump):
    dump = read_json(fixture_net_dump / "dump.json")
    assert {k: dump[k] for k in ("task", "level", "framework", "dump_data_dir")} == \
        {"task": "statistics", "level": "mix", "framework": "mindspore", "dump_data_dir": None}
    assert {p.name for p in fixture_net_dump.iterdir()} == {"dump.json", "stack.json", "construct.json"}


def test_entry_names_and_order_match_msprobe(fixture_net_dump):
    ours = list(read_json(fixture_net_dump / "dump.json")["data"])
    theirs = [_ours(name) for name in read_json(FIXTURE / "dump.json")["data"]]
    assert ours == theirs
    assert "Cell.blocks.0.attn.qkv.Dense.forward.0" in ours and "Mint.matmul.0.forward" in ours
    assert "Functional.gelu.0.forward" in ours and "Tensor.__truediv__.0.forward" in ours
    assert "Primitive.matmul.MatMul.0.forward" in ours and "Cell.head.Dense.parameters_grad.0" in ours


def test_construct_nesting_matches_msprobe(fixture_net_dump):
    ours = read_json(fixture_net_dump / "construct.json")
    theirs = {_ours(k): (_ours(v) if v else v) for k, v in read_json(FIXTURE / "construct.json").items()}
    assert ours == theirs


def test_entry_keys_match_msprobe(fixture_net_dump):
    ours = read_json(fixture_net_dump / "dump.json")["data"]
    theirs = read_json(FIXTURE / "dump.json")["data"]
    for name, entry in theirs.items():
        mine = ours[_ours(name)]
        assert list(mine) == list(entry), name
        if "parameters" in entry:
            assert sorted(mine["parameters"]) == sorted(entry["parameters"]), name
    record = ours["Cell.blocks.0.ln1.LayerNorm.forward.0"]["input_args"][0]
    assert list(record) == ["type", "dtype", "shape", "Max", "Min", "Mean", "Norm"]  # no requires_grad, like msprobe
    assert ours["Tensor.astype.0.forward"]["input_args"][1] == {"type": "mindspore.dtype", "value": "Float32"}


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
    assert grads["output"][0]["shape"] == [4, 8, 32] and grads["input"][0]["shape"] == [4, 8, 32]


def test_stack_json_layout(fixture_net_dump):
    stacks = read_json(fixture_net_dump / "stack.json")
    names, lines = stacks["0"]
    assert names and all(line.startswith("File ") for line in lines)
    assert not any("probe_mindspore" in line or "probe_core" in line for _, (_, ls) in stacks.items() for line in ls)
    assert any("ms_net.py" in line for _, (_, ls) in stacks.items() for line in ls)
