"""A transformer training loop for probe locate's cost benchmark (benchmarks/locate_cost.py), written with no
knowledge of probe: token embeddings, ``--blocks`` pre-norm blocks (attention, then an MLP with a GELU) of width
``--hidden``, a language-model head, AdamW, ``--steps`` steps of ``--batch`` sequences of ``--seq`` tokens.

``--gelu-tanh-from N`` switches the first block's GELU to its tanh approximation from step N on (the same quiet
change as train_tiny.py's, in a model whose steps cost what real ones do against the process start).
``--grad-by-freq-from N`` makes the embedding scale its weight's gradient by the tokens' frequencies from step N on
(``scale_grad_by_freq``: the forward is the same, the backward is not).
"""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--gelu-tanh-from", type=int, default=None)
parser.add_argument("--grad-by-freq-from", type=int, default=None)
parser.add_argument("--hidden", type=int, default=512)
parser.add_argument("--blocks", type=int, default=4)
parser.add_argument("--heads", type=int, default=8)
parser.add_argument("--batch", type=int, default=4)
parser.add_argument("--seq", type=int, default=128)
parser.add_argument("--vocab", type=int, default=2000)
args = parser.parse_args()


class Attention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads, self.qkv, self.proj = heads, nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        q, k, v = self.qkv(x).view(batch, seq, 3, self.heads, hidden // self.heads).transpose(1, 3).unbind(2)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(batch, seq, hidden))


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.norm1, self.attn, self.norm2 = nn.LayerNorm(hidden), Attention(hidden, heads), nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(args.vocab, args.hidden)
        self.blocks = nn.ModuleList(Block(args.hidden, args.heads) for _ in range(args.blocks))
        self.norm, self.head = nn.LayerNorm(args.hidden), nn.Linear(args.hidden, args.vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


torch.manual_seed(0)
model = Model()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(args.steps):
    tokens = torch.randint(0, args.vocab, (args.batch, args.seq + 1))
    if args.gelu_tanh_from is not None and step >= args.gelu_tanh_from:
        model.blocks[0].mlp[1].approximate = "tanh"
    if args.grad_by_freq_from is not None and step >= args.grad_by_freq_from:
        model.embed.scale_grad_by_freq = True
    logits = model(tokens[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, args.vocab), tokens[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step}: loss {loss.item():.6f}", flush=True)
