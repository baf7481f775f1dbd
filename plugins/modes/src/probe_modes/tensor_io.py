"""Load a dumped tensor file (``.npy`` or ``.pt``) as a numeric numpy array.

Float16/32/64 and integer arrays keep their dtype (the metrics cast them into
float64 buffers they reuse, cheaper than a fresh float64 copy per tensor);
bfloat16 and other types numpy lacks are converted to float64, complex
values to their real part.

``.pt`` files are read with ``torch.load(weights_only=True)`` only; torch
is imported only when such a file is met. A missing or unreadable file is a
:class:`~probe_core.errors.DumpError` naming it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from probe_core.api import DumpError


def missing_file(path: Path, leaf_name: str) -> str:
    """Why ``path`` (``step{N}/rank{R}/dump_tensor_data/NAME``) is missing and what to do: its step has only the
    record journal (the run was killed before writing the file), or the dump was copied without it."""
    rank_dir = path.parent.parent
    if (rank_dir / ".journal.jsonl").is_file() and not (rank_dir / "dump.json").is_file():
        return (f"tensor file missing: {path} (for {leaf_name}): the run was killed before writing it (its step "
                f"has only the record journal); run `probe recover {rank_dir.parent.parent}`, which leaves out "
                "the entries whose files were never written, or pass --lenient to mark such rows as errors")
    return (f"tensor file missing: {path} (for {leaf_name}); copy the whole dump folder including "
            "dump_tensor_data/, or pass --lenient to mark such rows as errors and go on")


def load_array(path: Path | None, leaf_name: str) -> np.ndarray:
    if path is None:
        raise DumpError(f"{leaf_name}: the dump has no data_name for this tensor; dump it with task \"tensor\"")
    if not path.is_file():
        raise DumpError(missing_file(path, leaf_name))
    try:
        if path.suffix == ".npy":
            array = np.load(path, allow_pickle=False)
        elif path.suffix == ".pt":
            import torch

            tensor = torch.load(path, weights_only=True, map_location="cpu").detach()
            if tensor.dtype in (torch.float16, torch.float32, torch.float64, torch.int8, torch.int16, torch.int32,
                                torch.int64, torch.uint8, torch.bool):
                array = tensor.numpy()
            else:  # bfloat16, float8, complex, ...: numpy has no such dtype
                array = (tensor.real if tensor.is_complex() else tensor).to(torch.float64).numpy()
        else:
            raise DumpError(f"{path}: unknown tensor file type {path.suffix!r}; expected .npy or .pt")
    except DumpError:
        raise
    except Exception as exc:
        raise DumpError(f"{path}: cannot read tensor file ({type(exc).__name__}: {exc}); is it complete?") from None
    if array.dtype.kind in "iuf":
        return array
    if array.dtype == np.bool_:
        return array.astype(np.uint8)
    return np.asarray(array.real if np.iscomplexobj(array) else array, dtype=np.float64)
