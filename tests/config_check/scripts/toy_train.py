"""A tiny training script instrumented with ConfigChecker, as a user would write it.

    python toy_train.py OUT.zip SCRIPT_OR_CONFIG [--weight-delta X] [--batch-delta X] [--extra-rng N] [--lr X]
"""

import argparse
import random

from probe_config_check import ConfigChecker

ConfigChecker.apply_patches(fmk="pytorch")

import torch  # noqa: E402  (after apply_patches, as the docs say)

parser = argparse.ArgumentParser()
parser.add_argument("output")
parser.add_argument("shell_path")
parser.add_argument("--weight-delta", type=float, default=0.0)
parser.add_argument("--batch-delta", type=float, default=0.0)
parser.add_argument("--extra-rng", type=int, default=0)
parser.add_argument("--lr", type=float, default=0.1)
args = parser.parse_args()

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
with torch.no_grad():
    model[2].weight[0, 0] += args.weight_delta

for _ in range(1 + args.extra_rng):
    random.random()

ConfigChecker(model, shell_path=[args.shell_path], output_zip_path=args.output, fmk="pytorch")

generator = torch.Generator().manual_seed(1)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
for step in range(3):
    batch = torch.rand(8, 4, generator=generator)
    if step == 1:
        batch[0, 0] += args.batch_delta
    loss = model(batch).square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
