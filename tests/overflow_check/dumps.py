"""Hand-written dump.json files in probe's/msprobe's layout (real files, for the reader and the CLI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

INF, NAN = float("inf"), float("nan")


def tensor(top: Any = 1.0, bottom: Any = -1.0, mean: Any = 0.0, norm: Any = 2.0) -> dict[str, Any]:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": [2, 2], "Max": top, "Min": bottom,
            "Mean": mean, "Norm": norm, "requires_grad": False}


def api(inputs: list, outputs: list, **kwargs: Any) -> dict[str, Any]:
    return {"input_args": inputs, "input_kwargs": kwargs, "output": outputs}


def backward(grad_in: list, grad_out: list) -> dict[str, Any]:
    return {"input": grad_in, "output": grad_out}


def write_rank(folder: Path, data: dict[str, Any], stacks: dict[str, list[str]] | None = None,
               construct: dict[str, str | None] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    dump = {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None, "data": data}
    (folder / "dump.json").write_text(json.dumps(dump, indent=1), encoding="utf-8")
    stack_json = {str(i): [[name], lines] for i, (name, lines) in enumerate((stacks or {}).items())}
    (folder / "stack.json").write_text(json.dumps(stack_json), encoding="utf-8")
    (folder / "construct.json").write_text(json.dumps(construct or {}), encoding="utf-8")
    return folder
