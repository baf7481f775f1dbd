"""``probe check ckpt A B``: how two checkpoints differ, parameter by parameter, worst first.

For every parameter both sides hold (msprobe's keys first): ``l2`` = ‖a − b‖₂ (0 for equal weights),
``cos`` = a·b / (‖a‖‖b‖) (1 for parallel weights, so a rescaled weight keeps 1: ``l2`` and
``max_abs_diff`` show it; 1 when both are all zeros, 0 when only one is), ``numel``, ``shape``, then
``max_abs_diff`` = max |a − b|, ``dtype`` (the bench's; ``target_dtype`` too when it differs) and
``rel_l2`` = ‖a − b‖ / ‖a‖ (``null`` when only the target is nonzero), the order of the result.
Computed in float64. A parameter only one side holds, or with different shapes, gets an ``error``
entry instead of metrics and comes first.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
from probe_core.api import CheckError, cosine

from probe_config_check.ckpt_loaders import Bfloat16Array, load_checkpoint


def as_float64(tensor: Any) -> np.ndarray:
    """A flat float64 numpy copy of a numpy array or a torch tensor (bf16 included)."""
    if hasattr(tensor, "detach"):
        import torch

        return tensor.detach().to("cpu", torch.float64).reshape(-1).numpy()
    return np.asarray(tensor, dtype=np.float64).reshape(-1)


def dtype_name(tensor: Any) -> str:
    """``float32``, ``bfloat16``, ... of a torch tensor or numpy array as the checkpoint stores it."""
    if isinstance(tensor, Bfloat16Array):
        return "bfloat16"
    return str(tensor.dtype).removeprefix("torch.")


def similarity(a: Any, b: Any) -> dict[str, Any]:
    """The metrics of two same-shaped tensors (see the module docstring)."""
    x, y = as_float64(a), as_float64(b)
    diff = x - y
    l2, norm = float(np.linalg.norm(diff)), float(np.linalg.norm(x))
    out = {"l2": l2, "cos": cosine(float(np.dot(x, y)), norm, float(np.linalg.norm(y))), "numel": int(x.size),
           "shape": list(a.shape), "max_abs_diff": float(np.max(np.abs(diff))) if diff.size else 0.0,
           "dtype": dtype_name(a), "rel_l2": l2 / norm if norm else (None if l2 else 0.0)}
    if dtype_name(b) != out["dtype"]:
        out["target_dtype"] = dtype_name(b)
    return out


def _worst_first(item: tuple[str, dict[str, Any]]) -> tuple:
    name, metrics = item
    if "error" in metrics:
        return 0, 0.0, name
    rel = metrics["rel_l2"]  # None: the bench is all zeros, the target not
    return 1, -math.inf if rel is None or math.isnan(rel) else -rel, name


def compare_checkpoints(bench: str | os.PathLike[str], target: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """parameter name -> metrics (or an ``error``) for two checkpoints of any kind probe reads, worst first."""
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
                            "shape": list(have.shape), "dtype": dtype_name(have)}
        elif tuple(a.shape) != tuple(b.shape):
            result[name] = {"error": "shape mismatch", "shape": list(a.shape), "target_shape": list(b.shape),
                            "dtype": dtype_name(a)}
        else:
            result[name] = similarity(a, b)
    return dict(sorted(result.items(), key=_worst_first))


def print_report(result: dict[str, dict[str, Any]], output: str, console: Any, rows: int = 20) -> None:
    """The parameters that differ, worst first (at most ``rows``), and a count line."""
    from rich.markup import escape
    from rich.table import Table

    differing = [(name, m) for name, m in result.items() if "error" in m or m["l2"] != 0]
    if differing:
        table = Table(title=f"parameters that differ, worst first ({min(rows, len(differing))} of "
                            f"{len(differing)})")
        for column in ("parameter", "cosine", "L2 of diff", "max |diff|", "shape", "dtype"):
            table.add_column(column, overflow="fold")
        for name, m in differing[:rows]:
            if "error" in m:
                table.add_row(escape(name), "[red]" + escape(m["error"]) + "[/]", "", "", str(m["shape"]), m["dtype"])
                continue
            dtype = m["dtype"] + (f" / {m['target_dtype']}" if "target_dtype" in m else "")
            table.add_row(escape(name), f"{m['cos']:.9g}", f"{m['l2']:.6g}", f"{m['max_abs_diff']:.6g}",
                          str(m["shape"]), dtype)
        console.print(table)
    console.print(f"compared {len(result)} parameters: {len(result) - len(differing)} identical, "
                  f"{len(differing)} differ; wrote [bold]{escape(output)}[/]", highlight=False)


def write_result(result: dict[str, dict[str, Any]], output: str | os.PathLike[str]) -> Path:
    """Write the JSON result; an existing file is never overwritten."""
    output = Path(output)
    if output.exists() or output.is_symlink():
        raise CheckError(f"{output}: already exists; pass a new path with -o (probe does not overwrite results)")
    output.parent.mkdir(parents=True, exist_ok=True)
    with open(output, "x", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2)
    return output
