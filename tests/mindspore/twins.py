"""One small network written twice — MindSpore and PyTorch — with identical weights, for cross-framework compare.

``blocks.{i}`` are pre-norm residual MLP blocks (``ln`` LayerNorm, ``fc1``
Dense/Linear, ReLU, ``fc2`` mint.nn.Linear/Linear); ``head`` follows a mean
over the sequence. APIs are the twins the built-in name table pairs:
``Mint.mean``/``Torch.mean``, ``MintFunctional.relu``/``Functional.relu``,
``Tensor.__add__`` and ``Functional.cross_entropy``.
"""

from __future__ import annotations

import mindspore as ms
import numpy as np
import torch
from mindspore import mint, nn, ops

D, H, C, BATCH, SEQ = 16, 32, 5, 4, 6


class MsBlock(nn.Cell):
    def __init__(self) -> None:
        super().__init__()
        self.ln = nn.LayerNorm((D,), epsilon=1e-5)
        self.fc1 = nn.Dense(D, H)
        self.fc2 = mint.nn.Linear(H, D)

    def construct(self, x):
        return x + self.fc2(mint.nn.functional.relu(self.fc1(self.ln(x))))


class MsNet(nn.Cell):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.CellList([MsBlock(), MsBlock()])
        self.head = nn.Dense(D, C)

    def construct(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(mint.mean(x, dim=1))


class PtBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln = torch.nn.LayerNorm(D, eps=1e-5)
        self.fc1 = torch.nn.Linear(D, H)
        self.fc2 = torch.nn.Linear(H, D)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.relu(self.fc1(self.ln(x))))


class PtNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList([PtBlock(), PtBlock()])
        self.head = torch.nn.Linear(D, C)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(torch.mean(x, dim=1))


_MS_TO_PT_PARAM = {"gamma": "weight", "beta": "bias"}


def twin_pair(seed: int = 0) -> tuple[MsNet, PtNet]:
    """A MindSpore net and a PyTorch net holding the same (seeded random) weights."""
    rng = np.random.default_rng(seed)
    ms_net, pt_net = MsNet(), PtNet()
    pt_params = dict(pt_net.named_parameters())
    for param in ms_net.get_parameters():
        path, _, leaf = param.name.rpartition(".")
        value = rng.standard_normal(param.shape).astype(np.float32) * 0.3
        if leaf == "gamma":
            value = value + 1.0
        param.set_data(ms.Tensor(value))
        with torch.no_grad():
            pt_params[f"{path}.{_MS_TO_PT_PARAM.get(leaf, leaf)}"].copy_(torch.from_numpy(value))
    return ms_net, pt_net


def batch(seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((BATCH, SEQ, D)).astype(np.float32),
            rng.integers(0, C, BATCH).astype(np.int64))


def ms_train_step(net: MsNet, x: np.ndarray, y: np.ndarray) -> None:
    """Forward and backward (gradients w.r.t. every parameter) in PyNative."""
    def loss(x, y):
        return ops.cross_entropy(net(x), y)

    ms.value_and_grad(loss, None, net.trainable_params())(ms.Tensor(x), ms.Tensor(y.astype(np.int32)))


def pt_train_step(net: PtNet, x: np.ndarray, y: np.ndarray) -> None:
    torch.nn.functional.cross_entropy(net(torch.from_numpy(x)), torch.from_numpy(y)).backward()
