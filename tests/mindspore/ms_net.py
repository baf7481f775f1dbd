"""The network of the msprobe MindSpore fixture (two pre-norm blocks, a head), for tests and ``probe run``.

Run as a script it trains ``STEPS`` steps (argv[1], default 1) with
``value_and_grad`` and an ``nn.SGD`` optimizer.
"""

from __future__ import annotations

import sys

import mindspore as ms
import numpy as np
from mindspore import mint, nn, ops

ms.set_device("CPU")
ms.runtime.launch_blocking()

DIM, HEADS, CLASSES, BATCH, SEQ = 32, 4, 10, 4, 8


class Attn(nn.Cell):
    def __init__(self, d: int = DIM, h: int = HEADS) -> None:
        super().__init__()
        self.h, self.dh = h, d // h
        self.qkv = nn.Dense(d, 3 * d)
        self.proj = mint.nn.Linear(d, d)

    def construct(self, x):
        b, s, d = x.shape
        qkv = self.qkv(x)
        q, k, v = mint.split(qkv, d, dim=-1)
        q = q.reshape(b, s, self.h, self.dh).transpose(0, 2, 1, 3)
        k = k.reshape(b, s, self.h, self.dh).transpose(0, 2, 1, 3)
        v = v.reshape(b, s, self.h, self.dh).transpose(0, 2, 1, 3)
        sc = mint.matmul(q, k.swapaxes(-1, -2)) / (self.dh ** 0.5)
        p = mint.softmax(sc, dim=-1)
        o = ops.matmul(p, v).transpose(0, 2, 1, 3).reshape(b, s, d)
        return self.proj(o)


class Block(nn.Cell):
    def __init__(self, d: int = DIM) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm((d,))
        self.attn = Attn(d)
        self.ln2 = nn.LayerNorm((d,))
        self.fc1 = nn.Dense(d, 4 * d)
        self.fc2 = mint.nn.Linear(4 * d, d)
        self.act = nn.GELU(approximate=False)

    def construct(self, x):
        x = x + self.attn(self.ln1(x))
        y = self.fc2(ops.gelu(self.fc1(self.ln2(x))))
        return x + self.act(y) * 0.5


class Net(nn.Cell):
    def __init__(self, d: int = DIM, depth: int = 2) -> None:
        super().__init__()
        self.blocks = nn.CellList([Block(d) for _ in range(depth)])
        self.head = nn.Dense(d, CLASSES)

    def construct(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(mint.mean(x, dim=1))


def data(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = ms.Tensor(rng.standard_normal((BATCH, SEQ, DIM)).astype(np.float32))
    y = ms.Tensor(rng.integers(0, CLASSES, BATCH).astype(np.int32))
    return x, y


def train(net: Net, steps: int = 1, on_step=None) -> None:
    x, y = data()
    optimizer = nn.SGD(net.trainable_params(), learning_rate=0.01)

    def fwd(x, y):
        return ops.cross_entropy(net(x), y)

    grad_fn = ms.value_and_grad(fwd, None, optimizer.parameters)
    for _ in range(steps):
        _, grads = grad_fn(x, y)
        optimizer(grads)
        if on_step is not None:
            on_step()


if __name__ == "__main__":
    ms.set_seed(0)
    train(Net(), int(sys.argv[1]) if len(sys.argv) > 1 else 1)
