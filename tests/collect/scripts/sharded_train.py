"""Two ranks on CPU with gloo (run under torchrun): a 5-layer MLP sharded with FSDP2 (``fsdp``) or split by
tensor parallelism (``tp``: ColwiseParallel then RowwiseParallel), 3 AdamW steps; prints each step's loss.
``single``: the same model and steps in one process, no torch.distributed (the bench of a sharded run).
``--plant`` switches the second GELU (module ``3``) to its tanh approximation. ``--same-batch``: every FSDP2
rank trains on the batch ``single`` trains on (else each rank its own); ``--dtensor-activations``: the columns
ColwiseParallel computes stay a DTensor (``use_local_output=False``) instead of this rank's plain tensor."""

import argparse

import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("layout", choices=("fsdp", "tp", "single"))
parser.add_argument("--plant", action="store_true")
parser.add_argument("--same-batch", action="store_true")
parser.add_argument("--dtensor-activations", action="store_true")
args = parser.parse_args()

rank = 0
if args.layout != "single":
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

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
elif args.layout == "tp":
    colwise = ColwiseParallel(use_local_output=not args.dtensor_activations)
    parallelize_module(model, mesh, {"0": colwise, "2": RowwiseParallel()})
optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
# FSDP2 is data parallel: each rank its own batch, unless --same-batch (tensor parallel ranks share one anyway)
torch.manual_seed(1 + rank if args.layout == "fsdp" and not args.same_batch else 1)
for step in range(3):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"rank{rank} step{step} loss {loss.item():.10f}", flush=True)
if args.layout != "single":
    dist.destroy_process_group()
