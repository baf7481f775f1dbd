"""Entry names, nesting, construct.json and stack.json against msprobe's dump of the same model."""

from __future__ import annotations

from tests.collect.helpers import FIXTURE, load, one_step

VIEW_OPS = ("Tensor.chunk.", "Tensor.reshape.", "Tensor.transpose.")


def test_mix_names_match_msprobe(tmp_path):
    """risk_level FOCUS (the default, as msprobe's) leaves view/shape ops out: the same entries as msprobe."""
    ours = load(one_step(tmp_path, level="mix") / "dump.json")["data"]
    theirs = load(FIXTURE / "dump.json")["data"]
    assert sorted(ours) == sorted(theirs)


def test_risk_level_all_adds_view_ops(tmp_path):
    """risk_level ALL records every API: msprobe's entries plus the view/shape ops, which msprobe names the same
    way in its construct.json."""
    ours = load(one_step(tmp_path, level="mix", risk_level="ALL") / "dump.json")["data"]
    theirs = load(FIXTURE / "dump.json")["data"]
    assert [name for name in theirs if name not in ours] == []
    extra = [name for name in ours if name not in theirs]
    assert extra and all(name.startswith(VIEW_OPS) for name in extra)
    theirs_construct = load(FIXTURE / "construct.json")
    assert all(name in theirs_construct for name in extra if name.endswith("forward"))


def test_risk_level_core_keeps_compute_heavy_apis(tmp_path):
    ours = load(one_step(tmp_path, level="L1", risk_level="CORE") / "dump.json")["data"]
    apis = {name.rsplit(".", 2)[0] for name in ours}
    assert {"Functional.linear", "Functional.layer_norm", "Torch.matmul"} <= apis
    assert not apis & {"Functional.gelu", "Torch.softmax", "Tensor.reshape", "Tensor.__add__"}


def test_mix_header_and_construct(tmp_path):
    rank_dir = one_step(tmp_path, level="mix", risk_level="ALL")  # msprobe's construct.json names view ops too
    dump = load(rank_dir / "dump.json")
    assert {k: dump[k] for k in ("task", "level", "framework", "dump_data_dir")} == \
        {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None}
    construct = load(rank_dir / "construct.json")
    assert construct["Module.blocks.0.Block.forward.0"] is None  # the root model is not an entry
    assert construct["Module.blocks.0.attn.qkv.Linear.forward.0"] == "Module.blocks.0.attn.Attention.forward.0"
    assert construct["Functional.linear.0.forward"] == "Module.blocks.0.attn.qkv.Linear.forward.0"
    assert construct["Torch.matmul.0.forward"] == "Module.blocks.0.attn.Attention.forward.0"
    assert construct["Module.blocks.0.mlp.fc2.linear.Linear.forward.0"] == \
        "Module.blocks.0.mlp.fc2.ScaledLinear.forward.0"
    # backward parents mirror the forward ones (msprobe writes null for some of these; probe does not)
    assert construct["Module.blocks.0.ln1.LayerNorm.backward.0"] == "Module.blocks.0.Block.backward.0"
    assert construct["Functional.linear.0.backward"] == "Module.blocks.0.attn.qkv.Linear.backward.0"
    assert construct["Tensor.mean.0.forward"] is None
    theirs = load(FIXTURE / "construct.json")
    agree = [name for name, parent in theirs.items() if construct.get(name) == parent]
    differ = {name: (construct.get(name), parent) for name, parent in theirs.items() if construct.get(name) != parent}
    assert len(agree) > 130
    assert all(theirs_parent is None for _, theirs_parent in differ.values())  # only msprobe's nulls differ


def test_stack_maps_every_entry(tmp_path):
    rank_dir = one_step(tmp_path, level="mix")
    data = load(rank_dir / "dump.json")["data"]
    stacks = load(rank_dir / "stack.json")
    mapped = [name for names, _ in stacks.values() for name in names]
    assert sorted(mapped) == sorted(data)
    for names, lines in stacks.values():
        assert lines and all(line.startswith("File ") and ", line " in line for line in lines)
        assert not any("probe_torch" in line or "probe_core" in line for line in lines)
    matmul = next(lines for names, lines in stacks.values() if "Torch.matmul.0.forward" in names)
    assert "fixture_model.py" in matmul[0] and "torch.matmul" in matmul[0]


