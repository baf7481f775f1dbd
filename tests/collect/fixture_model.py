"""The fixture's model: a 2-block transformer, hidden 64, 4 heads, 4x8 input (the shape msprobe dumped)."""

import math, torch, torch.nn as nn, torch.nn.functional as F
class Attention(nn.Module):
    def __init__(s, d, h):
        super().__init__(); s.h=h; s.qkv=nn.Linear(d,3*d); s.proj=nn.Linear(d,d)
    def forward(s, x):
        b,t,d=x.shape; h=s.h
        q,k,v = s.qkv(x).chunk(3, dim=-1)
        q=q.reshape(b,t,h,d//h).transpose(1,2); k=k.reshape(b,t,h,d//h).transpose(1,2); v=v.reshape(b,t,h,d//h).transpose(1,2)
        scores = torch.matmul(q, k.transpose(-2,-1)) / math.sqrt(d//h)
        att = torch.softmax(scores, dim=-1)
        out = torch.matmul(att, v).transpose(1,2).reshape(b,t,d)
        return s.proj(out)
class ScaledLinear(nn.Module):
    def __init__(s, a, b):
        super().__init__(); s.linear=nn.Linear(a,b); s.scale=1.0
    def forward(s, x): return s.linear(x)*s.scale
class MLP(nn.Module):
    def __init__(s,d):
        super().__init__(); s.fc1=nn.Linear(d,4*d); s.fc2=ScaledLinear(4*d,d)
    def forward(s,x): return s.fc2(F.gelu(s.fc1(x)))
class Block(nn.Module):
    def __init__(s,d,h):
        super().__init__(); s.ln1=nn.LayerNorm(d); s.attn=Attention(d,h); s.ln2=nn.LayerNorm(d); s.mlp=MLP(d)
    def forward(s,x):
        x = x + s.attn(s.ln1(x))
        x = x + s.mlp(s.ln2(x))
        return x
class Model(nn.Module):
    def __init__(s,d=64,h=4,n=2,c=10):
        super().__init__(); s.blocks=nn.ModuleList([Block(d,h) for _ in range(n)]); s.ln_f=nn.LayerNorm(d); s.head=nn.Linear(d,c)
    def forward(s,x):
        for blk in s.blocks: x = blk(x)
        x = s.ln_f(x)
        return s.head(x.mean(dim=1))
