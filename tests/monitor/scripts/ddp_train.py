"""Two-rank data-parallel training (gloo, CPU) for ``torchrun --nproc_per_node=2 probe run --task monitor``."""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(),
                                                        torch.nn.Linear(16, 4)))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(3):
        g = torch.Generator().manual_seed(1000 * rank + step)  # each rank its own batch
        x, y = torch.randn(16, 8, generator=g), torch.randint(0, 4, (16,), generator=g)
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    # both ranks past their last step, and DDP's reducer gone, before the process group is: otherwise gloo's
    # teardown aborts the process now and then ("terminate called without an active exception", torch 2.13)
    del model, optimizer
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
