"""``probe check ckpt A B``: how similar two checkpoints are, parameter by parameter.

For every parameter both sides hold: ``l2`` = ‖a − b‖₂ (0 for equal
weights), ``cos`` = a·b / (‖a‖‖b‖) (1 for parallel weights; 1 when both are
all zeros, 0 when only one is), ``numel`` and ``shape``. Computed in float64.
A parameter only one side holds, or with different shapes, gets an
``error`` entry instead of metrics.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from probe_core.api import CheckError, cosine

from probe_config_check.ckpt_loaders import load_checkpoint


def as_float64(tensor: Any) -> np.ndarray:
    """A flat float64 numpy copy of a numpy array or a torch tensor (bf16 included)."""
    if hasattr(tensor, "detach"):
        import torch

        return tensor.detach().to("cpu", torch.float64).reshape(-1).numpy()
    return np.asarray(tensor, dtype=np.float64).reshape(-1)


def similarity(a: Any, b: Any) -> dict[str, Any]:
    """l2, cos, numel and shape of two same-shaped tensors."""
    x, y = as_float64(a), as_float64(b)
    cos = cosine(float(np.dot(x, y)), float(np.linalg.norm(x)), float(np.linalg.norm(y)))
    return {"l2": float(np.linalg.norm(x - y)), "cos": cos, "numel": int(x.size), "shape": list(a.shape)}


def compare_checkpoints(bench: str | os.PathLike[str], target: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """parameter name -> metrics (or an ``error``) for two checkpoints of any kind probe reads."""
    from rich.console import Console
    from rich.progress import track

    bench_kind, bench_params = load_checkpoint(bench)
    target_kind, target_params = load_checkpoint(target)
    if not set(bench_params) & set(target_params):
        raise CheckError(f"{bench} ({bench_kind}) and {target} ({target_kind}) share no parameter names; "
                         "are they checkpoints of the same model?")
    result: dict[str, dict[str, Any]] = {}
    names = sorted(set(bench_params) | set(target_params))
    for name in track(names, description="comparing parameters", console=Console(stderr=True), transient=True):
        a, b = bench_params.get(name), target_params.get(name)
        if a is None or b is None:
            have = a if a is not None else b
            side = "bench" if a is None else "target"
            result[name] = {"error": f"missing in {side}", "numel": int(np.prod(have.shape)),
                            "shape": list(have.shape)}
        elif tuple(a.shape) != tuple(b.shape):
            result[name] = {"error": "shape mismatch", "shape": list(a.shape), "target_shape": list(b.shape)}
        else:
            result[name] = similarity(a, b)
    return result


def write_result(result: dict[str, dict[str, Any]], output: str | os.PathLike[str]) -> Path:
    """Write the JSON result; an existing file is never overwritten."""
    output = Path(output)
    if output.exists() or output.is_symlink():
        raise CheckError(f"{output}: already exists; pass a new path with -o (probe does not overwrite results)")
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "x", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2)
    return output
