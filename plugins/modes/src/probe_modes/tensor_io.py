"""Load a dumped tensor file (``.npy`` or ``.pt``) as a float64 numpy array.

``.pt`` files are read with ``torch.load(weights_only=True)`` only; torch
is imported only when such a file is met. A missing or unreadable file is a
:class:`~probe_core.errors.DumpError` naming it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from probe_core.errors import DumpError


def load_array(path: Path | None, leaf_name: str) -> np.ndarray:
    if path is None:
        raise DumpError(f"{leaf_name}: the dump has no data_name for this tensor; dump it with task \"tensor\"")
    if not path.is_file():
        raise DumpError(f"tensor file missing: {path} (for {leaf_name}); copy the whole dump folder including "
                        f"dump_tensor_data/, or pass --lenient to mark such rows as errors and go on")
    try:
        if path.suffix == ".npy":
            array = np.load(path, allow_pickle=False)
        elif path.suffix == ".pt":
            import torch

            tensor = torch.load(path, weights_only=True, map_location="cpu")
            array = tensor.detach().to(torch.float64).numpy() if tensor.is_floating_point() or tensor.is_complex() \
                else tensor.detach().numpy()
        else:
            raise DumpError(f"{path}: unknown tensor file type {path.suffix!r}; expected .npy or .pt")
    except DumpError:
        raise
    except Exception as exc:
        raise DumpError(f"{path}: cannot read tensor file ({type(exc).__name__}: {exc}); is it complete?") from None
    if array.dtype == np.bool_ or array.dtype.kind in "iuf":
        return np.asarray(array, dtype=np.float64)
    return np.asarray(array.real if np.iscomplexobj(array) else array, dtype=np.float64)
