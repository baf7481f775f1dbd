"""timm: a 2-block ViT made by create_model, timm's AdamW and cosine schedule, 2 updates.

--plant: from the second update on, blocks.1.norm2 normalises with eps 1e-2 instead of 1e-6.
--float64: the model and the images in float64 (the high-precision bench).
"""
import argparse

import timm
import torch
import torch.nn.functional as F
from timm.optim import create_optimizer_v2
from timm.scheduler import CosineLRScheduler

parser = argparse.ArgumentParser()
parser.add_argument("--plant", action="store_true")
parser.add_argument("--float64", action="store_true")
args = parser.parse_args()

torch.manual_seed(0)
model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=10, img_size=32, patch_size=8,
                          depth=2, embed_dim=48, num_heads=3)
optimizer = create_optimizer_v2(model, opt="adamw", lr=1e-3, weight_decay=0.05)
scheduler = CosineLRScheduler(optimizer, t_initial=2)
images, labels = torch.randn(2, 4, 3, 32, 32), torch.randint(0, 10, (2, 4))
if args.float64:
    model, images = model.double(), images.double()

model.train()
for step in range(2):
    if args.plant and step == 1:
        model.blocks[1].norm2.eps = 1e-2
    loss = F.cross_entropy(model(images[step]), labels[step])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step(step + 1)
    print(f"step {step} loss {loss.item():.4f}")
