"""The initial weights and the batches both twin scripts train on (numpy only, seeded): the MindSpore MLP of
``train_tiny_ms.py`` and its PyTorch twin ``train_tiny_pt.py`` start from the same weights and see the same data."""

import numpy as np

#: (name, shape) of the MLP's parameters, PyTorch's layout (Linear/Dense weights are (out, in))
SHAPES = (("0.weight", (16, 8)), ("0.bias", (16,)), ("2.weight", (4, 16)), ("2.bias", (4,)))
BATCH = 4


def weights() -> dict:
    rng = np.random.default_rng(0)
    return {name: (rng.standard_normal(shape) * 0.3).astype(np.float32) for name, shape in SHAPES}


def batches(steps: int) -> list:
    rng = np.random.default_rng(1)
    return [(rng.standard_normal((BATCH, 8)).astype(np.float32), rng.integers(0, 4, BATCH).astype(np.int32))
            for _ in range(steps)]
