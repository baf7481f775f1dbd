"""Gradient accumulation: 2 micro-batches per optimizer update, 2 updates, a small CNN.

--plant: from the second update on, the GELU uses its tanh approximation.
--float64: the model and the images in float64 (the high-precision bench).
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--plant", action="store_true")
parser.add_argument("--float64", action="store_true")
args = parser.parse_args()

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.GELU(), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Linear(8, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
accumulation = 2
images, labels = torch.randn(4, 4, 3, 8, 8), torch.randint(0, 4, (4, 4))
if args.float64:
    model, images = model.double(), images.double()

for micro in range(4):
    if args.plant and micro == accumulation:
        model[2].approximate = "tanh"
    loss = F.cross_entropy(model(images[micro]), labels[micro]) / accumulation
    loss.backward()
    if (micro + 1) % accumulation == 0:
        optimizer.step()
        optimizer.zero_grad()
        print(f"update {micro // accumulation} loss {loss.item():.4f}")
