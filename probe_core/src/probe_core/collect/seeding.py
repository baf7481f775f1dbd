"""The framework-neutral part of ``seed_all``: Python's and numpy's generators and ``PYTHONHASHSEED``."""

from __future__ import annotations

import os
import random


def seed_python(seed: int) -> None:
    """Seed ``random``, numpy (when installed) and ``PYTHONHASHSEED``; a framework seeds its own RNGs too."""
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    try:
        import numpy as np
    except ImportError:
        return
    np.random.seed(seed)
