"""``from probe_torch import PrecisionDebugger, seed_all`` — msprobe's PyTorch entry points."""

from __future__ import annotations

import atexit
import os
from typing import Any

from probe_core.api import PrecisionDebuggerBase, seed_python


class PrecisionDebugger(PrecisionDebuggerBase):
    """msprobe-compatible debugger for PyTorch; files are finished at ``step()`` and at exit."""

    framework = "pytorch"

    def __init__(self, config_path: Any = None, **overrides: Any) -> None:
        super().__init__(config_path, **overrides)
        atexit.register(self.close)


def seed_all(seed: int = 1234, mode: bool = False, rm_dropout: bool = True) -> None:
    """Seed python, numpy, torch (CPU and CUDA); ``mode`` turns on deterministic algorithms; ``rm_dropout`` disables dropout."""
    import torch

    seed_python(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    if mode:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
    if rm_dropout:
        _remove_dropout()


def _remove_dropout() -> None:
    """Make every dropout a no-op (p forced to 0), as msprobe's seed_all does."""
    import torch.nn.functional as F

    if getattr(F, "_probe_dropout_originals", None):
        return
    originals = {}
    for name in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"):
        original = getattr(F, name, None)
        if original is None:
            continue

        def no_dropout(input, p=0.5, training=True, inplace=False, _original=original):
            return _original(input, 0.0, training, inplace)

        originals[name] = original
        setattr(F, name, no_dropout)
    F._probe_dropout_originals = originals


def restore_dropout() -> None:
    """Undo ``seed_all(rm_dropout=True)``."""
    import torch.nn.functional as F

    for name, original in (getattr(F, "_probe_dropout_originals", None) or {}).items():
        setattr(F, name, original)
    F._probe_dropout_originals = None
