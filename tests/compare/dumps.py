"""Build small dumps in msprobe's format for compare tests (numpy only, no framework)."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np


def tensor_leaf(array: np.ndarray, mode: str, folder: Path | None = None, data_name: str | None = None,
                requires_grad: bool = False, dtype: str = "torch.float32") -> dict:
    array = np.asarray(array, dtype=np.float32)
    leaf = {
        "type": "torch.Tensor", "dtype": dtype, "shape": list(array.shape),
        "Max": float(array.max()), "Min": float(array.min()), "Mean": float(array.mean()),
        "Norm": float(np.linalg.norm(array.astype(np.float64))), "requires_grad": requires_grad,
    }
    if mode == "md5":
        leaf["md5"] = f"{zlib.crc32(array.tobytes()):08x}"
    if mode == "tensor":
        leaf["data_name"] = data_name
        (folder / "dump_tensor_data").mkdir(parents=True, exist_ok=True)
        np.save(folder / "dump_tensor_data" / data_name, array)
    return leaf


def write_dump(folder: Path, entries: list[tuple], mode: str = "statistics", framework: str = "pytorch") -> Path:
    """``entries``: ``(name, parent, inputs, outputs[, parameters])`` with numpy arrays or scalars.

    Writes dump.json, construct.json and stack.json (and .npy files in tensor mode) into ``folder``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    data, construct, stack = {}, {}, {}
    for number, item in enumerate(entries):
        name, parent, inputs, outputs = item[:4]
        params = item[4] if len(item) > 4 else None

        def leaf(value, role, i):
            if isinstance(value, (int, float, bool, str)) and not isinstance(value, np.ndarray):
                return {"type": type(value).__name__, "value": value}
            return tensor_leaf(value, mode, folder, f"{name}.{role}.{i}.npy")

        in_key = "input" if name.endswith("backward") else "input_args"
        entry = {in_key: [leaf(v, "input", i) for i, v in enumerate(inputs)]}
        if in_key == "input_args":
            entry["input_kwargs"] = {}
        entry["output"] = [leaf(v, "output", i) for i, v in enumerate(outputs)]
        if params:
            entry["parameters"] = {k: leaf(v, "parameters", k) for k, v in params.items()}
        data[name] = entry
        construct[name] = parent
        stack[str(number)] = [[name], [f"File model.py, line {10 + number}, in forward, \n y = op_{number}(x)"]]
    task = "tensor" if mode == "tensor" else "statistics"
    dump = {"task": task, "level": "mix", "framework": framework,
            "dump_data_dir": str(folder / "dump_tensor_data") if mode == "tensor" else None, "data": data}
    (folder / "dump.json").write_text(json.dumps(dump, indent=1))
    (folder / "construct.json").write_text(json.dumps(construct, indent=1))
    (folder / "stack.json").write_text(json.dumps(stack, indent=1))
    return folder


def tiny_model_entries(scale: float = 1.0, seed: int = 0) -> list[tuple]:
    """A 2-layer MLP's forward entries; ``scale`` multiplies fc1's output (the perturbation)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    w1 = rng.standard_normal((16, 8)).astype(np.float32)
    w2 = rng.standard_normal((3, 16)).astype(np.float32)
    h = (x @ w1.T).astype(np.float32)
    h_scaled = (h * np.float32(scale)).astype(np.float32)
    r = np.maximum(h_scaled, 0).astype(np.float32)
    y = (r @ w2.T).astype(np.float32)
    return [
        ("Functional.linear.0.forward", "Module.fc1.Linear.forward.0", [x, w1], [h]),
        ("Module.fc1.Linear.forward.0", None, [x], [h_scaled], {"weight": w1}),
        ("Functional.relu.0.forward", "Module.act.ReLU.forward.0", [h_scaled], [r]),
        ("Module.act.ReLU.forward.0", None, [h_scaled], [r]),
        ("Functional.linear.1.forward", "Module.fc2.Linear.forward.0", [r, w2], [y]),
        ("Module.fc2.Linear.forward.0", None, [r], [y], {"weight": w2}),
        ("Tensor.sum.0.forward", None, [y], [y.sum(dtype=np.float32).reshape(())]),
    ]
