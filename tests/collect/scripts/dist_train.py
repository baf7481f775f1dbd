"""Two ranks on CPU with gloo (run under torchrun): a model step plus an all_reduce of the gradients' norm."""

import torch
import torch.distributed as dist
import torch.nn as nn

dist.init_process_group("gloo")
torch.manual_seed(dist.get_rank())
model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    loss = model(torch.randn(3, 4)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    total = loss.detach().clone()
    dist.all_reduce(total)
    optimizer.step()
dist.destroy_process_group()
