"""Steps where the user sees them, in-place ops, modules that raise (issue 11, items 2 and 3).

Each loop of ``scripts/loops.py`` runs as ``probe run`` runs it (in-process through
``probe_core.testing.collect``: same collector, hooks and step logic) and once without probe; the final
weights must be the same, so probe changed nothing in training.
"""

from __future__ import annotations

import warnings

import pytest

from probe_core import testing
from probe_core.collect.command import framework_modules, guess_framework, imported_frameworks, run_script
from probe_core.plugins import current_registry
from tests.collect.helpers import ROOT, load, run_probe

LOOPS = ROOT / "tests" / "collect" / "scripts" / "loops.py"


def _weights(tmp_path, mode, dump=None, **config):
    """The script's final weight sum, without probe (``dump`` None) or under collection into ``dump``."""
    out = tmp_path / f"weights-{mode}-{dump.name if dump else 'plain'}.txt"
    if dump is None:
        assert run_script(LOOPS, [mode, str(out)]) == 0
    else:
        testing.collect(LOOPS, dump, args=[mode, str(out)], **config)
    return float(out.read_text())


def _steps(dump):
    return sorted(int(p.name[4:]) for p in dump.iterdir() if p.name.startswith("step"))


def _data(dump, step):
    return load(dump / f"step{step}" / "rank0" / "dump.json")["data"]


def _construct(dump, step):
    return load(dump / f"step{step}" / "rank0" / "construct.json")


@pytest.mark.parametrize("level", ["L0", "L1", "mix"])
def test_inplace_ops_in_every_spelling_run_and_record_values_before_and_after(tmp_path, level):
    dump = tmp_path / level
    assert _weights(tmp_path, "inplace", dump, level=level) == _weights(tmp_path, "inplace")
    assert _steps(dump) == [0, 1]
    data = _data(dump, 0)
    if level != "L0":
        relu = data["Functional.relu.1.forward"]  # F.relu(x, inplace=True): input before, output after
        assert relu["input_kwargs"]["inplace"]["value"] is True
        assert relu["input_args"][0]["Min"] < 0 and relu["output"][0]["Min"] == 0
        mul = data["Tensor.mul_.0.forward"]
        assert mul["output"][0]["Max"] == pytest.approx(2 * mul["input_args"][0]["Max"])
        iadd = data["Tensor.__iadd__.0.forward"]
        assert iadd["output"][0]["Min"] == pytest.approx(iadd["input_args"][0]["Min"] + 1)
        add = data["Torch.add.0.forward"]  # out=: the result is the output
        assert add["output"][0]["Min"] == pytest.approx(add["input_args"][0]["Min"] + 1)
        # in-place calls have backward entries too: the gradient w.r.t. their output, then w.r.t. their input
        back = data["Tensor.mul_.0.backward"]
        assert back["output"][0]["Norm"] == pytest.approx(2 * back["input"][0]["Norm"])
        back = data["Tensor.__iadd__.0.backward"]
        assert back["output"][0]["Norm"] == pytest.approx(back["input"][0]["Norm"])
        back = data["Functional.relu.1.backward"]  # relu passes the gradient on or cuts it
        assert back["output"][0]["Norm"] <= back["input"][0]["Norm"] and back["output"][0]["Min"] <= 0
        assert "Tensor.__sub__.0.backward" in data and "Torch.add.0.backward" not in data  # out=: no autograd
    if level != "L1":
        # the Sequential whose first ReLU changes the Sequential's own input in place: forward, backward
        seq = data["Module.pre.Sequential.forward.0"]
        assert seq["input_args"][0]["Min"] < 0 and seq["output"][0]["shape"] == [3, 8]
        assert data["Module.pre.Sequential.backward.0"]["output"][0]["shape"] == [3, 8]
        assert data["Module.act.ReLU.forward.0"]["output"][0]["Min"] == 0
        back = data["Module.act.ReLU.backward.0"]  # an in-place module has its backward entry
        assert back["output"][0]["shape"] == [3, 8] and back["output"][0]["Norm"] <= back["input"][0]["Norm"]
        assert "Module.fc1.Linear.parameters_grad.0" in data


def test_module_that_raises_leaves_a_correct_tree_and_no_warning(tmp_path):
    dump = tmp_path / "dump"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _weights(tmp_path, "raises", dump) == _weights(tmp_path, "raises")
    assert not [w for w in caught if "forward hook" in str(w.message)], [str(w.message) for w in caught]
    for step in _steps(dump):
        data, construct = _data(dump, step), _construct(dump, step)
        assert "Module.bad.Fails.forward.0" not in data and "Module.bad.Fails.backward.0" not in data
        # the sibling after the failed block is no child of it; the failed block's own calls keep it as parent
        assert construct["Module.b.Linear.forward.0"] is None
        assert construct["Module.bad.inner.Linear.forward.0"] == "Module.bad.Fails.forward.0"
        assert construct["Functional.linear.2.forward"] == "Module.b.Linear.forward.0"
        assert "Module.b.Linear.backward.0" in data and "Module.a.Linear.parameters_grad.0" in data


@pytest.mark.parametrize("mode,updates,forwards", [("closure", 3, 1), ("lbfgs", 2, 3)])
def test_optimizer_step_with_closure_ends_a_step_and_records_the_closure(tmp_path, mode, updates, forwards):
    dump = tmp_path / mode
    assert _weights(tmp_path, mode, dump) == _weights(tmp_path, mode)
    assert _steps(dump) == list(range(updates))
    for step in range(updates):
        data = _data(dump, step)
        assert [n for n in data if n.startswith("Module.0.Linear.forward.")] == \
            [f"Module.0.Linear.forward.{i}" for i in range(forwards)]  # LBFGS: the closure runs 3 times
        assert "Module.0.Linear.backward.0" in data and "Functional.cross_entropy.0.backward" in data
        assert "Module.2.Linear.parameters_grad.0" in data
        assert not any("optim" in n.lower() or "_foreach" in n or n.startswith("Torch.stack") for n in data)


