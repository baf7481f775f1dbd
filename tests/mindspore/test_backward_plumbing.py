"""How a recorded call's gradients are caught: same-shape views of the inputs that need a gradient, one
``ops.HookBackward`` only where an input without a gradient of its own must get one (msprobe's layout)."""

from __future__ import annotations

import mindspore as ms
import numpy as np
import pytest
from mindspore import mint, ops

from .conftest import dump_ms, read_json

W = np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)
X = np.array([[1.0, 2.0], [-3.0, 0.5]], np.float32)


@pytest.fixture
def hook_ops(monkeypatch):
    """Counts the ``ops.HookBackward`` ops the collector builds."""
    built = []
    init = ops.HookBackward.__init__

    def counted(self, *args, **kwargs):
        built.append(1)
        init(self, *args, **kwargs)

    monkeypatch.setattr(ops.HookBackward, "__init__", counted)
    return built


def _backward(tmp_path, forward):
    w = ms.Parameter(ms.Tensor(W), name="w")
    grad_fn = ms.value_and_grad(lambda x: forward(x, w), None, [w])
    return read_json(dump_ms(tmp_path, lambda: grad_fn(ms.Tensor(X)), level="L1") / "dump.json")["data"]


def _stats(record):
    return [record[k] for k in ("Max", "Min", "Norm")]


def _expect(array):
    return pytest.approx([float(array.max()), float(array.min()), float(np.linalg.norm(array))], rel=1e-5)


def test_inputs_with_gradients_get_views_and_their_own_gradient_of_the_call(tmp_path, hook_ops):
    """``w`` feeds three calls; the matmul's entry holds the gradients of its own use of ``h`` and ``w``."""
    data = _backward(tmp_path, lambda x, w: mint.matmul(mint.exp(w), w).sum() + w.sum())
    assert hook_ops == []
    grads = data["Mint.matmul.0.backward"]["output"]
    ones = np.ones((2, 2), np.float32)
    assert _stats(grads[0]) == _expect(ones @ W.T)  # d/dh
    assert _stats(grads[1]) == _expect(np.exp(W).T @ ones)  # d/dw of the matmul alone
    assert _stats(data["Mint.exp.0.backward"]["output"][0]) == _expect((ones @ W.T) * np.exp(W))


def test_an_input_without_gradient_shares_one_identity_with_the_others(tmp_path, hook_ops):
    """``matmul(x, w)``, ``x`` the data: one HookBackward gives ``x`` the gradient the matmul computes for it."""
    data = _backward(tmp_path, lambda x, w: mint.matmul(x, w).sum())
    assert len(hook_ops) == 1
    grads = data["Mint.matmul.0.backward"]["output"]
    ones = np.ones((2, 2), np.float32)
    assert _stats(grads[0]) == _expect(ones @ W.T)
    assert _stats(grads[1]) == _expect(X.T @ ones)


def test_a_shape_query_is_recorded_without_a_gradient_catch(tmp_path, monkeypatch):
    """``ops.shape(h)`` returns numbers: its forward entry is written, and its input gets no identity view
    (~0.1 ms each on MindSpore), as no gradient ever flows back through it."""
    import probe_mindspore.collector as collector_module

    viewed = []
    real_view = collector_module._VIEW

    def view(tensor, *shape):
        viewed.append(tuple(tensor.shape))
        return real_view(tensor, *shape)

    monkeypatch.setattr(collector_module, "_VIEW", view)
    data = _backward(tmp_path, lambda x, w: mint.exp(w).reshape(ops.shape(w)).sum())
    assert "Functional.shape.0.forward" in data and "Functional.shape.0.backward" not in data
    assert "Mint.exp.0.backward" in data
    assert "Tensor.reshape.0.backward" in data
    assert len(viewed) == len([name for name in data if name.endswith(".backward")])  # one view per gradient caught
