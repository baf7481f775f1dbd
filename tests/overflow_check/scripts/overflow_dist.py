"""Two ranks on CPU with gloo (run under torchrun and ``probe run``): one training step of a tiny model whose
activations go through an all_reduce.

``before``: rank 1 overflows in ``torch.exp`` before the all_reduce; rank 0 receives the Inf through it.
``during``: both ranks hand the all_reduce finite values (3e38 each) whose sum overflows float32.
``clean``: nothing overflows.
"""

import sys

import torch
import torch.distributed as dist
import torch.nn as nn

case = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
hidden = model(torch.randn(3, 4))
hidden = torch.exp(hidden * 1000.0) if case == "before" and rank == 1 else torch.tanh(hidden)
total = hidden.sum(dim=1)
if case == "during":
    total = total * 0 + 3e38
dist.all_reduce(total)
loss = total.mean()
loss.backward()
optimizer.step()
dist.destroy_process_group()
