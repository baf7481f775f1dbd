"""torchvision resnet18 on synthetic images, SGD with momentum, 2 updates.

--plant: from the second update on, layer4.1.bn2 normalises with eps 1e-2 instead of 1e-5.
--float64: the model and the images in float64 (the high-precision bench).
"""
import argparse

import torch
import torch.nn as nn
import torchvision

parser = argparse.ArgumentParser()
parser.add_argument("--plant", action="store_true")
parser.add_argument("--float64", action="store_true")
args = parser.parse_args()

torch.manual_seed(0)
model = torchvision.models.resnet18(num_classes=10)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
images, labels = torch.randn(4, 2, 3, 32, 32), torch.randint(0, 10, (4, 2))
if args.float64:
    model, images = model.double(), images.double()

model.train()
for step in range(2):
    if args.plant and step == 1:
        model.layer4[1].bn2.eps = 1e-2
    optimizer.zero_grad()
    loss = criterion(model(images[step]), labels[step])
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