def test_an_optimizer_wrapping_another_ends_one_step_per_update(tmp_path):
    dump = tmp_path / "wrapped"
    assert _weights(tmp_path, "wrapped", dump) == _weights(tmp_path, "wrapped")
    assert _steps(dump) == [0, 1]
    for step in (0, 1):
        assert "Module.0.Linear.forward.0" in _data(dump, step) and "Module.0.Linear.forward.1" not in _data(dump, step)


def test_gradient_accumulation_is_one_step_per_update(tmp_path):
    dump = tmp_path / "accum"
    assert _weights(tmp_path, "accum", dump) == _weights(tmp_path, "accum")
    assert _steps(dump) == [0, 1]
    for step in (0, 1):
        data = _data(dump, step)
        assert {"Module.0.Linear.forward.0", "Module.0.Linear.forward.1", "Module.0.Linear.backward.1",
                "Module.0.Linear.parameters_grad.1"} <= set(data)
        assert "Module.0.Linear.forward.2" not in data


@pytest.mark.parametrize("level", ["L1", "mix"])
def test_steps_start_at_the_forward_and_logging_after_the_last_update_makes_no_step(tmp_path, level):
    dump = tmp_path / level
    assert _weights(tmp_path, "logging", dump, level=level) == _weights(tmp_path, "logging")
    assert _steps(dump) == [0, 1]
    for step in (0, 1):
        names = list(_data(dump, step))
        # recording starts at the model's first forward, at L1 too: no construction, init or data preparation
        assert names[0] == "Functional.linear.0.forward"
        assert not any(n.startswith(("Torch.empty", "Torch.kaiming", "Torch.uniform", "Torch.randn",
                                     "Torch.randint", "Torch.tensor")) for n in names)
        assert not any(n.startswith(("Tensor.mean", "Tensor.__isub__")) for n in names)


def test_a_model_without_modules_is_recorded_at_l1(tmp_path):
    dump = tmp_path / "L1"
    assert _weights(tmp_path, "nomodule", dump, level="L1") == _weights(tmp_path, "nomodule")
    assert _steps(dump) == [0]  # no optimizer: one step
    names = list(_data(dump, 0))
    # from the first computation on a tensor that requires a gradient (the first batch's randn is no entry;
    # the second's, inside the one step, is), under msprobe's operator names from the start
    assert names[:3] == ["Tensor.__matmul__.0.forward", "Torch.tanh.0.forward", "Functional.cross_entropy.0.forward"]
    assert {"Tensor.__matmul__.1.forward", "Functional.cross_entropy.1.backward", "Tensor.__matmul__.1.backward",
            "Torch.randn.0.forward"} <= set(names) and "Torch.randn.1.forward" not in names


def test_a_run_that_records_nothing_says_so_loudly(tmp_path):
    result = run_probe("run", str(LOOPS), "idle", cwd=tmp_path)
    assert result.returncode == 0 and "nothing to train" in result.stdout
    assert "WARNING: this run recorded NO entries" in result.stderr
    assert "no pytorch model forward was seen" in result.stderr


def test_framework_comes_from_every_import_spelling(tmp_path):
    registry = current_registry()
    cases = {"import sys, mindspore as ms\n": "mindspore",
             "from mindspore import nn\n": "mindspore",
             "try:\n    import mindspore.ops as ops\nexcept ImportError:\n    pass\n": "mindspore",
             "def f():\n    import mindspore\n": "mindspore",
             "import mindspore\nimport torch\n": None,  # both: the config decides (default pytorch)
             "import os, torch.nn as nn\n": "pytorch",
             "x = 'import mindspore'\n": None,  # a string is no import
             "import mindspore\nthis is not python(\n": "mindspore"}  # unparsable: the line-based guess
    for source, expected in cases.items():
        script = tmp_path / "s.py"
        script.write_text(source)
        assert guess_framework(script, registry) == expected, source
    modules = framework_modules(registry)  # what the installed collectors declare (CollectorSpec.modules)
    assert modules == {"torch": "pytorch", "mindspore": "mindspore"}
    assert imported_frameworks("import torch, mindspore", modules) == {"pytorch", "mindspore"}
    assert registry.default_framework() == "pytorch"  # the available collector of lowest priority


def test_an_empty_run_names_the_framework_the_script_ran(monkeypatch):
    import sys
    import types

    from probe_core.collect.command import nothing_recorded_reasons

    config = types.SimpleNamespace(step=[], rank=[], list=[], scope=[])
    collector = types.SimpleNamespace(framework="pytorch", forward_seen=False, unrecorded=lambda: [],
                                      session=types.SimpleNamespace(config=config, registry=current_registry()))
    monkeypatch.setitem(sys.modules, "mindspore", types.ModuleType("mindspore"))
    assert "pass --framework mindspore" in nothing_recorded_reasons(collector, 0)[0]
    config.step = [7]
    monkeypatch.delitem(sys.modules, "mindspore")
    reasons = nothing_recorded_reasons(collector, 3)
    assert "exited with code 3" in reasons[0] and "no pytorch model forward" in reasons[1] and "[7]" in reasons[2]
