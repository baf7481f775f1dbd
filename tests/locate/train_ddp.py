"""A tiny 2-rank data-parallel training loop (gloo, CPU) for probe locate's multi-rank test, written with no
knowledge of probe: ``torchrun --standalone --nproc_per_node=2 train_ddp.py [--gelu-tanh-from N]``.

Each rank trains the same MLP under DistributedDataParallel on its own batches; ``--gelu-tanh-from N`` switches
the GELU of rank 1 only to its tanh approximation from step N on, so rank 1's gradients part first.
"""

import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--gelu-tanh-from", type=int, default=None)
args = parser.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
ddp = nn.parallel.DistributedDataParallel(model)
optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
generator = torch.Generator().manual_seed(rank)
data = [(torch.randn(4, 8, generator=generator), torch.randint(0, 4, (4,), generator=generator))
        for _ in range(args.steps)]
for step, (x, y) in enumerate(data):
    if args.gelu_tanh_from is not None and step >= args.gelu_tanh_from and rank == 1:
        model[1].approximate = "tanh"
    loss = F.cross_entropy(ddp(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"rank {rank} step {step}: loss {loss.item():.6f}")
dist.destroy_process_group()
