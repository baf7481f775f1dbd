"""PyTorch Lightning: a LightningModule with automatic optimisation (optimizer.step(closure)), 2 updates.

--plant: a callback switches the GELU to its tanh approximation after the first update.
--float64: Trainer(precision="64-true"), Lightning's double precision (the high-precision bench).
"""
import argparse

import pytorch_lightning as pl
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--plant", action="store_true")
parser.add_argument("--float64", action="store_true")
args = parser.parse_args()


class Classifier(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


class Plant(pl.Callback):
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        pl_module.net[2].approximate = "tanh"


pl.seed_everything(0, verbose=False)
model = Classifier()
data = TensorDataset(torch.randn(16, 16), torch.randint(0, 4, (16,)))
trainer = pl.Trainer(max_steps=2, accelerator="cpu", devices=1, precision="64-true" if args.float64 else "32-true",
                     logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                     num_sanity_val_steps=0, callbacks=[Plant()] if args.plant else [])
trainer.fit(model, DataLoader(data, batch_size=8))
