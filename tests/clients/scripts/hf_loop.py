"""HF transformers in a plain loop: a tiny random GPT-2 language model, AdamW, 2 updates, no downloads.

--plant: from the second update on, block 1's ln_2 normalises with eps 1e-2 instead of 1e-5.
--float64: the model in float64 (the high-precision bench; its inputs are token ids).
"""
import argparse

import torch
from transformers import GPT2Config, GPT2LMHeadModel

parser = argparse.ArgumentParser()
parser.add_argument("--plant", action="store_true")
parser.add_argument("--float64", action="store_true")
args = parser.parse_args()

torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2))
if args.float64:
    model = model.double()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
tokens = torch.randint(0, 64, (2, 4, 16))

model.train()
for step in range(2):
    if args.plant and step == 1:
        model.transformer.h[1].ln_2.eps = 1e-2
    outputs = model(input_ids=tokens[step], labels=tokens[step])
    outputs.loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(f"step {step} loss {outputs.loss.item():.4f}")
