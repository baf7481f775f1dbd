"""A small Llama trained for four steps on the CPU, written with no knowledge of probe.

The model is transformers' ``LlamaForCausalLM`` built from a small ``LlamaConfig`` (2 layers, hidden size 64,
about 220K parameters; nothing is downloaded), trained with AdamW on synthetic tokens.

``--rms-eps`` sets the RMSNorm epsilon to 1e-5 instead of Llama's 1e-6: a quiet config drift between two
stacks (one framework's default against another's) that probe is built to find.

``make demo`` runs it twice under ``probe run`` (with and without ``--rms-eps``), then ``probe compare`` names
the first RMSNorm the change touches. transformers imports torchvision; where the installed torchvision does
not match torch, put ``examples/shim`` on ``PYTHONPATH`` (the Makefile does).
"""

import argparse

import torch
from transformers import LlamaConfig, LlamaForCausalLM

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--rms-eps", action="store_true", help="RMSNorm epsilon 1e-5 instead of 1e-6")
parser.add_argument("--steps", type=int, default=4)
args = parser.parse_args()

torch.manual_seed(0)
config = LlamaConfig(vocab_size=1024, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                     rms_norm_eps=1e-5 if args.rms_eps else 1e-6)
model = LlamaForCausalLM(config)
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
tokens = torch.randint(0, config.vocab_size, (args.steps, 4, 32))

for step, input_ids in enumerate(tokens):
    loss = model(input_ids=input_ids, labels=input_ids).loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.4f}")