def test_levels(tmp_path):
    l0 = one_step(tmp_path / "l0", level="L0")
    l0_names = list(load(l0 / "dump.json")["data"])
    assert l0_names and all(name.startswith("Module.") for name in l0_names)
    assert any(name.endswith("parameters_grad.0") for name in l0_names)
    assert set(load(l0 / "construct.json")) == {n for n in l0_names if "parameters_grad" not in n}
    l1 = one_step(tmp_path / "l1", level="L1")
    l1_names = list(load(l1 / "dump.json")["data"])
    assert l1_names and not any(name.startswith("Module.") for name in l1_names)
    assert load(l1 / "construct.json") == {}
    assert "Tensor.__add__.0.forward" in l1_names and "Tensor.__add__.0.backward" in l1_names


def test_metadata_calls_are_not_entries(tmp_path):
    import torch

    from probe_torch import PrecisionDebugger

    debugger = PrecisionDebugger(dump_path=str(tmp_path), level="L1", risk_level="ALL")
    debugger.start()
    x = torch.ones(2, 3, dtype=torch.float64)
    _ = (x.shape, x.size(0), x.dim(), x.numel(), x.dtype, x.is_contiguous(), len(x), repr(x))
    y = x.reshape(3, 2).transpose(0, 1)
    z = torch.cat([y, y])
    z += 1
    debugger.stop()
    debugger.step()
    debugger.close()
    names = list(load(tmp_path / "step0" / "rank0" / "dump.json")["data"])
    assert names == ["Torch.ones.0.forward", "Tensor.reshape.0.forward", "Tensor.transpose.0.forward",
                     "Torch.cat.0.forward", "Tensor.__iadd__.0.forward"]


def test_arguments_are_recorded_as_the_user_passed_them(tmp_path):
    """Python-level APIs re-pass their arguments through ``handle_torch_function`` (keywords, defaults
    filled in); entries show the user's call, as msprobe's do, and the stack starts at the user's line."""
    import torch
    import torch.nn.functional as F

    from probe_torch import PrecisionDebugger

    debugger = PrecisionDebugger(dump_path=str(tmp_path), level="L1")
    debugger.start()
    x, w, b = torch.randn(2, 4), torch.ones(4), torch.zeros(4)
    F.layer_norm(x, (4,), w, b, 1e-5)
    F.cross_entropy(x, torch.tensor([0, 3]))
    F.softmax(x, dim=-1)
    debugger.stop()
    debugger.step()
    debugger.close()
    rank_dir = tmp_path / "step0" / "rank0"
    data = load(rank_dir / "dump.json")["data"]
    norm = data["Functional.layer_norm.0.forward"]
    assert [arg.get("shape", arg.get("value")) for arg in norm["input_args"][:1] + norm["input_args"][2:]] == \
        [[2, 4], [4], [4], 1e-05]
    assert norm["input_kwargs"] == {}
    assert data["Functional.cross_entropy.0.forward"]["input_kwargs"] == {}
    assert data["Functional.softmax.0.forward"]["input_kwargs"] == {"dim": {"type": "int", "value": -1}}
    stacks = {name: lines for names, lines in load(rank_dir / "stack.json").values() for name in names}
    assert stacks["Functional.layer_norm.0.forward"][0].endswith("F.layer_norm(x, (4,), w, b, 1e-5)")
    assert __file__ in stacks["Functional.cross_entropy.0.forward"][0]


def test_torchs_list_operations_are_recorded_as_msprobe_records_them(tmp_path):
    """``torch._foreach_*`` (gradient clipping, the foreach optimizers on GPUs) are private names that are
    operators: msprobe records them (``Torch._foreach_norm``), each list of tensors as a list."""
    import torch

    from probe_torch import PrecisionDebugger

    weights = [torch.ones(3), torch.full((2,), 2.0)]
    debugger = PrecisionDebugger(dump_path=str(tmp_path), task="statistics", level="L1")
    debugger.start()
    torch._foreach_norm(weights)
    torch._foreach_mul_(weights, 0.5)
    debugger.stop()
    debugger.step()
    debugger.close()
    data = load(tmp_path / "step0" / "rank0" / "dump.json")["data"]
    assert list(data) == ["Torch._foreach_norm.0.forward", "Torch._foreach_mul_.0.forward"]
    norms = data["Torch._foreach_norm.0.forward"]["output"]
    assert [round(leaf["Max"], 4) for leaf in norms] == [1.7321, 2.8284]
    assert [leaf["Max"] for leaf in data["Torch._foreach_mul_.0.forward"]["input_args"][0]] == [1.0, 2.0]
