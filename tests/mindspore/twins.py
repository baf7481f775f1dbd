"""One small network written twice — MindSpore and PyTorch — with identical weights, for cross-framework compare.

``blocks.{i}`` are pre-norm residual MLP blocks (``ln`` LayerNorm, ``fc1``
Dense/Linear, sigmoid, ``fc2`` mint.nn.Linear/Linear); ``head`` follows a mean
over the sequence. APIs are the twins the built-in name table pairs:
``Mint.mean``/``Torch.mean``, ``Mint.sigmoid``/``Torch.sigmoid``,
``Tensor.__add__``, and a loss ``(out * out).sum()`` (no keyword arguments on either side, so the
recorded inputs of twin calls are alike).
"""

from __future__ import annotations

import mindspore as ms
import numpy as np
import torch
from mindspore import mint, nn, ops

D, H, C, BATCH, SEQ = 16, 32, 5, 4, 6


class LayerNorm(nn.Cell):
    """LayerNorm with PyTorch's parameter names (``nn.LayerNorm`` calls them gamma/beta)."""

    def __init__(self, d: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = ms.Parameter(ms.Tensor(np.ones(d, np.float32)), name="weight")
        self.bias = ms.Parameter(ms.Tensor(np.zeros(d, np.float32)), name="bias")
        self.layer_norm = ops.LayerNorm(begin_norm_axis=-1, begin_params_axis=-1, epsilon=eps)

    def construct(self, x):
        return self.layer_norm(x, self.weight, self.bias)[0]


class MsBlock(nn.Cell):
    def __init__(self) -> None:
        super().__init__()
        self.ln = LayerNorm(D)
        self.fc1 = nn.Dense(D, H)
        self.fc2 = mint.nn.Linear(H, D)

    def construct(self, x):
        return x + self.fc2(mint.sigmoid(self.fc1(self.ln(x))))


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
        return x + self.fc2(torch.sigmoid(self.fc1(self.ln(x))))


class PtNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList([PtBlock(), PtBlock()])
        self.head = torch.nn.Linear(D, C)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(torch.mean(x, dim=1))


def twin_pair(seed: int = 0) -> tuple[MsNet, PtNet]:
    """A MindSpore net and a PyTorch net holding the same (seeded random) weights."""
    rng = np.random.default_rng(seed)
    ms_net, pt_net = MsNet(), PtNet()
    pt_params = dict(pt_net.named_parameters())
    for param in ms_net.get_parameters():
        path, _, leaf = param.name.rpartition(".")
        value = rng.standard_normal(param.shape).astype(np.float32) * 0.3
        if path.endswith(".ln") and leaf == "weight":
            value = value + 1.0
        param.set_data(ms.Tensor(value))
        with torch.no_grad():
            pt_params[param.name].copy_(torch.from_numpy(value))
    return ms_net, pt_net


def batch(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((BATCH, SEQ, D)).astype(np.float32)


def ms_train_step(net: MsNet, x: np.ndarray) -> None:
    """Forward and backward (gradients w.r.t. every parameter) in PyNative."""
    def loss(x):
        out = net(x)
        return (out * out).sum()

    ms.value_and_grad(loss, None, net.trainable_params())(ms.Tensor(x))


def pt_train_step(net: PtNet, x: np.ndarray) -> None:
    out = net(torch.from_numpy(x))
    (out * out).sum().backward()
