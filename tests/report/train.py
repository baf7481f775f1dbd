"""A tiny residual MLP trained for a few steps; ``--tanh-block B [B ...]`` switches these blocks' GELU to its tanh
approximation (the quiet numerical change the report tests look for).

    python train.py [--steps N] [--blocks K] [--tanh-block B [B ...]]
"""

import argparse

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int, approximate: str) -> None:
        super().__init__()
        self.fc1, self.fc2, self.approximate = nn.Linear(width, width), nn.Linear(width, width), approximate

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(x), approximate=self.approximate))


class Net(nn.Module):
    def __init__(self, blocks: int, tanh_blocks: list[int]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(8, "tanh" if i in tanh_blocks else "none") for i in range(blocks))
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--tanh-block", type=int, nargs="+", default=[])
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Net(args.blocks, args.tanh_block)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(args.steps):
        g = torch.Generator().manual_seed(step)
        x, y = torch.randn(16, 8, generator=g), torch.randint(0, 4, (16,), generator=g)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
