"""Reading API calls back from dumps (probe's and msprobe's) and generating their inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from probe_acc_check.cases import TensorSpec, Typed, dedupe, open_dump, read_cases, select
from probe_acc_check.errors import AccCheckError, SkipApi
from probe_acc_check.inputs import generate, make_inputs

from .conftest import FIXTURES

MSPROBE_PT = FIXTURES / "msprobe_pytorch_stat_mix" / "step0"
MSPROBE_MS = FIXTURES / "msprobe_mindspore_stat_mix" / "step0"


def test_msprobe_pytorch_dump_gives_one_case_per_api_call_with_its_arguments():
    cases = {case.name: case for case in read_cases(open_dump(MSPROBE_PT))}
    assert len(cases) == 32 and not any(name.startswith("Module") for name in cases)
    norm = cases["Functional.layer_norm.0"]
    x, shape, weight, bias, eps = norm.args
    assert isinstance(x, TensorSpec) and x.shape == (4, 8, 64) and x.dtype == "torch.float32"
    assert (x.min, x.max) == (-3.583965539932251, 3.9949018955230713) and x.path is None
    assert shape == [64] and eps == 1e-05 and (weight.min, weight.max, bias.max) == (1.0, 1.0, 0.0)
    assert norm.grads is not None and norm.grads[0].shape == (4, 8, 64)  # from Functional.layer_norm.0.backward
    assert cases["Torch.softmax.0"].kwargs == {"dim": -1}
    assert cases["Tensor.__truediv__.0"].args[1] == 4.0 and not cases["Tensor.__truediv__.0"].skip


def test_msprobe_mindspore_dump_keeps_dtypes_and_marks_primitives_skipped():
    cases = {case.name: case for case in read_cases(open_dump(MSPROBE_MS))}
    assert cases["Tensor.to.0"].args[1] == Typed("dtype", "Float32")
    assert cases["Functional.cross_entropy.0"].args[2] is None and cases["Functional.cross_entropy.0"].args[4] == "mean"
    assert "MindSpore primitive" in cases["Primitive.matmul.MatMul.0"].skip
    assert not cases["Mint.matmul.0"].skip and cases["Mint.matmul.0"].grads is not None


def test_random_ops_and_unknown_argument_types_become_skip_reasons(tmp_path):
    leaf = {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2], "Max": 1.0, "Min": 0.0}
    data = {"Torch.randn.0.forward": {"input_args": [{"type": "int", "value": 2}], "input_kwargs": {},
                                      "output": [leaf]},
            "Torch.odd.0.forward": {"input_args": [leaf, {"type": "torch.Generator", "value": "?"}],
                                    "input_kwargs": {}, "output": [leaf]}}
    (tmp_path / "dump.json").write_text(json.dumps({"task": "statistics", "level": "L1", "framework": "pytorch",
                                                    "data": data}))
    cases = {case.name: case for case in read_cases(open_dump(tmp_path))}
    assert cases["Torch.randn.0"].skip.startswith("random op")
    assert "'torch.Generator' cannot be rebuilt" in cases["Torch.odd.0"].skip


def test_a_dump_without_api_entries_or_with_several_ranks_is_one_clear_error(tmp_path):
    (tmp_path / "dump.json").write_text(json.dumps({"task": "statistics", "level": "L0", "framework": "pytorch",
                                                    "data": {"Module.fc.Linear.forward.0": {"input_args": []}}}))
    with pytest.raises(AccCheckError, match='no API entries .level L0.*"level": "L1" or "mix"'):
        read_cases(open_dump(tmp_path))
    for rank in (0, 1):
        (tmp_path / "root" / "step0" / f"rank{rank}").mkdir(parents=True)
        (tmp_path / "root" / "step0" / f"rank{rank}" / "dump.json").write_text((tmp_path / "dump.json").read_text())
    with pytest.raises(AccCheckError, match="2 dumps found .*--step N --rank R"):
        open_dump(tmp_path / "root")
    assert open_dump(tmp_path / "root", rank=1).rank == 1


def test_generated_values_stay_in_the_recorded_range_with_min_and_max_planted():
    rng = np.random.default_rng(0)
    floats = generate(TensorSpec("x", "torch.bfloat16", (3, 50), -2.5, 7.0), rng)
    assert floats.shape == (3, 50) and floats.min() == -2.5 and floats.max() == 7.0
    ints = generate(TensorSpec("i", "Int32", (40,), 1, 9), rng)
    assert set(np.unique(ints)) <= set(range(1, 10)) and {1, 9} <= set(ints.tolist())
    assert generate(TensorSpec("b", "torch.bool", (5,), True, True), rng).all()
    with pytest.raises(SkipApi, match="no Min recorded"):
        generate(TensorSpec("y", "torch.float32", (2,), None, None), rng)


def test_inputs_depend_only_on_the_api_and_the_seed():
    cases = read_cases(open_dump(MSPROBE_PT))
    softmax = next(case for case in cases if case.name == "Torch.softmax.1")
    alone, again = make_inputs(softmax, 7), make_inputs(softmax, 7)
    assert np.array_equal(alone.args[0].data, again.args[0].data)
    assert not np.array_equal(alone.args[0].data, make_inputs(softmax, 8).args[0].data)
    recorded = softmax.grads[0]  # the output gradient comes from the backward entry's statistics
    assert alone.grads[0].shape == recorded.shape == (4, 4, 8, 8)
    assert (alone.grads[0].min(), alone.grads[0].max()) == (recorded.min, recorded.max)


def test_filter_and_dedupe_choose_cases():
    cases = read_cases(open_dump(MSPROBE_PT))
    assert [c.name for c in select(cases, ["gelu"])] == ["Functional.gelu.0", "Functional.gelu.1"]
    assert [c.name for c in select(cases, ["Torch.matmul.1", "Tensor.__mul__*"])] == [
        "Torch.matmul.1", "Tensor.__mul__.0", "Tensor.__mul__.1"]
    kept = [c.name for c in dedupe(cases)]
    assert "Functional.gelu.0" in kept and "Functional.gelu.1" not in kept  # same shapes and arguments
    assert len(kept) < len(cases)
