"""A script that runs a model but never steps an optimizer (probe run --task monitor must say so)."""

import torch

model = torch.nn.Linear(4, 2)
print(float(model(torch.ones(1, 4)).sum()))
