"""A tiny training loop for probe locate's tests, written with no knowledge of probe.

``--gelu-tanh-from N`` switches the MLP's GELU to its tanh approximation from step N on (an operator that
computes something else on the same inputs); ``--lr-from N`` multiplies the learning rate by 10 from step N
on (a divergence in the update); ``--backward-hook`` gives the GELU module a full backward hook (registered before
probe's) that passes its input gradient on times 1.0, ``--grad-bug-from N`` the same hook times 1.001 from step N on
(a module whose backward is wrong, its forward right).
``--steps S`` (default 4), ``--hidden H`` (default 16) and ``--layers L``
(default 1: hidden layers), ``--batch B``
(default 4; benchmarks/locate_cost.py makes the model larger). The bug is in the first GELU.
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=4)
parser.add_argument("--gelu-tanh-from", type=int, default=None)
parser.add_argument("--lr-from", type=int, default=None)
parser.add_argument("--backward-hook", action="store_true")
parser.add_argument("--grad-bug-from", type=int, default=None)
parser.add_argument("--hidden", type=int, default=16)
parser.add_argument("--layers", type=int, default=1)
parser.add_argument("--batch", type=int, default=4)
args = parser.parse_args()

torch.manual_seed(0)
hidden = [layer for _ in range(args.layers - 1) for layer in (nn.Linear(args.hidden, args.hidden), nn.GELU())]
model = nn.Sequential(nn.Linear(8, args.hidden), nn.GELU(), *hidden, nn.Linear(args.hidden, 4))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
grad_scale = [1.0]
if args.backward_hook or args.grad_bug_from is not None:
    model[1].register_full_backward_hook(lambda module, grad_in, grad_out: (grad_in[0] * grad_scale[0],))
data = [(torch.randn(args.batch, 8), torch.randint(0, 4, (args.batch,))) for _ in range(args.steps)]
for step, (x, y) in enumerate(data):
    if args.gelu_tanh_from is not None and step >= args.gelu_tanh_from:
        model[1].approximate = "tanh"
    if args.grad_bug_from is not None and step >= args.grad_bug_from:
        grad_scale[0] = 1.001
    if args.lr_from is not None and step == args.lr_from:
        for group in optimizer.param_groups:
            group["lr"] *= 10
    loss = F.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.6f}")
