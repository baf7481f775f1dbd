"""Two ranks on CPU with gloo (run under torchrun): a 5-layer MLP sharded with FSDP2 (``fsdp``) or split by
tensor parallelism (``tp``: ColwiseParallel then RowwiseParallel), 3 AdamW steps; prints each step's loss.
``--plant`` switches the second GELU (module ``3``) to its tanh approximation."""

import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

parser = argparse.ArgumentParser()
parser.add_argument("layout", choices=("fsdp", "tp"))
parser.add_argument("--plant", action="store_true")
args = parser.parse_args()

mesh = init_device_mesh("cpu", (2,))
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 16),
                      nn.GELU(approximate="tanh" if args.plant else "none"), nn.Linear(16, 4))
if args.layout == "fsdp":
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
else:
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
torch.manual_seed(1 + rank if args.layout == "fsdp" else 1)  # FSDP: data parallel, each rank its own batch
for step in range(3):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"rank{rank} step{step} loss {loss.item():.10f}", flush=True)
dist.destroy_process_group()
